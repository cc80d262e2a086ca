//! The session tier on PostgreSQL (see `store::sessions`). Every change
//! that appends audit entries takes the audit head lock first, as every
//! appending transaction does: two hosts ending or expiring one session
//! are serialized there, and the second finds it gone (no second set of
//! entries). Counter and last-use updates lock only their own rows.

use std::sync::Arc;

use deadpool_postgres::Pool;
use serde_json::Value;
use tokio_postgres::{Row, Transaction};

use super::ops::{
    append_in_tx, begin, client, ensure_artifact, is_unique_violation, lock_head, pg,
};
use crate::audit::{AuditEntry, AuditKind};
use crate::backend::CallBatch;
use crate::error::StoreError;
use crate::sessions::{
    EndedSession, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch, counters_from,
    merged_counters, recent_to_text, session_deletion_payload,
};
use temper_runtime::id::ArtifactId;

const SESSION_COLUMNS: &str = "agent, session, owner, created_ms, last_used_ms, idle_ms";
const TOOL_COLUMNS: &str =
    "name, artifact, manifest, created_seq, total_calls, successes, total_latency_us, recent_us";

/// What [`add_session_tool`] inserts: [`crate::NewSessionTool`], owned.
#[derive(Debug)]
pub(super) struct OwnedNewSessionTool {
    pub(super) session: SessionRecord,
    pub(super) name: String,
    pub(super) artifact: ArtifactId,
    pub(super) manifest: String,
    pub(super) decision: Value,
    pub(super) max_tools: usize,
}

fn session_from(r: &Row) -> SessionRecord {
    SessionRecord {
        agent: r.get(0),
        session: r.get(1),
        owner: r.get(2),
        created_ms: r.get(3),
        last_used_ms: r.get(4),
        idle_ms: r.get(5),
    }
}

fn tool_from(op: &'static str, r: &Row) -> Result<SessionToolRecord, StoreError> {
    let json = |source| StoreError::Json { op, source };
    Ok(SessionToolRecord {
        name: r.get(0),
        artifact: ArtifactId::from_hex(r.get::<_, &str>(1))?,
        manifest: serde_json::from_str(r.get::<_, &str>(2)).map_err(json)?,
        created_seq: r.get(3),
        counters: counters_from(r.get(4), r.get(5), r.get(6), r.get::<_, &str>(7)).map_err(json)?,
    })
}

async fn tools_in(
    tx: &Transaction<'_>,
    op: &'static str,
    agent: &str,
    session: &str,
) -> Result<Vec<SessionToolRecord>, StoreError> {
    let rows = tx
        .query(
            &format!(
                "SELECT {TOOL_COLUMNS} FROM session_tools WHERE agent = $1 AND session = $2 ORDER BY name"
            ),
            &[&agent, &session],
        )
        .await
        .map_err(pg(op))?;
    rows.iter().map(|r| tool_from(op, r)).collect()
}

/// Takes the session tool (agent, session, name) out of its tier inside
/// `tx` (a promotion, under the head lock): what it was, or `None`.
pub(super) async fn take_tool(
    tx: &Transaction<'_>,
    op: &'static str,
    agent: &str,
    session: &str,
    name: &str,
) -> Result<Option<SessionToolRecord>, StoreError> {
    let row = tx
        .query_opt(
            &format!(
                "DELETE FROM session_tools WHERE agent = $1 AND session = $2 AND name = $3
                 RETURNING {TOOL_COLUMNS}"
            ),
            &[&agent, &session, &name],
        )
        .await
        .map_err(pg(op))?;
    row.map(|r| tool_from(op, &r)).transpose()
}

/// Adds session-tier calls to their tool's counters inside `tx` (its row
/// locked); whether the tool was there.
pub(super) async fn add_calls(
    tx: &Transaction<'_>,
    op: &'static str,
    session: &str,
    entry: &CallBatch,
) -> Result<bool, StoreError> {
    let json = |source| StoreError::Json { op, source };
    let Some(row) = tx
        .query_opt(
            "SELECT total_calls, successes, total_latency_us, recent_us FROM session_tools
             WHERE agent = $1 AND session = $2 AND name = $3 FOR UPDATE",
            &[&entry.agent, &session, &entry.name],
        )
        .await
        .map_err(pg(op))?
    else {
        return Ok(false);
    };
    let stored =
        counters_from(row.get(0), row.get(1), row.get(2), row.get::<_, &str>(3)).map_err(json)?;
    let c = merged_counters(stored, &entry.counters);
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    tx.execute(
        "UPDATE session_tools SET total_calls = $4, successes = $5, total_latency_us = $6, recent_us = $7
         WHERE agent = $1 AND session = $2 AND name = $3",
        &[
            &entry.agent,
            &session,
            &entry.name,
            &clamp(c.total),
            &clamp(c.successes),
            &clamp(c.latency_sum_us),
            &recent_to_text(&c),
        ],
    )
    .await
    .map_err(pg(op))?;
    Ok(true)
}

