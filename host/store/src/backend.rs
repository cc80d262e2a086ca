//! The registry backend trait: what a database behind a [`Registry`] must
//! do, and the one place where the two implementations (SQLite, the
//! embedded default, and PostgreSQL, shared by several hosts) meet.
//!
//! The [`Registry`] façade owns the rules that do not depend on the
//! database: which tier needs an owner, what the registration entry says,
//! how an artifact's bytes are checked against its id and how a compact form
//! is expanded. A backend owns transactions: every method that changes
//! rows and appends audit entries does both in one transaction, and the
//! audit chain's head is read and moved under a lock that serializes
//! appends from every connection (and every host) on that database.
//!
//! [`Registry`]: super::Registry

use serde_json::Value;

use super::audit::{AuditEntry, AuditKind, AuditReport};
use super::error::{AuditError, StoreError};
use super::search::{SearchHit, SearchQuery};
use super::sessions::{
    EndedSession, NewSessionTool, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch,
};
use super::stats::{CallCounters, ToolStats};
use super::{Tier, ToolRecord};
use temper_runtime::id::ArtifactId;

/// Which database a backend runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// A store directory: `temper.db` (SQLite) and `artifacts/`.
    Sqlite,
    /// A PostgreSQL database, shared by any number of hosts.
    Postgres,
}

impl BackendKind {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
        }
    }
}

/// The form in which an artifact's bytes are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArtifactForm {
    /// The self-contained component, exactly the bytes its id hashes.
    Wasm,
    /// A compact record (bytecode + manifest) from which an
    /// [`ArtifactCodec`](super::ArtifactCodec) rebuilds the component byte
    /// for byte; the id is still the blake3 of the rebuilt bytes.
    Compact,
}

impl ArtifactForm {
    /// `wasm` or `compact`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactForm::Wasm => "wasm",
            ArtifactForm::Compact => "compact",
        }
    }
}

/// What [`RegistryBackend::register`] inserts, prepared by the façade.
#[derive(Debug, Clone, Copy)]
pub struct NewTool<'a> {
    /// The record; its `created_seq` is ignored.
    pub record: &'a ToolRecord,
    /// The owning agent for [`Tier::Agent`], `""` for [`Tier::Shared`].
    pub owner: &'a str,
    /// The manifest as canonical JSON (what is stored).
    pub manifest: &'a str,
    /// An entry appended before the registration entry (a promotion from a
    /// session, an import's forge decision), in the same transaction.
    pub first: Option<(AuditKind, &'a Value)>,
    /// The registration entry's payload.
    pub registration: &'a Value,
    /// Counters the tool brings with it (its session-tier calls), written
    /// as its first statistics in the same transaction.
    pub carried: Option<&'a CallCounters>,
    /// A promotion from the session tier: (agent, session) whose tool of
    /// the same name leaves it in the same transaction, its stored counters
    /// added to `carried`; [`StoreError::NotFound`] if it is gone (promoted
    /// or ended on another host meanwhile).
    pub from_session: Option<(&'a str, &'a str)>,
}

/// Calls of one tool counted in memory since the last flush: what
/// [`RegistryBackend::record_calls`] adds to the tool's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct CallBatch {
    /// The tool's name, resolved as `agent` sees it when flushed.
    pub name: String,
    /// The calling agent.
    pub agent: String,
    /// The session, for a session-tier tool (then `name` is looked up in
    /// that session only).
    pub session: Option<String>,
    /// The calls: counts and latency sum to add, and up to
    /// [`LATENCY_WINDOW`](super::LATENCY_WINDOW) latencies, oldest first.
    pub counters: CallCounters,
}

/// Which tools [`RegistryBackend::tools`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolScope<'a> {
    /// The agent-tier tools owned by this agent.
    Agent(&'a str),
    /// The shared-tier tools.
    Shared,
}

/// A registry database. Implementations are `Send + Sync` and synchronous:
/// they are called from async code the way file I/O is, and each call is
/// one short transaction.
///
/// Contract (the store test suite runs against every implementation):
/// - name uniqueness per (tier, owner) holds under concurrent writers:
///   the loser of a race gets [`StoreError::Conflict`];
/// - changes and their audit entries commit together or not at all;
/// - audit appends are serialized across all connections to the database,
///   so the chain has no gap and no fork;
/// - [`RegistryBackend::put_blob`] returns once the bytes are durable, and
///   [`RegistryBackend::register`] refuses a record whose artifact is in
///   no form ([`StoreError::MissingArtifact`]).
pub trait RegistryBackend: Send + Sync + std::fmt::Debug {
    /// Which database this is.
    fn kind(&self) -> BackendKind;

    /// Where it is, for messages: the store directory, or the database URL
    /// without its password.
    fn location(&self) -> String;

    /// Stores `bytes` as the `form` of artifact `id`, durably. Idempotent;
    /// a different blob already stored under (id, form) is replaced (the
    /// façade has checked that these bytes belong to `id`).
    fn put_blob(&self, id: &ArtifactId, form: ArtifactForm, bytes: &[u8])
    -> Result<(), StoreError>;

    /// The `form` of artifact `id`, or `None` if not stored in that form.
    /// A [`ArtifactForm::Wasm`] blob that does not hash to `id` is
    /// [`StoreError::Corrupt`].
    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError>;

    /// Whether artifact `id` is stored in `form` (content not checked).
    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError>;

