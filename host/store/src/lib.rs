//! The forge pipeline's persistent store: content-addressed artifacts, the
//! tool registry, per-tool call statistics, and the provenance audit trail.
//!
//! [`Registry`] is the one type the rest of Temper uses. It runs on a
//! [`RegistryBackend`]:
//!
//! - [`SqliteBackend`] (the embedded default, `--store DIR`): a store
//!   directory with `temper.db` and `artifacts/`; see its module docs for
//!   durability and crash safety.
//! - `PostgresBackend` (`--store postgres://…`): one database shared by
//!   several hosts; artifacts live in the database too.
//!
//! Both keep the same schema semantics, each with its own versioned
//! migrations; the store test suite runs against both.
//!
//! # Artifacts
//!
//! An artifact is addressed by the blake3 of its component bytes. The store
//! keeps either those bytes or, when an [`ArtifactCodec`] is attached (the
//! forge attaches its runtime's), a compact record the codec expands back
//! to the same bytes: a forged JavaScript tool is its bytecode and manifest,
//! about a kilobyte, instead of the ~1 MB component. Every read is checked
//! against the id, after expansion. Artifacts are never deleted by the
//! store (several tools may share one); deleting a tool removes its row,
//! stats and latencies only.
//!
//! # Tiers
//!
//! The store keeps the session tier (sessions and their tools, with an idle
//! expiry, so any host on the database serves any session: see
//! [`Registry::add_session_tool`] and the `sessions` module), the
//! agent tier (owned by one agent) and the shared tier (visible to all);
//! [`Registry::register`] refuses [`Tier::Session`], and
//! [`Registry::promote`] moves an agent-tier tool to the shared tier.
//! Authorization (who may promote or delete) is the caller's concern.
//! Changes through [`Registry::register`], [`Registry::promote`] and
//! [`Registry::delete`] append their audit entry in the same transaction.
//!
//! # Statistics
//!
//! Call counts, successes and the latency sum are exact counters over all
//! calls; the p95 latency is exact over the last [`LATENCY_WINDOW`] calls of
//! the tool, whose latencies are kept in a table pruned on every write.
//! Calls are counted in memory and written behind, in batches, at most
//! every [`Registry::stats_flush`] ([`DEFAULT_STATS_FLUSH`]): see
//! [`Registry::record_invocation`] for what that guarantees.

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod audit;
mod backend;
mod behind;
mod error;
mod freshness;
mod location;
mod quotas;
mod search;
mod sessions;
pub use location::{DEFAULT_POSTGRES_PORT, LocationError, PostgresUrl, StoreLocation};
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod stats;
#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use audit::{AuditEntry, AuditKind, AuditReport, GENESIS_HASH};
pub use backend::{ArtifactForm, BackendKind, CallBatch, NewTool, RegistryBackend, ToolScope};
pub use behind::DEFAULT_STATS_FLUSH;
use behind::WriteBehind;
pub use error::{AuditError, StoreError};
#[cfg(feature = "postgres")]
pub use postgres::PostgresBackend;
pub use quotas::{QUOTA_WINDOW_MS, QuotaLease, quota_window};
pub use search::{
    FIELD_WEIGHTS, MAX_SEARCH_LIMIT, MAX_WORKING_SET, SearchDoc, SearchHit, SearchQuery,
    SearchTiers, merge_working_set, name_words, params_text, query_terms,
};
pub use sessions::{
    EndedSession, NewSessionTool, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch,
    now_ms,
};
#[cfg(feature = "sqlite")]
pub use sqlite::{MemoryIndex, SCHEMA_VERSION, SqliteBackend};
pub use stats::{CallCounters, LATENCY_WINDOW, ToolStats};
use temper_runtime::canonical_json::canonical_json;
pub use temper_runtime::id::ArtifactId;

/// Where a tool lives and who sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// One session only (stored with its session, discarded with it).
    Session,
    /// One agent, across its sessions.
    Agent,
    /// Every agent.
    Shared,
}

