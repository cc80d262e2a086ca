//! Requests to a stdio upstream without rmcp's service in between (the
//! direct path): `tools/call`, `tools/list`, and the resources and prompts
//! methods. rmcp keeps the handshake, `ping`, `list_changed` and the
//! Streamable HTTP transport.
//!
//! Why (measured with `cargo bench -p temper-cli --bench hub` and `perf`):
//! rmcp reads every incoming message as its `ServerResult`, an untagged
//! union of twenty result types behind a JSON-RPC message that is itself
//! read through serde's buffered `flatten`. A tool result is therefore
//! copied into serde's intermediate `Content` tree twice and matched
//! against each result type in turn, and every request and answer passes
//! through rmcp's service task. That was most of what Temper added to a
//! call (see the hub chapter of the book for figures). rmcp's types also
//! drop what they do not model (a tool's `execution`, say), where a
//! gateway must pass the upstream's own answer on. On this path the
//! request is written by the caller and the answer's line is read once by
//! the connection's reader, which borrows its `result` as the upstream's
//! text and hands a copy of that text to the caller: the caller reads what
//! it needs of it (`output.rs`), off the reader.
//!
//! Direct requests carry string ids (`"temper-hub-7"`); rmcp numbers its
//! own requests, so the two never collide. A line that carries such an id
//! is routed here; every other line goes to rmcp as before. A request that
//! asks for progress carries its id as its progress token, so the
//! upstream's `notifications/progress` for it are routed here too. A
//! request carries the `_meta` rmcp would give it: on a revision without
//! the `initialize` handshake (2026-07-28), the protocol version, client
//! info and capabilities; before it, none.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

use super::relay::{AskRefused, CallNote, Relay, RelayRequests, UpstreamAsk, attribute};

/// The ids of direct calls start with this.
const ID_PREFIX: &str = "temper-hub-";
/// How a direct call's id starts on the wire.
const ID_NEEDLE: &[u8] = b"\"temper-hub-";
/// How the upstream's own notifications and requests are recognised before
/// they are read (answers to rmcp's requests have no method).
const METHOD_NEEDLE: &[u8] = b"\"method\"";

/// The answer to a direct request: the response's `result`, or its `error`.
#[derive(Debug)]
pub(super) enum Reply {
    /// The `result` member, as the upstream wrote it.
    Result(Box<RawValue>),
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

/// A request waiting for its answer: where the answer goes, where its
/// notes go when the caller gave a relay, and whether it is a tool call
/// (the requests a log message or an upstream's request may belong to).
struct Waiter {
    answer: oneshot::Sender<Reply>,
    notes: Option<mpsc::Sender<CallNote>>,
    call: bool,
}

/// The requests waiting for their answer, by number; `None` once the
/// connection has ended (their senders dropped, so each fails at once).
/// Bounded by the requests in flight: an entry leaves when its answer
/// comes, when its request ends (timeout, or the caller gone), or with the
/// connection.
type Waiting = Mutex<Option<HashMap<u64, Waiter>>>;

/// The direct path of one stdio connection: shared by the callers (which
/// write) and the connection's reader (which routes the answers).
pub(super) struct Direct {
    next: AtomicU64,
    waiting: Waiting,
    write: Arc<tokio::sync::Mutex<ChildStdin>>,
    /// The `_meta` of every request, as JSON text (`None`: no `_meta`);
    /// set once the handshake is done, when calls may take this path.
    meta: OnceLock<Option<String>>,
    /// The upstream's secrets, cut out of the log messages and requests
    /// relayed.
    secrets: Vec<String>,
    /// The upstream's table name, for refusals.
    upstream: String,
    /// Which of its requests are relayed.
    relay: RelayRequests,
}

impl Direct {
    /// The direct path over the child's stdin `write` (shared with rmcp's
    /// writes: one message per lock, so lines never interleave).
    /// `secrets` are cut out of what it relays; the `upstream`'s
    /// requests `relay` names are relayed.
    pub(super) fn new(
        write: Arc<tokio::sync::Mutex<ChildStdin>>,
        secrets: Vec<String>,
        upstream: String,
        relay: RelayRequests,
    ) -> Self {
        Self {
            next: AtomicU64::new(1),
            waiting: Mutex::new(Some(HashMap::new())),
            write,
            meta: OnceLock::new(),
            secrets,
            upstream,
            relay,
        }
    }

