//! Who is calling and their MCP sessions: the principal a bearer token
//! maps to, the token file (re-read when it changes), per-token limits,
//! sessions (each a session tier) and their idle reaping.
//!
//! A session lives in the store (the forge's stored session tier, owned by
//! the token's key), so any host on the store serves it: a host that does
//! not know a session id looks it up there and serves it if the same
//! token owns it ([`find_stored`]). What a host keeps of a session is its
//! handler and GET stream, checked against the store at most every
//! [`RECHECK`] (a session ended or expired through another host is then
//! answered 404 here too). Expiry is judged in the store, on the last use
//! any host wrote (uses are written behind), by whichever host reaps first.

use crate::access::Access;
use crate::handler::Handler;
use crate::handler::hub_relay::ClientAsks;
use crate::tokens::{Tokens, TokensError};
use bytes::Bytes;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use temper_forge::ForgeContext;
use tokio::sync::{Semaphore, mpsc};

use super::wire::sse_event;
use super::{State, lock};

/// Who a request comes from.
#[derive(Clone)]
pub(super) struct Principal {
    /// The token's key (`sha256:...`), or `local` without tokens.
    pub(super) key: String,
    pub(super) agent: String,
    pub(super) access: Access,
    pub(super) calls_per_minute: Option<u32>,
    pub(super) max_concurrent: u32,
    /// Its per-tool quotas.
    pub(super) tool_quotas: crate::tool_quotas::ToolQuotas,
    /// The token's narrowing of the hub tools, if any (its `tools`, or
    /// its JWT scopes'), part of its grant ([`temper_forge::grant`]).
    pub(super) tools: Option<temper_forge::HubNarrowing>,
    /// The token's narrowing of the hub's resources and prompts, if any.
    pub(super) features: (
        Option<temper_policy::ToolAllow>,
        Option<temper_policy::ToolAllow>,
    ),
}

/// The tokens file, re-read when its content changes.
///
/// Every request stats the file (one `statx`, no open or read): while its
/// identity, size and change times are those of the copy held, and that
/// copy was read at least [`SETTLE`] after the file's last change, the
/// file has not changed since (any later write moves its change time past
/// the one held), so the held tokens are used. Otherwise the file is read
/// and compared as before. A revocation (an edit, a rename over it, a
/// symlink swapped) is therefore seen by the next request, as before.
pub(super) struct TokenSource {
    pub(super) path: PathBuf,
    pub(super) cache: Mutex<TokenCache>,
    /// See [`SETTLE`] (shorter in tests).
    settle: Duration,
}

/// How long after a file's last change its copy must have been read for
/// the change times alone to vouch for it: more than the coarsest
/// timestamp granularity (a jiffy on most file systems, 2 s on FAT) and than a clock's small
/// steps. Until then every request reads the file.
pub(super) const SETTLE: Duration = Duration::from_secs(3);

/// What [`TokenSource`] holds: the file's bytes and tokens as last read,
/// and the file's stamp taken just before that read.
pub(super) struct TokenCache {
    text: Vec<u8>,
    tokens: Option<Arc<Tokens>>,
    /// The stamp, when it may vouch for `text` (see [`TokenSource`]).
    settled: Option<Stamp>,
    /// Times the file was read (tests).
    reads: u64,
}

/// What identifies one version of a file without reading it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether both change times are at least `settle` before `now`
    /// (wall clock, as the file system's times are).
    fn settled_by(&self, now: std::time::SystemTime, settle: Duration) -> bool {
        let Ok(now) = now.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let Some(limit) = now.checked_sub(settle) else {
            return false;
        };
        let before = |(s, ns): (i64, i64)| {
            u64::try_from(s)
                .is_ok_and(|s| Duration::new(s, ns.clamp(0, 999_999_999) as u32) <= limit)
        };
        before(self.mtime) && before(self.ctime)
    }
}

impl TokenSource {
    pub(super) fn open(path: PathBuf) -> Result<Self, TokensError> {
        Self::open_settling(path, SETTLE)
    }

