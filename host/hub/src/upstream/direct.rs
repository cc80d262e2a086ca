//! `tools/call` on a stdio upstream without rmcp's service in between (the
//! direct path). rmcp keeps everything else: the handshake, `tools/list`,
//! `ping`, `list_changed` and the Streamable HTTP transport.
//!
//! Why (measured with `cargo bench -p temper-cli --bench hub` and `perf`):
//! rmcp reads every incoming message as its `ServerResult`, an untagged
//! union of twenty result types behind a JSON-RPC message that is itself
//! read through serde's buffered `flatten`. A tool result is therefore
//! copied into serde's intermediate `Content` tree twice and matched
//! against each result type in turn, its text (the same output again, as
//! SDK servers send it) is copied into a `String`, and every request and
//! answer passes through rmcp's service task. That was most of what
//! Temper added to a call (see the hub chapter of the book for figures).
//! On this path the request is written by the caller and the answer's
//! line is read once by the connection's reader: a plain result's
//! `structuredContent` is borrowed as raw JSON text (its text content
//! skipped), then read strictly into the value that is checked
//! (`strict.rs`), its text kept when exact so a gateway can pass it on;
//! any other line is read into a `serde_json::Value`.
//!
//! Direct calls carry string ids (`"temper-hub-7"`); rmcp numbers its own
//! requests, so the two never collide. A line that carries such an id is
//! routed here; every other line goes to rmcp as before. A request carries
//! the `_meta` rmcp would give it: on a revision without the `initialize`
//! handshake (2026-07-28), the protocol version, client info and
//! capabilities; before it, none.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;

use super::output::CallOutput;
use super::strict;

/// The ids of direct calls start with this.
const ID_PREFIX: &str = "temper-hub-";
/// How a direct call's id starts on the wire.
const ID_NEEDLE: &[u8] = b"\"temper-hub-";

/// The answer to a direct call: the response's `result`, or its `error`.
#[derive(Debug)]
pub(super) enum Reply {
    /// The `structuredContent` of a result that is not an error: the
    /// tool's output, with its text when that is exact (`strict.rs`).
    Output(CallOutput),
    /// A `structuredContent` that `strict.rs` refuses (a duplicate key,
    /// a bad string, too deep): what is wrong with it.
    Refused(String),
    /// The `result` member (any other result).
    Result(Value),
    /// The `error` member (`{code, message}`), or the description of a
    /// response that has neither.
    Error(String),
}

/// Why a direct call got no reply.
#[derive(Debug)]
pub(super) enum NoReply {
    /// No reply within the limit.
    Timeout,
    /// The connection ended, or the request could not be written
    /// (`Some(the write error)`).
    Gone(Option<String>),
}

/// The calls waiting for their answer, by number; `None` once the
/// connection has ended (their senders dropped, so each fails at once).
/// Bounded by the calls in flight: an entry leaves when its answer comes,
/// when its call ends (timeout, or the caller gone), or with the connection.
type Waiting = Mutex<Option<HashMap<u64, oneshot::Sender<Reply>>>>;

/// The direct path of one stdio connection: shared by the callers (which
/// write) and the connection's reader (which routes the answers).
pub(super) struct Direct {
    next: AtomicU64,
    waiting: Waiting,
    write: Arc<tokio::sync::Mutex<ChildStdin>>,
    /// The `_meta` of every request, as JSON text (`None`: no `_meta`);
    /// set once the handshake is done, when calls may take this path.
    meta: OnceLock<Option<String>>,
}

impl Direct {
    /// The direct path over the child's stdin `write` (shared with rmcp's
    /// writes: one message per lock, so lines never interleave).
    pub(super) fn new(write: Arc<tokio::sync::Mutex<ChildStdin>>) -> Self {
        Self {
            next: AtomicU64::new(1),
            waiting: Mutex::new(Some(HashMap::new())),
            write,
            meta: OnceLock::new(),
        }
    }

    /// Lets calls take the direct path once the handshake is done, each
    /// request with `meta` as its `_meta` (when `Some`).
    pub(super) fn enable(&self, meta: Option<Value>) {
        let _ = self.meta.set(meta.map(|m| m.to_string()));
    }

    /// Whether calls take the direct path.
    pub(super) fn enabled(&self) -> bool {
        self.meta.get().is_some()
    }

    /// The connection ended: every waiting call fails now, later ones at
    /// once.
    pub(super) fn close(&self) {
        crate::lock(&self.waiting).take();
    }