    /// `text` with the upstream's secrets cut out.
    fn redact(&self, text: &str) -> String {
        super::redact(&self.secrets, text.to_string())
    }

    /// The notes queue of the only `tools/call` in flight, when exactly
    /// one is and its caller gave a relay (see `relay.rs`).
    pub(super) fn sole_call(&self) -> Option<mpsc::Sender<CallNote>> {
        let waiting = crate::lock(&self.waiting);
        let calls = waiting.as_ref()?.values().filter(|w| w.call);
        attribute(calls.map(|w| w.notes.as_ref()))
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

    /// Hands `line` to the direct request it answers (or whose progress it
    /// reports, or the sole call in flight a log message is attributed to);
    /// false when it is for none (it is rmcp's). An answer to a request
    /// that is no longer waiting (timed out) is dropped.
    pub(super) fn route(&self, line: &[u8]) -> bool {
        if memchr::memmem::find(line, ID_NEEDLE).is_none() {
            // The upstream's own notifications and requests.
            return memchr::memmem::find(line, METHOD_NEEDLE).is_some() && self.upstreams(line);
        }
        // The result is borrowed as the upstream's text, not read: the
        // caller reads what it needs of it, off the reader.
        let Ok(msg) = serde_json::from_slice::<Line<'_>>(line) else {
            return false; // rmcp's parse names what is wrong with it
        };
        if let Some(method) = msg.method.as_deref() {
            return method == "notifications/progress" && self.progress(msg.params);
        }
        let Some(n) = msg.id.as_ref().and_then(Value::as_str).and_then(number_of) else {
            return false;
        };
        let waiter = crate::lock(&self.waiting)
            .as_mut()
            .and_then(|w| w.remove(&n));
        match waiter {
            Some(waiter) => {
                let reply = match (msg.result, msg.error) {
                    (_, Some(error)) => Reply::Error(error_text(&error)),
                    (Some(result), None) => Reply::Result(result.to_owned()),
                    (None, None) => {
                        Reply::Error("sent a response with neither result nor error".into())
                    }
                };
                let _ = waiter.answer.send(reply);
            }
            None => tracing::debug!(id = n, "answer to a call that no longer waits (dropped)"),
        }
        true
    }