pub(super) async fn open_session(
    pool: Pool,
    loc: Arc<str>,
    s: Arc<SessionRecord>,
) -> Result<SessionRecord, StoreError> {
    const OP: &str = "open_session";
    let c = client(&pool, OP, &loc).await?;
    c.execute(
        &format!(
            "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (agent, session) DO NOTHING"
        ),
        &[
            &s.agent,
            &s.session,
            &s.owner,
            &s.created_ms,
            &s.last_used_ms,
            &s.idle_ms,
        ],
    )
    .await
    .map_err(pg(OP))?;
    let row = c
        .query_one(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE agent = $1 AND session = $2"),
            &[&s.agent, &s.session],
        )
        .await
        .map_err(pg(OP))?;
    Ok(session_from(&row))
}

pub(super) async fn session(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    session: String,
) -> Result<Option<SessionRecord>, StoreError> {
    const OP: &str = "session";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE agent = $1 AND session = $2"),
            &[&agent, &session],
        )
        .await
        .map_err(pg(OP))?;
    Ok(row.as_ref().map(session_from))
}

pub(super) async fn session_tools(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    session: String,
) -> Result<Vec<SessionToolRecord>, StoreError> {
    const OP: &str = "session_tools";
    let c = client(&pool, OP, &loc).await?;
    let rows = c
        .query(
            &format!(
                "SELECT {TOOL_COLUMNS} FROM session_tools WHERE agent = $1 AND session = $2 ORDER BY name"
            ),
            &[&agent, &session],
        )
        .await
        .map_err(pg(OP))?;
    rows.iter().map(|r| tool_from(OP, r)).collect()
}

pub(super) async fn add_session_tool(
    pool: Pool,
    loc: Arc<str>,
    new: Arc<OwnedNewSessionTool>,
) -> Result<i64, StoreError> {
    const OP: &str = "add_session_tool";
    let s = &new.session;
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    lock_head(&tx, OP).await?;
    ensure_artifact(&tx, OP, &new.artifact).await?;
    tx.execute(
        &format!(
            "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (agent, session) DO UPDATE SET
                last_used_ms = GREATEST(sessions.last_used_ms, EXCLUDED.last_used_ms)"
        ),
        &[
            &s.agent,
            &s.session,
            &s.owner,
            &s.created_ms,
            &s.last_used_ms,
            &s.idle_ms,
        ],
    )
    .await
    .map_err(pg(OP))?;
    let held: i64 = tx
        .query_one(
            "SELECT COUNT(*) FROM session_tools WHERE agent = $1 AND session = $2",
            &[&s.agent, &s.session],
        )
        .await
        .map_err(pg(OP))?
        .get(0);
    if held as usize >= new.max_tools {
        return Err(StoreError::SessionFull {
            op: OP,
            agent: s.agent.clone(),
            session: s.session.clone(),
            limit: new.max_tools,
        });
    }
    let entry = append_in_tx(
        &tx,
        OP,
        AuditKind::ForgeDecision,
        &new.name,
        Some(&s.agent),
        &new.decision,
    )
    .await?;
    tx.execute(
        "INSERT INTO session_tools (agent, session, name, artifact, manifest, created_seq)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &s.agent,
            &s.session,
            &new.name,
            &new.artifact.as_str(),
            &new.manifest,
            &entry.seq,
        ],
    )
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict {
                op: OP,
                tier: "session",
                owner: s.session.clone(),
                name: new.name.clone(),
            }
        } else {
            pg(OP)(e)
        }
    })?;
    super::search::index_session_tool(&tx, OP, &s.agent, &s.session, &new.name, &new.manifest)
        .await?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(entry.seq)
}

pub(super) async fn delete_session_tool(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    session: String,
    name: String,
    payload: Value,
) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError> {
    const OP: &str = "delete_session_tool";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    lock_head(&tx, OP).await?;
    let Some(tool) = take_tool(&tx, OP, &agent, &session, &name).await? else {
        return Ok(None);
    };
    let entry = append_in_tx(&tx, OP, AuditKind::Deletion, &name, Some(&agent), &payload).await?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(Some((tool, entry)))
}

