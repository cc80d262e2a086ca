//! One MCP connection over a byte stream pair (stdin/stdout for `temper
//! mcp`).
//!
//! A reader thread cuts the input into frames ([`jsonrpc::read_frame`]); a
//! writer thread owns the output and writes one message per line, so
//! messages never interleave and the output carries protocol messages only
//! (diagnostics go to stderr). Every request runs in its own task: a slow
//! forge or tool call does not hold up `ping` or `tools/list`. A handler that
//! panics still gets its request answered (`-32603`). Bad input of any kind
//! is answered and reading goes on; at the end of the input the server
//! waits for the requests in flight, discards the connection's session tier
//! ([`Forge::cleanup_session`]) and returns.
//!
//! Registry changes other processes make (a promotion, a deletion, an
//! import into the agent or shared tier) are found by polling the audit
//! trail ([`super::watch`]) and announced as `notifications/tools/list_changed`
//! when they concern the connection's agent.
//!
//! Requests are served before `initialize` too (the server is lenient);
//! `notifications/cancelled` ends the `subscriptions/listen` it names and is
//! otherwise ignored (a forge or call runs to its end, bounded by the
//! engine's limits, so the audit trail stays whole).
//!
//! **Both eras on one connection** ([`crate::protocol`]): a legacy client
//! (`initialize`) is answered in the revision it negotiated; a modern
//! request (2026-07-28 `_meta`) is answered in that revision, in the
//! connection's session (stdio keeps one session per connection, whatever
//! `dev.temper/session` says). A modern client hears of tool list changes
//! on its `subscriptions/listen` subscriptions (each notification stamped
//! with the subscription's id); plain `list_changed` notifications go out
//! unless the connection only ever spoke the modern revision.