    fn open_settling(path: PathBuf, settle: Duration) -> Result<Self, TokensError> {
        let text = std::fs::read(&path).map_err(|source| TokensError::Read {
            path: path.clone(),
            source,
        })?;
        let tokens = Tokens::load(&path)?;
        Ok(Self {
            path,
            // Not vouched for: the first request reads the file again.
            cache: Mutex::new(TokenCache {
                text,
                tokens: Some(Arc::new(tokens)),
                settled: None,
                reads: 0,
            }),
            settle,
        })
    }

    /// The current tokens; `None` while the file is unreadable or invalid
    /// (fail closed: every request is refused until it is fixed).
    pub(super) fn current(&self) -> Option<Arc<Tokens>> {
        let now = std::time::SystemTime::now();
        let stamp = std::fs::metadata(&self.path).ok().map(|m| Stamp::of(&m));
        let mut cache = lock(&self.cache);
        if stamp.is_some() && cache.settled == stamp {
            return cache.tokens.clone();
        }
        // The stamp was taken before this read: a change after it moves
        // the change time, and the next request reads again.
        cache.settled = stamp.filter(|s| s.settled_by(now, self.settle));
        cache.reads += 1;
        let text = std::fs::read(&self.path);
        match text {
            Ok(text) if text == cache.text => {}
            Ok(text) => {
                let parsed = std::str::from_utf8(&text)
                    .map_err(|e| e.to_string())
                    .and_then(|t| Tokens::parse(t).map_err(|e| e.to_string()));
                match parsed {
                    Ok(t) => {
                        tracing::info!("reloaded {} ({} tokens)", self.path.display(), t.len());
                        cache.tokens = Some(Arc::new(t));
                    }
                    Err(e) => {
                        tracing::error!(
                            "{} is invalid, refusing every request until it is fixed: {e}",
                            self.path.display()
                        );
                        cache.tokens = None;
                    }
                }
                cache.text = text;
            }
            Err(e) => {
                if cache.tokens.is_some() {
                    tracing::error!(
                        "cannot read {}, refusing every request: {e}",
                        self.path.display()
                    );
                }
                cache.settled = None;
                cache.text.clear();
                cache.tokens = None;
            }
        }
        cache.tokens.clone()
    }
}

/// A token's in-flight cap on this host (its call quotas are shared by
/// the hosts: [`super::quota`]).
pub(super) struct Limits {
    pub(super) in_flight: Arc<Semaphore>,
    pub(super) cap: u32,
}

impl Limits {
    pub(super) fn new(cap: u32) -> Self {
        Self {
            in_flight: Arc::new(Semaphore::new(cap as usize)),
            cap,
        }
    }
}

/// One MCP session: its handler (the session tier lives in the engine under
/// the handler's context), its GET stream, and what keeps it alive.
pub(super) struct Session {
    pub(super) id: String,
    pub(super) owner: String,
    pub(super) handler: Handler,
    pub(super) stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    pub(super) last_active: Mutex<Instant>,
    pub(super) in_flight: AtomicUsize,
    pub(super) closed: AtomicBool,
    /// When the store last confirmed the session.
    pub(super) checked: Mutex<Instant>,
    /// What the client declared in `initialize` (`capabilities`); `None`
    /// on a host that took the session over from another (not stored).
    pub(super) client_capabilities: Mutex<Option<Value>>,
    /// The requests sent to the client (an upstream's, relayed) that wait
    /// for its answer.
    pub(super) asks: ClientAsks,
    /// The client sent `logging/setLevel`: it takes log messages (a hub
    /// tool's upstream's, relayed), so its calls are answered on a stream.
    pub(super) wants_logs: AtomicBool,
}

/// How often a host re-reads a session it holds from the store: a session
/// ended or expired through another host is served here at most this long
/// after.
pub(super) const RECHECK: Duration = Duration::from_secs(1);

/// A session's id: 32 lowercase hex digits (what `initialize` makes).
pub(super) fn valid_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The forge context of HTTP session `sid` for `agent`.
pub(super) fn context(agent: &str, sid: &str) -> ForgeContext {
    ForgeContext::new(agent.to_owned(), format!("mcp-http/{sid}"))
}

