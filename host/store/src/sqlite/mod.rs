//! The embedded backend: a store directory with `temper.db` (SQLite) and
//! `artifacts/`.
//!
//! - SQLite runs in WAL mode with `synchronous=FULL`: every commit fsyncs the
//!   WAL, so a committed registry row or audit entry survives power loss, not
//!   just a process crash. A killed process leaves either a committed or a
//!   rolled-back transaction.
//! - A busy timeout ([`RegistryOptions::busy_timeout`]) lets many threads and
//!   processes share one store; every writing transaction is
//!   `BEGIN IMMEDIATE`, so writers queue on the database lock, which is also
//!   what serializes audit appends.
//! - Artifact files are written atomically (see `artifacts.rs`); a
//!   registration first checks that the artifact is there and fsyncs it.

pub(crate) mod artifacts;
mod audit;
mod memory;
mod schema;
mod search;
mod sessions;
mod stats;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde_json::Value;

use super::audit::{AuditEntry, AuditKind, AuditReport};
use super::backend::{ArtifactForm, BackendKind, CallBatch, NewTool, RegistryBackend, ToolScope};
use super::error::{AuditError, StoreError};
use super::sessions::{
    EndedSession, NewSessionTool, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch,
};
use super::stats::ToolStats;
use super::{RegistryOptions, Tier, ToolRecord, deletion_payload, promotion_payload};
pub use memory::MemoryIndex;
pub use schema::SCHEMA_VERSION;
use temper_runtime::id::ArtifactId;

/// A store directory opened by [`SqliteBackend::open`].
/// One connection behind a mutex; for parallel writers open one per thread
/// or process (SQLite serializes them).
#[derive(Debug)]
pub struct SqliteBackend {
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

pub(super) struct Row {
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

pub(super) fn resolve(
    conn: &Connection,
    op: &'static str,
    name: &str,
    agent: &str,
) -> Result<Option<Row>, StoreError> {
    conn.query_row(RESOLVE, params![name, agent], row_from)
        .optional()
        .map_err(StoreError::sqlite(op))
}

pub(super) fn not_found(op: &'static str, name: &str, agent: &str) -> StoreError {
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

impl SqliteBackend {
    /// Opens (creating if needed) the store in `dir`: creates
    /// `dir/artifacts`, opens `dir/temper.db` in WAL mode with
    /// `synchronous=FULL` and a busy timeout, runs pending migrations, and
    /// deletes stale temp artifact files.
    pub fn open(dir: &Path, options: RegistryOptions) -> Result<SqliteBackend, StoreError> {
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
        let found = schema::migrate(&mut conn)?;
        // A store from before the search index: its tools are indexed once.
        if found < schema::SEARCH_INDEX_VERSION {
            let indexed = search::index_missing(&mut conn)?;
            if indexed > 0 {
                tracing::info!("indexed {indexed} tools for search");
            }
        }
        Ok(SqliteBackend {
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

    /// How many stale temp artifact files [`SqliteBackend::open`] deleted.
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
}

impl RegistryBackend for SqliteBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Sqlite
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn put_blob(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        self.artifacts.put(id, form, bytes)
    }

    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError> {
        self.artifacts.get(id, form)
    }

    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError> {
        Ok(self.artifacts.path(id, form).is_file())
    }

    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.artifacts.list()
    }

    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError> {
        const OP: &str = "register";
        let record = new.record;
        let owner = new.owner;
        self.artifacts.ensure_durable(OP, &record.artifact)?;
        self.write(OP, |tx| {
            let mut carried = new.carried.cloned();
            if let Some((agent, session)) = new.from_session {
                let tool = sessions::take_tool(tx, OP, agent, session, &record.name)?
                    .ok_or_else(|| not_found(OP, &record.name, agent))?;
                let c = carried.get_or_insert_with(Default::default);
                c.add_since(&Default::default(), &tool.counters);
            }
            if let Some((kind, payload)) = new.first {
                audit::append_in_tx(tx, OP, kind, &record.name, record.agent_id.as_deref(), payload)?;
            }
            let entry = audit::append_in_tx(
                tx,
                OP,
                AuditKind::Registration,
                &record.name,
                record.agent_id.as_deref(),
                new.registration,
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
                    new.manifest,
                    entry.seq
                ],
            )
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::Conflict {
                        op: OP,
                        tier: record.tier.as_str(),
                        owner: owner.to_owned(),
                        name: record.name.clone(),
                    }
                } else {
                    StoreError::sqlite(OP)(e)
                }
            })?;
            let tool_id = tx.last_insert_rowid();
            search::index_tool(tx, OP, tool_id, &record.name, new.manifest)?;
            if let Some(counts) = &carried {
                stats::insert_counts(tx, OP, tool_id, counts)?;
            }
            Ok(entry.seq)
        })
    }

    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError> {
        match scope {
            ToolScope::Agent(agent) => self.query_tools(
                "tools_for_agent",
                "tier = 'agent' AND owner = ?1",
                &[&agent],
            ),
            ToolScope::Shared => self.query_tools("shared_tools", "tier = 'shared'", &[]),
        }
    }

    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
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

    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        const OP: &str = "get";
        let row = resolve(&self.conn(), OP, name, agent)?;
        row.map(|r| r.into_record(OP)).transpose()
    }

    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
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
                &deletion_payload(&record),
            )?;
            Ok(record)
        })
    }

    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        const OP: &str = "promote";
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
                &promotion_payload(&record),
            )?;
            Ok(record)
        })
    }

    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        self.record_calls_sql(batch)
    }

    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        self.stats_sql(name, agent)
    }

    fn append_audit(
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

    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        audit::read_entries(&self.conn(), after_seq, limit)
    }

    fn audit_head_seq(&self) -> Result<i64, StoreError> {
        Ok(audit::read_head(&self.conn(), "audit_head_seq")?.0)
    }

    fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(StoreError::sqlite("verify_audit"))?;
        audit::verify(&tx)
    }

    fn open_session(&self, session: &SessionRecord) -> Result<SessionRecord, StoreError> {
        self.open_session_sql(session)
    }

    fn session(&self, agent: &str, session: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.session_sql(agent, session)
    }

    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<SessionToolRecord>, StoreError> {
        self.session_tools_sql(agent, session)
    }

    fn add_session_tool(&self, new: NewSessionTool<'_>) -> Result<i64, StoreError> {
        self.add_session_tool_sql(new)
    }

    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: SessionEnd,
    ) -> Result<Option<EndedSession>, StoreError> {
        self.end_session_sql(agent, session, end)
    }

    fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &Value,
    ) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError> {
        self.delete_session_tool_sql(agent, session, name, payload)
    }

    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.expired_sessions_sql(now_ms, limit)
    }

    fn touch_sessions(&self, touches: &[SessionTouch]) -> Result<(), StoreError> {
        self.touch_sessions_sql(touches)
    }

    fn lease_quota(&self, lease: &crate::QuotaLease) -> Result<u32, StoreError> {
        self.lease_quota_sql(lease)
    }

    fn search(
        &self,
        query: &crate::SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<crate::SearchHit>, StoreError> {
        self.search_sql(query, terms, fetch)
    }

    fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError> {
        self.working_set_sql(agent, session)
    }

    fn add_to_working_set(
        &self,
        session: &SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.add_to_working_set_sql(session, names, cap)
    }

    fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.most_used_sql(agent, limit)
    }
}
