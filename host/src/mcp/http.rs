//! MCP over Streamable HTTP (protocol 2025-06-18 and later): `temper mcp
//! --http ADDR`, on hyper.
//!
//! One endpoint, `/mcp`:
//! - `POST`: one JSON-RPC message. A request is answered with JSON, or with
//!   an SSE stream when the client accepts one and the request is a
//!   `tools/call` (progress notifications, then the response); a
//!   notification or response gets `202`. `initialize` opens a session and
//!   returns its `Mcp-Session-Id`.
//! - `GET`: the session's server-to-client SSE stream
//!   (`notifications/tools/list_changed`); a newer GET replaces it.
//! - `DELETE`: ends the session.
//!
//! **A session is the session tier**: its tools are discarded when it ends
//! (DELETE) or idles out (no request, no open GET stream for
//! [`HttpConfig::session_idle`]).
//!
//! **Identity is never self-declared.** With `--tokens FILE`
//! ([`super::tokens`]) every request needs `Authorization: Bearer TOKEN`;
//! the token decides the agent, its tiers, its `tools/call` quota and its
//! concurrency cap; a session belongs to the token that opened it (another
//! token gets `404` for it). A missing, wrong or revoked token gets `401`
//! with no detail. The file is re-read when it changes, so removing a token
//! revokes it at once. Without tokens the server acts as `--agent` and
//! binding to a non-loopback address is refused.
//!
//! **Hardening**: `Origin` is checked on every request (DNS rebinding: a
//! browser page may only reach the server from an allowed origin, loopback
//! origins only when bound to loopback), and on a loopback bind `Host` must
//! be a loopback name. Request bodies are capped
//! ([`HttpConfig::max_body_bytes`], `413`); headers must arrive within
//! [`HttpConfig::header_timeout`] and the body within
//! [`HttpConfig::body_timeout`] (`408`), so slow senders (slowloris) are cut
//! off; a connection whose client stops reading is closed after
//! [`HttpConfig::write_timeout`] of blocked writes; connections are capped
//! in number; each token has a cap on requests in flight (`429`) and on
//! sessions.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming as IncomingBody};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::handler::{Access, Handler, Notifier, SUPPORTED_PROTOCOL_VERSIONS};
use super::jsonrpc::{self, Incoming, Rejected, RpcError};
use super::tokens::{Tokens, TokensError};
use crate::forge::{Forge, ForgeContext};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";
/// The session header.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The protocol version header.
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// Settings of the HTTP transport. [`HttpConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Where to listen (`127.0.0.1:8808`; port 0 picks one).
    pub addr: String,
    /// The tokens file (required for a non-loopback address).
    pub tokens: Option<PathBuf>,
    /// Browser origins allowed besides loopback ones (`https://app.example`).
    pub allowed_origins: Vec<String>,
    /// A session with no request and no GET stream for this long ends.
    pub session_idle: Duration,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Time allowed for a request's headers (and between requests).
    pub header_timeout: Duration,
    /// Time allowed for a request's body.
    pub body_timeout: Duration,
    /// How long a write may stay blocked (a client that stopped reading).
    pub write_timeout: Duration,
    /// Requests in flight per token (a token's `max_concurrent` overrides).
    pub max_concurrent: u32,
    /// Sessions per token.
    pub max_sessions: usize,
    /// Open connections in all.
    pub max_connections: usize,
    /// Interval of SSE keep-alive comments on GET streams.
    pub keep_alive: Duration,
}