/// This host's handle on session `sid` of `p`.
pub(super) fn new_session(state: &State, sid: &str, p: &Principal) -> Arc<Session> {
    Arc::new(Session {
        id: sid.to_owned(),
        owner: p.key.clone(),
        handler: Handler::new(
            state.forge.clone(),
            context(&p.agent, sid),
            p.access,
            state.watch.clone(),
        )
        .with_tools(p.tools.clone())
        .with_features(p.features.0.clone(), p.features.1.clone()),
        stream: Mutex::new(None),
        last_active: Mutex::new(Instant::now()),
        in_flight: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        checked: Mutex::new(Instant::now()),
        client_capabilities: Mutex::new(None),
        asks: ClientAsks::default(),
        wants_logs: AtomicBool::new(false),
    })
}

/// Whether the store holds session `sid` of `p`'s agent, unexpired and
/// owned by `p`'s token (another token's session is not found, as an
/// unknown one). A store that cannot answer is logged and taken as no.
pub(super) async fn find_stored(state: &State, sid: &str, p: &Principal) -> bool {
    match state.forge.stored_session(&context(&p.agent, sid)).await {
        Ok(found) => found.is_some_and(|s| s.owner == p.key),
        Err(e) => {
            tracing::warn!("cannot read a session from the store: {e}");
            false
        }
    }
}

impl Session {
    pub(super) fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }

    /// Whether the client declared `capability` in `initialize`.
    pub(super) fn declares(&self, capability: &str) -> bool {
        lock(&self.client_capabilities)
            .as_ref()
            .is_some_and(|c| c.get(capability).is_some_and(Value::is_object))
    }

    /// Whether the client may be asked an upstream's request (it declared
    /// elicitation or sampling) or takes log messages (it set a level):
    /// its calls are answered on a stream.
    pub(super) fn takes_notes(&self) -> bool {
        self.declares("elicitation")
            || self.declares("sampling")
            || self.wants_logs.load(Ordering::Relaxed)
    }

    /// Sends `message` on the GET stream; false when there is none (or it
    /// is gone, or full: a client that does not read loses it).
    pub(super) fn push(&self, message: &Value) -> bool {
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

    pub(super) fn idle_for(&self) -> Option<Duration> {
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
    pub(super) fn discard(&self, why: &str) {
        let ctx = self.handler.context();
        match self.handler.forge().cleanup_session(ctx) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                "session of {} {why}: discarded {n} session tools",
                ctx.agent_id
            ),
            Err(e) => tracing::warn!("cannot discard a session tier: {e}"),
        }
    }
}

/// Counts a request in flight on its session; when the session ended
/// meanwhile, discards what the request added to the tier.
pub(super) struct InFlight(Arc<Session>);

