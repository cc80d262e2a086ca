//! The forge pipeline's persistent store: content-addressed artifacts, the
//! tool registry, per-tool call statistics, and the provenance audit trail.
//!
//! Layout of a store directory:
//!
//! - `temper.db`: SQLite metadata (registry, stats, audit trail, head
//!   record), schema versioned by `PRAGMA user_version` (see [`SCHEMA_VERSION`]).
//! - `artifacts/<blake3-hex>.wasm`: artifact files, written atomically
//!   (temp file in the same directory, write, fsync, rename, fsync directory).
//!
//! # Durability and crash safety
//!
//! - SQLite runs in WAL mode with `synchronous=FULL`: every commit fsyncs the
//!   WAL, so a committed registry row or audit entry survives power loss, not
//!   just a process crash. (`NORMAL` with WAL stays consistent but may drop
//!   the last commits on power loss; the audit head hash handed to callers
//!   must not be rolled back, so FULL is chosen.) A killed process leaves
//!   either a committed or a rolled-back transaction.
//! - A busy timeout (default 10 s, [`RegistryOptions::busy_timeout`]) lets many
//!   threads and processes share one store; every writing transaction is
//!   `BEGIN IMMEDIATE`, so writers queue on the lock instead of failing on a
//!   read-to-write upgrade.
//! - [`Registry::register`] first checks that the artifact file exists, hashes
//!   to its id, and is fsynced (file and directory), and only then inserts
//!   the row, so no registry row can point at a missing artifact.
//! - Changes through [`Registry::register`], [`Registry::promote`] and
//!   [`Registry::delete`] append their audit entry in the same transaction.
//! - A crash mid-write can leave `.tmp-*.partial` files in `artifacts/`;
//!   their names never parse as an [`ArtifactId`], so they are never served.
//!   [`Registry::open`] deletes those older than [`RegistryOptions::stale_temp_age`]
//!   (younger ones may belong to a live writer in another process).
//! - Artifact files are never deleted by the store (several tools may share
//!   one); deleting a tool removes its row, stats and latencies only.
//!
//! # Tiers
//!
//! Session-tier tools live in memory in the engine and are not persisted
//! here: [`Registry::register`] refuses [`Tier::Session`]. The store keeps the
//! agent tier (owned by one agent) and the shared tier (visible to all), and
//! [`Registry::promote`] moves an agent-tier tool to the shared tier.
//! Authorization (who may promote or delete) is the caller's concern.
//!
//! # Statistics
//!
//! Call counts, successes and the latency sum are exact counters over all
//! calls; the p95 latency is exact over the last [`LATENCY_WINDOW`] calls of
//! the tool, whose latencies are kept in a table pruned on every insert.

mod artifacts;
mod audit;
mod error;
mod schema;
mod stats;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical_json::canonical_json;
pub use crate::id::ArtifactId;
pub use audit::{AuditEntry, AuditKind, AuditReport, GENESIS_HASH};
pub use error::{AuditError, StoreError};
pub use schema::SCHEMA_VERSION;
pub use stats::{CallCounters, LATENCY_WINDOW, ToolStats};

/// Where a tool lives and who sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// One session only; kept in memory by the engine, never in the store.
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

/// An open store. `Send + Sync`: one connection behind a mutex; for parallel
/// writers open one `Registry` per thread or process (SQLite serializes them).
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    artifacts: artifacts::ArtifactDir,
    conn: Mutex<Connection>,
    removed_temp_files: usize,
}

const TOOL_COLUMNS: &str = "id, name, agent_id, session_id, tier, artifact, manifest, created_seq";

/// Selects the tool `name` that `agent` sees: its own agent-tier tool first,
/// else the shared one.
const RESOLVE: &str = "SELECT id, name, agent_id, session_id, tier, artifact, manifest, created_seq
     FROM tools
     WHERE name = ?1 AND ((tier = 'agent' AND owner = ?2) OR (tier = 'shared' AND owner = ''))
     ORDER BY CASE tier WHEN 'agent' THEN 0 ELSE 1 END
     LIMIT 1";

struct Row {
    id: i64,
    name: String,
    agent_id: Option<String>,
    session_id: Option<String>,
    tier: String,
    artifact: String,
    manifest: String,
    created_seq: i64,
}

fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        name: r.get(1)?,
        agent_id: r.get(2)?,
        session_id: r.get(3)?,
        tier: r.get(4)?,
        artifact: r.get(5)?,
        manifest: r.get(6)?,
        created_seq: r.get(7)?,
    })
}