    /// Hands `line` to the direct call it answers; false when it answers
    /// none (it is rmcp's). An answer to a call that is no longer waiting
    /// (timed out) is dropped.
    pub(super) fn route(&self, line: &[u8]) -> bool {
        if memchr::memmem::find(line, ID_NEEDLE).is_none() {
            return false;
        }
        // First the common case, a result with structured content: its
        // text content (SDKs repeat the output there, as an escaped JSON
        // string) is skipped, not copied out, and the structured content
        // is kept as its own text, read into a value below (once it is
        // known to answer a call of ours).
        let lean = serde_json::from_slice::<Line<Lean<'_>>>(line)
            .ok()
            .filter(|l| l.error.is_none())
            .and_then(|l| Some((l.result.as_ref()?.structured()?, l.id, l.method)));
        let (id, method, reply) = match lean {
            Some((raw, id, method)) => (id, method, Pending::Structured(raw)),
            // Anything else is read whole.
            None => match serde_json::from_slice::<Line<Value>>(line) {
                Ok(msg) => {
                    let reply = match (msg.result, msg.error) {
                        (_, Some(error)) => Reply::Error(error_text(&error)),
                        (Some(result), None) => Reply::Result(result),
                        (None, None) => {
                            Reply::Error("sent a response with neither result nor error".into())
                        }
                    };
                    (msg.id, msg.method, Pending::Read(reply))
                }
                Err(_) => return false, // rmcp's parse names what is wrong with it
            },
        };
        let Some(n) = id
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix(ID_PREFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return false;
        };
        if method.is_some() {
            return false; // a request from the upstream, not an answer
        }
        let tx = crate::lock(&self.waiting)
            .as_mut()
            .and_then(|w| w.remove(&n));
        match tx {
            Some(tx) => {
                let reply = match reply {
                    Pending::Read(reply) => reply,
                    Pending::Structured(raw) => match strict::read(raw) {
                        Ok(output) => Reply::Output(output),
                        Err(e) => Reply::Refused(format!(
                            "structuredContent is not JSON Temper passes on: {e}"
                        )),
                    },
                };
                let _ = tx.send(reply);
            }
            None => tracing::debug!(id = n, "answer to a call that no longer waits (dropped)"),
        }
        true
    }

    /// Calls `tool` with `arguments`: writes the request, waits for its
    /// answer up to `timeout`. On a timeout the upstream is told that the
    /// request is cancelled.
    pub(super) async fn call(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
        timeout: std::time::Duration,
    ) -> Result<Reply, NoReply> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut waiting = crate::lock(&self.waiting);
            let Some(waiting) = waiting.as_mut() else {
                return Err(NoReply::Gone(None));
            };
            waiting.insert(n, tx);
        }
        let guard = Registered { direct: self, n };
        let request = self.request(n, tool, arguments);
        let exchange = async {
            self.write(request)
                .await
                .map_err(|e| NoReply::Gone(Some(e.to_string())))?;
            rx.await.map_err(|_| NoReply::Gone(None))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => {
                drop(guard);
                answer
            }
            Err(_) => {
                drop(guard);
                let id = format!("{ID_PREFIX}{n}");
                let cancel = Notification {
                    jsonrpc: "2.0",
                    method: "notifications/cancelled",
                    params: Cancelled {
                        request_id: &id,
                        reason: "timed out",
                    },
                };
                // Best effort: the call has failed whatever happens here.
                if let Ok(cancel) = serde_json::to_vec(&cancel) {
                    let _ = tokio::time::timeout(CANCEL_WRITE, self.write(cancel)).await;
                }
                Err(NoReply::Timeout)
            }
        }
    }

    /// The request line of call `n` (id `temper-hub-{n}`), `_meta`
    /// included when the revision wants one, with room for its line end.
    fn request(&self, n: u64, tool: &str, arguments: &Map<String, Value>) -> Vec<u8> {
        let mut line = Vec::with_capacity(256);
        let _ = write!(
            line,
            r#"{{"jsonrpc":"2.0","id":"{ID_PREFIX}{n}","method":"tools/call","params":{{"#
        );
        if let Some(Some(meta)) = self.meta.get() {
            line.extend_from_slice(b"\"_meta\":");
            line.extend_from_slice(meta.as_bytes());
            line.push(b',');
        }
        line.extend_from_slice(b"\"name\":");
        // A string and a map of JSON values: serializing cannot fail.
        let _ = serde_json::to_writer(&mut line, tool);
        line.extend_from_slice(b",\"arguments\":");
        let _ = serde_json::to_writer(&mut line, arguments);
        line.extend_from_slice(b"}}");
        line
    }

    /// Writes one message (without its line end) as one line.
    async fn write(&self, mut message: Vec<u8>) -> std::io::Result<()> {
        message.push(b'\n');
        let mut w = self.write.lock().await;
        w.write_all(&message).await?;
        w.flush().await
    }
}

