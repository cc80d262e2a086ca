//! The session tier in the store: sessions and their tools, kept in the
//! database so that any host on it serves any request of any session.
//!
//! A session is keyed by (agent, session id) and has an **owner** (who may
//! use it: an HTTP host puts the token's key there; `""` for a session made
//! implicitly by a forge), a creation time, a **last use** and an **idle
//! limit**: it expires once `last_used + idle` is past (an idle limit of 0
//! never expires; `temper session end` or the transport ends it).
//!
//! Rules every backend keeps (the store suite checks them on both):
//! - a session tool's row and its `forge_decision` audit entry commit in
//!   one transaction ([`Registry::add_session_tool`]): the trail never
//!   shows a decision for a tool that was not kept, nor the reverse;
//! - ending a session ([`Registry::end_session`]) deletes its row and its
//!   tools and appends one `deletion` entry per tool in one transaction;
//!   expiring one ([`Registry::reap_expired_sessions`]) does the same only
//!   while the session is still expired *in that transaction*, so when
//!   several hosts reap at once exactly one deletes it and audits its tools;
//! - uses are recorded in memory and written behind with the call counts
//!   ([`Registry::touch_session`]), so a call writes nothing on its path;
//! - a change made here moves the session's epoch
//!   ([`Registry::session_epoch`]); a registry watch moves it when it reads
//!   a session-tier entry another host wrote.
//!
//! [`Registry::add_session_tool`]: super::Registry::add_session_tool
//! [`Registry::end_session`]: super::Registry::end_session
//! [`Registry::reap_expired_sessions`]: super::Registry::reap_expired_sessions
//! [`Registry::touch_session`]: super::Registry::touch_session
//! [`Registry::session_epoch`]: super::Registry::session_epoch

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::audit::AuditEntry;
use super::stats::CallCounters;
use super::{Registry, StoreError};
use temper_runtime::canonical_json::canonical_json;
use temper_runtime::id::ArtifactId;

/// One stored session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The agent it belongs to.
    pub agent: String,
    /// Its id, unique per agent.
    pub session: String,
    /// Who may use it (an HTTP token's key), `""` when made by a forge.
    pub owner: String,
    /// When it was made, ms since the Unix epoch.
    pub created_ms: i64,
    /// When it was last used as far as the store knows (uses are written
    /// behind), ms since the Unix epoch.
    pub last_used_ms: i64,
    /// How long it may stay unused, ms; 0: it never expires.
    pub idle_ms: i64,
}

impl SessionRecord {
    /// A session of `agent` with id `session`, owned by `owner`, made now.
    pub fn new(agent: &str, session: &str, owner: &str, idle_ms: i64) -> Self {
        let now = now_ms();
        SessionRecord {
            agent: agent.to_owned(),
            session: session.to_owned(),
            owner: owner.to_owned(),
            created_ms: now,
            last_used_ms: now,
            idle_ms: idle_ms.max(0),
        }
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired_at(&self, now_ms: i64) -> bool {
        self.idle_ms > 0 && self.last_used_ms.saturating_add(self.idle_ms) <= now_ms
    }
}

/// One stored session-tier tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionToolRecord {
    /// Its name, unique in its session.
    pub name: String,
    /// Its artifact.
    pub artifact: ArtifactId,
    /// Its manifest (as the forge wrote it).
    pub manifest: Value,
    /// Its calls, as written so far (calls are written behind).
    pub counters: CallCounters,
    /// The seq of its `forge_decision` audit entry.
    pub created_seq: i64,
}

/// What [`RegistryBackend::add_session_tool`](super::RegistryBackend::add_session_tool)
/// inserts, prepared by the façade.
#[derive(Debug, Clone, Copy)]
pub struct NewSessionTool<'a> {
    /// The session; made with these fields when it is not stored yet, else
    /// only its last use moves.
    pub session: &'a SessionRecord,
    /// The tool's name.
    pub name: &'a str,
    /// Its artifact (already durable in the store).
    pub artifact: &'a ArtifactId,
    /// Its manifest as canonical JSON.
    pub manifest: &'a str,
    /// The `forge_decision` entry's payload, appended in the same
    /// transaction.
    pub decision: &'a Value,
    /// Most tools the session may hold: a tool past it is refused with
    /// [`StoreError::SessionFull`](super::StoreError::SessionFull).
    pub max_tools: usize,
}