impl HttpConfig {
    /// The defaults for `addr`: sessions idle out after 30 min, 8 MiB
    /// bodies, 10 s for headers, 30 s for a body, 30 s of blocked writes,
    /// 64 requests in flight and 64 sessions per token, 1024 connections.
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            tokens: None,
            allowed_origins: Vec::new(),
            session_idle: Duration::from_secs(30 * 60),
            max_body_bytes: jsonrpc::MAX_MESSAGE_BYTES,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_concurrent: 64,
            max_sessions: 64,
            max_connections: 1024,
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// Why the HTTP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback address without `--tokens`.
    #[error(
        "mcp http: refusing to listen on {addr} without --tokens: any machine that can reach it could forge and run tools as agent {agent:?}; pass --tokens FILE, or listen on 127.0.0.1"
    )]
    NeedsTokens {
        /// The address.
        addr: SocketAddr,
        /// The agent it would have acted as.
        agent: String,
    },
    /// The tokens file is unusable.
    #[error(transparent)]
    Tokens(#[from] TokensError),
    /// The address does not resolve.
    #[error("mcp http: bad address {addr:?}: {reason}")]
    Address {
        /// As given.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Listening or accepting failed.
    #[error("mcp http: cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// A bound server: [`HttpServer::local_addr`] says where, [`HttpServer::run`]
/// serves.
pub struct HttpServer {
    listener: TcpListener,
    state: Arc<State>,
}

impl HttpServer {
    /// Binds `config.addr`. Sessions act as the token's agent, or as `base`'s
    /// agent without tokens. Refuses a non-loopback address without tokens,
    /// and a tokens file that does not parse.
    pub async fn bind(
        forge: Forge,
        base: &ForgeContext,
        config: HttpConfig,
    ) -> Result<Self, HttpError> {
        let addr = tokio::net::lookup_host(&config.addr)
            .await
            .map_err(|e| HttpError::Address {
                addr: config.addr.clone(),
                reason: e.to_string(),
            })?
            .next()
            .ok_or_else(|| HttpError::Address {
                addr: config.addr.clone(),
                reason: "no address".into(),
            })?;
        let loopback = addr.ip().is_loopback();
        let tokens = match &config.tokens {
            Some(path) => Some(TokenSource::open(path.clone())?),
            None if !loopback => {
                return Err(HttpError::NeedsTokens {
                    addr,
                    agent: base.agent_id.clone(),
                });
            }
            None => None,
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Listen {
                addr: config.addr.clone(),
                source,
            })?;
        let state = Arc::new(State {
            forge,
            base_agent: base.agent_id.clone(),
            loopback,
            tokens,
            limits: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            connections: Arc::new(Semaphore::new(config.max_connections)),
            config,
        });
        Ok(Self { listener, state })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends (or accepting fails for good).
    pub async fn run(self) -> Result<(), HttpError> {
        let state = self.state;
        tokio::spawn(reap_idle_sessions(Arc::downgrade(&state)));
        loop {
            let permit = state
                .connections
                .clone()
                .acquire_owned()
                .await
                .expect("the connection semaphore is never closed");
            let (stream, _peer) = match self.listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: wait, then go on.
                    eprintln!("temper mcp: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let state = state.clone();
            tokio::spawn(async move {
                let io = TokioIo::new(TimedIo::new(stream, state.config.write_timeout));
                let service_state = state.clone();
                let service = hyper::service::service_fn(move |req| {
                    let state = service_state.clone();
                    async move { Ok::<_, Infallible>(route(state, req).await) }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(state.config.header_timeout)
                    .max_buf_size(64 << 10);
                let _ = builder.serve_connection(io, service).await;
                drop(permit);
            });
        }
    }
}

// ---- state -----------------------------------------------------------------

struct State {
    forge: Forge,
    base_agent: String,
    loopback: bool,
    tokens: Option<TokenSource>,
    /// Per token key: quota bucket and in-flight cap.
    limits: Mutex<HashMap<String, Arc<Limits>>>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    connections: Arc<Semaphore>,
    config: HttpConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Who a request comes from.
#[derive(Clone)]
struct Principal {
    /// The token's key (`sha256:...`), or `local` without tokens.
    key: String,
    agent: String,
    access: Access,
    calls_per_minute: Option<u32>,
    max_concurrent: u32,
}

/// The tokens file, re-read when its content changes.
struct TokenSource {
    path: PathBuf,
    cache: Mutex<(Vec<u8>, Option<Arc<Tokens>>)>,
}

impl TokenSource {
    fn open(path: PathBuf) -> Result<Self, TokensError> {
        let text = std::fs::read(&path).map_err(|source| TokensError::Read {
            path: path.clone(),
            source,
        })?;
        let tokens = Tokens::load(&path)?;
        Ok(Self {
            path,
            cache: Mutex::new((text, Some(Arc::new(tokens)))),
        })
    }

    /// The current tokens; `None` while the file is unreadable or invalid
    /// (fail closed: every request is refused until it is fixed).
    fn current(&self) -> Option<Arc<Tokens>> {
        let text = std::fs::read(&self.path);
        let mut cache = lock(&self.cache);
        match text {
            Ok(text) if text == cache.0 => {}
            Ok(text) => {
                let parsed = std::str::from_utf8(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|t| Tokens::parse(t).map_err(|e| e.to_string()));
                match parsed {
                    Ok(t) => {
                        eprintln!(
                            "temper mcp: reloaded {} ({} tokens)",
                            self.path.display(),
                            t.len()
                        );
                        cache.1 = Some(Arc::new(t));
                    }
                    Err(e) => {
                        eprintln!(
                            "temper mcp: {} is invalid, refusing every request until it is fixed: {e}",
                            self.path.display()
                        );
                        cache.1 = None;
                    }
                }
                cache.0 = text;
            }
            Err(e) => {
                if cache.1.is_some() {
                    eprintln!(
                        "temper mcp: cannot read {}, refusing every request: {e}",
                        self.path.display()
                    );
                }
                cache.0.clear();
                cache.1 = None;
            }
        }
        cache.1.clone()
    }
}

/// A token's quota bucket and in-flight cap.
struct Limits {
    in_flight: Arc<Semaphore>,
    cap: u32,
    bucket: Mutex<(f64, Instant)>,
}

impl Limits {
    fn new(cap: u32, per_minute: Option<u32>) -> Self {
        Self {
            in_flight: Arc::new(Semaphore::new(cap as usize)),
            cap,
            bucket: Mutex::new((per_minute.unwrap_or(0) as f64, Instant::now())),
        }
    }

    /// Takes one call from a bucket of `per_minute` refilled continuously;
    /// `Err(seconds)` until the next call is allowed.
    fn take_call(&self, per_minute: u32) -> Result<(), u64> {
        let mut b = lock(&self.bucket);
        let now = Instant::now();
        let rate = per_minute as f64 / 60.0;
        b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * rate).min(per_minute as f64);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.0) / rate).ceil().max(1.0) as u64)
        }
    }
}

/// One MCP session: its handler (the session tier lives in the engine under
/// the handler's context), its GET stream, and what keeps it alive.
struct Session {
    id: String,
    owner: String,
    handler: Handler,
    stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    last_active: Mutex<Instant>,
    in_flight: AtomicUsize,
    closed: AtomicBool,
}

impl Session {
    fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }

    /// Sends `message` on the GET stream; false when there is none (or it
    /// is gone, or full: a client that does not read loses it).
    fn push(&self, message: &Value) -> bool {
        let mut stream = lock(&self.stream);
        let Some(tx) = stream.as_ref() else {
            return false;
        };
        match tx.try_send(sse_event(message)) {
            Ok(()) => true,
            Err(_) => {
                *stream = None;
                false
            }
        }
    }

    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        if lock(&self.stream).as_ref().is_some_and(|s| !s.is_closed()) {
            return None;
        }
        Some(lock(&self.last_active).elapsed())
    }

    /// Discards the session tier (again, after a request that was in flight
    /// when the session ended: what it forged goes too).
    fn discard(&self, why: &str) {
        let ctx = self.handler.context();
        match self.handler.forge().cleanup_session(ctx) {
            Ok(0) => {}
            Ok(n) => eprintln!(
                "temper mcp: session of {} {why}: discarded {n} session tools",
                ctx.agent_id
            ),
            Err(e) => eprintln!("temper mcp: cannot discard a session tier: {e}"),
        }
    }
}

