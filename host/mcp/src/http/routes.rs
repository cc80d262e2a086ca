//! The endpoint's methods: POST (JSON or SSE answers, with progress), GET
//! (the session's stream for `list_changed`), DELETE, and `initialize`.

use crate::handler::Notifier;
use crate::handler::hub_relay::{AskReceiver, capability_of};
use crate::jsonrpc::{self, Incoming, Rejected, RpcError};
use crate::protocol::{ALL_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS};
use crate::watch::Changes;
use bytes::Bytes;
use futures_util::FutureExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming as IncomingBody;
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::bearer;
use super::session::{InFlight, Principal, Session, new_session};
use super::to_end::handle;
use super::wire::{Body, accepts, empty, json_response, plain, sse_event, sse_response};
use super::{ENDPOINT, SESSION_HEADER, State, VERSION_HEADER, lock, modern, quota};

pub(super) async fn route(state: Arc<State>, req: Request<IncomingBody>) -> Response<Body> {
    let started = Instant::now();
    if let Some(r) = bearer::metadata(&state, &req) {
        return r;
    }
    if req.uri().path() != ENDPOINT {
        return plain(
            StatusCode::NOT_FOUND,
            "not found (the MCP endpoint is /mcp)",
        );
    }
    if !state.origin_allowed(req.headers()) {
        return plain(StatusCode::FORBIDDEN, "origin not allowed");
    }
    let principal = match state.authenticate(req.headers()).await {
        Ok(p) => p,
        Err(refusal) => return bearer::refused(&state, refusal),
    };
    if let Some(v) = req.headers().get(VERSION_HEADER) {
        let v = v.to_str().unwrap_or("(not visible ASCII)");
        // A POST's is answered once its body is read, with its id
        // (`unsupported_header_version` in `post`).
        if !ALL_PROTOCOL_VERSIONS.contains(&v) && req.method() != Method::POST {
            // The spec's error, listing what this server speaks; a GET or
            // DELETE has no body, hence no id.
            let error = crate::protocol::unsupported_version(v);
            return json_response(
                StatusCode::BAD_REQUEST,
                &jsonrpc::error_response(&Value::Null, &error),
            );
        }
        if MODERN_PROTOCOL_VERSIONS.contains(&v) && req.method() != Method::POST {
            return modern::not_allowed();
        }
    }
    match *req.method() {
        Method::POST => post(state, principal, req, started).await,
        Method::GET => get(&state, &principal, req.headers()).await,
        Method::DELETE => match state.session(req.headers(), &principal).await {
            Ok(s) => {
                state.end_session(&s.id, "ended by the client");
                empty(StatusCode::NO_CONTENT)
            }
            Err(r) => r,
        },
        _ => {
            let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            r
        }
    }
}

/// The `UnsupportedProtocolVersion` error for an `MCP-Protocol-Version`
/// header naming a revision this server does not speak, if it does.
fn unsupported_header_version(headers: &HeaderMap) -> Option<RpcError> {
    let v = headers.get(VERSION_HEADER)?;
    let v = v.to_str().unwrap_or("(not visible ASCII)");
    (!ALL_PROTOCOL_VERSIONS.contains(&v)).then(|| crate::protocol::unsupported_version(v))
}

pub(super) async fn get(state: &State, p: &Principal, headers: &HeaderMap) -> Response<Body> {
    if !accepts(headers, "text/event-stream") {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "GET opens an SSE stream: Accept: text/event-stream",
        );
    }
    let session = match state.session(headers, p).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    session.touch();
    let (tx, rx) = mpsc::channel(64);
    let weak = tx.downgrade();
    *lock(&session.stream) = Some(tx);
    // Keep-alive comments: they keep proxies from closing the stream and
    // find a client that stopped reading (the channel fills, the stream is
    // dropped). The task holds no sender: when the session drops the
    // stream (DELETE, a newer GET), the stream ends at once.
    let every = state.config.keep_alive;
    let session = Arc::downgrade(&session);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let (Some(tx), Some(session)) = (weak.upgrade(), session.upgrade()) else {
                return;
            };
            if tx
                .try_send(Bytes::from_static(b": keep-alive\n\n"))
                .is_err()
            {
                let mut stream = lock(&session.stream);
                if stream.as_ref().is_some_and(|s| s.same_channel(&tx)) {
                    *stream = None;
                    drop(stream);
                    session.touch();
                }
                return;
            }
        }
    });
    sse_response(rx)
}

