//! The session tier in SQLite (see `store::sessions`): every change in one
//! `BEGIN IMMEDIATE` transaction, which also serializes it with audit
//! appends and with other hosts' reapers.

use rusqlite::{OptionalExtension, Transaction, params};
use serde_json::Value;

use super::{SqliteBackend, audit, is_unique_violation};

/// A taken key: the session tools' primary key, or any unique index.
fn is_taken(e: &rusqlite::Error) -> bool {
    is_unique_violation(e)
        || matches!(
            e,
            rusqlite::Error::SqliteFailure(f, _)
                if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        )
}
use crate::audit::{AuditEntry, AuditKind};
use crate::backend::CallBatch;
use crate::error::StoreError;
use crate::sessions::{
    EndedSession, NewSessionTool, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch,
    counters_from, merged_counters, recent_to_text, session_deletion_payload,
};
use temper_runtime::id::ArtifactId;

const SESSION_COLUMNS: &str = "agent, session, owner, created_ms, last_used_ms, idle_ms";
const TOOL_COLUMNS: &str =
    "name, artifact, manifest, created_seq, total_calls, successes, total_latency_us, recent_us";

fn session_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        agent: r.get(0)?,
        session: r.get(1)?,
        owner: r.get(2)?,
        created_ms: r.get(3)?,
        last_used_ms: r.get(4)?,
        idle_ms: r.get(5)?,
    })
}

type RawTool = (String, String, String, i64, i64, i64, i64, String);

fn raw_tool(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawTool> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

fn tool_from(op: &'static str, raw: RawTool) -> Result<SessionToolRecord, StoreError> {
    let (name, artifact, manifest, created_seq, total, successes, latency, recent) = raw;
    Ok(SessionToolRecord {
        artifact: ArtifactId::from_hex(&artifact)?,
        manifest: serde_json::from_str(&manifest)
            .map_err(|source| StoreError::Json { op, source })?,
        counters: counters_from(total, successes, latency, &recent)
            .map_err(|source| StoreError::Json { op, source })?,
        created_seq,
        name,
    })
}

fn tools_in(
    conn: &rusqlite::Connection,
    op: &'static str,
    agent: &str,
    session: &str,
) -> Result<Vec<SessionToolRecord>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {TOOL_COLUMNS} FROM session_tools WHERE agent = ?1 AND session = ?2 ORDER BY name"
        ))
        .map_err(StoreError::sqlite(op))?;
    let raws = stmt
        .query_map(params![agent, session], raw_tool)
        .map_err(StoreError::sqlite(op))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite(op))?;
    raws.into_iter().map(|r| tool_from(op, r)).collect()
}

/// Takes the session tool (agent, session, name) out of its tier inside
/// `tx` (a promotion): its stored counters, or `None` if it is not there.
pub(super) fn take_tool(
    tx: &Transaction<'_>,
    op: &'static str,
    agent: &str,
    session: &str,
    name: &str,
) -> Result<Option<SessionToolRecord>, StoreError> {
    let raw = tx
        .query_row(
            &format!(
                "DELETE FROM session_tools WHERE agent = ?1 AND session = ?2 AND name = ?3
                 RETURNING {TOOL_COLUMNS}"
            ),
            params![agent, session, name],
            raw_tool,
        )
        .optional()
        .map_err(StoreError::sqlite(op))?;
    raw.map(|r| tool_from(op, r)).transpose()
}

/// Adds session-tier calls to their tools' counters inside `tx`; whether
/// the tool was there.
pub(super) fn add_calls(
    tx: &Transaction<'_>,
    op: &'static str,
    session: &str,
    entry: &CallBatch,
) -> Result<bool, StoreError> {
    let stored = tx
        .query_row(
            "SELECT total_calls, successes, total_latency_us, recent_us FROM session_tools
             WHERE agent = ?1 AND session = ?2 AND name = ?3",
            params![entry.agent, session, entry.name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?)),
        )
        .optional()
        .map_err(StoreError::sqlite(op))?;
    let Some((total, successes, latency, recent)) = stored else {
        return Ok(false);
    };
    let stored = counters_from(total, successes, latency, &recent)
        .map_err(|source| StoreError::Json { op, source })?;
    let c = merged_counters(stored, &entry.counters);
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    tx.execute(
        "UPDATE session_tools SET total_calls = ?4, successes = ?5, total_latency_us = ?6, recent_us = ?7
         WHERE agent = ?1 AND session = ?2 AND name = ?3",
        params![
            entry.agent,
            session,
            entry.name,
            clamp(c.total),
            clamp(c.successes),
            clamp(c.latency_sum_us),
            recent_to_text(&c)
        ],
    )
    .map_err(StoreError::sqlite(op))?;
    Ok(true)
}