impl Row {
    fn into_record(self, op: &'static str) -> Result<ToolRecord, StoreError> {
        let tier = Tier::parse(&self.tier).ok_or_else(|| StoreError::Invalid {
            op,
            detail: format!("tool {:?} has unknown tier {:?}", self.name, self.tier),
        })?;
        Ok(ToolRecord {
            name: self.name,
            agent_id: self.agent_id,
            session_id: self.session_id,
            tier,
            artifact: ArtifactId::from_hex(&self.artifact)?,
            manifest: serde_json::from_str(&self.manifest)
                .map_err(|source| StoreError::Json { op, source })?,
            created_seq: self.created_seq,
        })
    }
}

fn resolve(
    conn: &Connection,
    op: &'static str,
    name: &str,
    agent: &str,
) -> Result<Option<Row>, StoreError> {
    conn.query_row(RESOLVE, params![name, agent], row_from)
        .optional()
        .map_err(StoreError::sqlite(op))
}

fn not_found(op: &'static str, name: &str, agent: &str) -> StoreError {
    StoreError::NotFound {
        op,
        name: name.to_owned(),
        agent: agent.to_owned(),
    }
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
    )
}

/// Switches the database to WAL, retrying while another connection holds
/// the lock (the switch can return `SQLITE_BUSY` without waiting).
fn enable_wal(conn: &Connection, timeout: Duration) -> Result<(), StoreError> {
    let start = Instant::now();
    loop {
        let mode: rusqlite::Result<String> =
            conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0));
        match mode {
            Ok(m) if m.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(m) => {
                return Err(StoreError::Invalid {
                    op: "open",
                    detail: format!("cannot enable WAL journal mode (got {m:?})"),
                });
            }
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::DatabaseBusy && start.elapsed() < timeout =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(StoreError::sqlite("open")(e)),
        }
    }
}

impl Registry {
    /// Opens (creating if needed) the store in `dir` with default
    /// [`RegistryOptions`]: creates `dir/artifacts`, opens `dir/temper.db` in WAL
    /// mode with `synchronous=FULL` and a busy timeout, runs pending
    /// migrations, and deletes stale temp artifact files.
    pub fn open(dir: &Path) -> Result<Registry, StoreError> {
        Registry::open_with(dir, RegistryOptions::default())
    }

    /// [`Registry::open`] with explicit options.
    pub fn open_with(dir: &Path, options: RegistryOptions) -> Result<Registry, StoreError> {
        const OP: &str = "open";
        std::fs::create_dir_all(dir).map_err(StoreError::io(OP, dir))?;
        let artifacts = artifacts::ArtifactDir::open(dir.join("artifacts"))?;
        let removed_temp_files = artifacts.remove_stale_temps(options.stale_temp_age)?;
        let mut conn = Connection::open(dir.join("temper.db")).map_err(StoreError::sqlite(OP))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(StoreError::sqlite(OP))?;
        enable_wal(&conn, options.busy_timeout)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(StoreError::sqlite(OP))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(StoreError::sqlite(OP))?;
        schema::migrate(&mut conn)?;
        Ok(Registry {
            dir: dir.to_owned(),
            artifacts,
            conn: Mutex::new(conn),
            removed_temp_files,
        })
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The artifact directory (`dir/artifacts`).
    pub fn artifact_dir(&self) -> &Path {
        self.artifacts.dir()
    }

    /// How many stale temp artifact files [`Registry::open`] deleted.
    pub fn removed_temp_files(&self) -> usize {
        self.removed_temp_files
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave a transaction open
        // (dropping a `Transaction` rolls it back), so the connection is fine.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction and commits it.
    fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite(op))?;
        let out = f(&tx)?;
        tx.commit().map_err(StoreError::sqlite(op))?;
        Ok(out)
    }

    // ---- artifacts -------------------------------------------------------

    /// Stores `bytes` under their blake3 and returns the id once the file is
    /// durable. Idempotent; if a file with that name exists its hash is
    /// checked, and a corrupt one is atomically replaced by these bytes.
    pub fn put_artifact(&self, bytes: &[u8]) -> Result<ArtifactId, StoreError> {
        self.artifacts.put(bytes)
    }