/// Why a session's tools are discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// Ended by its client (or host): always.
    Ended,
    /// Idled out: only if it is still expired at this time (ms since the
    /// Unix epoch) when the ending transaction runs.
    Expired {
        /// The time the expiry is judged at.
        now_ms: i64,
    },
}

impl SessionEnd {
    /// The `reason` its `deletion` entries give: `session ended` either
    /// way, as the in-memory tier wrote it (an expiry adds
    /// `"expired": true`).
    pub fn reason(self) -> &'static str {
        "session ended"
    }
}

/// A session ended: its tools, and the `deletion` entries appended for
/// them.
#[derive(Debug, Clone, PartialEq)]
pub struct EndedSession {
    /// The agent.
    pub agent: String,
    /// The session id.
    pub session: String,
    /// The tools discarded.
    pub tools: Vec<SessionToolRecord>,
    /// One `deletion` entry per tool.
    pub entries: Vec<AuditEntry>,
}

/// A session used at `at_ms` (what the write-behind batches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTouch {
    /// The agent.
    pub agent: String,
    /// The session id.
    pub session: String,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

/// Now, in ms since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The `deletion` entry's payload for a session tool discarded with its
/// session (the same fields the in-memory tier wrote).
pub(crate) fn session_deletion_payload(
    session: &str,
    artifact: &ArtifactId,
    end: SessionEnd,
) -> Value {
    let mut payload = serde_json::json!({
        "tier": "session",
        "session": session,
        "artifact": artifact.as_str(),
        "reason": end.reason(),
    });
    if matches!(end, SessionEnd::Expired { .. }) {
        payload["expired"] = true.into();
    }
    payload
}

/// Latencies as stored: a JSON array, oldest first.
pub(crate) fn recent_to_text(c: &CallCounters) -> String {
    serde_json::to_string(&c.recent_us).expect("a list of numbers serializes")
}

/// Counters from their stored columns.
pub(crate) fn counters_from(
    total: i64,
    successes: i64,
    latency_sum_us: i64,
    recent: &str,
) -> Result<CallCounters, serde_json::Error> {
    Ok(CallCounters {
        total: total.max(0) as u64,
        successes: successes.max(0) as u64,
        latency_sum_us: latency_sum_us.max(0) as u64,
        recent_us: serde_json::from_str(recent)?,
    })
}

/// `stored` with `more` (calls counted since) added, the latency window
/// trimmed.
pub(crate) fn merged_counters(mut stored: CallCounters, more: &CallCounters) -> CallCounters {
    stored.add_since(&CallCounters::default(), more);
    stored
}

impl Registry {
    /// Stores `session` unless (agent, session id) is stored already, and
    /// returns what is stored: the caller checks the owner of a session
    /// that was there.
    pub fn open_session(&self, session: &SessionRecord) -> Result<SessionRecord, StoreError> {
        self.backend.open_session(session)
    }

    /// The stored session (agent, session), if any (expired or not: see
    /// [`SessionRecord::expired_at`]).
    pub fn session(&self, agent: &str, session: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.backend.session(agent, session)
    }

    /// The tools of (agent, session), by name, with their calls as written
    /// (this registry's pending calls are not flushed: see
    /// [`Registry::session_tool_counters`]).
    pub fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<SessionToolRecord>, StoreError> {
        self.backend.session_tools(agent, session)
    }