impl InFlight {
    pub(super) fn new(session: Arc<Session>) -> Self {
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

/// Sessions the store expires per reaping tick, at most.
const REAP_BATCH: usize = 64;

/// Every tick: keeps the sessions this host is busy with alive in the
/// store (a request in flight, an open GET stream), lets go of its handles
/// on sessions idle here for the idle limit (the session stays in the
/// store: another host may be serving it), and expires the sessions of
/// the store idle for their limit (any host's; one host wins each).
pub(super) async fn reap_idle_sessions(state: std::sync::Weak<State>) {
    loop {
        let Some(s) = state.upgrade() else { return };
        let idle = s.config.session_idle;
        let tick = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        let mut released = Vec::new();
        for x in lock(&s.sessions).values() {
            match x.idle_for() {
                None => {
                    if let Err(e) = s.forge.touch_session(x.handler.context()) {
                        tracing::warn!("cannot record a session's use: {e}");
                    }
                }
                Some(d) if d >= idle => released.push(x.id.clone()),
                Some(_) => {}
            }
        }
        for id in released {
            s.release_session(&id);
        }
        match s.forge.reap_expired_sessions(REAP_BATCH).await {
            Ok(ended) => {
                for e in ended {
                    tracing::info!(
                        "session of {} idled out: discarded {} session tools",
                        e.agent,
                        e.tools.len()
                    );
                    if let Some(sid) = e.session.strip_prefix("mcp-http/") {
                        s.release_session(sid);
                    } else {
                        s.modern
                            .forget(&ForgeContext::new(e.agent.clone(), e.session.clone()));
                    }
                }
            }
            Err(e) => tracing::warn!("cannot expire idle sessions: {e}"),
        }
        drop(s);
        tokio::time::sleep(tick).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    /// A tokens file entry; the same length for tokens and agents of the
    /// same lengths (so that rewrites below keep the file's size).
    fn entry(token: &str, agent: &str) -> String {
        let hash: String = sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("[tokens.\"sha256:{hash}\"]\nagent = \"{agent}\"\n")
    }

    fn agent_of(source: &TokenSource, token: &str) -> Option<String> {
        source
            .current()?
            .authenticate(token)
            .map(|e| e.agent.clone())
    }

    fn reads(source: &TokenSource) -> u64 {
        lock(&source.cache).reads
    }

    const SETTLE_IN_TESTS: Duration = Duration::from_millis(50);

    /// Waits out the settling time and has one request read the file, so
    /// that its stamp vouches for it from then on.
    fn settle(source: &TokenSource, token: &str) {
        std::thread::sleep(SETTLE_IN_TESTS * 3);
        let before = reads(source);
        assert!(agent_of(source, token).is_some());
        assert_eq!(reads(source), before + 1, "read once after settling");
    }

    #[test]
    fn a_settled_tokens_file_is_not_read_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, entry("token-aaaa", "alice")).unwrap();
        let source = TokenSource::open_settling(path, SETTLE_IN_TESTS).unwrap();
        // Just written: every request reads it.
        assert_eq!(agent_of(&source, "token-aaaa").as_deref(), Some("alice"));
        assert_eq!(agent_of(&source, "token-aaaa").as_deref(), Some("alice"));
        assert_eq!(reads(&source), 2);
        settle(&source, "token-aaaa");
        let settled = reads(&source);
        for _ in 0..20 {
            assert_eq!(agent_of(&source, "token-aaaa").as_deref(), Some("alice"));
        }
        assert_eq!(reads(&source), settled, "stat only once settled");
    }

    #[test]
    fn every_change_to_a_settled_tokens_file_is_seen_by_the_next_request() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.toml");
        std::fs::write(&path, entry("token-aaaa", "alice")).unwrap();
        let source = TokenSource::open_settling(path.clone(), SETTLE_IN_TESTS).unwrap();
        settle(&source, "token-aaaa");

        // Revoked by a rewrite in place of the same size whose modification
        // time is set back to the old one (as `cp -p` or `touch -r` would):
        // the change time still moves.
        let old_mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let same = entry("token-bbbb", "alice");
        assert_eq!(same.len(), entry("token-aaaa", "alice").len());
        std::fs::write(&path, &same).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old_mtime)
            .unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, same.len());
        assert_eq!(agent_of(&source, "token-aaaa"), None, "revoked at once");
        assert_eq!(agent_of(&source, "token-bbbb").as_deref(), Some("alice"));

        // Replaced by a rename over it (a file written long before).
        settle(&source, "token-bbbb");
        let next = dir.path().join("next.toml");
        std::fs::write(&next, entry("token-cccc", "carol")).unwrap();
        std::thread::sleep(SETTLE_IN_TESTS * 3);
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(agent_of(&source, "token-bbbb"), None, "revoked at once");
        assert_eq!(agent_of(&source, "token-cccc").as_deref(), Some("carol"));

        // Made invalid, then removed: every request refused (fail closed).
        settle(&source, "token-cccc");
        std::fs::write(&path, "not toml [").unwrap();
        assert!(source.current().is_none());
        std::fs::write(&path, entry("token-cccc", "carol")).unwrap();
        assert_eq!(agent_of(&source, "token-cccc").as_deref(), Some("carol"));
        settle(&source, "token-cccc");
        std::fs::remove_file(&path).unwrap();
        assert!(source.current().is_none());
        assert!(source.current().is_none());
    }
}