/// Counts a request in flight on its session; when the session ended
/// meanwhile, discards what the request added to the tier.
struct InFlight(Arc<Session>);

impl InFlight {
    fn new(session: Arc<Session>) -> Self {
        session.in_flight.fetch_add(1, Ordering::SeqCst);
        session.touch();
        Self(session)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.0.closed.load(Ordering::SeqCst) {
            self.0.discard("ended");
        }
    }
}

impl State {
    fn authenticate(&self, headers: &HeaderMap) -> Option<Principal> {
        let Some(source) = &self.tokens else {
            return Some(Principal {
                key: "local".into(),
                agent: self.base_agent.clone(),
                access: Access::ALL,
                calls_per_minute: None,
                max_concurrent: self.config.max_concurrent,
            });
        };
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        let (scheme, token) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim();
        if token.is_empty() {
            return None;
        }
        let tokens = source.current()?;
        let entry = tokens.authenticate(token)?;
        Some(Principal {
            key: entry.key.clone(),
            agent: entry.agent.clone(),
            access: entry.access,
            calls_per_minute: entry.calls_per_minute,
            max_concurrent: entry.max_concurrent.unwrap_or(self.config.max_concurrent),
        })
    }

    fn limits(&self, p: &Principal) -> Arc<Limits> {
        let mut all = lock(&self.limits);
        let l = all
            .entry(p.key.clone())
            .or_insert_with(|| Arc::new(Limits::new(p.max_concurrent, p.calls_per_minute)));
        if l.cap != p.max_concurrent {
            *l = Arc::new(Limits::new(p.max_concurrent, p.calls_per_minute));
        }
        l.clone()
    }

