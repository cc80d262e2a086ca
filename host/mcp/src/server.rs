//! One MCP connection over a byte stream pair (stdin/stdout for `temper
//! mcp`).
//!
//! A reader thread cuts the input into frames ([`jsonrpc::read_frame`]),
//! parses them and spawns each request as a task of its own on the
//! runtime: a slow forge or tool call does not hold up `ping` or
//! `tools/list`. Answers are written by the tasks themselves, one message
//! per line, through a combining writer ([`Output`]: no writer thread to
//! wake per answer), so messages never interleave and the output carries
//! protocol messages only (diagnostics go to stderr). A handler that
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
use std::os::fd::AsFd;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::access::Access;
use super::handler::hub_relay::{AskReceiver, ClientAsks, capability_of};
use super::handler::{Handler, LIST_CHANGED, Notifier};
use super::inline::{self, Writable};
use super::jsonrpc::{
    self, Frame, INVALID_REQUEST, Incoming, MAX_MESSAGE_BYTES, Rejected, RpcError,
};
use super::protocol::{self, results, results::SubscriptionFilter};
use super::watch::{self, deliver_hub_changes};
use temper_forge::{Forge, ForgeContext};
use temper_store::StoreError;

mod output;
use output::{Output, lock};

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
/// session tools were discarded. The forge's registry watch reads the
/// audit trail for changes other processes made to the caller's agent tier
/// or the shared tier, every `registry_poll` (e.g. [`watch::DEFAULT_POLL`])
/// if the forge's watch does not run yet ([`Forge::start_watch`]); with
/// `None`, only if the forge's own does.
pub async fn serve<R, W>(
    forge: Forge,
    ctx: ForgeContext,
    input: R,
    output: W,
    registry_poll: Option<Duration>,
) -> Result<usize, McpError>
where
    R: Read + Send + 'static,
    W: Write + AsFd + Send + 'static,
{
    let watch = watch::of(&forge, registry_poll)
        .await
        .map_err(McpError::Watch)?;
    let changes = forge.subscribe_changes();
    let agent = ctx.agent_id.clone();
    let conn = Arc::new(Connection {
        handler: Handler::new(forge, ctx, Access::ALL, watch.clone()),
        out: Arc::new(Output::with_probe(Writable::of(&output), Box::new(output))),
        rt: tokio::runtime::Handle::current(),
        initialized: AtomicBool::new(false),
        modern: AtomicBool::new(false),
        subscriptions: Mutex::new(Vec::new()),
        pending: AtomicUsize::new(0),
        client_capabilities: Mutex::new(None),
        asks: ClientAsks::default(),
    });
    // Every request task holds a clone of `in_flight`: once the reader's
    // and theirs are all dropped, `requests` ends.
    let (in_flight, mut requests) = mpsc::channel::<()>(1);
    let (end_tx, end) = oneshot::channel::<io::Result<()>>();
    {
        let (conn, handle) = (conn.clone(), conn.rt.clone());
        std::thread::Builder::new()
            .name("mcp-reader".into())
            .spawn(move || {
                let ended = read_loop(input, &conn, &handle, in_flight);
                let _ = end_tx.send(ended);
            })
            .map_err(|source| McpError::Thread {
                what: "reader",
                source,
            })?;
    }
    let poller = changes.map(|changes| {
        let conn = conn.clone();
        tokio::spawn(watch::deliver_changes(changes, move |changes| {
            // `None`: the receiver fell behind; anything may have changed.
            if changes.is_none_or(|c| watch::reach(&c, &agent, Access::ALL)) {
                conn.list_changed();
            }
            !conn.out.failed()
        }))
    });
    // The hub upstreams' list changes, announced as the same notification.
    let hub_changes = conn
        .handler
        .forge()
        .hub()
        .and_then(|hub| hub.subscribe_list_changes())
        .map(|changes| {
            let conn = conn.clone();
            tokio::spawn(deliver_hub_changes(changes, move |method| {
                conn.list_changed_of(method);
                !conn.out.failed()
            }))
        });
    // The reader thread ended (a panic there drops its sender: the input
    // is taken as ended).
    let ended = end.await.unwrap_or(Ok(()));
    while requests.recv().await.is_some() {}
    for poller in poller.into_iter().chain(hub_changes) {
        poller.abort();
        let _ = poller.await;
    }
    // Every answer is written (each request wrote its own before it
    // ended, or handed it to the write under way then, which finished
    // before that request's writer did).
    let discarded = conn.handler.forge().cleanup_session(conn.handler.context());
    ended.map_err(McpError::Read)?;
    discarded.map_err(McpError::Cleanup)
}