    /// Reads an artifact and verifies its blake3; a file that does not hash
    /// to `id` gives [`StoreError::Corrupt`] naming `id`.
    pub fn get_artifact(&self, id: &ArtifactId) -> Result<Vec<u8>, StoreError> {
        self.artifacts.get(id)
    }

    /// Whether an artifact file exists for `id` (its content is not checked).
    pub fn has_artifact(&self, id: &ArtifactId) -> bool {
        self.artifacts.path(id).is_file()
    }

    /// The ids of all artifact files, sorted; temp files are never listed.
    pub fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.artifacts.list()
    }

    // ---- registry --------------------------------------------------------

    /// Registers a tool in the agent or shared tier and appends a
    /// `registration` audit entry in the same transaction; returns the stored
    /// record with `created_seq` set to that entry's seq.
    ///
    /// The artifact must already be in the store ([`Registry::put_artifact`]):
    /// it is re-hashed and fsynced before the row is inserted. Fails with
    /// [`StoreError::Conflict`] if (tier, owner, name) exists, and with
    /// [`StoreError::Invalid`] for [`Tier::Session`] or an agent-tier record
    /// without `agent_id`.
    pub fn register(&self, record: ToolRecord) -> Result<ToolRecord, StoreError> {
        self.register_with(record, None, None)
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
        self.register_with(record, Some((AuditKind::Promotion, payload)), Some(carried))
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
        self.register_with(record, Some((kind, payload)), None)
    }

    fn register_with(
        &self,
        record: ToolRecord,
        first: Option<(AuditKind, &Value)>,
        carried: Option<&CallCounters>,
    ) -> Result<ToolRecord, StoreError> {
        const OP: &str = "register";
        let owner = match (record.tier, &record.agent_id) {
            (Tier::Session, _) => {
                return Err(StoreError::Invalid {
                    op: OP,
                    detail: "session-tier tools are kept in memory by the engine, not in the store"
                        .into(),
                });
            }
            (Tier::Agent, Some(agent)) => agent.clone(),
            (Tier::Agent, None) => {
                return Err(StoreError::Invalid {
                    op: OP,
                    detail: format!("agent-tier tool {:?} needs an agent_id", record.name),
                });
            }
            (Tier::Shared, _) => String::new(),
        };
        self.artifacts.ensure_durable(OP, &record.artifact)?;
        let manifest = canonical_json(&record.manifest);
        let payload = serde_json::json!({
            "tier": record.tier.as_str(),
            "artifact": record.artifact.as_str(),
            "session_id": record.session_id,
            "manifest_blake3": blake3::hash(manifest.as_bytes()).to_hex().as_str(),
            "source_blake3": record.manifest.get("sourceBlake3"),
        });
        self.write(OP, |tx| {
            if let Some((kind, payload)) = first {
                audit::append_in_tx(tx, OP, kind, &record.name, record.agent_id.as_deref(), payload)?;
            }
            let entry = audit::append_in_tx(
                tx,
                OP,
                AuditKind::Registration,
                &record.name,
                record.agent_id.as_deref(),
                &payload,
            )?;
            tx.execute(
                "INSERT INTO tools (tier, owner, name, agent_id, session_id, artifact, manifest, created_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    record.tier.as_str(),
                    owner,
                    record.name,
                    record.agent_id,
                    record.session_id,
                    record.artifact.as_str(),
                    manifest,
                    entry.seq
                ],
            )
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Conflict {
                        op: OP,
                        tier: record.tier.as_str(),
                        owner: owner.clone(),
                        name: record.name.clone(),
                    }
                } else {
                    StoreError::sqlite(OP)(e)
                }
            })?;
            if let Some(counts) = carried {
                stats::insert_counts(tx, OP, tx.last_insert_rowid(), counts)?;
            }
            Ok(ToolRecord { created_seq: entry.seq, ..record.clone() })
        })
    }

    fn query_tools(
        &self,
        op: &'static str,
        filter: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<ToolRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {TOOL_COLUMNS} FROM tools WHERE {filter} ORDER BY name"
            ))
            .map_err(StoreError::sqlite(op))?;
        let rows = stmt
            .query_map(args, row_from)
            .map_err(StoreError::sqlite(op))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::sqlite(op))?;
        rows.into_iter().map(|r| r.into_record(op)).collect()
    }

    /// The agent-tier tools owned by `agent`, by name.
    pub fn tools_for_agent(&self, agent: &str) -> Result<Vec<ToolRecord>, StoreError> {
        self.query_tools(
            "tools_for_agent",
            "tier = 'agent' AND owner = ?1",
            &[&agent],
        )
    }

    /// How many agent-tier tools `agent` owns.
    pub fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        const OP: &str = "agent_tool_count";
        self.conn()
            .query_row(
                "SELECT COUNT(*) FROM tools WHERE tier = 'agent' AND owner = ?1",
                [agent],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(StoreError::sqlite(OP))
    }

    /// The shared-tier tools, by name.
    pub fn shared_tools(&self) -> Result<Vec<ToolRecord>, StoreError> {
        self.query_tools("shared_tools", "tier = 'shared'", &[])
    }

    /// The tool `name` as `agent` sees it: the agent's own agent-tier tool if
    /// there is one, else the shared tool, else `None`.
    pub fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        const OP: &str = "get";
        let row = resolve(&self.conn(), OP, name, agent)?;
        row.map(|r| r.into_record(OP)).transpose()
    }

    /// Deletes the tool [`Registry::get`] would return (with its stats) and
    /// appends a `deletion` audit entry by `agent` in the same transaction;
    /// returns the deleted record. The artifact file is kept.
    pub fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        const OP: &str = "delete";
        self.write(OP, |tx| {
            let row = resolve(tx, OP, name, agent)?.ok_or_else(|| not_found(OP, name, agent))?;
            tx.execute("DELETE FROM tools WHERE id = ?1", [row.id])
                .map_err(StoreError::sqlite(OP))?;
            let record = row.into_record(OP)?;
            audit::append_in_tx(
                tx,
                OP,
                AuditKind::Deletion,
                name,
                Some(agent),
                &serde_json::json!({
                    "tier": record.tier.as_str(),
                    "owner": if record.tier == Tier::Agent { record.agent_id.as_deref() } else { None },
                    "artifact": record.artifact.as_str(),
                    "created_seq": record.created_seq,
                }),
            )?;
            Ok(record)
        })
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
        self.promote_with(name, agent, to_tier, None)
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
        self.promote_with(name, agent, Tier::Shared, Some(payload))
    }

    fn promote_with(
        &self,
        name: &str,
        agent: &str,
        to_tier: Tier,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        const OP: &str = "promote";
        if to_tier != Tier::Shared {
            return Err(StoreError::Invalid {
                op: OP,
                detail: format!(
                    "can only promote an agent-tier tool to the shared tier, not to {to_tier}"
                ),
            });
        }
        self.write(OP, |tx| {
            let row = tx
                .query_row(
                    &format!(
                        "SELECT {TOOL_COLUMNS} FROM tools WHERE tier = 'agent' AND owner = ?1 AND name = ?2"
                    ),
                    params![agent, name],
                    row_from,
                )
                .optional()
                .map_err(StoreError::sqlite(OP))?
                .ok_or_else(|| not_found(OP, name, agent))?;
            if let Some(payload) = approval {
                audit::append_in_tx(tx, OP, AuditKind::Approval, name, Some(agent), payload)?;
            }
            tx.execute("UPDATE tools SET tier = 'shared', owner = '' WHERE id = ?1", [row.id])
                .map_err(|e| {
                    if is_unique_violation(&e) {
                        StoreError::Conflict {
                            op: OP,
                            tier: "shared",
                            owner: String::new(),
                            name: name.to_owned(),
                        }
                    } else {
                        StoreError::sqlite(OP)(e)
                    }
                })?;
            let mut record = row.into_record(OP)?;
            record.tier = Tier::Shared;
            audit::append_in_tx(
                tx,
                OP,
                AuditKind::Promotion,
                name,
                Some(agent),
                &serde_json::json!({
                    "from": "agent",
                    "to": "shared",
                    "artifact": record.artifact.as_str(),
                    "created_seq": record.created_seq,
                }),
            )?;
            Ok(record)
        })
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
        const OP: &str = "append_audit";
        self.write(OP, |tx| {
            audit::append_in_tx(tx, OP, kind, subject, agent, payload)
        })
    }

    /// Up to `limit` audit entries with `seq > after_seq`, in order.
    pub fn audit_entries(
        &self,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit::read_entries(&self.conn(), after_seq, limit)
    }

    /// Verifies the whole audit chain against the head record, in one read
    /// snapshot. Detects an edited entry (any field), a removed or reordered
    /// entry, and a truncated tail; the error names the seq where it breaks.
    pub fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(StoreError::sqlite("verify_audit"))?;
        audit::verify(&tx)
    }
}