/// Where a request's notifications go: progress to its own SSE stream
/// (when it has one), `list_changed` to the session's GET stream, else to
/// its own stream.
pub(super) struct HttpNotes {
    pub(super) state: Arc<State>,
    pub(super) session: Arc<Session>,
    pub(super) post: Option<mpsc::Sender<Bytes>>,
}

impl Notifier for HttpNotes {
    fn request_note(&self, message: Value) {
        if let Some(tx) = &self.post {
            let _ = tx.try_send(sse_event(&message));
        }
    }

    fn carries_notes(&self) -> bool {
        self.post.is_some()
    }

    fn ask(&self, method: &str, params: Value) -> Option<AskReceiver> {
        let post = self.post.as_ref()?;
        if !self.session.declares(capability_of(method)?) {
            return None;
        }
        let (id, answer) = self.session.asks.register()?;
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        post.try_send(sse_event(&request)).ok()?;
        Some(answer)
    }

    fn session_note(&self, message: Value) {
        if !self.session.push(&message) {
            self.request_note(message);
        }
    }

    fn registry_note(&self, changes: &Changes, caller_reached: bool, message: Value) {
        if caller_reached {
            self.session_note(message.clone());
        }
        self.state.modern.registry_changed(changes);
        for s in self.state.sessions_reached(changes) {
            if s.id != self.session.id {
                s.push(&message);
            }
        }
    }
}