/// Reads and dispatches messages until the input ends (`Ok`) or fails.
/// Runs on a thread of its own: each request is spawned on `handle` from
/// here (one task per request, no hop through another task), holding a
/// clone of `in_flight` until answered; what needs no handler (refused
/// input, `subscriptions/listen`, notifications) is answered here, in
/// input order.
fn read_loop<R: Read>(
    input: R,
    conn: &Arc<Connection>,
    handle: &tokio::runtime::Handle,
    in_flight: mpsc::Sender<()>,
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 << 10, input);
    loop {
        let frame = jsonrpc::read_frame(&mut reader, MAX_MESSAGE_BYTES)?;
        let read_at = Instant::now();
        match frame {
            Frame::Eof => return Ok(()),
            Frame::TooLarge { bytes } => {
                tracing::warn!("refused a message of {bytes} bytes");
                let error = RpcError::new(
                    INVALID_REQUEST,
                    format!("message of {bytes} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"),
                );
                conn.send_from_reader(jsonrpc::error_response(&Value::Null, &error), &in_flight);
            }
            Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Frame::Line(line) => match jsonrpc::parse_message(&line).inspect(|m| {
                crate::observe::count(conn.handler.forge(), m, "stdio");
            }) {
                Err(Rejected { id, error }) => {
                    tracing::warn!("{error}");
                    conn.send_from_reader(jsonrpc::error_response(&id, &error), &in_flight);
                }
                Ok(Incoming::Request { id, method, params }) if method == LISTEN => {
                    conn.listen(id, params.as_ref(), &in_flight);
                }
                Ok(Incoming::Request { id, method, params }) => {
                    // Nothing else waits in the input: the client waits
                    // for this answer (see `inline`).
                    let here = reader.buffer().is_empty()
                        && reader_inline()
                        && inline::is_short(&method, params.as_ref());
                    conn.pending.fetch_add(1, Ordering::AcqRel);
                    let task = {
                        let (conn, held) = (conn.clone(), in_flight.clone());
                        async move {
                            conn.answer(id, method, params, read_at).await;
                            drop(held);
                        }
                    };
                    if here {
                        inline::run_here_or_spawn(handle, task, &in_flight);
                    } else {
                        handle.spawn(task);
                    }
                }
                Ok(Incoming::Notification { method, params }) => {
                    if method == "notifications/cancelled" {
                        conn.cancelled(params.as_ref());
                    } else if !method.starts_with("notifications/") {
                        tracing::warn!("ignoring unknown notification {method:?}");
                    }
                }
                Ok(Incoming::Response { id, outcome }) => {
                    if !conn.asks.answer(&id, outcome) {
                        tracing::warn!(
                            "ignoring a response (id {id}): no request of ours waits for it"
                        );
                    }
                }
            },
        }
    }
}

/// Whether the reader may answer short requests itself (see [`inline`]):
/// yes unless `TEMPER_MCP_READER_INLINE=0` (a switch for measuring the
/// difference; read once).
fn reader_inline() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("TEMPER_MCP_READER_INLINE").map_or(true, |v| v != "0"))
}

/// The `tracing` target of the per-request server time events (a `micros`
/// field): stdio from the request's line read to its answer written, HTTP
/// from the request's headers read to its answer handed to hyper.
pub const TIMING_TARGET: &str = "temper_mcp::timing";

/// What every request handler shares.
struct Connection {
    handler: Handler,
    out: Arc<Output>,
    /// The runtime the connection is served on (for writes the reader
    /// thread hands off).
    rt: tokio::runtime::Handle,
    /// A legacy client sent `initialize`.
    initialized: AtomicBool,
    /// A modern (2026-07-28) request came.
    modern: AtomicBool,
    /// Open `subscriptions/listen` requests (by id) and what they honor.
    subscriptions: Mutex<Vec<(Value, SubscriptionFilter)>>,
    /// Requests read and not yet answered (see [`Output::send_coalesced`]).
    pending: AtomicUsize,
    /// What the legacy client declared in `initialize` (`capabilities`).
    client_capabilities: Mutex<Option<Value>>,
    /// The requests sent to the client (an upstream's, relayed) that wait
    /// for its answer.
    asks: ClientAsks,
}

/// The method of a modern change-notification stream.
const LISTEN: &str = "subscriptions/listen";

impl Notifier for Connection {
    fn request_note(&self, message: Value) {
        self.send(message);
    }

    fn ask(&self, method: &str, params: Value) -> Option<AskReceiver> {
        let capability = capability_of(method)?;
        let declared = lock(&self.client_capabilities)
            .as_ref()
            .is_some_and(|c| c.get(capability).is_some_and(Value::is_object));
        if !declared {
            return None;
        }
        let (id, answer) = self.asks.register()?;
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        Some(answer)
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
        self.deliver(&message, None);
    }

    /// Sends `message` (the answer to a request read at `read_at`, or a
    /// notification) from whichever thread handles the request: the
    /// reader's way when the reader polls it (see [`inline`]).
    fn deliver(&self, message: &impl Serialize, read_at: Option<Instant>) {
        match inline::reader_guard() {
            Some(held) => self.out.send_on_reader(message, read_at, &self.rt, held),
            None => self.out.send(message, read_at),
        }
    }