impl Tier {
    /// The stored name (`session`, `agent`, `shared`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Session => "session",
            Tier::Agent => "agent",
            Tier::Shared => "shared",
        }
    }

    fn parse(s: &str) -> Option<Tier> {
        match s {
            "session" => Some(Tier::Session),
            "agent" => Some(Tier::Agent),
            "shared" => Some(Tier::Shared),
            _ => None,
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A registry row: one forged tool in the agent or shared tier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The tool's name, unique per (tier, owner).
    pub name: String,
    /// The agent that forged it; required for [`Tier::Agent`] (it is the
    /// owner), provenance only for [`Tier::Shared`].
    pub agent_id: Option<String>,
    /// The session it was forged in, if known.
    pub session_id: Option<String>,
    /// Where it lives.
    pub tier: Tier,
    /// Its component artifact; must already be in the store.
    pub artifact: ArtifactId,
    /// Schemas, allowlist, test cases, `sourceBlake3`, optional source.
    pub manifest: Value,
    /// The seq of its registration audit entry; assigned by
    /// [`Registry::register`] (the value passed in is ignored).
    pub created_seq: i64,
}

/// Tuning for [`Registry::open_with`].
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// How long a writer waits for another's lock before failing with
    /// `SQLITE_BUSY`. Default 10 s.
    pub busy_timeout: Duration,
    /// Temp artifact files at least this old are deleted on open. Default
    /// 15 minutes; a younger one may be a live writer's in another process.
    pub stale_temp_age: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            busy_timeout: Duration::from_secs(10),
            stale_temp_age: Duration::from_secs(15 * 60),
        }
    }
}

pub use temper_runtime::ArtifactCodec;

/// An artifact as [`Registry::get_stored`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredArtifact {
    /// The component's bytes, checked against the id.
    Wasm(Vec<u8>),
    /// A compact record, not yet expanded (so not yet checked).
    Compact(Vec<u8>),
}

/// `bytes` (an expanded compact record) if they hash to `id`, else
/// [`StoreError::Corrupt`].
pub fn check_expanded(id: &ArtifactId, bytes: Vec<u8>) -> Result<Vec<u8>, StoreError> {
    let actual = ArtifactId::of(&bytes);
    if &actual != id {
        return Err(StoreError::Corrupt {
            op: "get_artifact",
            id: id.clone(),
            actual: actual.to_string(),
        });
    }
    Ok(bytes)
}

/// An open store: a [`RegistryBackend`] and the rules every backend shares.
/// `Send + Sync`; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Registry {
    backend: Arc<dyn RegistryBackend>,
    /// Call counts not yet written, and their flusher.
    calls: Arc<WriteBehind>,
    /// How current cached entries are ([`Registry::leased`]).
    tiers: freshness::TierClock,
    codec: OnceLock<Arc<dyn ArtifactCodec>>,
    removed_temp_files: usize,
}

/// The registration entry's payload for `record` (manifest as stored).
fn registration_payload(record: &ToolRecord, manifest: &str) -> Value {
    serde_json::json!({
        "tier": record.tier.as_str(),
        "artifact": record.artifact.as_str(),
        "session_id": record.session_id,
        "manifest_blake3": blake3::hash(manifest.as_bytes()).to_hex().as_str(),
        "source_blake3": record.manifest.get("sourceBlake3"),
    })
}

/// The `deletion` entry's payload for the deleted `record`.
pub(crate) fn deletion_payload(record: &ToolRecord) -> Value {
    serde_json::json!({
        "tier": record.tier.as_str(),
        "owner": if record.tier == Tier::Agent { record.agent_id.as_deref() } else { None },
        "artifact": record.artifact.as_str(),
        "created_seq": record.created_seq,
    })
}

/// The `promotion` entry's payload for `record`, moved to the shared tier.
pub(crate) fn promotion_payload(record: &ToolRecord) -> Value {
    serde_json::json!({
        "from": "agent",
        "to": "shared",
        "artifact": record.artifact.as_str(),
        "created_seq": record.created_seq,
    })
}

impl Registry {
    /// Opens (creating if needed) the SQLite store in `dir` with default
    /// [`RegistryOptions`] (feature `sqlite`).
    #[cfg(feature = "sqlite")]
    pub fn open(dir: &Path) -> Result<Registry, StoreError> {
        Registry::open_with(dir, RegistryOptions::default())
    }

    /// [`Registry::open`] with explicit options.
    #[cfg(feature = "sqlite")]
    pub fn open_with(dir: &Path, options: RegistryOptions) -> Result<Registry, StoreError> {
        let backend = SqliteBackend::open(dir, options)?;
        let removed_temp_files = backend.removed_temp_files();
        let mut registry = Registry::with_backend(Arc::new(backend));
        registry.removed_temp_files = removed_temp_files;
        Ok(registry)
    }

