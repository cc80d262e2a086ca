//! MCP 2026-07-28 on the same endpoint as the legacy revisions: one POST per
//! request, no `initialize`, no `Mcp-Session-Id` (ignored when sent), no
//! GET stream, no resumability (`Last-Event-ID` is ignored).
//!
//! A POST is modern when its `MCP-Protocol-Version` header names a modern
//! revision or its body is a modern request ([`protocol::is_modern`]). It
//! is checked in this order, the first failure answering `400` with a
//! JSON-RPC error:
//! 1. `params._meta` carries the required keys (`-32602`);
//! 2. the routing headers match the body (`HeaderMismatch`, `-32020`,
//!    naming the header's and the body's values): `MCP-Protocol-Version`
//!    and `Mcp-Method` on every request, `Mcp-Name` on `tools/call`
//!    (Base64 sentinel `=?base64?…?=` decoded first); a missing one, one
//!    sent twice or one that is not visible ASCII fails too;
//! 3. the version is one this server speaks (`-32022` listing them);
//! 4. `dev.temper/session`, when given, is well formed (`-32602`).
//!
//! Then the token's limits apply as on legacy requests. The request runs in
//! the session [`protocol::modern_context`] names: a client-chosen one, or,
//! when it names none, its principal's default session (one per agent,
//! [`protocol::DEFAULT_SESSION_ID`]), so that what a standard client forges
//! it can call in its next request. Either is the stored session tier (as
//! a legacy `Mcp-Session-Id` is): any host on the store serves it, each use
//! is recorded (written behind), and it ends when it has been idle
//! ([`HttpConfig::session_idle`](super::HttpConfig)) on every host, judged
//! in the store by whichever host reaps first. What a host keeps of it is
//! only its requests in flight (for the per-token cap). A named session
//! is its opener's (the principal's key), checked on every request: any
//! other principal, of the same agent too, is answered `404` as for an
//! unknown legacy session. The default session is its agent's principals'
//! of one kind ([`default_owner`]); another kind runs in a default session
//! of its own ([`own_default`]). `forge_tool`'s
//! result names the session it ran in (`_meta["dev.temper/session"]`). Errors get the spec's statuses (`-32601` → 404, invalid
//! params and the errors above → 400).
//!
//! `subscriptions/listen` answers with an SSE stream: the acknowledgment
//! first, then `notifications/tools/list_changed` (stamped with the
//! subscription's id) when a modern request forges a tool in the
//! subscription's session (any session of its agent when it named none) or
//! a registry change (promotion, another host's change) reaches its agent,
//! with keep-alive comments between; it ends when the client closes it.

use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::Value;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use temper_forge::ForgeContext;
use tokio::sync::mpsc;

use super::routes::{admit, answered};
use super::session::Principal;
use super::to_end::handle;
use super::wire::{Body, empty, json_response, sse_event, sse_response};
use super::{State, lock};
use crate::access::Access;
use crate::handler::{Handler, LIST_CHANGED, Notifier};
use crate::jsonrpc::{self, RpcError};
use crate::protocol::{self, results, results::SubscriptionFilter};
use crate::watch::Changes;

mod headers;

pub(super) use headers::is_modern;
use headers::{check_headers, refuse, status_for};

/// Modern sessions and subscriptions of one server.
#[derive(Default)]
pub(super) struct Modern {
    sessions: Mutex<HashMap<ForgeContext, Arc<ModernSession>>>,
    listeners: Mutex<Vec<Arc<Listener>>>,
}

/// A modern session (client-chosen, or a principal's default session),
/// keyed by its context: what keeps it alive.
struct ModernSession {
    /// The principal's key that opened it: the only one it serves (and
    /// what the per-token cap counts).
    owner: String,
    last_active: Mutex<Instant>,
    /// When the store last confirmed its owner.
    checked: Mutex<Instant>,
    in_flight: AtomicUsize,
}

/// Why a request may not enter a modern session.
enum Refusal {
    /// Over the per-token cap (`429`).
    Cap(RpcError),
    /// Another principal's session (`404`, answered as an unknown one).
    NotYours,
    /// The store did not answer (`503`).
    Store,
}

/// An open `subscriptions/listen` stream.
struct Listener {
    id: Value,
    owner: String,
    agent: String,
    access: Access,
    /// The session whose forges it hears of, if it named one.
    session: Option<ForgeContext>,
    filter: SubscriptionFilter,
    tx: mpsc::Sender<Bytes>,
}