/// A JSON-RPC message as the direct path reads it, with its `result` as `R`.
#[derive(serde::Deserialize)]
struct Line<R> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
    #[serde(default = "none")]
    result: Option<R>,
    #[serde(default)]
    error: Option<Value>,
}

fn none<R>() -> Option<R> {
    None
}

/// A `tools/call` result as the lean read sees it: its `structuredContent`
/// as text borrowed from the line (`None` when absent or `null`), and what
/// says whether it is the output. Every other member (the text content) is
/// skipped.
#[derive(serde::Deserialize)]
struct Lean<'a> {
    #[serde(rename = "structuredContent", default, borrow)]
    structured: Option<&'a RawValue>,
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(rename = "resultType", default, borrow)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Lean<'a> {
    /// The structured content when the result is a plain one: not
    /// `isError`, and `complete` (or saying nothing of its kind).
    fn structured(&self) -> Option<&'a RawValue> {
        let plain = self.is_error != Some(true)
            && self.result_type.as_deref().is_none_or(|t| t == "complete");
        self.structured.filter(|_| plain)
    }
}

/// A routed line's answer, before it is known to be awaited: the
/// structured content is read into a value only then.
enum Pending<'a> {
    Structured(&'a RawValue),
    Read(Reply),
}

/// Longest wait for the cancellation notice of a timed-out call to be written.
const CANCEL_WRITE: std::time::Duration = std::time::Duration::from_millis(100);

/// A waiting call's entry, removed when the call ends however it ends.
struct Registered<'a> {
    direct: &'a Direct,
    n: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Some(w) = crate::lock(&self.direct.waiting).as_mut() {
            w.remove(&self.n);
        }
    }
}

/// `error {code}: {message}` of a JSON-RPC error object.
fn error_text(error: &Value) -> String {
    let code = error.get("code").and_then(Value::as_i64);
    let message = error.get("message").and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => format!("error {code}: {message}"),
        _ => format!(
            "sent a malformed JSON-RPC error: {}",
            shorten(&error.to_string())
        ),
    }
}