pub(super) async fn post(
    state: Arc<State>,
    p: Principal,
    req: Request<IncomingBody>,
    started: Instant,
) -> Response<Body> {
    // The request's parts, owned: its headers are read here and handed on
    // (never copied), its body collected below.
    let (parts, body) = req.into_parts();
    let headers = parts.headers;
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "POST a JSON-RPC message as application/json",
        );
    }
    let cap = state.config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap as u64) {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body over the limit");
    }
    let body = Limited::new(body, cap).collect();
    let bytes = match tokio::time::timeout(state.config.body_timeout, body).await {
        Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "request body too slow"),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body over the limit");
        }
        Ok(Err(_)) => return plain(StatusCode::BAD_REQUEST, "cannot read the request body"),
        Ok(Ok(b)) => b.to_bytes(),
    };
    let message = match jsonrpc::parse_message(&bytes) {
        Ok(m) => {
            crate::observe::count(&state.forge, &m, "http");
            m
        }
        Err(Rejected { id, error }) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &jsonrpc::error_response(&id, &error),
            );
        }
    };
    if let Some(error) = unsupported_header_version(&headers) {
        // The spec's error, listing what this server speaks, answering the
        // request's id whenever it has one (SEP-2575).
        let id = match &message {
            Incoming::Request { id, .. } | Incoming::Response { id, .. } => id.clone(),
            Incoming::Notification { .. } => Value::Null,
        };
        return json_response(
            StatusCode::BAD_REQUEST,
            &jsonrpc::error_response(&id, &error),
        );
    }
    let sse_ok = accepts(&headers, "text/event-stream");
    let json_ok = headers.get(header::ACCEPT).is_none() || accepts(&headers, "application/json");
    if !sse_ok && !json_ok {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "Accept application/json and/or text/event-stream",
        );
    }
    let (method_ref, params_ref) = match &message {
        Incoming::Request { method, params, .. } => (Some(method.as_str()), params.as_ref()),
        _ => (None, None),
    };
    if modern::is_modern(&headers, method_ref, params_ref) {
        return match message {
            Incoming::Request { id, method, params } => {
                modern::post(
                    state, p, headers, id, method, params, sse_ok, json_ok, started,
                )
                .await
            }
            // Accepted and dropped: 2026-07-28 defines no client
            // notifications over HTTP (closing a stream cancels it).
            Incoming::Notification { .. } | Incoming::Response { .. } => {
                empty(StatusCode::ACCEPTED)
            }
        };
    }
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (id, method, params),
        other @ (Incoming::Notification { .. } | Incoming::Response { .. }) => {
            return match state.session(&headers, &p).await {
                Ok(s) => {
                    s.touch();
                    // The client's answer to an upstream's request relayed
                    // to it.
                    if let Incoming::Response { id, outcome } = other
                        && !s.asks.answer(&id, outcome)
                    {
                        tracing::warn!(
                            "ignoring a response (id {id}): no request of ours waits for it"
                        );
                    }
                    empty(StatusCode::ACCEPTED)
                }
                Err(r) => r,
            };
        }
    };
    if method == "initialize" {
        return initialize(&state, &p, &id, params.as_ref(), json_ok).await;
    }
    if !headers.contains_key(SESSION_HEADER) {
        // A JSON-RPC error the client can read (SDKs probing a newer
        // protocol's methods fall back to initialize on it).
        let error = RpcError::new(
            jsonrpc::INVALID_REQUEST,
            format!("{method}: no session: send initialize first, then its Mcp-Session-Id"),
        );
        return json_response(
            StatusCode::BAD_REQUEST,
            &jsonrpc::error_response(&id, &error),
        );
    }
    let session = match state.session(&headers, &p).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let permit = match admit(&state, &p, &id, &method, params.as_ref(), false).await {
        Ok(permit) => permit,
        Err(r) => return r,
    };
    let streaming = sse_ok
        && (!json_ok
            || (method == "tools/call" && (may_notify(params.as_ref()) || session.takes_notes())));
    if method == "logging/setLevel" {
        session
            .wants_logs
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (tx, rx) = if streaming {
        let (tx, rx) = mpsc::channel(64);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let answer_id = id.clone();
    // Boxed where it is made: the handling future (the handler, the tool
    // call, the sandbox's) is several kilobytes, and unboxed it was copied
    // whole into this future, into its task and back out per request.
    let task = Box::pin(answer(
        state.clone(),
        session,
        permit,
        id,
        method,
        params,
        tx,
        started,
    ));
    match rx {
        Some(rx) => {
            tokio::spawn(task);
            sse_response(rx)
        }
        // To its end even if the client goes away (see `to_end::handle`).
        None => match handle(task).await {
            Ok(Some(message)) => {
                let response = json_response(StatusCode::OK, &message);
                answered(started);
                response
            }
            Ok(None) => plain(StatusCode::INTERNAL_SERVER_ERROR, "the handler failed"),
            Err(panic) => {
                let e = crate::server::panic_message(&*panic);
                tracing::error!("request {answer_id} failed: {e}");
                let error = RpcError::internal(format!("the handler failed: {e}"));
                json_response(StatusCode::OK, &jsonrpc::error_response(&answer_id, &error))
            }
        },
    }
}

/// Applies `p`'s limits to a request: its cap on requests in flight on
/// this host (`429`), then, on a `tools/call`, the called tool's quota and
/// `p`'s `calls_per_minute`, shared by the hosts ([`super::quota`]: `429`
/// with `Retry-After`; `-32023` over 2026-07-28 when `modern`, `-32000`
/// over the legacy revisions, `data.retryAfterSeconds` either way). A call
/// refused by its tool's quota does not use `p`'s. The permit counts the
/// request until dropped.
#[allow(clippy::result_large_err)]
pub(super) async fn admit(
    state: &State,
    p: &Principal,
    id: &Value,
    method: &str,
    params: Option<&Value>,
    modern: bool,
) -> Result<OwnedSemaphorePermit, Response<Body>> {
    let limits = state.limits(p);
    let Ok(permit) = limits.in_flight.clone().try_acquire_owned() else {
        let error = RpcError::new(
            -32000,
            format!(
                "too many requests in flight: this token may have {} at once",
                p.max_concurrent
            ),
        );
        return Err(json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &jsonrpc::error_response(id, &error),
        ));
    };
    if method != "tools/call" {
        return Ok(permit);
    }
    let tool = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    let store = state.forge.store_handle();
    if let Some(tool) = tool
        && let Some(limit) = p.tool_quotas.limit(tool)
        && let Err(refused) = state
            .quotas
            .take(&store, &quota::quota_key(&p.key, Some(tool)), limit)
            .await
    {
        let what = format!("this token may call {tool} {limit} times per minute");
        return Err(quota_refusal(id, refused, &what, modern));
    }
    if let Some(limit) = p.calls_per_minute
        && let Err(refused) = state
            .quotas
            .take(&store, &quota::quota_key(&p.key, None), limit)
            .await
    {
        let what = format!("this token may make {limit} tools/call requests per minute");
        return Err(quota_refusal(id, refused, &what, modern));
    }
    Ok(permit)
}