impl Listener {
    /// Sends `list_changed`; false when the client is gone or not reading.
    fn list_changed(&self) -> bool {
        self.list_changed_of(LIST_CHANGED)
    }

    /// Sends the `list_changed` notification `method` when its filter
    /// asked for it; false when the client is gone or not reading.
    fn list_changed_of(&self, method: &str) -> bool {
        !self.filter.wants(method)
            || self
                .tx
                .try_send(sse_event(&results::subscription_note(method, &self.id)))
                .is_ok()
    }
}

impl Modern {
    /// Counts a request in the session `ctx` of `owner` (the token's key,
    /// or the group owning its agent's default session), opening it
    /// unless the token has `open` sessions of `cap` on this host already
    /// (every revision's):
    /// a session this host does not hold is stored (unless stored already,
    /// by another host) with the idle limit `idle`; each request records a
    /// use (written behind). A session is its opener's: another principal
    /// (another token, a JWT of the same agent, the default identity) is
    /// refused on every request, as an unknown legacy session is; a held
    /// session's owner is re-read from the store at most every
    /// [`RECHECK`](super::session::RECHECK).
    #[allow(clippy::too_many_arguments)]
    async fn enter(
        &self,
        forge: &temper_forge::Forge,
        ctx: &ForgeContext,
        owner: &str,
        cap: usize,
        open: usize,
        idle: Duration,
    ) -> Result<Arc<ModernSession>, Refusal> {
        let held = lock(&self.sessions).get(ctx).cloned();
        let held = match held {
            Some(s) if s.owner != owner => return Err(Refusal::NotYours),
            Some(s) if lock(&s.checked).elapsed() >= super::session::RECHECK => {
                match forge.stored_session(ctx).await {
                    Ok(Some(stored)) if stored.owner == owner => {
                        *lock(&s.checked) = Instant::now();
                        Some(s)
                    }
                    Ok(Some(_)) => {
                        // Expired and opened again by another principal.
                        self.forget(ctx);
                        return Err(Refusal::NotYours);
                    }
                    Ok(None) => {
                        // Ended or expired through another host: opened
                        // again below.
                        self.forget(ctx);
                        None
                    }
                    Err(e) => {
                        tracing::warn!("cannot read a session from the store: {e}");
                        return Err(Refusal::Store);
                    }
                }
            }
            other => other,
        };
        let s = match held {
            Some(s) => s,
            None => {
                if open >= cap {
                    return Err(Refusal::Cap(RpcError::new(
                        -32000,
                        format!(
                            "too many sessions: this token may have {cap} open, every protocol revision's together; they end after the idle timeout (a legacy one also with DELETE)"
                        ),
                    )));
                }
                let stored = match forge.open_session(ctx, owner, idle).await {
                    Ok(stored) => stored,
                    Err(e) => {
                        tracing::warn!("cannot store a session: {e}");
                        return Err(Refusal::Store);
                    }
                };
                if stored.owner != owner {
                    return Err(Refusal::NotYours);
                }
                let made = Arc::new(ModernSession {
                    owner: owner.to_string(),
                    last_active: Mutex::new(Instant::now()),
                    checked: Mutex::new(Instant::now()),
                    in_flight: AtomicUsize::new(0),
                });
                lock(&self.sessions)
                    .entry(ctx.clone())
                    .or_insert(made)
                    .clone()
            }
        };
        if s.owner != owner {
            return Err(Refusal::NotYours);
        }
        s.in_flight.fetch_add(1, Ordering::SeqCst);
        *lock(&s.last_active) = Instant::now();
        if let Err(e) = forge.touch_session(ctx) {
            tracing::warn!("cannot record a session's use: {e}");
        }
        Ok(s)
    }

    /// How many sessions token `token` has open on this host (those it
    /// opened, and its agent's default session, owned by `group`).
    pub(super) fn count(&self, token: &str, group: &str) -> usize {
        lock(&self.sessions)
            .values()
            .filter(|s| s.owner == token || s.owner == group)
            .count()
    }

    /// Lets go of this host's handle on session `ctx` (ended or expired in
    /// the store).
    pub(super) fn forget(&self, ctx: &ForgeContext) {
        lock(&self.sessions).remove(ctx);
    }

    /// Sends `list_changed` to the listeners `reached` selects; drops those
    /// whose client is gone.
    fn notify(&self, reached: impl Fn(&Listener) -> bool) {
        lock(&self.listeners).retain(|l| !reached(l) || l.list_changed());
    }