    /// The ids of all stored artifacts (any form), sorted, without duplicates.
    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError>;

    /// Inserts a tool row and its audit entries in one transaction; returns
    /// the registration entry's seq (the record's `created_seq`).
    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError>;

    /// The tools in `scope`, by name.
    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError>;

    /// How many agent-tier tools `agent` owns.
    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError>;

    /// The tool `name` as `agent` sees it: its own agent-tier tool first,
    /// else the shared one.
    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError>;

    /// Deletes the tool [`RegistryBackend::get`] would return, with its
    /// stats, and appends a `deletion` entry
    /// (`deletion_payload`) in the same transaction.
    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError>;

    /// Moves `agent`'s agent-tier tool `name` to the shared tier with its
    /// stats, appending an `approval` entry with `approval` (if given) and
    /// the `promotion` entry (`promotion_payload`) in the same
    /// transaction. [`StoreError::Conflict`] if a shared tool of that name
    /// exists.
    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError>;

    /// Adds a batch of calls counted in memory (see [`CallBatch`]) to the
    /// tools' statistics, all in one transaction; returns how many entries
    /// named a tool that no longer exists (their calls are dropped, as the
    /// tool's stats went with it).
    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError>;

    /// Call statistics of the tool `name` as `agent` sees it, counters and
    /// latencies from one snapshot.
    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError>;

    /// Appends an audit entry in its own transaction.
    fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError>;

    /// Up to `limit` entries with `seq > after_seq`, in order.
    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;

    /// The seq of the chain's last entry (0 when empty), from the head
    /// record.
    fn audit_head_seq(&self) -> Result<i64, StoreError>;

    /// Verifies the whole chain against the head record in one snapshot
    /// (through the shared chain verifier in `store::audit`).
    fn verify_audit(&self) -> Result<AuditReport, AuditError>;

    // ---- the session tier (see `store::sessions`) ----

    /// Stores `session` unless (agent, session) is stored already; returns
    /// what is stored (the caller checks its owner).
    fn open_session(&self, session: &SessionRecord) -> Result<SessionRecord, StoreError>;

    /// The session (agent, session), if stored.
    fn session(&self, agent: &str, session: &str) -> Result<Option<SessionRecord>, StoreError>;

    /// The tools of (agent, session), by name.
    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<SessionToolRecord>, StoreError>;

    /// In one transaction: stores the session if it is not (else moves its
    /// last use), refuses a full session ([`StoreError::SessionFull`]) or a
    /// taken name ([`StoreError::Conflict`], tier `session`), inserts the
    /// tool and appends its `forge_decision` entry; returns that entry's
    /// seq.
    fn add_session_tool(&self, new: NewSessionTool<'_>) -> Result<i64, StoreError>;

    /// In one transaction: deletes the session and its tools and appends a
    /// `deletion` entry per tool; `None` if there was nothing to end (or,
    /// for [`SessionEnd::Expired`], if it is not expired any more).
    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: SessionEnd,
    ) -> Result<Option<EndedSession>, StoreError>;

    /// In one transaction: deletes the session tool `name` of (agent,
    /// session) and appends its `deletion` entry (`payload`); `None` (and
    /// nothing appended) if there is no such tool.
    fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &Value,
    ) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError>;

    /// Up to `limit` sessions expired at `now_ms`, as (agent, session).
    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Moves the sessions' last uses forward (never back), in one
    /// transaction.
    fn touch_sessions(&self, touches: &[SessionTouch]) -> Result<(), StoreError>;

    // ---- shared call quotas (see `store::quotas`) ----

    /// In one statement: takes up to `lease.want` calls of the key's
    /// window within `lease.limit` and returns how many were granted; the
    /// key's older windows are deleted when its window's first lease is
    /// taken.
    fn lease_quota(&self, lease: &crate::QuotaLease) -> Result<u32, StoreError>;

    // ---- the search index (see `store::search`) ----

    /// Up to `fetch` indexed tools matching any of `terms` (ASCII letters
    /// and digits only, at least one) that `query`'s agent may see in its
    /// session and tiers, best first; a name may come once per tier.
    fn search(
        &self,
        query: &SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<SearchHit>, StoreError>;

    /// The working set of (agent, session), most recent first; empty when
    /// the session is not stored.
    fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError>;

    /// In one transaction: stores `session` if it is not, and puts `names`
    /// at the front of its working set (`search::merge_working_set`, at
    /// most `cap`); returns the new set.
    fn add_to_working_set(
        &self,
        session: &SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// Up to `limit` agent-tier tools of `agent` and shared tools with
    /// calls, most called first (then by name).
    fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError>;
}

/// The owner column of a record: the agent for [`Tier::Agent`], `""` for
/// [`Tier::Shared`]; session-tier records and agent-tier records without
/// an agent are refused.
pub(crate) fn owner_of(op: &'static str, record: &ToolRecord) -> Result<String, StoreError> {
    match (record.tier, &record.agent_id) {
        (Tier::Session, _) => Err(StoreError::Invalid {
            op,
            detail: "session-tier tools are stored with Registry::add_session_tool, not registered"
                .into(),
        }),
        (Tier::Agent, Some(agent)) => Ok(agent.clone()),
        (Tier::Agent, None) => Err(StoreError::Invalid {
            op,
            detail: format!("agent-tier tool {:?} needs an agent_id", record.name),
        }),
        (Tier::Shared, _) => Ok(String::new()),
    }
}