    /// Checks `Origin` (and `Host` on a loopback bind).
    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        if self.loopback
            && let Some(host) = headers.get(header::HOST)
            && !host.to_str().is_ok_and(|h| is_loopback_name(strip_port(h)))
        {
            return false;
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.trim().trim_end_matches('/');
        if self
            .config
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
        {
            return true;
        }
        self.loopback
            && ["http://", "https://"].iter().any(|scheme| {
                origin.len() > scheme.len()
                    && origin[..scheme.len()].eq_ignore_ascii_case(scheme)
                    && is_loopback_name(strip_port(&origin[scheme.len()..]))
            })
    }

    /// The session a request names, if it belongs to `p`; else the answer
    /// to send (built once per refused request: size does not matter).
    #[allow(clippy::result_large_err)]
    fn session(&self, headers: &HeaderMap, p: &Principal) -> Result<Arc<Session>, Response<Body>> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "Mcp-Session-Id header required (send initialize first)",
            ));
        };
        match lock(&self.sessions).get(id) {
            // Another token's session is answered like an unknown one.
            Some(s) if s.owner == p.key => Ok(s.clone()),
            _ => Err(plain(StatusCode::NOT_FOUND, "no such session")),
        }
    }

    fn end_session(&self, id: &str, why: &str) {
        let Some(s) = lock(&self.sessions).remove(id) else {
            return;
        };
        s.closed.store(true, Ordering::SeqCst);
        lock(&s.stream).take();
        s.discard(why);
    }

    fn sessions_of_agent(&self, agent: &str) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .values()
            .filter(|s| s.handler.context().agent_id == agent)
            .cloned()
            .collect()
    }
}

fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn reap_idle_sessions(state: std::sync::Weak<State>) {
    loop {
        let Some(s) = state.upgrade() else { return };
        let idle = s.config.session_idle;
        let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        let expired: Vec<String> = lock(&s.sessions)
            .values()
            .filter(|x| x.idle_for().is_some_and(|d| d >= idle))
            .map(|x| x.id.clone())
            .collect();
        for id in expired {
            s.end_session(&id, "idled out");
        }
        drop(s);
        tokio::time::sleep(tick).await;
    }
}

// ---- bodies ----------------------------------------------------------------

/// A response body: a whole buffer, or an SSE stream fed by a channel.
pub enum Body {
    /// All of it.
    Full(Full<Bytes>),
    /// Events as they come; ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(f) => Pin::new(f).poll_frame(cx),
            Body::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }
}

fn sse_event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::new())));
    *r.status_mut() = status;
    r
}