use std::io::{self, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::access::Access;
use super::handler::{Handler, LIST_CHANGED, Notifier};
use super::jsonrpc::{
    self, Frame, INVALID_REQUEST, Incoming, MAX_MESSAGE_BYTES, Rejected, RpcError,
};
use super::protocol::{self, results, results::SubscriptionFilter};
use super::watch::{self, RegistryWatch};
use temper_forge::{Forge, ForgeContext};
use temper_store::StoreError;

/// Why a connection ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// Reading the input failed (not: it ended).
    #[error("mcp: cannot read the input: {0}")]
    Read(#[source] io::Error),
    /// A reader or writer thread could not be started.
    #[error("mcp: cannot start the {what} thread: {source}")]
    Thread {
        /// `reader` or `writer`.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The audit trail's head could not be read to start the registry
    /// watch.
    #[error("mcp: cannot start the registry watch: {0}")]
    Watch(#[source] StoreError),
    /// Discarding the connection's session tier failed (its audit entries
    /// could not be written).
    #[error("mcp: cannot discard the connection's session tier: {0}")]
    Cleanup(#[source] StoreError),
}

/// The context of one connection: `base`'s agent, and a session of its own,
/// `BASE_SESSION/mcp-PID-MILLIS`, so that the connection starts with an
/// empty session tier and what it forges is discarded when it closes
/// (tools the CLI keeps in `base`'s session are not visible to it).
pub fn connection_context(base: &ForgeContext) -> ForgeContext {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    ForgeContext::new(
        base.agent_id.clone(),
        format!("{}/mcp-{}-{millis}", base.session_id, std::process::id()),
    )
}

/// Serves one connection on stdin/stdout (see [`serve`]).
pub async fn serve_stdio(
    forge: Forge,
    ctx: ForgeContext,
    registry_poll: Option<Duration>,
) -> Result<usize, McpError> {
    serve(forge, ctx, io::stdin(), io::stdout(), registry_poll).await
}

/// Serves one connection: reads messages from `input` until it ends, answers
/// on `output`, then discards `ctx`'s session tier. Returns how many
/// session tools were discarded. Every `registry_poll` (e.g.
/// [`watch::DEFAULT_POLL`]; `None`: never) the audit trail is read for
/// changes other processes made to the caller's agent tier or the shared
/// tier.
pub async fn serve<R, W>(
    forge: Forge,
    ctx: ForgeContext,
    input: R,
    output: W,
    registry_poll: Option<Duration>,
) -> Result<usize, McpError>
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Outgoing>();
    let writer = std::thread::Builder::new()
        .name("mcp-writer".into())
        .spawn(move || write_loop(output, out_rx))
        .map_err(|source| McpError::Thread {
            what: "writer",
            source,
        })?;
    let (frame_tx, mut frames) = mpsc::channel::<(Instant, io::Result<Frame>)>(4);
    std::thread::Builder::new()
        .name("mcp-reader".into())
        .spawn(move || read_loop(input, frame_tx))
        .map_err(|source| McpError::Thread {
            what: "reader",
            source,
        })?;

    let watch = RegistryWatch::start(forge.store_handle())
        .await
        .map_err(McpError::Watch)?;
    let agent = ctx.agent_id.clone();
    let conn = Arc::new(Connection {
        handler: Handler::new(forge, ctx, Access::ALL, watch.clone()),
        out: out_tx,
        initialized: AtomicBool::new(false),
        modern: AtomicBool::new(false),
        subscriptions: Mutex::new(Vec::new()),
    });
    let poller = registry_poll.map(|every| {
        let conn = conn.clone();
        tokio::spawn(watch::poll_loop(watch, every, move |changes| {
            if changes.reaches(&agent, Access::ALL) {
                conn.list_changed();
            }
            !conn.out.is_closed()
        }))
    });
    let mut requests = JoinSet::new();
    let ended = loop {
        let (read_at, frame) = match frames.recv().await {
            None | Some((_, Ok(Frame::Eof))) => break Ok(()),
            Some((_, Err(e))) => break Err(McpError::Read(e)),
            Some((at, Ok(frame))) => (at, frame),
        };
        match frame {
            Frame::Eof => unreachable!("handled above"),
            Frame::TooLarge { bytes } => {
                tracing::warn!("refused a message of {bytes} bytes");
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!("message of {bytes} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"),
                );
                conn.send(jsonrpc::error_response(&Value::Null, &error));
            }
            Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Frame::Line(line) => match jsonrpc::parse_message(&line).inspect(|m| {
                crate::observe::count(conn.handler.forge(), m, "stdio");
            }) {
                Err(Rejected { id, error }) => {
                    tracing::warn!("{error}");
                    conn.send(jsonrpc::error_response(&id, &error));
                }
                Ok(Incoming::Request { id, method, params }) if method == LISTEN => {
                    conn.listen(id, params.as_ref());
                }
                Ok(Incoming::Request { id, method, params }) => {
                    requests.spawn(conn.clone().answer(id, method, params, read_at));
                }
                Ok(Incoming::Notification { method, params }) => {
                    if method == "notifications/cancelled" {
                        conn.cancelled(params.as_ref());
                    } else if !method.starts_with("notifications/") {
                        tracing::warn!("ignoring unknown notification {method:?}");
                    }
                }
                Ok(Incoming::Response { id }) => {
                    tracing::warn!("ignoring a response (id {id}): this server sends no requests");
                }
            },
        }
        while requests.try_join_next().is_some() {}
    };
    while requests.join_next().await.is_some() {}
    if let Some(poller) = poller {
        poller.abort();
        let _ = poller.await;
    }
    let discarded = conn.handler.forge().cleanup_session(conn.handler.context());
    // The last sender: the writer drains what is queued, then ends.
    drop(conn);
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    ended?;
    discarded.map_err(McpError::Cleanup)
}

fn read_loop<R: Read>(input: R, frames: mpsc::Sender<(Instant, io::Result<Frame>)>) {
    let mut reader = BufReader::with_capacity(64 << 10, input);
    loop {
        let frame = jsonrpc::read_frame(&mut reader, MAX_MESSAGE_BYTES);
        let last = matches!(frame, Ok(Frame::Eof) | Err(_));
        if frames.blocking_send((Instant::now(), frame)).is_err() || last {
            return;
        }
    }
}

/// Writes messages as they come, one per line. Whatever is queued when the
/// writer wakes goes out in one buffered write and one flush: under load
/// the answers of many calls share a system call, and a lone answer is
/// flushed at once.
fn write_loop<W: Write>(output: W, mut messages: mpsc::UnboundedReceiver<Outgoing>) {
    let mut output = io::BufWriter::with_capacity(64 << 10, output);
    let mut written: Vec<Instant> = Vec::new();
    while let Some(first) = messages.blocking_recv() {
        let mut next = Some(first);
        while let Some(Outgoing { message, read_at }) = next {
            let line = serde_json::to_writer(&mut output, &message)
                .map_err(io::Error::from)
                .and_then(|()| output.write_all(b"\n"));
            if let Err(e) = line {
                tracing::warn!("cannot write to the client: {e}");
                return;
            }
            written.extend(read_at);
            next = messages.try_recv().ok();
        }
        if let Err(e) = output.flush() {
            tracing::warn!("cannot write to the client: {e}");
            return;
        }
        for at in written.drain(..) {
            answered(at);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reports a request's time in the server, from its line read to its
/// answer written, as a `trace` event of target [`TIMING_TARGET`] (what
/// `cargo bench --bench mcp` collects; free when nothing listens).
fn answered(read_at: Instant) {
    tracing::trace!(
        target: TIMING_TARGET,
        transport = "stdio",
        micros = read_at.elapsed().as_micros() as u64,
    );
}

/// The `tracing` target of the per-request server time events (a `micros`
/// field): stdio from the request's line read to its answer written, HTTP
/// from the request's headers read to its answer handed to hyper.
pub const TIMING_TARGET: &str = "temper_mcp::timing";

/// A message for the writer: a request's answer (with when the request was
/// read) or a notification.
struct Outgoing {
    message: Value,
    read_at: Option<Instant>,
}

impl Outgoing {
    fn note(message: Value) -> Self {
        Self {
            message,
            read_at: None,
        }
    }
}

/// What every request handler shares.
struct Connection {
    handler: Handler,
    out: mpsc::UnboundedSender<Outgoing>,
    /// A legacy client sent `initialize`.
    initialized: AtomicBool,
    /// A modern (2026-07-28) request came.
    modern: AtomicBool,
    /// Open `subscriptions/listen` requests (by id) and what they honor.
    subscriptions: Mutex<Vec<(Value, SubscriptionFilter)>>,
}

/// The method of a modern change-notification stream.
const LISTEN: &str = "subscriptions/listen";

impl Notifier for Connection {
    fn request_note(&self, message: Value) {
        self.send(message);
    }
    fn session_note(&self, message: Value) {
        if message.get("method").and_then(Value::as_str) == Some(LIST_CHANGED) {
            self.list_changed();
        } else {
            self.send(message);
        }
    }
}

impl Connection {
    fn send(&self, message: Value) {
        // Fails only once the writer gave up (the client is gone).
        let _ = self.out.send(Outgoing::note(message));
    }

    /// Announces that the tool list changed: to a legacy client as a plain
    /// notification (unless the connection only ever spoke the modern
    /// revision, which gets change notifications on subscriptions only),
    /// and on every subscription that asked for it, stamped with its id.
    fn list_changed(&self) {
        if self.initialized.load(Ordering::SeqCst) || !self.modern.load(Ordering::SeqCst) {
            self.send(jsonrpc::notification(LIST_CHANGED, serde_json::json!({})));
        }
        for (id, filter) in lock(&self.subscriptions).iter() {
            if filter.tools() {
                self.send(results::subscription_note(LIST_CHANGED, id));
            }
        }
    }

    /// Opens a `subscriptions/listen` subscription: acknowledged at once,
    /// then open until `notifications/cancelled` names it or the input ends
    /// (the connection is its stream; its notifications carry its id).
    fn listen(&self, id: Value, params: Option<&Value>) {
        self.modern.store(true, Ordering::SeqCst);
        if let Err(error) = protocol::envelope(params) {
            self.send(jsonrpc::error_response(&id, &error));
            return;
        }
        let filter = SubscriptionFilter::honored(params);
        let mut subs = lock(&self.subscriptions);
        if subs.iter().any(|(open, _)| *open == id) {
            drop(subs);
            let error = RpcError::new(
                INVALID_REQUEST,
                format!("{LISTEN}: a subscription with id {id} is already open"),
            );
            self.send(jsonrpc::error_response(&id, &error));
            return;
        }
        // The acknowledgment goes out under the lock: no notification of
        // this subscription can precede it.
        self.send(results::acknowledged(&id, &filter));
        subs.push((id, filter));
    }

    /// Ends the subscription `notifications/cancelled` names, if it names
    /// one (a forge or call in flight runs to its end: see the module docs).
    fn cancelled(&self, params: Option<&Value>) {
        if let Some(id) = params.and_then(|p| p.get("requestId")) {
            lock(&self.subscriptions).retain(|(open, _)| open != id);
        }
    }

    /// Handles one request in a task of its own and sends the answer.
    async fn answer(
        self: Arc<Self>,
        id: Value,
        method: String,
        params: Option<Value>,
        read_at: Instant,
    ) {
        // The connection's session is in use: it does not idle out while
        // the connection lives (written behind, no write on this path).
        if let Err(e) = self.handler.forge().touch_session(self.handler.context()) {
            tracing::warn!("cannot record the session's use: {e}");
        }
        let conn = self.clone();
        let session = &self.handler.context().session_id;
        let span = crate::trace::request_span(session, &id, &method, params.as_ref());
        let handler = tokio::spawn(tracing::Instrument::instrument(
            async move {
                let params = params.as_ref();
                if protocol::is_modern(&method, params) {
                    // The connection is the session, whatever
                    // `dev.temper/session` says (one session per connection).
                    conn.modern.store(true, Ordering::SeqCst);
                    protocol::envelope(params)?;
                    conn.handler
                        .handle_modern(&method, params, conn.as_ref())
                        .await
                } else {
                    if method == "initialize" {
                        conn.initialized.store(true, Ordering::SeqCst);
                    }
                    conn.handler.handle(&method, params, conn.as_ref()).await
                }
            },
            span.clone(),
        ));
        let message = match handler.await {
            Ok(Ok(result)) => jsonrpc::response(&id, result),
            Ok(Err(error)) => {
                crate::trace::record_rpc_error(&span, error.code);
                jsonrpc::error_response(&id, &error)
            }
            Err(e) => {
                tracing::error!("request {id} failed: {e}");
                jsonrpc::error_response(
                    &id,
                    &RpcError::internal(format!("the handler failed: {e}")),
                )
            }
        };
        let _ = self.out.send(Outgoing {
            message,
            read_at: Some(read_at),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connection_gets_its_own_session() {
        let base = ForgeContext::new("a", "s");
        let ctx = connection_context(&base);
        assert_eq!(ctx.agent_id, "a");
        assert!(
            ctx.session_id
                .starts_with(&format!("s/mcp-{}-", std::process::id()))
        );
    }
}