    /// Announces a hub upstream's list change (the notification `method`)
    /// to every listener that asked for it.
    pub(super) fn hub_list_changed(&self, method: &str) {
        lock(&self.listeners).retain(|l| l.list_changed_of(method));
    }

    /// Announces `changes` (a registry change) to the listeners they reach.
    pub(super) fn registry_changed(&self, changes: &Changes) {
        self.notify(|l| crate::watch::reach(changes, &l.agent, l.access));
    }

    /// Lets go of the handles on client-chosen sessions idle here for
    /// `idle` or longer with nothing in flight (the stored session stays:
    /// another host may be serving it; the store expires it), and records a
    /// use of those with requests in flight.
    fn reap(&self, forge: &temper_forge::Forge, idle: Duration) {
        lock(&self.sessions).retain(|ctx, s| {
            if s.in_flight.load(Ordering::SeqCst) > 0 {
                if let Err(e) = forge.touch_session(ctx) {
                    tracing::warn!("cannot record a session's use: {e}");
                }
                return true;
            }
            lock(&s.last_active).elapsed() < idle
        });
    }
}

/// The answer to a request naming another principal's session: what an
/// unknown legacy session gets, `404`, nothing about whose it is.
fn not_yours(id: &Value) -> Response<Body> {
    let e = RpcError::new(
        jsonrpc::INVALID_PARAMS,
        "no such session: name another dev.temper/session, or none for your default session",
    );
    json_response(StatusCode::NOT_FOUND, &jsonrpc::error_response(id, &e))
}

/// Who may use session `named` of `p`'s agent: `p`'s key, or for the
/// agent's default session (and its kind's own), `p`'s kind.
fn owner_of<'a>(p: &'a Principal, group: &'a str, named: Option<&str>) -> &'a str {
    match named {
        None => group,
        Some(id) if id == protocol::DEFAULT_SESSION_ID || id == own_default(group) => group,
        Some(_) => &p.key,
    }
}

/// Whether `p` may listen to session `named`: it is not stored, or stored
/// as `p`'s (a store that cannot answer: no).
async fn may_listen(state: &State, p: &Principal, named: &str) -> bool {
    let group = default_owner(p);
    let owner = owner_of(p, &group, Some(named));
    let ctx = protocol::modern_context(&p.agent, Some(named));
    match state.forge.stored_session(&ctx).await {
        Ok(found) => found.is_none_or(|s| s.owner == owner),
        Err(e) => {
            tracing::warn!("cannot read a session from the store: {e}");
            false
        }
    }
}

/// Enters `ctx` for `owner` (see [`Modern::enter`]).
async fn enter(
    state: &State,
    ctx: &ForgeContext,
    owner: &str,
    open: usize,
) -> Result<Arc<ModernSession>, Refusal> {
    state
        .modern
        .enter(
            &state.forge,
            ctx,
            owner,
            state.config.max_sessions,
            open,
            state.config.session_idle,
        )
        .await
}

/// Who owns `p`'s agent's default session when `p` opens it: the agent's
/// static tokens together (`tokens:<agent>`), a JWT's agent (`jwt:<agent>`,
/// its key), or the default identity (`local`).
pub(super) fn default_owner(p: &Principal) -> String {
    if p.key.starts_with("jwt:") || p.key == "local" {
        p.key.clone()
    } else {
        format!("tokens:{}", p.agent)
    }
}

/// The default session of the principals of `group` ([`default_owner`])
/// when another kind of principal of the agent holds the agent's:
/// `default-` and 16 hex digits of a hash of the group (the same on every
/// host; no secret).
fn own_default(key: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("temper-default-session\0{key}").as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", protocol::DEFAULT_SESSION_ID)
}

/// Lets go of idle client-chosen sessions until the server is gone.
pub(super) async fn reap_idle(state: Weak<State>) {
    loop {
        let Some(s) = state.upgrade() else { return };
        let idle = s.config.session_idle;
        let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        s.modern.reap(&s.forge, idle);
        drop(s);
        tokio::time::sleep(tick).await;
    }
}