pub(super) async fn end_session(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    session: String,
    end: SessionEnd,
) -> Result<Option<EndedSession>, StoreError> {
    const OP: &str = "end_session";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    // The head lock first: reapers of one session on several hosts queue
    // here, and each later one re-reads the session below.
    lock_head(&tx, OP).await?;
    let still = match end {
        SessionEnd::Ended => {
            tx.query_opt(
                "SELECT 1 FROM sessions WHERE agent = $1 AND session = $2 FOR UPDATE",
                &[&agent, &session],
            )
            .await
        }
        SessionEnd::Expired { now_ms } => {
            tx.query_opt(
                "SELECT 1 FROM sessions WHERE agent = $1 AND session = $2
                 AND idle_ms > 0 AND last_used_ms + idle_ms <= $3 FOR UPDATE",
                &[&agent, &session, &now_ms],
            )
            .await
        }
    }
    .map_err(pg(OP))?;
    if still.is_none() {
        return Ok(None);
    }
    let tools = tools_in(&tx, OP, &agent, &session).await?;
    tx.execute(
        "DELETE FROM sessions WHERE agent = $1 AND session = $2",
        &[&agent, &session],
    )
    .await
    .map_err(pg(OP))?;
    let mut entries = Vec::with_capacity(tools.len());
    for t in &tools {
        entries.push(
            append_in_tx(
                &tx,
                OP,
                AuditKind::Deletion,
                &t.name,
                Some(&agent),
                &session_deletion_payload(&session, &t.artifact, end),
            )
            .await?,
        );
    }
    tx.commit().await.map_err(pg(OP))?;
    Ok(Some(EndedSession {
        agent,
        session,
        tools,
        entries,
    }))
}

pub(super) async fn expired_sessions(
    pool: Pool,
    loc: Arc<str>,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<(String, String)>, StoreError> {
    const OP: &str = "expired_sessions";
    let c = client(&pool, OP, &loc).await?;
    let rows = c
        .query(
            "SELECT agent, session FROM sessions
             WHERE idle_ms > 0 AND last_used_ms + idle_ms <= $1 LIMIT $2",
            &[&now_ms, &(limit as i64)],
        )
        .await
        .map_err(pg(OP))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub(super) async fn touch_sessions(
    pool: Pool,
    loc: Arc<str>,
    touches: Arc<Vec<SessionTouch>>,
) -> Result<(), StoreError> {
    const OP: &str = "touch_sessions";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    let stmt = tx
        .prepare(
            "UPDATE sessions SET last_used_ms = GREATEST(last_used_ms, $3)
             WHERE agent = $1 AND session = $2",
        )
        .await
        .map_err(pg(OP))?;
    for t in touches.iter() {
        tx.execute(&stmt, &[&t.agent, &t.session, &t.at_ms])
            .await
            .map_err(pg(OP))?;
    }
    tx.commit().await.map_err(pg(OP))
}

/// See [`crate::RegistryBackend::lease_quota`]: one statement (the row
/// locked by the upsert), plus a delete of the key's older windows on a
/// window's first lease.
pub(super) async fn lease_quota(
    pool: Pool,
    loc: Arc<str>,
    lease: Arc<crate::QuotaLease>,
) -> Result<u32, StoreError> {
    const OP: &str = "lease_quota";
    let c = client(&pool, OP, &loc).await?;
    let (want, limit) = (i64::from(lease.want), i64::from(lease.limit));
    let row = c
        .query_one(
            "INSERT INTO quota_leases (key, win, used, last_grant)
             VALUES ($1, $2, LEAST($3::BIGINT, $4::BIGINT), LEAST($3::BIGINT, $4::BIGINT))
             ON CONFLICT (key, win) DO UPDATE SET
                 last_grant = GREATEST(0, LEAST($3::BIGINT, $4::BIGINT - quota_leases.used)),
                 used = quota_leases.used
                     + GREATEST(0, LEAST($3::BIGINT, $4::BIGINT - quota_leases.used))
             RETURNING last_grant, used",
            &[&lease.key, &lease.window, &want, &limit],
        )
        .await
        .map_err(pg(OP))?;
    let (granted, used): (i64, i64) = (row.get(0), row.get(1));
    if used == granted {
        // The window's first lease: the key's older windows go.
        c.execute(
            "DELETE FROM quota_leases WHERE key = $1 AND win < $2",
            &[&lease.key, &lease.window],
        )
        .await
        .map_err(pg(OP))?;
    }
    Ok(u32::try_from(granted.max(0)).unwrap_or(0))
}