    /// A registry on any backend.
    pub fn with_backend(backend: Arc<dyn RegistryBackend>) -> Registry {
        Registry {
            calls: WriteBehind::new(backend.clone()),
            tiers: freshness::TierClock::new(),
            backend,
            codec: OnceLock::new(),
            removed_temp_files: 0,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &dyn RegistryBackend {
        &*self.backend
    }

    /// Where the store is: its directory, or its database URL without the
    /// password.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// How many stale temp artifact files opening a SQLite store deleted.
    pub fn removed_temp_files(&self) -> usize {
        self.removed_temp_files
    }

    /// Attaches the codec that compacts artifacts on
    /// [`Registry::put_artifact`] and expands them on
    /// [`Registry::get_artifact`]. The first codec attached stays; returns
    /// whether this one was.
    pub fn attach_codec(&self, codec: Arc<dyn ArtifactCodec>) -> bool {
        self.codec.set(codec).is_ok()
    }

    // ---- artifacts -------------------------------------------------------

    /// Stores `bytes` under their blake3 and returns the id once they are
    /// durable: as a compact record when the attached codec can make one,
    /// else as they are. Idempotent; a corrupt stored copy is replaced.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<ArtifactId, StoreError> {
        let id = ArtifactId::of(bytes);
        if let Some(compact) = self.codec.get().and_then(|c| c.compact(&id, bytes)) {
            self.backend
                .put_blob(&id, ArtifactForm::Compact, &compact)?;
        } else {
            self.backend.put_blob(&id, ArtifactForm::Wasm, bytes)?;
        }
        Ok(id)
    }

    /// Reads an artifact and verifies its blake3 (after expanding a compact
    /// record through the attached codec); bytes that do not hash to `id`
    /// give [`StoreError::Corrupt`].
    pub fn get_artifact(&self, id: &ArtifactId) -> Result<Vec<u8>, StoreError> {
        const OP: &str = "get_artifact";
        match self.get_stored(id)? {
            StoredArtifact::Wasm(bytes) => Ok(bytes),
            StoredArtifact::Compact(compact) => {
                let codec = self.codec.get().ok_or_else(|| StoreError::NoCodec {
                    op: OP,
                    id: id.clone(),
                })?;
                let bytes = codec
                    .expand(&compact)
                    .map_err(|detail| StoreError::Compact {
                        op: OP,
                        id: id.clone(),
                        detail,
                    })?;
                check_expanded(id, bytes)
            }
        }
    }

    /// The artifact `id` as stored: its bytes (verified), or its compact
    /// record for the caller to expand (then [`check_expanded`]).
    pub fn get_stored(&self, id: &ArtifactId) -> Result<StoredArtifact, StoreError> {
        if let Some(bytes) = self.backend.get_blob(id, ArtifactForm::Wasm)? {
            return Ok(StoredArtifact::Wasm(bytes));
        }
        match self.backend.get_blob(id, ArtifactForm::Compact)? {
            Some(compact) => Ok(StoredArtifact::Compact(compact)),
            None => Err(StoreError::MissingArtifact {
                op: "get_artifact",
                id: id.clone(),
            }),
        }
    }

    /// The compact record of artifact `id`, if it is stored as one (not
    /// verified: expand it and check the hash, or use
    /// [`Registry::get_artifact`]).
    pub fn get_compact(&self, id: &ArtifactId) -> Result<Option<Vec<u8>>, StoreError> {
        self.backend.get_blob(id, ArtifactForm::Compact)
    }

    /// Whether the artifact `id` is stored in any form (content not
    /// checked). A database that cannot answer is an error, not a "no".
    pub fn has_artifact(&self, id: &ArtifactId) -> Result<bool, StoreError> {
        for form in [ArtifactForm::Wasm, ArtifactForm::Compact] {
            if self.backend.has_blob(id, form)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The ids of all stored artifacts, sorted.
    pub fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.backend.artifact_ids()
    }

    // ---- registry --------------------------------------------------------

    /// Registers a tool in the agent or shared tier and appends a
    /// `registration` audit entry in the same transaction; returns the stored
    /// record with `created_seq` set to that entry's seq.
    ///
    /// The artifact must already be in the store ([`Registry::put_artifact`]):
    /// it is checked and made durable before the row is inserted. Fails with
    /// [`StoreError::Conflict`] if (tier, owner, name) exists, and with
    /// [`StoreError::Invalid`] for [`Tier::Session`] or an agent-tier record
    /// without `agent_id`.
    pub fn register(&self, record: ToolRecord) -> Result<ToolRecord, StoreError> {
        self.register_with(record, None, None, None)
    }

    /// [`Registry::register`] for a tool promoted from the session tier: a
    /// `promotion` audit entry with `payload` (the panel's verdicts) is
    /// appended in the same transaction, before the registration entry, so
    /// the trail never shows one without the other.
    /// The tool's calls so far (`carried`: its session-tier counters) become
    /// its first statistics here, in the same transaction.
    pub fn register_promoted(
        &self,
        record: ToolRecord,
        payload: &Value,
        carried: &CallCounters,
    ) -> Result<ToolRecord, StoreError> {
        self.register_with(
            record,
            Some((AuditKind::Promotion, payload)),
            Some(carried),
            None,
        )
    }

    /// [`Registry::register_promoted`] for a tool of the stored session
    /// tier: the session tool `record.name` of (`record.agent_id`,
    /// `session`) leaves that tier in the same transaction, and its stored
    /// calls (this registry's flushed first) become the agent-tier tool's
    /// first statistics. [`StoreError::NotFound`] if the session tool is
    /// gone (promoted, or its session ended, elsewhere meanwhile).
    pub fn promote_from_session(
        &self,
        record: ToolRecord,
        payload: &Value,
        session: &str,
    ) -> Result<ToolRecord, StoreError> {
        let agent = record.agent_id.clone().unwrap_or_default();
        let promoted = self.register_with(
            record,
            Some((AuditKind::Promotion, payload)),
            None,
            Some((&agent, session)),
        );
        self.tiers.session_changed(&agent, session);
        promoted
    }

    /// [`Registry::register`] with an audit entry of `kind` and `payload` (for
    /// example the forge decision of an imported tool) appended in the same
    /// transaction, before the registration entry.
    pub fn register_with_entry(
        &self,
        record: ToolRecord,
        kind: AuditKind,
        payload: &Value,
    ) -> Result<ToolRecord, StoreError> {
        self.register_with(record, Some((kind, payload)), None, None)
    }

    fn register_with(
        &self,
        record: ToolRecord,
        first: Option<(AuditKind, &Value)>,
        carried: Option<&CallCounters>,
        from_session: Option<(&str, &str)>,
    ) -> Result<ToolRecord, StoreError> {
        let owner = backend::owner_of("register", &record)?;
        let first_appended = first.is_some();
        self.flush_stats()?;
        let manifest = canonical_json(&record.manifest);
        let registration = registration_payload(&record, &manifest);
        let created_seq = self.backend.register(NewTool {
            record: &record,
            owner: &owner,
            manifest: &manifest,
            first,
            registration: &registration,
            carried,
            from_session,
        });
        // A new agent-tier tool may shadow a shared one: the name's epoch
        // moves with the tier's.
        let shared = record.tier == Tier::Shared;
        self.tiers
            .tool_changed(&record.name, (!shared).then_some(owner.as_str()));
        let created_seq = created_seq?;
        // The entries this change appended, in one transaction: the
        // registration and the one before it, if any.
        let first_seq = if first_appended {
            created_seq - 1
        } else {
            created_seq
        };
        self.tiers.own().mark(first_seq..=created_seq);
        Ok(ToolRecord {
            created_seq,
            ..record
        })
    }

    /// The agent-tier tools owned by `agent`, by name.
    pub fn tools_for_agent(&self, agent: &str) -> Result<Vec<ToolRecord>, StoreError> {
        self.backend.tools(ToolScope::Agent(agent))
    }

    /// How many agent-tier tools `agent` owns.
    pub fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        self.backend.agent_tool_count(agent)
    }

    /// The shared-tier tools, by name.
    pub fn shared_tools(&self) -> Result<Vec<ToolRecord>, StoreError> {
        self.backend.tools(ToolScope::Shared)
    }

    /// The tool `name` as `agent` sees it: the agent's own agent-tier tool if
    /// there is one, else the shared tool, else `None`.
    pub fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        self.backend.get(name, agent)
    }