/// Answers one modern request (the module docs say in what order it is
/// checked).
#[allow(clippy::too_many_arguments)] // the request's parts, as received
pub(super) async fn post(
    state: Arc<State>,
    p: Principal,
    headers: HeaderMap,
    id: Value,
    method: String,
    params: Option<Value>,
    sse_ok: bool,
    json_ok: bool,
    started: Instant,
) -> Response<Body> {
    let envelope = match protocol::envelope(params.as_ref()) {
        Ok(e) => Some(e),
        // Rung 1 (missing keys) before the headers; rungs 3 and 4 after.
        Err(e) if protocol::requested_version(params.as_ref()).is_none() => {
            return refuse(&id, &e);
        }
        Err(e) => {
            if let Err(h) = check_headers(&headers, &method, params.as_ref()) {
                return refuse(&id, &h);
            }
            return refuse(&id, &e);
        }
    };
    if let Err(e) = check_headers(&headers, &method, params.as_ref()) {
        return refuse(&id, &e);
    }
    let envelope = envelope.expect("checked above");
    if method == "subscriptions/listen" {
        if !sse_ok {
            return super::wire::plain(
                StatusCode::NOT_ACCEPTABLE,
                "subscriptions/listen answers with a stream: Accept: text/event-stream",
            );
        }
        // A named session another principal holds is not listened to.
        if let Some(named) = envelope.session.as_deref()
            && !may_listen(&state, &p, named).await
        {
            return not_yours(&id);
        }
        return listen(&state, &p, id, envelope.session.as_deref(), params.as_ref());
    }
    let permit = match admit(&state, &p, &id, &method, params.as_ref(), true).await {
        Ok(permit) => permit,
        Err(r) => return r,
    };
    // A named session is its opener's; the agent's default session (none
    // named, or `default`) is shared by the agent's principals of one kind
    // (its static tokens, its JWTs, the default identity), and another
    // kind gets a default session of its own: stored, expired and audited
    // alike.
    let group = default_owner(&p);
    // The cap counts the token's sessions of both revisions.
    let open = lock(&state.sessions)
        .values()
        .filter(|s| s.owner == p.key)
        .count()
        + state.modern.count(&p.key, &group);
    let named = envelope.session.as_deref();
    let own = own_default(&group);
    let owner = owner_of(&p, &group, named);
    let mut ctx = protocol::modern_context(&p.agent, named);
    let mut entered = enter(&state, &ctx, owner, open).await;
    if named.is_none() && matches!(entered, Err(Refusal::NotYours)) {
        ctx = protocol::modern_context(&p.agent, Some(&own));
        entered = enter(&state, &ctx, owner, open).await;
    }
    let session = match entered {
        Ok(s) => s,
        Err(Refusal::Cap(e)) => {
            return json_response(
                StatusCode::TOO_MANY_REQUESTS,
                &jsonrpc::error_response(&id, &e),
            );
        }
        Err(Refusal::NotYours) => return not_yours(&id),
        Err(Refusal::Store) => {
            let e = RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "the session store cannot be reached".to_string(),
            );
            return json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &jsonrpc::error_response(&id, &e),
            );
        }
    };
    let notes_ctx = ctx.clone();
    let handler = Handler::new(state.forge.clone(), ctx, p.access, state.watch.clone())
        .with_tools(p.tools.clone())
        .with_features(p.features.0.clone(), p.features.1.clone())
        .in_modern_session();
    let progress = params
        .as_ref()
        .and_then(|p| p.pointer("/_meta/progressToken"))
        .is_some_and(|t| t.is_string() || t.is_number());
    // A call that opts in to log messages may get some (a hub tool's
    // upstream's, relayed): it is answered on a stream too.
    let logs = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .is_some_and(|m| m.get(protocol::meta::LOG_LEVEL).is_some());
    let streaming = sse_ok && (!json_ok || (method == "tools/call" && (progress || logs)));
    let (tx, rx) = if streaming {
        let (tx, rx) = mpsc::channel(64);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let notes = ModernNotes {
        state: state.clone(),
        ctx: notes_ctx,
        post: tx.clone(),
    };
    let answer_id = id.clone();
    // Boxed where it is made (see `routes::post`): the handling future is
    // several kilobytes, copied whole at each move unboxed.
    let task = Box::pin(async move {
        // `answer`: a hub tool's call relays what its upstream sends (the
        // caller's request in hand).
        let result = handler
            .answer(&method, params.as_ref(), &notes, true)
            .await
            .map(crate::handler::answer::Answer::into_value);
        *lock(&session.last_active) = Instant::now();
        session.in_flight.fetch_sub(1, Ordering::SeqCst);
        drop(permit);
        match result {
            Ok(r) => (StatusCode::OK, jsonrpc::response(&id, r)),
            Err(e) => (status_for(e.code), jsonrpc::error_response(&id, &e)),
        }
    });
    match (tx, rx) {
        (Some(tx), Some(rx)) => {
            tokio::spawn(async move {
                let message = match AssertUnwindSafe(task).catch_unwind().await {
                    Ok((_, m)) => m,
                    Err(panic) => handler_failed(&answer_id, &*panic),
                };
                let _ = tx.send(sse_event(&message)).await;
                answered(started);
            });
            stream_response(rx)
        }
        _ => {
            // To its end even if the client goes away (see
            // `to_end::handle`).
            let (status, message) = match handle(task).await {
                Ok(answer) => answer,
                Err(panic) => (StatusCode::OK, handler_failed(&answer_id, &*panic)),
            };
            let r = json_response(status, &message);
            answered(started);
            r
        }
    }
}

