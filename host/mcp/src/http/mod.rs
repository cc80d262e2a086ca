//! MCP over Streamable HTTP (protocol 2025-03-26 and later): `temper mcp
//! --http ADDR`, on hyper. The 2026-07-28 revision (stateless, no
//! sessions, `subscriptions/listen`) shares the endpoint: [`modern`] says
//! how a request is recognized and answered; what follows is the legacy
//! revisions'.
//!
//! One endpoint, `/mcp`:
//! - `POST`: one JSON-RPC message. A request is answered with JSON, or with
//!   an SSE stream when the client accepts one and the request is a
//!   `tools/call` that may notify on it (a progress token, or a forge or
//!   promotion: progress notifications, `list_changed`, then the response);
//!   a notification or response gets `202`. `initialize` opens a session
//!   and returns its `Mcp-Session-Id`.
//! - `GET`: the session's server-to-client SSE stream
//!   (`notifications/tools/list_changed`); a newer GET replaces it.
//! - `DELETE`: ends the session.
//!
//! A promotion on this server is announced to every session of the agent;
//! changes other processes sharing the store make are found by polling the
//! audit trail every [`HttpConfig::registry_poll`] ([`super::watch`]) and
//! announced to the sessions they concern.
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
//! revokes it at once. With `--auth jwt --auth-config FILE` ([`crate::auth`],
//! [`bearer`]) bearer JWTs of the configured issuer are accepted too (a
//! session then belongs to the token's agent), and the RFC 9728 metadata
//! is served at `/.well-known/oauth-protected-resource[/mcp]`. Without
//! either the server acts as `--agent` and binding to a non-loopback
//! address is refused.
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
//! sessions (both revisions' together). Its `tools/call` quotas (and
//! per-tool quotas) are counted in the store, shared by every host on it
//! ([`quota`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::{HeaderMap, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::auth::{AuthError, JwtVerifier};
use super::handler::LIST_CHANGED;
use super::jsonrpc::{self};
use super::tokens::TokensError;
use super::watch::{self, RegistryWatch};
use temper_forge::{Forge, ForgeContext};
use temper_store::StoreError;

mod bearer;
mod modern;
mod quota;
mod routes;
mod session;
mod to_end;
mod wire;

use routes::route;
use session::{Limits, Principal, Session, TokenSource, reap_idle_sessions};
use wire::{Body, TimedIo, plain};

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
    /// The tokens file (this or `jwt` is required for a non-loopback
    /// address).
    pub tokens: Option<PathBuf>,
    /// The `--auth-config` file of `--auth jwt` (bearer JWTs,
    /// [`crate::auth::config`]).
    pub jwt: Option<PathBuf>,
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
    /// Sessions per token, every protocol revision's together.
    pub max_sessions: usize,
    /// A host leases `max(1, limit / quota_lease_divisor)` calls of a
    /// quota from the store at a time ([`quota`]): larger leases mean fewer
    /// store round trips and a larger possible undershoot.
    pub quota_lease_divisor: u32,
    /// Open connections in all.
    pub max_connections: usize,
    /// Interval of SSE keep-alive comments on GET streams.
    pub keep_alive: Duration,
    /// How often the audit trail is read for registry changes other
    /// processes made (`None`: never; this server's own are announced
    /// either way).
    pub registry_poll: Option<Duration>,
}

impl HttpConfig {
    /// The defaults for `addr`: sessions idle out after 30 min, 8 MiB
    /// bodies, 10 s for headers, 30 s for a body, 30 s of blocked writes,
    /// 64 requests in flight and 64 sessions per token, 1024 connections,
    /// the registry polled every second.
    pub fn new(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            tokens: None,
            jwt: None,
            allowed_origins: Vec::new(),
            session_idle: Duration::from_secs(30 * 60),
            max_body_bytes: jsonrpc::MAX_MESSAGE_BYTES,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_concurrent: 64,
            max_sessions: 64,
            quota_lease_divisor: 10,
            max_connections: 1024,
            keep_alive: Duration::from_secs(15),
            registry_poll: Some(watch::DEFAULT_POLL),
        }
    }
}