/// The answer to a call a quota refused (see [`admit`]); the store's
/// error is logged, not sent.
fn quota_refusal(id: &Value, refused: quota::Refused, what: &str, modern: bool) -> Response<Body> {
    let (status, retry, error) = match refused {
        quota::Refused::Spent { retry_after } => {
            let code = if modern {
                crate::protocol::RATE_LIMITED
            } else {
                -32000
            };
            let message = format!(
                "quota exceeded: {what} (on every host together); retry in {retry_after} s"
            );
            (
                StatusCode::TOO_MANY_REQUESTS,
                retry_after,
                RpcError::new(code, message),
            )
        }
        quota::Refused::Store(e) => {
            tracing::warn!("cannot lease a call quota: {e}");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                1,
                RpcError::internal(
                    "the quota store cannot be reached: the call was not run; retry shortly"
                        .to_string(),
                ),
            )
        }
    };
    let error = error.with_data(serde_json::json!({ "retryAfterSeconds": retry }));
    let mut r = json_response(status, &jsonrpc::error_response(id, &error));
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry));
    r
}

/// Whether a `tools/call` with `params` may send notifications on its own
/// stream: progress when it carries a progress token, `list_changed` from
/// a forge or a promotion (when the session has no GET stream). Any other
/// call is answered with plain JSON when the client accepts it: no SSE
/// framing, no channel, no chunked body.
fn may_notify(params: Option<&Value>) -> bool {
    let Some(p) = params else { return false };
    p.pointer("/_meta/progressToken")
        .is_some_and(|t| t.is_string() || t.is_number())
        || matches!(
            p.get("name").and_then(Value::as_str),
            Some(crate::tools::FORGE_TOOL | crate::tools::PROMOTE_TOOL)
        )
}