fn handler_failed(id: &Value, panic: &(dyn std::any::Any + Send)) -> Value {
    let e = crate::server::panic_message(panic);
    tracing::error!("request {id} failed: {e}");
    jsonrpc::error_response(id, &RpcError::internal(format!("the handler failed: {e}")))
}

/// An SSE answer, marked for proxies not to buffer it.
fn stream_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = sse_response(rx);
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// Opens a `subscriptions/listen` stream (module docs).
fn listen(
    state: &Arc<State>,
    p: &Principal,
    id: Value,
    session: Option<&str>,
    params: Option<&Value>,
) -> Response<Body> {
    let filter = SubscriptionFilter::honored(params);
    let (tx, rx) = mpsc::channel(64);
    let listener = Arc::new(Listener {
        id: id.clone(),
        owner: p.key.clone(),
        agent: p.agent.clone(),
        access: p.access,
        session: session.map(|s| protocol::modern_context(&p.agent, Some(s))),
        filter: filter.clone(),
        tx,
    });
    {
        let mut all = lock(&state.modern.listeners);
        let cap = state.config.max_sessions;
        if all.iter().filter(|l| l.owner == p.key).count() >= cap {
            let error = RpcError::new(
                -32000,
                format!("too many subscriptions: this token may have {cap} open"),
            );
            return json_response(
                StatusCode::TOO_MANY_REQUESTS,
                &jsonrpc::error_response(&id, &error),
            );
        }
        // The acknowledgment is queued under the lock: nothing of this
        // subscription can precede it.
        let _ = listener
            .tx
            .try_send(sse_event(&results::acknowledged(&id, &filter)));
        all.push(listener.clone());
    }
    // Keep-alive comments; a client that is gone or stopped reading is
    // dropped (its stream ends).
    let every = state.config.keep_alive;
    let weak_state = Arc::downgrade(state);
    let weak = Arc::downgrade(&listener);
    drop(listener);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let (Some(l), Some(state)) = (weak.upgrade(), weak_state.upgrade()) else {
                return;
            };
            if l.tx
                .try_send(Bytes::from_static(b": keep-alive\n\n"))
                .is_err()
            {
                lock(&state.modern.listeners).retain(|x| !Arc::ptr_eq(x, &l));
                return;
            }
        }
    });
    stream_response(rx)
}

/// Where a modern request's notifications go: progress to its own stream,
/// `list_changed` to the subscriptions it concerns (never to the request's
/// stream: in 2026-07-28 change notifications ride `subscriptions/listen`
/// only), and registry changes to legacy sessions as well.
struct ModernNotes {
    state: Arc<State>,
    /// The request's session.
    ctx: ForgeContext,
    post: Option<mpsc::Sender<Bytes>>,
}

impl Notifier for ModernNotes {
    fn request_note(&self, message: Value) {
        if let Some(tx) = &self.post {
            let _ = tx.try_send(sse_event(&message));
        }
    }

    fn carries_notes(&self) -> bool {
        self.post.is_some()
    }

    fn session_note(&self, message: Value) {
        if message.get("method").and_then(Value::as_str) == Some(LIST_CHANGED) {
            // A forge in this session: its subscriptions hear of it, and
            // so do the agent's subscriptions that named no session.
            let ctx = &self.ctx;
            self.state.modern.notify(|l| match &l.session {
                Some(s) => s == ctx,
                None => l.agent == ctx.agent_id,
            });
        } else {
            self.request_note(message);
        }
    }

    fn registry_note(&self, changes: &Changes, _caller_reached: bool, message: Value) {
        self.state.modern.registry_changed(changes);
        for s in self.state.sessions_reached(changes) {
            s.push(&message);
        }
    }
}

/// The answer to a GET or DELETE that names a modern revision: those
/// methods do not exist there.
pub(super) fn not_allowed() -> Response<Body> {
    let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}