fn json_response(status: StatusCode, message: &Value) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::from(message.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::Stream(rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .any(|v| v.eq_ignore_ascii_case(kind) || v == "*/*")
}

// ---- routing ---------------------------------------------------------------

async fn route(state: Arc<State>, req: Request<IncomingBody>) -> Response<Body> {
    if req.uri().path() != ENDPOINT {
        return plain(
            StatusCode::NOT_FOUND,
            "not found (the MCP endpoint is /mcp)",
        );
    }
    if !state.origin_allowed(req.headers()) {
        return plain(StatusCode::FORBIDDEN, "origin not allowed");
    }
    let Some(principal) = state.authenticate(req.headers()) else {
        let mut r = empty(StatusCode::UNAUTHORIZED);
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    };
    if let Some(v) = req.headers().get(VERSION_HEADER)
        && !v
            .to_str()
            .is_ok_and(|v| SUPPORTED_PROTOCOL_VERSIONS.contains(&v))
    {
        return plain(StatusCode::BAD_REQUEST, "unsupported MCP-Protocol-Version");
    }
    match *req.method() {
        Method::POST => post(state, principal, req).await,
        Method::GET => get(&state, &principal, req.headers()),
        Method::DELETE => match state.session(req.headers(), &principal) {
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

fn get(state: &State, p: &Principal, headers: &HeaderMap) -> Response<Body> {
    if !accepts(headers, "text/event-stream") {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "GET opens an SSE stream: Accept: text/event-stream",
        );
    }
    let session = match state.session(headers, p) {
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
struct HttpNotes {
    state: Arc<State>,
    session: Arc<Session>,
    post: Option<mpsc::Sender<Bytes>>,
}

impl Notifier for HttpNotes {
    fn request_note(&self, message: Value) {
        if let Some(tx) = &self.post {
            let _ = tx.try_send(sse_event(&message));
        }
    }

    fn session_note(&self, message: Value) {
        if !self.session.push(&message) {
            self.request_note(message);
        }
    }

    fn agent_note(&self, message: Value) {
        self.session_note(message.clone());
        for s in self
            .state
            .sessions_of_agent(&self.session.handler.context().agent_id)
        {
            if s.id != self.session.id {
                s.push(&message);
            }
        }
    }
}

async fn post(state: Arc<State>, p: Principal, req: Request<IncomingBody>) -> Response<Body> {
    let headers = req.headers().clone();
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
    let body = Limited::new(req.into_body(), cap).collect();
    let bytes = match tokio::time::timeout(state.config.body_timeout, body).await {
        Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "request body too slow"),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body over the limit");
        }
        Ok(Err(_)) => return plain(StatusCode::BAD_REQUEST, "cannot read the request body"),
        Ok(Ok(b)) => b.to_bytes(),
    };
    let message = match jsonrpc::parse_message(&bytes) {
        Ok(m) => m,
        Err(Rejected { id, error }) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &jsonrpc::error_response(&id, &error),
            );
        }
    };
    let sse_ok = accepts(&headers, "text/event-stream");
    let json_ok = headers.get(header::ACCEPT).is_none() || accepts(&headers, "application/json");
    if !sse_ok && !json_ok {
        return plain(
            StatusCode::NOT_ACCEPTABLE,
            "Accept application/json and/or text/event-stream",
        );
    }
    let (id, method, params) = match message {
        Incoming::Request { id, method, params } => (id, method, params),
        Incoming::Notification { .. } | Incoming::Response { .. } => {
            return match state.session(&headers, &p) {
                Ok(s) => {
                    s.touch();
                    empty(StatusCode::ACCEPTED)
                }
                Err(r) => r,
            };
        }
    };
    if method == "initialize" {
        return initialize(&state, &p, &id, params.as_ref(), json_ok);
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
    let session = match state.session(&headers, &p) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let limits = state.limits(&p);
    if method == "tools/call"
        && let Some(per_minute) = p.calls_per_minute
        && let Err(retry) = limits.take_call(per_minute)
    {
        let error = RpcError::new(
            -32000,
            format!(
                "quota exceeded: this token may make {per_minute} tools/call requests per minute"
            ),
        );
        let mut r = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &jsonrpc::error_response(&id, &error),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry));
        return r;
    }
    let Ok(permit) = limits.in_flight.clone().try_acquire_owned() else {
        let error = RpcError::new(
            -32000,
            format!(
                "too many requests in flight: this token may have {} at once",
                p.max_concurrent
            ),
        );
        return json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &jsonrpc::error_response(&id, &error),
        );
    };
    let streaming = sse_ok && (method == "tools/call" || !json_ok);
    let (tx, rx) = if streaming {
        let (tx, rx) = mpsc::channel(64);
        (Some(tx), Some(rx))
    } else {
        (None, None)
    };
    let task = answer(state.clone(), session, permit, id, method, params, tx);
    match rx {
        Some(rx) => {
            tokio::spawn(task);
            sse_response(rx)
        }
        None => match tokio::spawn(task).await {
            Ok(Some(message)) => json_response(StatusCode::OK, &message),
            _ => plain(StatusCode::INTERNAL_SERVER_ERROR, "the handler failed"),
        },
    }
}