/// Runs one request to its end (even when the client has gone: a forge or
/// call is bounded by the engine's limits and its audit trail stays whole).
/// With `stream`, the answer goes there and `None` is returned.
#[allow(clippy::too_many_arguments)] // the request's parts, as received
pub(super) async fn answer(
    state: Arc<State>,
    session: Arc<Session>,
    permit: OwnedSemaphorePermit,
    id: Value,
    method: String,
    params: Option<Value>,
    stream: Option<mpsc::Sender<Bytes>>,
    started: Instant,
) -> Option<Value> {
    {
        let in_flight = InFlight::new(session.clone());
        let notes = HttpNotes {
            state,
            session: session.clone(),
            post: stream.clone(),
        };
        let span = crate::trace::request_span(&session.id, &id, &method, params.as_ref());
        let handling = {
            let session = session.clone();
            let span = span.clone();
            tracing::Instrument::instrument(
                async move {
                    let r = session
                        .handler
                        .answer(&method, params.as_ref(), &notes, false)
                        .await;
                    if let Err(e) = &r {
                        crate::trace::record_rpc_error(&tracing::Span::current(), e.code);
                    }
                    (r, notes)
                },
                span,
            )
        };
        // A streamed answer runs in a task of its own (`post` spawned it),
        // where a panic is caught so that the stream still gets its error.
        // A JSON answer is awaited by `post`, which already catches one.
        let handled = if stream.is_some() {
            AssertUnwindSafe(handling).catch_unwind().await
        } else {
            Ok(handling.await)
        };
        let message = match handled {
            Ok((Ok(result), _)) => jsonrpc::response(&id, result.into_value()),
            Ok((Err(error), _)) => jsonrpc::error_response(&id, &error),
            Err(panic) => {
                let e = crate::server::panic_message(&*panic);
                tracing::error!("request {id} failed: {e}");
                jsonrpc::error_response(
                    &id,
                    &RpcError::internal(format!("the handler failed: {e}")),
                )
            }
        };
        // The request is done once its answer exists: a client that has
        // read it may send the next one at once.
        drop(in_flight);
        drop(permit);
        match stream {
            Some(tx) => {
                // Waits while the client reads slowly; a client that stopped
                // reading has its connection closed by the write timeout,
                // which drops the receiver and ends this.
                let _ = tx.send(sse_event(&message)).await;
                answered(started);
                None
            }
            None => Some(message),
        }
    }
}

/// Reports a request's time in the server, from its headers read to its
/// answer handed to hyper (see [`crate::TIMING_TARGET`]).
pub(super) fn answered(started: Instant) {
    tracing::trace!(
        target: crate::TIMING_TARGET,
        transport = "http",
        micros = started.elapsed().as_micros() as u64,
    );
}

pub(super) async fn initialize(
    state: &Arc<State>,
    p: &Principal,
    id: &Value,
    params: Option<&Value>,
    json_ok: bool,
) -> Response<Body> {
    let capabilities = crate::handler::capabilities(&state.forge);
    let result = match crate::handler::initialize(params, capabilities) {
        Ok(r) => r,
        Err(e) => return json_response(StatusCode::OK, &jsonrpc::error_response(id, &e)),
    };
    let sid = format!("{:032x}", rand::random::<u128>());
    // The cap counts the token's sessions of every revision on this host.
    let open = lock(&state.sessions)
        .values()
        .filter(|s| s.owner == p.key)
        .count()
        + state.modern.count(&p.key, &modern::default_owner(p));
    if open >= state.config.max_sessions {
        let error = RpcError::new(
            -32000,
            format!(
                "too many sessions: this token may have {} open, every protocol revision's together (end one with DELETE; they end after the idle timeout)",
                state.config.max_sessions
            ),
        );
        return json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &jsonrpc::error_response(id, &error),
        );
    }
    // Stored first: any host behind the balancer serves the next request.
    let session = new_session(state, &sid, p);
    if let Err(e) = state
        .forge
        .open_session(session.handler.context(), &p.key, state.config.session_idle)
        .await
    {
        tracing::error!("cannot store a new session: {e}");
        let error = RpcError::internal(format!("cannot store the session: {e}"));
        return json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &jsonrpc::error_response(id, &error),
        );
    }
    *lock(&session.client_capabilities) = params.and_then(|p| p.get("capabilities")).cloned();
    lock(&state.sessions).insert(sid.clone(), session);
    let message = jsonrpc::response(id, result);
    let mut r = if json_ok {
        json_response(StatusCode::OK, &message)
    } else {
        let (tx, rx) = mpsc::channel(1);
        let _ = tx.try_send(sse_event(&message));
        sse_response(rx)
    };
    r.headers_mut().insert(
        SESSION_HEADER,
        HeaderValue::from_str(&sid).expect("hex is a valid header value"),
    );
    r
}