/// Why the HTTP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A non-loopback address without `--tokens` or `--auth jwt`.
    #[error(
        "mcp http: refusing to listen on {addr} without --tokens or --auth jwt: any machine that can reach it could forge and run tools as agent {agent:?}; pass --tokens FILE or --auth jwt --auth-config FILE, or listen on 127.0.0.1"
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
    /// The `--auth jwt` config or its key set is unusable.
    #[error("mcp http: --auth jwt: {0}")]
    Auth(#[from] AuthError),
    /// The address does not resolve.
    #[error("mcp http: bad address {addr:?}: {reason}")]
    Address {
        /// As given.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The audit trail's head could not be read to start the registry
    /// watch.
    #[error("mcp http: cannot start the registry watch: {0}")]
    Watch(#[source] StoreError),
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
        let jwt = match &config.jwt {
            Some(path) => Some(Arc::new(crate::auth::load_jwt(path).await?)),
            None => None,
        };
        let tokens = match &config.tokens {
            Some(path) => Some(TokenSource::open(path.clone())?),
            None if !loopback && jwt.is_none() => {
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
        let watch = watch::of(&forge, config.registry_poll)
            .await
            .map_err(HttpError::Watch)?;
        let state = Arc::new(State {
            watch,
            forge,
            base_agent: base.agent_id.clone(),
            loopback,
            tokens,
            jwt,
            limits: Mutex::new(HashMap::new()),
            quotas: quota::Quotas::new(config.quota_lease_divisor),
            sessions: Mutex::new(HashMap::new()),
            modern: modern::Modern::default(),
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
        tokio::spawn(modern::reap_idle(Arc::downgrade(&state)));
        if let Some(changes) = state.forge.subscribe_changes() {
            let weak = Arc::downgrade(&state);
            tokio::spawn(watch::deliver_changes(changes, move |changes| {
                let Some(state) = weak.upgrade() else {
                    return false;
                };
                // `None`: the receiver fell behind; anything may have
                // changed, for everyone.
                let changes = changes.unwrap_or_else(|| watch::Changes {
                    shared: true,
                    agents: Default::default(),
                });
                let note = jsonrpc::notification(LIST_CHANGED, serde_json::json!({}));
                for s in state.sessions_reached(&changes) {
                    s.push(&note);
                }
                state.modern.registry_changed(&changes);
                true
            }));
        }
        // The hub upstreams' list changes: every session hears them.
        if let Some(changes) = state.forge.hub().and_then(|h| h.subscribe_list_changes()) {
            let weak = Arc::downgrade(&state);
            tokio::spawn(watch::deliver_hub_changes(changes, move |method| {
                let Some(state) = weak.upgrade() else {
                    return false;
                };
                let note = jsonrpc::notification(method, serde_json::json!({}));
                let sessions: Vec<_> = lock(&state.sessions).values().cloned().collect();
                for s in sessions {
                    s.push(&note);
                }
                state.modern.hub_list_changed(method);
                true
            }));
        }
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
                    tracing::warn!("accept failed: {e}");
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
    /// The server's cursor into the audit trail (shared by its sessions).
    watch: RegistryWatch,
    base_agent: String,
    loopback: bool,
    tokens: Option<TokenSource>,
    /// Bearer JWT verification (`--auth jwt`).
    jwt: Option<Arc<JwtVerifier>>,
    /// Per token key: the in-flight cap (this host's).
    limits: Mutex<HashMap<String, Arc<Limits>>>,
    /// This host's leases of the store's shared call quotas.
    quotas: quota::Quotas,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// 2026-07-28 sessions and subscriptions ([`modern`]).
    modern: modern::Modern,
    connections: Arc<Semaphore>,
    config: HttpConfig,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    fn limits(&self, p: &Principal) -> Arc<Limits> {
        let mut all = lock(&self.limits);
        // Looked up by `&str` first: the key is copied only for a token
        // seen for the first time (or whose cap changed).
        if let Some(l) = all.get(p.key.as_str())
            && l.cap == p.max_concurrent
        {
            return l.clone();
        }
        let l = Arc::new(Limits::new(p.max_concurrent));
        all.insert(p.key.clone(), l.clone());
        l
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
    /// to send (built once per refused request: size does not matter). A
    /// session this host does not hold is looked up in the store, and one
    /// it holds is re-checked there at most every [`session::RECHECK`].
    #[allow(clippy::result_large_err)]
    async fn session(
        &self,
        headers: &HeaderMap,
        p: &Principal,
    ) -> Result<Arc<Session>, Response<Body>> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "Mcp-Session-Id header required (send initialize first)",
            ));
        };
        let not_found = || plain(StatusCode::NOT_FOUND, "no such session");
        if !session::valid_id(id) {
            return Err(not_found());
        }
        let held = lock(&self.sessions).get(id).cloned();
        let s = match held {
            // Another token's session is answered like an unknown one.
            Some(s) if s.owner != p.key => return Err(not_found()),
            Some(s) => {
                if lock(&s.checked).elapsed() >= session::RECHECK {
                    if !session::find_stored(self, id, p).await {
                        self.release_session(id);
                        return Err(not_found());
                    }
                    *lock(&s.checked) = Instant::now();
                }
                s
            }
            None => {
                if !session::find_stored(self, id, p).await {
                    return Err(not_found());
                }
                let made = session::new_session(self, id, p);
                lock(&self.sessions)
                    .entry(id.to_owned())
                    .or_insert(made)
                    .clone()
            }
        };
        if let Err(e) = self.forge.touch_session(s.handler.context()) {
            tracing::warn!("cannot record a session's use: {e}");
        }
        Ok(s)
    }

    /// Ends session `id` for every host: its stored tier is discarded.
    fn end_session(&self, id: &str, why: &str) {
        let Some(s) = lock(&self.sessions).remove(id) else {
            return;
        };
        s.closed.store(true, Ordering::SeqCst);
        lock(&s.stream).take();
        s.discard(why);
    }

    /// Lets go of this host's handle on session `id` (its GET stream
    /// closes); the stored session is left as it is.
    fn release_session(&self, id: &str) {
        if let Some(s) = lock(&self.sessions).remove(id) {
            lock(&s.stream).take();
        }
    }

    /// The sessions `changes` concern (by agent and tiers).
    fn sessions_reached(&self, changes: &watch::Changes) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .values()
            .filter(|s| watch::reach(changes, &s.handler.context().agent_id, s.handler.access()))
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

// ---- bodies ----------------------------------------------------------------

// ---- routing ---------------------------------------------------------------

// ---- a connection whose client stops reading -------------------------------

#[cfg(test)]
mod tests {
    use super::wire::accepts;
    use super::*;
    use http::HeaderValue;

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
}