impl SqliteBackend {
    pub(super) fn open_session_sql(&self, s: &SessionRecord) -> Result<SessionRecord, StoreError> {
        const OP: &str = "open_session";
        self.write(OP, |tx| {
            tx.execute(
                &format!(
                    "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (agent, session) DO NOTHING"
                ),
                params![
                    s.agent,
                    s.session,
                    s.owner,
                    s.created_ms,
                    s.last_used_ms,
                    s.idle_ms
                ],
            )
            .map_err(StoreError::sqlite(OP))?;
            tx.query_row(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE agent = ?1 AND session = ?2"
                ),
                params![s.agent, s.session],
                session_from,
            )
            .map_err(StoreError::sqlite(OP))
        })
    }

    pub(super) fn session_sql(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        const OP: &str = "session";
        self.conn()
            .query_row(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions WHERE agent = ?1 AND session = ?2"
                ),
                params![agent, session],
                session_from,
            )
            .optional()
            .map_err(StoreError::sqlite(OP))
    }

    pub(super) fn session_tools_sql(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<SessionToolRecord>, StoreError> {
        tools_in(&self.conn(), "session_tools", agent, session)
    }

    pub(super) fn add_session_tool_sql(&self, new: NewSessionTool<'_>) -> Result<i64, StoreError> {
        const OP: &str = "add_session_tool";
        let s = new.session;
        self.artifacts.ensure_durable(OP, new.artifact)?;
        self.write(OP, |tx| {
            tx.execute(
                &format!(
                    "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (agent, session) DO UPDATE SET
                        last_used_ms = MAX(last_used_ms, excluded.last_used_ms)"
                ),
                params![
                    s.agent,
                    s.session,
                    s.owner,
                    s.created_ms,
                    s.last_used_ms,
                    s.idle_ms
                ],
            )
            .map_err(StoreError::sqlite(OP))?;
            let held: i64 = tx
                .query_row(
                    "SELECT COUNT(*) FROM session_tools WHERE agent = ?1 AND session = ?2",
                    params![s.agent, s.session],
                    |r| r.get(0),
                )
                .map_err(StoreError::sqlite(OP))?;
            if held as usize >= new.max_tools {
                return Err(StoreError::SessionFull {
                    op: OP,
                    agent: s.agent.clone(),
                    session: s.session.clone(),
                    limit: new.max_tools,
                });
            }
            let entry = audit::append_in_tx(
                tx,
                OP,
                AuditKind::ForgeDecision,
                new.name,
                Some(&s.agent),
                new.decision,
            )?;
            tx.execute(
                "INSERT INTO session_tools (agent, session, name, artifact, manifest, created_seq)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    s.agent,
                    s.session,
                    new.name,
                    new.artifact.as_str(),
                    new.manifest,
                    entry.seq
                ],
            )
            .map_err(|e| {
                if is_taken(&e) {
                    StoreError::Conflict {
                        op: OP,
                        tier: "session",
                        owner: s.session.clone(),
                        name: new.name.to_owned(),
                    }
                } else {
                    StoreError::sqlite(OP)(e)
                }
            })?;
            super::search::index_session_tool(
                tx,
                OP,
                &s.agent,
                &s.session,
                new.name,
                new.manifest,
            )?;
            Ok(entry.seq)
        })
    }

    pub(super) fn end_session_sql(
        &self,
        agent: &str,
        session: &str,
        end: SessionEnd,
    ) -> Result<Option<EndedSession>, StoreError> {
        const OP: &str = "end_session";
        self.write(OP, |tx| {
            let still = match end {
                SessionEnd::Ended => tx.query_row(
                    "SELECT COUNT(*) FROM sessions WHERE agent = ?1 AND session = ?2",
                    params![agent, session],
                    |r| r.get::<_, i64>(0),
                ),
                SessionEnd::Expired { now_ms } => tx.query_row(
                    "SELECT COUNT(*) FROM sessions WHERE agent = ?1 AND session = ?2
                     AND idle_ms > 0 AND last_used_ms + idle_ms <= ?3",
                    params![agent, session, now_ms],
                    |r| r.get::<_, i64>(0),
                ),
            }
            .map_err(StoreError::sqlite(OP))?;
            if still == 0 {
                return Ok(None);
            }
            // Read the tools for their entries; they go with the session
            // (ON DELETE CASCADE), all in this transaction.
            let tools = tools_in(tx, OP, agent, session)?;
            tx.execute(
                "DELETE FROM sessions WHERE agent = ?1 AND session = ?2",
                params![agent, session],
            )
            .map_err(StoreError::sqlite(OP))?;
            let mut entries = Vec::with_capacity(tools.len());
            for t in &tools {
                entries.push(audit::append_in_tx(
                    tx,
                    OP,
                    AuditKind::Deletion,
                    &t.name,
                    Some(agent),
                    &session_deletion_payload(session, &t.artifact, end),
                )?);
            }
            Ok(Some(EndedSession {
                agent: agent.to_owned(),
                session: session.to_owned(),
                tools,
                entries,
            }))
        })
    }

    pub(super) fn delete_session_tool_sql(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &Value,
    ) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError> {
        const OP: &str = "delete_session_tool";
        self.write(OP, |tx| {
            let Some(tool) = take_tool(tx, OP, agent, session, name)? else {
                return Ok(None);
            };
            let entry =
                audit::append_in_tx(tx, OP, AuditKind::Deletion, name, Some(agent), payload)?;
            Ok(Some((tool, entry)))
        })
    }

    pub(super) fn expired_sessions_sql(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        const OP: &str = "expired_sessions";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT agent, session FROM sessions
                 WHERE idle_ms > 0 AND last_used_ms + idle_ms <= ?1 LIMIT ?2",
            )
            .map_err(StoreError::sqlite(OP))?;
        stmt.query_map(params![now_ms, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(StoreError::sqlite(OP))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite(OP))
    }

    pub(super) fn touch_sessions_sql(&self, touches: &[SessionTouch]) -> Result<(), StoreError> {
        const OP: &str = "touch_sessions";
        self.write(OP, |tx| {
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE sessions SET last_used_ms = MAX(last_used_ms, ?3)
                     WHERE agent = ?1 AND session = ?2",
                )
                .map_err(StoreError::sqlite(OP))?;
            for t in touches {
                stmt.execute(params![t.agent, t.session, t.at_ms])
                    .map_err(StoreError::sqlite(OP))?;
            }
            Ok(())
        })
    }
}