    /// Deletes the tool [`Registry::get`] would return (with its stats) and
    /// appends a `deletion` audit entry by `agent` in the same transaction;
    /// returns the deleted record. The artifact is kept.
    pub fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        self.flush_stats()?;
        let deleted = self.backend.delete(name, agent);
        match &deleted {
            Ok(r) => self.tiers.tool_changed(
                name,
                (r.tier != Tier::Shared).then(|| r.agent_id.as_deref().unwrap_or(agent)),
            ),
            Err(_) => self.tiers.changed(),
        }
        deleted
    }

    /// Moves `agent`'s agent-tier tool `name` to `to_tier` (only
    /// [`Tier::Shared`] is a promotion the store holds) and appends a
    /// `promotion` audit entry in the same transaction. Its stats move with
    /// it. Fails with [`StoreError::Conflict`] if a shared tool of that name
    /// exists. Record the approval first with [`Registry::append_audit`].
    pub fn promote(
        &self,
        name: &str,
        agent: &str,
        to_tier: Tier,
    ) -> Result<ToolRecord, StoreError> {
        check_promotion(to_tier)?;
        self.flush_stats()?;
        let promoted = self.backend.promote(name, agent, None);
        self.tiers.tool_changed(name, Some(agent));
        self.tiers.tool_changed(name, None);
        promoted
    }

    /// Records a human approval (`approval` audit entry with `payload`) and
    /// promotes `agent`'s tool `name` to the shared tier, in one
    /// transaction: an approval without its promotion (or the reverse) is
    /// never committed.
    pub fn approve_and_promote(
        &self,
        name: &str,
        agent: &str,
        payload: &Value,
    ) -> Result<ToolRecord, StoreError> {
        self.flush_stats()?;
        let promoted = self.backend.promote(name, agent, Some(payload));
        self.tiers.tool_changed(name, Some(agent));
        self.tiers.tool_changed(name, None);
        promoted
    }

    /// Records one call of the tool `name` as `agent` sees it (see
    /// [`Registry::get`]). Failure details belong in an `invocation_failure`
    /// audit entry ([`Registry::append_audit`]).
    ///
    /// The call is counted in memory and written behind: a flusher thread
    /// adds the calls counted since its last write to the database in one
    /// transaction, every [`Registry::stats_flush`]. So:
    /// - this never waits on the database (unless the interval is zero:
    ///   then the call is written at once, and errors are returned);
    /// - [`Registry::stats`], [`Registry::delete`], the promotions and
    ///   registrations flush first: this registry's reads and changes see
    ///   every call counted here;
    /// - [`Registry::flush_stats`] and dropping the registry write what is
    ///   pending (a clean shutdown loses nothing); a crash loses at most
    ///   the calls of one interval, plus those of a write in progress (one
    ///   write's duration);
    /// - a call whose tool is gone when the batch is written (deleted by
    ///   another host meanwhile) is dropped with the tool's stats.
    pub fn record_invocation(
        &self,
        name: &str,
        agent: &str,
        ok: bool,
        latency_us: u64,
    ) -> Result<(), StoreError> {
        self.calls.record(name, agent, ok, latency_us)
    }

    /// Writes every call counted in memory to the database now (see
    /// [`Registry::record_invocation`]). On an error the counts are kept
    /// for the next flush.
    pub fn flush_stats(&self) -> Result<(), StoreError> {
        self.calls.flush()
    }

    /// Audits a failed call of `name` by `agent` without flooding the
    /// trail: per tool, the first failure in a window (one
    /// [`Registry::stats_flush`] interval) is appended now as an
    /// `invocation_failure` entry with `payload`; later failures in the
    /// window are counted by `kind` and appended as one summary entry
    /// (`{"failures": N, "kinds": {kind: n}, "window_ms": ms}`) when the
    /// window closes (at the next flush after it, at
    /// [`Registry::close_failure_windows`] or when the registry is
    /// dropped). The stats count every failure exactly either way; a zero
    /// interval audits each one.
    pub fn record_failure(
        &self,
        name: &str,
        agent: &str,
        kind: &str,
        payload: &Value,
    ) -> Result<(), StoreError> {
        self.calls.record_failure(name, agent, kind, payload)
    }

    /// Closes every open failure window now, appending the summaries of
    /// those that counted later failures (a clean shutdown calls this).
    pub fn close_failure_windows(&self) -> Result<(), StoreError> {
        self.calls.close_windows(true)
    }

    /// Sets how often counted calls are written
    /// ([`DEFAULT_STATS_FLUSH`] until set). Zero writes every call at once,
    /// on the caller's thread.
    pub fn set_stats_flush(&self, interval: Duration) {
        self.calls.set_interval(interval);
    }

    /// How often counted calls are written.
    pub fn stats_flush(&self) -> Duration {
        self.calls.interval()
    }

    /// Call statistics of the tool `name` as `agent` sees it, this
    /// registry's unflushed calls included (they are flushed first).
    pub fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        self.flush_stats()?;
        self.backend.stats(name, agent)
    }

    // ---- how current cached entries are (see `freshness`) ---------------

    /// The epoch of what tool `name` resolves to, in any agent's view: it
    /// moves whenever a tool of that name is registered, deleted or
    /// promoted, as far as this process knows (through this registry, or
    /// read back by a registry watch, [`Registry::tool_changed`]). Read it
    /// *before* the database read whose result a cache keeps under it.
    pub fn name_epoch(&self, name: &str) -> u64 {
        self.tiers.name_epoch(name)
    }

    /// The epoch of `agent`'s listing (its agent tier and the shared
    /// tier), read as [`Registry::name_epoch`] is.
    pub fn listing_epoch(&self, agent: &str) -> u64 {
        self.tiers.listing_epoch(agent)
    }

    /// Whether cached entries may be used now: while the lease a registry
    /// watch renews holds ([`Registry::trail_read`]); otherwise (no watch,
    /// or its reads failed or lag) resolve against the database. An entry
    /// cached under an epoch other than the current one is stale.
    ///
    /// The bound this gives: a change committed on another host at time T
    /// is seen by the first read of the trail that starts after T, and a
    /// lease ends one poll interval after the start of the read that
    /// renewed it; so no entry used here after T + the poll interval
    /// predates the change (calls that used it before run to their end).
    pub fn leased(&self) -> bool {
        self.tiers.leased()
    }

    /// [`Registry::name_epoch`] while [`Registry::leased`], else `None`.
    pub fn leased_name_epoch(&self, name: &str) -> Option<u64> {
        self.leased().then(|| self.tiers.name_epoch(name))
    }

    /// [`Registry::listing_epoch`] while [`Registry::leased`], else `None`.
    pub fn leased_listing_epoch(&self, agent: &str) -> Option<u64> {
        self.leased().then(|| self.tiers.listing_epoch(agent))
    }

    /// The agent or shared tier changed in a way only an audit-trail
    /// reader knows and whose scope it cannot tell: every cached name and
    /// listing is stale.
    pub fn tiers_changed(&self) {
        self.tiers.changed();
    }

    /// Tool `name` changed in `agent`'s tier (`Some`) or the shared tier
    /// (`None`), as an audit-trail reader learned: the name's epoch and the
    /// listings it is in move.
    pub fn tool_changed(&self, name: &str, agent: Option<&str>) {
        self.tiers.tool_changed(name, agent);
    }

    /// Whether the audit entry `seq` records a change this process made
    /// (its epochs moved when it was made): a registry watch reading it
    /// back leaves them alone. Each seq answers `true` once.
    pub fn is_own_entry(&self, seq: i64) -> bool {
        self.tiers.own().take(seq)
    }

    /// A registry watch that reads the audit trail every `every` completed
    /// a read that started at `started`, having reported what it found
    /// through [`Registry::tool_changed`] and the like: cached entries may
    /// be used until `started + every` (see [`Registry::leased`]).
    pub fn trail_read(&self, started: std::time::Instant, every: Duration) {
        self.tiers.trail_read(started, every);
    }

    // ---- audit trail -----------------------------------------------------

    /// Appends an entry to the audit trail in its own transaction and returns
    /// it. (Registrations, promotions and deletions append theirs in the
    /// transaction of the change.)
    pub fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError> {
        self.backend.append_audit(kind, subject, agent, payload)
    }

    /// Up to `limit` audit entries with `seq > after_seq`, in order.
    pub fn audit_entries(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        self.backend.audit_entries(after_seq, limit)
    }

    /// The seq of the audit chain's last entry (0 when empty): where a
    /// reader that wants only what comes next starts.
    pub fn audit_head_seq(&self) -> Result<i64, StoreError> {
        self.backend.audit_head_seq()
    }

    /// Verifies the whole audit chain against the head record, in one read
    /// snapshot. Detects an edited entry (any field), a removed or reordered
    /// entry, and a truncated tail; the error names the seq where it breaks.
    pub fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        self.backend.verify_audit()
    }
}

impl Drop for Registry {
    /// Stops the stats flusher and writes the calls still pending.
    fn drop(&mut self) {
        self.calls.shutdown();
    }
}

fn check_promotion(to_tier: Tier) -> Result<(), StoreError> {
    if to_tier == Tier::Shared {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            op: "promote",
            detail: format!(
                "can only promote an agent-tier tool to the shared tier, not to {to_tier}"
            ),
        })
    }
}