    /// The counters of the session tool `name` of (agent, session), this
    /// registry's pending calls flushed first; `None` if there is no such
    /// tool.
    pub fn session_tool_counters(
        &self,
        agent: &str,
        session: &str,
        name: &str,
    ) -> Result<Option<CallCounters>, StoreError> {
        self.flush_stats()?;
        Ok(self
            .backend
            .session_tools(agent, session)?
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.counters))
    }

    /// Stores the session tool `name` in `session` (made if not stored)
    /// and appends its `forge_decision` entry (`decision`) in one
    /// transaction; returns the entry's seq. The artifact must be in the
    /// store. Fails with [`StoreError::Conflict`] (tier `session`) for a
    /// name the session holds and [`StoreError::SessionFull`] past
    /// `max_tools`.
    pub fn add_session_tool(
        &self,
        session: &SessionRecord,
        name: &str,
        artifact: &ArtifactId,
        manifest: &Value,
        decision: &Value,
        max_tools: usize,
    ) -> Result<i64, StoreError> {
        let manifest = canonical_json(manifest);
        let added = self.backend.add_session_tool(NewSessionTool {
            session,
            name,
            artifact,
            manifest: &manifest,
            decision,
            max_tools,
        });
        self.tiers.session_changed(&session.agent, &session.session);
        if let Ok(seq) = &added {
            self.tiers.own().mark([*seq]);
        }
        added
    }

    /// Ends (agent, session): deletes it and its tools, with a `deletion`
    /// entry per tool, in one transaction. `None` if it was not stored.
    pub fn end_session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<EndedSession>, StoreError> {
        let ended = self.backend.end_session(agent, session, SessionEnd::Ended);
        self.tiers.session_changed(agent, session);
        ended
    }

    /// Deletes the session tool `name` of (agent, session) and appends a
    /// `deletion` entry (`payload`, which should name who asked) in one
    /// transaction: what was deleted and its entry, or `None` if the
    /// session holds no such tool.
    pub fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &Value,
    ) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError> {
        self.flush_stats()?;
        let deleted = self
            .backend
            .delete_session_tool(agent, session, name, payload);
        self.tiers.session_changed(agent, session);
        if let Ok(Some((_, entry))) = &deleted {
            self.tiers.own().mark([entry.seq]);
        }
        deleted
    }

    /// Ends up to `limit` expired sessions, each in its own transaction
    /// that checks it is still expired: when several hosts reap at once,
    /// each session is ended (and its tools audited) once. Returns what
    /// this call ended. Pending uses are written first, so a session this
    /// host used lately is not taken for idle.
    pub fn reap_expired_sessions(&self, limit: usize) -> Result<Vec<EndedSession>, StoreError> {
        self.flush_stats()?;
        let now = now_ms();
        let mut out = Vec::new();
        for (agent, session) in self.backend.expired_sessions(now, limit)? {
            if let Some(ended) =
                self.backend
                    .end_session(&agent, &session, SessionEnd::Expired { now_ms: now })?
            {
                out.push(ended);
            }
        }
        for e in &out {
            self.tiers.session_changed(&e.agent, &e.session);
        }
        Ok(out)
    }

    /// Records a use of (agent, session), written behind with the call
    /// counts (at most once per [`Registry::stats_flush`]; at once with a
    /// zero interval).
    pub fn touch_session(&self, agent: &str, session: &str) -> Result<(), StoreError> {
        self.calls.touch(agent, session)
    }

    /// Records one call of the session tool `name` of (agent, session)
    /// and the session's use, written behind as
    /// [`Registry::record_invocation`] is.
    pub fn record_session_invocation(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        ok: bool,
        latency_us: u64,
    ) -> Result<(), StoreError> {
        self.calls
            .record_session(agent, session, name, ok, latency_us)
    }

    /// The epoch of the session tier of (agent, session): it moves whenever
    /// that tier changes as far as this process knows (a change through
    /// this registry, or one a registry watch read back,
    /// [`Registry::session_changed`]). Read it before the database read
    /// whose result a cache keeps under it.
    pub fn session_epoch(&self, agent: &str, session: &str) -> u64 {
        self.tiers.session_epoch(agent, session)
    }

    /// [`Registry::session_epoch`] while the lease of [`Registry::leased`]
    /// holds, else `None`.
    pub fn leased_session_epoch(&self, agent: &str, session: &str) -> Option<u64> {
        self.leased()
            .then(|| self.tiers.session_epoch(agent, session))
    }

    /// The session tier of (agent, session) changed in a way only an
    /// audit-trail reader knows.
    pub fn session_changed(&self, agent: &str, session: &str) {
        self.tiers.session_changed(agent, session);
    }

    /// Some session tier changed in a way only an audit-trail reader knows,
    /// which it cannot tell: every cached session tier is stale.
    pub fn sessions_changed(&self) {
        self.tiers.sessions_changed();
    }
}