    /// Sends `message` from the reader thread (see
    /// [`Output::send_detached`]; `held` is the reader's in-flight guard).
    fn send_from_reader(&self, message: Value, held: &mpsc::Sender<()>) {
        self.out.send_detached(&message, &self.rt, held);
    }

    /// Announces that the tool list changed: to a legacy client as a plain
    /// notification (unless the connection only ever spoke the modern
    /// revision, which gets change notifications on subscriptions only),
    /// and on every subscription that asked for it, stamped with its id.
    fn list_changed(&self) {
        self.list_changed_of(LIST_CHANGED);
    }

    /// Announces the `list_changed` notification `method` (tools,
    /// resources or prompts) as [`Self::list_changed`] does.
    fn list_changed_of(&self, method: &str) {
        if self.initialized.load(Ordering::SeqCst) || !self.modern.load(Ordering::SeqCst) {
            self.send(jsonrpc::notification(method, serde_json::json!({})));
        }
        for (id, filter) in lock(&self.subscriptions).iter() {
            if filter.wants(method) {
                self.send(results::subscription_note(method, id));
            }
        }
    }

    /// Opens a `subscriptions/listen` subscription: acknowledged at once,
    /// then open until `notifications/cancelled` names it or the input ends
    /// (the connection is its stream; its notifications carry its id).
    fn listen(&self, id: Value, params: Option<&Value>, held: &mpsc::Sender<()>) {
        self.modern.store(true, Ordering::SeqCst);
        if let Err(error) = protocol::envelope(params) {
            self.send_from_reader(jsonrpc::error_response(&id, &error), held);
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
            self.send_from_reader(jsonrpc::error_response(&id, &error), held);
            return;
        }
        // The acknowledgment goes out under the lock: no notification of
        // this subscription can precede it.
        self.send_from_reader(results::acknowledged(&id, &filter), held);
        subs.push((id, filter));
    }

    /// Ends the subscription `notifications/cancelled` names, if it names
    /// one (a forge or call in flight runs to its end: see the module docs).
    fn cancelled(&self, params: Option<&Value>) {
        if let Some(id) = params.and_then(|p| p.get("requestId")) {
            lock(&self.subscriptions).retain(|(open, _)| open != id);
        }
    }

    /// Handles one request (in the task the reader spawned for it) and
    /// sends the answer; a handler that panics is answered `-32603`.
    async fn answer(&self, id: Value, method: String, params: Option<Value>, read_at: Instant) {
        // The connection's session is in use: it does not idle out while
        // the connection lives (written behind, no write on this path).
        if let Err(e) = self.handler.forge().touch_session(self.handler.context()) {
            tracing::warn!("cannot record the session's use: {e}");
        }
        let session = &self.handler.context().session_id;
        let span = crate::trace::request_span(session, &id, &method, params.as_ref());
        let handled = tracing::Instrument::instrument(
            async {
                let params = params.as_ref();
                if protocol::is_modern(&method, params) {
                    // The connection is the session, whatever
                    // `dev.temper/session` says (one session per connection).
                    self.modern.store(true, Ordering::SeqCst);
                    protocol::envelope(params)?;
                    self.handler.answer(&method, params, self, true).await
                } else {
                    if method == "initialize" {
                        self.initialized.store(true, Ordering::SeqCst);
                        *lock(&self.client_capabilities) =
                            params.and_then(|p| p.get("capabilities")).cloned();
                    }
                    self.handler.answer(&method, params, self, false).await
                }
            },
            span.clone(),
        );
        let message = match AssertUnwindSafe(handled).catch_unwind().await {
            // A hub tool's output may be passed on as its upstream's text
            // (`answer.rs`).
            Ok(Ok(result)) => result.into_response(&id),
            Ok(Err(error)) => {
                crate::trace::record_rpc_error(&span, error.code);
                jsonrpc::error_response(&id, &error).into()
            }
            Err(panic) => {
                let e = panic_message(&*panic);
                tracing::error!("request {id} failed: {e}");
                jsonrpc::error_response(
                    &id,
                    &RpcError::internal(format!("the handler failed: {e}")),
                )
                .into()
            }
        };
        // Other requests still to answer: their answers may join this one's
        // write (see `Output::send_coalesced`).
        let others = self.pending.fetch_sub(1, Ordering::AcqRel) > 1;
        match inline::reader_guard() {
            Some(held) => self
                .out
                .send_on_reader(&message, Some(read_at), &self.rt, held),
            None if others => self.out.send_coalesced(&message, Some(read_at)).await,
            None => self.out.send(&message, Some(read_at)),
        }
    }
}

/// What a caught panic says.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    match text {
        Some(t) => format!("panicked with message {t:?}"),
        None => "panicked".to_string(),
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