impl SqliteBackend {
    /// See [`crate::RegistryBackend::lease_quota`].
    pub(super) fn lease_quota_sql(&self, lease: &crate::QuotaLease) -> Result<u32, StoreError> {
        const OP: &str = "lease_quota";
        let (want, limit) = (i64::from(lease.want), i64::from(lease.limit));
        self.write(OP, |tx| {
            let (granted, used): (i64, i64) = tx
                .query_row(
                    "INSERT INTO quota_leases (key, win, used, last_grant)
                     VALUES (?1, ?2, MIN(?3, ?4), MIN(?3, ?4))
                     ON CONFLICT (key, win) DO UPDATE SET
                         last_grant = MAX(0, MIN(?3, ?4 - used)),
                         used = used + MAX(0, MIN(?3, ?4 - used))
                     RETURNING last_grant, used",
                    params![lease.key, lease.window, want, limit],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(StoreError::sqlite(OP))?;
            if used == granted {
                // The window's first lease: the key's older windows go.
                tx.execute(
                    "DELETE FROM quota_leases WHERE key = ?1 AND win < ?2",
                    params![lease.key, lease.window],
                )
                .map_err(StoreError::sqlite(OP))?;
            }
            Ok(u32::try_from(granted.max(0)).unwrap_or(0))
        })
    }
}