    /// Hands the upstream's logging notification, or its request for
    /// elicitation or sampling the tools file relays, to the sole call in
    /// flight, its secrets cut out; false when it is none of these, or
    /// cannot be attributed (rmcp's handler then notes the log message in
    /// Temper's log, or refuses the request naming why).
    fn upstreams(&self, line: &[u8]) -> bool {
        let Ok(msg) = serde_json::from_slice::<Line<'_>>(line) else {
            return false;
        };
        let method: &'static str = match (msg.method.as_deref(), &msg.id) {
            (Some("notifications/message"), None) => "notifications/message",
            (Some("elicitation/create"), Some(_)) if self.relay.elicitation => "elicitation/create",
            (Some("sampling/createMessage"), Some(_)) if self.relay.sampling => {
                "sampling/createMessage"
            }
            _ => return false,
        };
        let Some(to) = self.sole_call() else {
            return false;
        };
        let text = self.redact(msg.params.map_or("{}", RawValue::get));
        let Ok(params @ Value::Object(_)) = serde_json::from_str::<Value>(&text) else {
            // A secret cut out of an escape, or not an object: not relayed.
            return false;
        };
        let Some(id) = msg.id else {
            // Full: dropped (logs are advisory, and the reader never waits).
            let _ = to.try_send(CallNote::Log(params));
            return true;
        };
        let (reply, answer) = oneshot::channel();
        let ask = UpstreamAsk {
            upstream: self.upstream.clone(),
            method,
            params,
            reply,
        };
        let (write, upstream) = (self.write.clone(), self.upstream.clone());
        // Answered off the reader: the caller may take its time.
        tokio::spawn(async move {
            let refused = |why: &str| AskRefused::new(&upstream, method, why);
            let answer = match to.send(CallNote::Ask(ask)).await {
                Ok(()) => answer
                    .await
                    .unwrap_or_else(|_| Err(refused("the call ended before its caller answered"))),
                Err(_) => Err(refused("the call's caller is gone")),
            };
            let message = match answer {
                Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(e) => {
                    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
                }
            };
            if let Ok(message) = serde_json::to_vec(&message) {
                let _ = write_line(&write, message).await;
            }
        });
        true
    }

    /// Hands a progress notification to the request whose token it carries
    /// (one of ours); false when the token is not ours.
    fn progress(&self, params: Option<&RawValue>) -> bool {
        let Some(params) =
            params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p.get()).ok())
        else {
            return false;
        };
        let Some(n) = params
            .get("progressToken")
            .and_then(Value::as_str)
            .and_then(number_of)
        else {
            return false;
        };
        let to = crate::lock(&self.waiting)
            .as_ref()
            .and_then(|w| w.get(&n))
            .and_then(|w| w.notes.clone());
        if let Some(to) = to {
            // Full: dropped (progress is advisory, and the reader never waits).
            let _ = to.try_send(CallNote::Progress(Value::Object(params)));
        }
        true
    }

    /// Sends the request `method` whose params are `params`' members (a
    /// JSON object's text; `_meta` is added), waits for its answer up to
    /// `timeout`. With a `relay`, the call's notes go there (and when
    /// its caller asked for progress, the request asks for progress, its
    /// id as the token). On a timeout the upstream is told that the
    /// request is cancelled.
    pub(super) async fn request(
        &self,
        method: &str,
        params: &Map<String, Value>,
        relay: Option<Relay>,
        timeout: std::time::Duration,
    ) -> Result<Reply, NoReply> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let asks_progress = relay.as_ref().is_some_and(|r| r.progress);
        {
            let mut waiting = crate::lock(&self.waiting);
            let Some(waiting) = waiting.as_mut() else {
                return Err(NoReply::Gone(None));
            };
            waiting.insert(
                n,
                Waiter {
                    answer: tx,
                    notes: relay.map(|r| r.notes),
                    call: method == "tools/call",
                },
            );
        }
        let guard = Registered { direct: self, n };
        let request = self.request_line(n, method, params, asks_progress);
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

    /// The line of request `n` (id `temper-hub-{n}`): `params`' members
    /// after a `_meta` holding the revision's members and, when
    /// `progress`, the progress token (the id).
    fn request_line(
        &self,
        n: u64,
        method: &str,
        params: &Map<String, Value>,
        progress: bool,
    ) -> Vec<u8> {
        let mut line = Vec::with_capacity(256);
        let _ = write!(line, r#"{{"jsonrpc":"2.0","id":"{ID_PREFIX}{n}","method":"#);
        // Strings and maps of JSON values: serializing cannot fail.
        let _ = serde_json::to_writer(&mut line, method);
        line.extend_from_slice(br#","params":{"#);
        let meta = self.meta.get().and_then(Option::as_deref);
        let mut first = true;
        if progress || meta.is_some() {
            line.extend_from_slice(b"\"_meta\":{");
            if progress {
                let _ = write!(line, r#""progressToken":"{ID_PREFIX}{n}""#);
            }
            if let Some(meta) = meta {
                // `meta` is an object's text: its members go in as they are.
                let inner = meta
                    .strip_prefix('{')
                    .and_then(|m| m.strip_suffix('}'))
                    .unwrap_or_default();
                if !inner.is_empty() {
                    if progress {
                        line.push(b',');
                    }
                    line.extend_from_slice(inner.as_bytes());
                }
            }
            line.push(b'}');
            first = false;
        }
        for (k, v) in params {
            if k == "_meta" {
                continue;
            }
            if !first {
                line.push(b',');
            }
            first = false;
            let _ = serde_json::to_writer(&mut line, k);
            line.push(b':');
            let _ = serde_json::to_writer(&mut line, v);
        }
        line.extend_from_slice(b"}}");
        line
    }

    /// Writes one message (without its line end) as one line.
    async fn write(&self, message: Vec<u8>) -> std::io::Result<()> {
        write_line(&self.write, message).await
    }
}

/// Writes one message (without its line end) as one line to `write`.
async fn write_line(
    write: &tokio::sync::Mutex<ChildStdin>,
    mut message: Vec<u8>,
) -> std::io::Result<()> {
    message.push(b'\n');
    let mut w = write.lock().await;
    w.write_all(&message).await?;
    w.flush().await
}

/// The number of one of our ids (`temper-hub-7` → 7).
fn number_of(id: &str) -> Option<u64> {
    id.strip_prefix(ID_PREFIX)?.parse().ok()
}

/// A JSON-RPC message as the direct path reads it: its `result` and
/// `params` borrowed as the upstream's text.
#[derive(serde::Deserialize)]
struct Line<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<Value>,
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
mod tests;