/// Runs one request to its end (even when the client has gone: a forge or
/// call is bounded by the engine's limits and its audit trail stays whole).
/// With `stream`, the answer goes there and `None` is returned.
async fn answer(
    state: Arc<State>,
    session: Arc<Session>,
    permit: OwnedSemaphorePermit,
    id: Value,
    method: String,
    params: Option<Value>,
    stream: Option<mpsc::Sender<Bytes>>,
) -> Option<Value> {
    {
        let in_flight = InFlight::new(session.clone());
        let notes = HttpNotes {
            state,
            session: session.clone(),
            post: stream.clone(),
        };
        let handled = {
            let session = session.clone();
            tokio::spawn(async move {
                let r = session
                    .handler
                    .handle(&method, params.as_ref(), &notes)
                    .await;
                (r, notes)
            })
            .await
        };
        let message = match handled {
            Ok((Ok(result), _)) => jsonrpc::response(&id, result),
            Ok((Err(error), _)) => jsonrpc::error_response(&id, &error),
            Err(e) => {
                eprintln!("temper mcp: request {id} failed: {e}");
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
                None
            }
            None => Some(message),
        }
    }
}

fn initialize(
    state: &Arc<State>,
    p: &Principal,
    id: &Value,
    params: Option<&Value>,
    json_ok: bool,
) -> Response<Body> {
    let result = match super::handler::initialize(params) {
        Ok(r) => r,
        Err(e) => return json_response(StatusCode::OK, &jsonrpc::error_response(id, &e)),
    };
    let sid = format!("{:032x}", rand::random::<u128>());
    {
        let mut sessions = lock(&state.sessions);
        if sessions.values().filter(|s| s.owner == p.key).count() >= state.config.max_sessions {
            let error = RpcError::new(
                -32000,
                format!(
                    "too many sessions: this token may have {} open (end one with DELETE)",
                    state.config.max_sessions
                ),
            );
            return json_response(
                StatusCode::TOO_MANY_REQUESTS,
                &jsonrpc::error_response(id, &error),
            );
        }
        let ctx = ForgeContext::new(p.agent.clone(), format!("mcp-http/{sid}"));
        sessions.insert(
            sid.clone(),
            Arc::new(Session {
                id: sid.clone(),
                owner: p.key.clone(),
                handler: Handler::new(state.forge.clone(), ctx, p.access),
                stream: Mutex::new(None),
                last_active: Mutex::new(Instant::now()),
                in_flight: AtomicUsize::new(0),
                closed: AtomicBool::new(false),
            }),
        );
    }
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

// ---- a connection whose client stops reading -------------------------------

/// A TCP stream whose writes fail once one has been blocked for `timeout`
/// (the client stopped reading): hyper then closes the connection.
struct TimedIo {
    inner: TcpStream,
    timeout: Duration,
    blocked: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TimedIo {
    fn new(inner: TcpStream, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            blocked: None,
        }
    }

    fn on_write<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.blocked = None;
            return r;
        }
        let timeout = self.timeout;
        let deadline = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.on_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.on_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.on_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports() {
        assert_eq!(strip_port("127.0.0.1:8808"), "127.0.0.1");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("localhost"), "localhost");
        assert!(is_loopback_name("localhost"));
        assert!(is_loopback_name("127.0.0.2"));
        assert!(is_loopback_name("::1"));
        assert!(!is_loopback_name("evil.example"));
        assert!(!is_loopback_name("10.0.0.1"));
    }

    #[test]
    fn accept_lists() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(accepts(&h, "text/event-stream"));
        assert!(accepts(&h, "application/json"));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        assert!(!accepts(&h, "application/json"));
    }

    #[test]
    fn quota_bucket_refuses_past_the_rate() {
        let l = Limits::new(4, Some(3));
        assert!(l.take_call(3).is_ok());
        assert!(l.take_call(3).is_ok());
        assert!(l.take_call(3).is_ok());
        let retry = l.take_call(3).unwrap_err();
        assert!((1..=20).contains(&retry), "{retry}");
    }
}