fn shorten(s: &str) -> &str {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[derive(Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: Cancelled<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Cancelled<'a> {
    request_id: &'a str,
    reason: &'static str,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    /// A direct path whose requests go to a child that discards them.
    fn direct() -> (Arc<Direct>, tokio::process::Child) {
        let mut child = tokio::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("cat runs");
        let stdin = child.stdin.take().unwrap();
        let d = Arc::new(Direct::new(Arc::new(tokio::sync::Mutex::new(stdin))));
        d.enable(None);
        (d, child)
    }

    /// Starts a call and waits until it is registered.
    async fn pending(d: &Arc<Direct>) -> tokio::task::JoinHandle<Result<Reply, NoReply>> {
        let d2 = d.clone();
        let call =
            tokio::spawn(async move { d2.call("t", &Map::new(), Duration::from_secs(10)).await });
        while crate::lock(&d.waiting)
            .as_ref()
            .is_none_or(HashMap::is_empty)
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        call
    }

    #[test]
    fn only_a_plain_result_with_structured_content_is_read_lean() {
        let lean = |line: Value| {
            let text = line.to_string();
            serde_json::from_slice::<Line<Lean<'_>>>(text.as_bytes())
                .ok()
                .and_then(|l| l.result)
                .and_then(|l| {
                    l.structured()
                        .map(|r| serde_json::from_str::<Value>(r.get()))
                })
                .map(Result::unwrap)
        };
        let text = json!([{"type": "text", "text": "{\"a\": 1}"}]);
        let r = |result: Value| json!({"jsonrpc": "2.0", "id": "temper-hub-1", "result": result});
        assert_eq!(
            lean(r(json!({"content": text, "structuredContent": {"a": 1}}))),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            lean(r(
                json!({"structuredContent": {"a": 1}, "resultType": "complete"})
            )),
            Some(json!({"a": 1}))
        );
        for other in [
            json!({"content": text}),
            json!({"content": text, "structuredContent": null}),
            json!({"content": text, "structuredContent": {"a": 1}, "isError": true}),
            json!({"structuredContent": {"a": 1}, "resultType": "input_required"}),
            json!(5),
        ] {
            assert_eq!(lean(r(other.clone())), None, "{other}");
        }
    }

    #[tokio::test]
    async fn answers_are_routed_by_id_and_others_left_to_rmcp() {
        let (d, _child) = direct();
        let call = pending(&d).await;
        // Not ours: rmcp's numeric ids, a request from the upstream, a
        // line that only mentions the prefix.
        assert!(!d.route(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(!d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-1","method":"ping"}"#));
        assert!(!d.route(br#"{"jsonrpc":"2.0","method":"x","params":{"a":"\"temper-hub-1"}}"#));
        assert!(d.route(
            br#"{"jsonrpc":"2.0","id":"temper-hub-1","result":{"content":[],"structuredContent":{"a":1}}}"#
        ));
        match call.await.unwrap() {
            Ok(Reply::Output(out)) => {
                assert_eq!(out.value, json!({"a": 1}));
                assert_eq!(out.raw.as_deref().map(RawValue::get), Some(r#"{"a":1}"#));
            }
            other => panic!("{other:?}"),
        }
        // Structured content Temper does not pass on: refused, named.
        let call = pending(&d).await;
        assert!(d.route(
            br#"{"jsonrpc":"2.0","id":"temper-hub-2","result":{"structuredContent":{"a":1,"a":2}}}"#
        ));
        match call.await.unwrap() {
            Ok(Reply::Refused(m)) => assert!(m.contains("duplicate key \"a\""), "{m}"),
            other => panic!("{other:?}"),
        }
        // A late answer (no call waits for it) is dropped, not given to rmcp.
        assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-9","result":{}}"#));

        let call = pending(&d).await;
        assert!(d.route(
            br#"{"jsonrpc":"2.0","id":"temper-hub-3","error":{"code":-32602,"message":"bad"}}"#
        ));
        match call.await.unwrap() {
            Ok(Reply::Error(m)) => assert_eq!(m, "error -32602: bad"),
            other => panic!("{other:?}"),
        }
        let call = pending(&d).await;
        assert!(d.route(br#"{"jsonrpc":"2.0","id":"temper-hub-4","result":{"content":[]}}"#));
        match call.await.unwrap() {
            Ok(Reply::Result(v)) => assert_eq!(v, json!({"content": []})),
            other => panic!("{other:?}"),
        }
        assert!(crate::lock(&d.waiting).as_ref().unwrap().is_empty());
    }

    #[tokio::test]
    async fn closing_fails_the_waiting_calls_and_later_ones() {
        let (d, _child) = direct();
        let call = pending(&d).await;
        d.close();
        assert!(matches!(call.await.unwrap(), Err(NoReply::Gone(None))));
        let later = d.call("t", &Map::new(), Duration::from_secs(10)).await;
        assert!(matches!(later, Err(NoReply::Gone(None))));
    }

    #[tokio::test]
    async fn a_call_without_answer_times_out_and_leaves_no_entry() {
        let (d, _child) = direct();
        let r = d.call("t", &Map::new(), Duration::from_millis(50)).await;
        assert!(matches!(r, Err(NoReply::Timeout)));
        assert!(crate::lock(&d.waiting).as_ref().unwrap().is_empty());
    }

    #[test]
    fn a_request_carries_the_meta_of_its_revision() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let (d, _child) = direct();
        let args: Map<String, Value> = serde_json::from_value(json!({"q": "x"})).unwrap();
        let line: Value = serde_json::from_slice(&d.request(4, "t", &args)).unwrap();
        assert_eq!(
            line,
            json!({"jsonrpc": "2.0", "id": "temper-hub-4", "method": "tools/call", "params": {"name": "t", "arguments": {"q": "x"}}})
        );
        let (modern, _child2) = {
            let mut child = tokio::process::Command::new("cat")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            (Direct::new(Arc::new(tokio::sync::Mutex::new(stdin))), child)
        };
        modern.enable(Some(
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
        ));
        let line: Value = serde_json::from_slice(&modern.request(5, "t", &args)).unwrap();
        assert_eq!(
            line["params"]["_meta"],
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
        );
        assert_eq!(line["params"]["name"], json!("t"));
    }
}
