//! The backend's operations, one transaction (or one statement) each, run
//! on the backend's runtime (see the module docs of [`super`] for the
//! locking rules they follow).

use std::sync::Arc;

use deadpool_postgres::{Object, Pool, PoolError};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, IsolationLevel, Row, Transaction};

use super::describe;
use crate::audit::{AuditEntry, AuditKind, AuditReport, ChainVerifier, RawEntry};
use crate::backend::{ArtifactForm, CallBatch};
use crate::error::{AuditError, StoreError};
use crate::stats::{CallCounters, LATENCY_WINDOW, ToolStats};
use crate::{Tier, ToolRecord, deletion_payload, promotion_payload};
use temper_runtime::id::ArtifactId;

const TOOL_COLUMNS: &str = "id, name, agent_id, session_id, tier, artifact, manifest, created_seq";

/// Selects the tool `name` ($1) that agent $2 sees: its own agent-tier tool
/// first, else the shared one. A lock clause may follow.
const RESOLVE: &str = "SELECT id, name, agent_id, session_id, tier, artifact, manifest, created_seq
     FROM tools
     WHERE name = $1 AND ((tier = 'agent' AND owner = $2) OR (tier = 'shared' AND owner = ''))
     ORDER BY CASE tier WHEN 'agent' THEN 0 ELSE 1 END
     LIMIT 1";

/// What [`register`] inserts: [`crate::NewTool`], owned.
#[derive(Debug)]
pub(super) struct OwnedNewTool {
    pub(super) record: ToolRecord,
    pub(super) owner: String,
    pub(super) manifest: String,
    pub(super) first: Option<(AuditKind, Value)>,
    pub(super) registration: Value,
    pub(super) carried: Option<CallCounters>,
    pub(super) from_session: Option<(String, String)>,
}

pub(super) fn pg(op: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    StoreError::postgres(op)
}

pub(super) fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

pub(super) fn not_found(op: &'static str, name: &str, agent: &str) -> StoreError {
    StoreError::NotFound {
        op,
        name: name.to_owned(),
        agent: agent.to_owned(),
    }
}

pub(super) fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A pooled connection.
pub(super) async fn client(
    pool: &Pool,
    op: &'static str,
    location: &str,
) -> Result<Object, StoreError> {
    pool.get().await.map_err(|e| StoreError::Pool {
        op,
        location: location.to_owned(),
        detail: match e {
            PoolError::Backend(e) => format!("cannot connect: {}", describe(&e)),
            PoolError::Timeout(kind) => {
                format!("timed out getting a connection ({kind:?}): {e}")
            }
            other => other.to_string(),
        },
    })
}

/// A READ COMMITTED read-write transaction.
pub(super) async fn begin<'a>(
    c: &'a mut Client,
    op: &'static str,
) -> Result<Transaction<'a>, StoreError> {
    c.build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(pg(op))
}

/// A REPEATABLE READ read-only transaction: one snapshot for every read.
async fn snapshot<'a>(c: &'a mut Client, op: &'static str) -> Result<Transaction<'a>, StoreError> {
    c.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg(op))
}

fn record_from(op: &'static str, r: &Row) -> Result<(i64, ToolRecord), StoreError> {
    let name: String = r.get(1);
    let tier_s: String = r.get(4);
    let tier = Tier::parse(&tier_s).ok_or_else(|| StoreError::Invalid {
        op,
        detail: format!("tool {name:?} has unknown tier {tier_s:?}"),
    })?;
    let artifact: String = r.get(5);
    let manifest: String = r.get(6);
    Ok((
        r.get(0),
        ToolRecord {
            name,
            agent_id: r.get(2),
            session_id: r.get(3),
            tier,
            artifact: ArtifactId::from_hex(&artifact)?,
            manifest: serde_json::from_str(&manifest)
                .map_err(|source| StoreError::Json { op, source })?,
            created_seq: r.get(7),
        },
    ))
}

// ---- audit ------------------------------------------------------------------

/// Locks the head record for the rest of the transaction and reads it.
/// Every appending transaction calls this before it touches any other row.
pub(super) async fn lock_head(
    tx: &Transaction<'_>,
    op: &'static str,
) -> Result<(i64, String), StoreError> {
    let row = tx
        .query_one(
            "SELECT count, head_hash FROM audit_head WHERE id = 1 FOR UPDATE",
            &[],
        )
        .await
        .map_err(pg(op))?;
    Ok((row.get(0), row.get(1)))
}

/// Appends an entry inside `tx` under the head lock and moves the head.
pub(super) async fn append_in_tx(
    tx: &Transaction<'_>,
    op: &'static str,
    kind: AuditKind,
    subject: &str,
    agent: Option<&str>,
    payload: &Value,
) -> Result<AuditEntry, StoreError> {
    let e = RawEntry::next(lock_head(tx, op).await?, kind, subject, agent, payload);
    tx.execute(
        "INSERT INTO audit (seq, kind, subject, agent, payload, ts_ms, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &e.seq,
            &e.kind,
            &e.subject,
            &e.agent,
            &e.payload,
            &e.ts_ms,
            &e.prev_hash,
            &e.hash,
        ],
    )
    .await
    .map_err(pg(op))?;
    tx.execute(
        "UPDATE audit_head SET count = $1, head_hash = $2 WHERE id = 1",
        &[&e.seq, &e.hash],
    )
    .await
    .map_err(pg(op))?;
    Ok(AuditEntry {
        seq: e.seq,
        kind,
        subject: e.subject,
        agent: e.agent,
        payload: payload.clone(),
        ts_ms: e.ts_ms,
        prev_hash: e.prev_hash,
        hash: e.hash,
    })
}

pub(super) async fn append_audit(
    pool: Pool,
    loc: Arc<str>,
    kind: AuditKind,
    subject: String,
    agent: Option<String>,
    payload: Arc<Value>,
) -> Result<AuditEntry, StoreError> {
    const OP: &str = "append_audit";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    let entry = append_in_tx(&tx, OP, kind, &subject, agent.as_deref(), &payload).await?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(entry)
}

const SELECT_RAW: &str =
    "SELECT seq, kind, subject, agent, payload, ts_ms, prev_hash, hash FROM audit";

fn raw_from(r: &Row) -> RawEntry {
    RawEntry {
        seq: r.get(0),
        kind: r.get(1),
        subject: r.get(2),
        agent: r.get(3),
        payload: r.get(4),
        ts_ms: r.get(5),
        prev_hash: r.get(6),
        hash: r.get(7),
    }
}

pub(super) async fn audit_entries(
    pool: Pool,
    loc: Arc<str>,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    const OP: &str = "audit_entries";
    let c = client(&pool, OP, &loc).await?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = c
        .query(
            &format!("{SELECT_RAW} WHERE seq > $1 ORDER BY seq LIMIT $2"),
            &[&after_seq, &limit],
        )
        .await
        .map_err(pg(OP))?;
    rows.iter().map(|r| raw_from(r).into_entry(OP)).collect()
}

/// The head record's count: the seq of the last entry (0 when empty).
pub(super) async fn audit_head_seq(pool: Pool, loc: Arc<str>) -> Result<i64, StoreError> {
    const OP: &str = "audit_head_seq";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_one("SELECT count FROM audit_head WHERE id = 1", &[])
        .await
        .map_err(pg(OP))?;
    Ok(row.get(0))
}

/// Entries fetched per round trip while verifying (fewer under test, so
/// the suite's chains span several pages).
const VERIFY_PAGE: i32 = if cfg!(test) { 7 } else { 4096 };

/// Verifies the chain against the head record, both read in one snapshot:
/// the entries come page by page through a portal ([`VERIFY_PAGE`] at a
/// time) into a [`ChainVerifier`], so memory stays constant however long
/// the chain. The outer error is the database's, the inner the chain's.
pub(super) async fn audit_verify(
    pool: Pool,
    loc: Arc<str>,
) -> Result<Result<AuditReport, AuditError>, StoreError> {
    const OP: &str = "verify_audit";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = snapshot(&mut c, OP).await?;
    let head = tx
        .query_one("SELECT count, head_hash FROM audit_head WHERE id = 1", &[])
        .await
        .map_err(pg(OP))?;
    let portal = tx
        .bind(&format!("{SELECT_RAW} ORDER BY seq"), &[])
        .await
        .map_err(pg(OP))?;
    let mut verifier = ChainVerifier::new();
    loop {
        let page = tx
            .query_portal(&portal, VERIFY_PAGE)
            .await
            .map_err(pg(OP))?;
        let last_page = page.len() < VERIFY_PAGE as usize;
        for row in &page {
            if let Err(broken) = verifier.push(raw_from(row)) {
                return Ok(Err(broken));
            }
        }
        if last_page {
            break;
        }
    }
    tx.commit().await.map_err(pg(OP))?;
    Ok(verifier.finish((head.get(0), head.get(1))))
}

// ---- artifacts --------------------------------------------------------------

pub(super) async fn put_blob(
    pool: Pool,
    loc: Arc<str>,
    id: ArtifactId,
    form: ArtifactForm,
    bytes: Arc<[u8]>,
) -> Result<(), StoreError> {
    const OP: &str = "put_artifact";
    let c = client(&pool, OP, &loc).await?;
    // One statement, committed with synchronous_commit=on: durable on return.
    c.execute(
        "INSERT INTO artifacts (id, form, bytes) VALUES ($1, $2, $3)
         ON CONFLICT (id, form) DO UPDATE SET bytes = EXCLUDED.bytes
         WHERE artifacts.bytes IS DISTINCT FROM EXCLUDED.bytes",
        &[&id.as_str(), &form.as_str(), &&*bytes],
    )
    .await
    .map_err(pg(OP))?;
    Ok(())
}

fn check_wasm(op: &'static str, id: &ArtifactId, bytes: &[u8]) -> Result<(), StoreError> {
    let actual = ArtifactId::of(bytes);
    if &actual != id {
        return Err(StoreError::Corrupt {
            op,
            id: id.clone(),
            actual: actual.to_string(),
        });
    }
    Ok(())
}

pub(super) async fn get_blob(
    pool: Pool,
    loc: Arc<str>,
    id: ArtifactId,
    form: ArtifactForm,
) -> Result<Option<Vec<u8>>, StoreError> {
    const OP: &str = "get_artifact";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_opt(
            "SELECT bytes FROM artifacts WHERE id = $1 AND form = $2",
            &[&id.as_str(), &form.as_str()],
        )
        .await
        .map_err(pg(OP))?;
    let Some(row) = row else { return Ok(None) };
    let bytes: Vec<u8> = row.get(0);
    if form == ArtifactForm::Wasm {
        check_wasm(OP, &id, &bytes)?;
    }
    Ok(Some(bytes))
}

pub(super) async fn has_blob(
    pool: Pool,
    loc: Arc<str>,
    id: ArtifactId,
    form: ArtifactForm,
) -> Result<bool, StoreError> {
    const OP: &str = "has_artifact";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_opt(
            "SELECT 1 FROM artifacts WHERE id = $1 AND form = $2",
            &[&id.as_str(), &form.as_str()],
        )
        .await
        .map_err(pg(OP))?;
    Ok(row.is_some())
}

pub(super) async fn artifact_ids(pool: Pool, loc: Arc<str>) -> Result<Vec<ArtifactId>, StoreError> {
    const OP: &str = "artifact_ids";
    let c = client(&pool, OP, &loc).await?;
    let rows = c
        .query("SELECT DISTINCT id FROM artifacts", &[])
        .await
        .map_err(pg(OP))?;
    // Rows whose id is not a blake3 hex digest are not artifacts.
    let mut ids: Vec<ArtifactId> = rows
        .iter()
        .filter_map(|r| ArtifactId::from_hex(r.get::<_, &str>(0)).ok())
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Checks inside `tx` that artifact `id` is stored (a wasm blob with the
/// right hash, else a compact record) before a row may name it.
pub(super) async fn ensure_artifact(
    tx: &Transaction<'_>,
    op: &'static str,
    id: &ArtifactId,
) -> Result<(), StoreError> {
    let rows = tx
        .query(
            "SELECT form, CASE WHEN form = 'wasm' THEN bytes END
             FROM artifacts WHERE id = $1",
            &[&id.as_str()],
        )
        .await
        .map_err(pg(op))?;
    if let Some(wasm) = rows.iter().find(|r| r.get::<_, &str>(0) == "wasm") {
        return check_wasm(op, id, wasm.get::<_, &[u8]>(1));
    }
    if rows.is_empty() {
        return Err(StoreError::MissingArtifact { op, id: id.clone() });
    }
    Ok(())
}

// ---- registry ---------------------------------------------------------------

/// Writes `counts` as the first statistics of the tool row `tool_id`.
async fn insert_counts(
    tx: &Transaction<'_>,
    op: &'static str,
    tool_id: i64,
    counts: &CallCounters,
) -> Result<(), StoreError> {
    if counts.total == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO tool_stats (tool_id, total_calls, successes, total_latency_us)
         VALUES ($1, $2, $3, $4)",
        &[
            &tool_id,
            &clamp(counts.total),
            &clamp(counts.successes),
            &clamp(counts.latency_sum_us),
        ],
    )
    .await
    .map_err(pg(op))?;
    // Only the latencies of the recent calls are kept (their outcome is in
    // the counters), oldest first, so that ids follow call order.
    let skip = counts.recent_us.len().saturating_sub(LATENCY_WINDOW);
    let recent: Vec<i64> = counts
        .recent_us
        .iter()
        .skip(skip)
        .map(|&l| clamp(l))
        .collect();
    tx.execute(
        "INSERT INTO invocations (tool_id, ok, latency_us)
         SELECT $1, TRUE, l FROM unnest($2::BIGINT[]) WITH ORDINALITY AS t (l, n) ORDER BY n",
        &[&tool_id, &recent],
    )
    .await
    .map_err(pg(op))?;
    Ok(())
}

pub(super) async fn register(
    pool: Pool,
    loc: Arc<str>,
    new: Arc<OwnedNewTool>,
) -> Result<i64, StoreError> {
    const OP: &str = "register";
    let record = &new.record;
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    // The head lock comes first: registrations are serialized with every
    // other appending transaction, so a name taken by a committed one is
    // seen at once (no wait on an uncommitted insert, no deadlock).
    lock_head(&tx, OP).await?;
    ensure_artifact(&tx, OP, &record.artifact).await?;
    if let Some((kind, payload)) = &new.first {
        append_in_tx(
            &tx,
            OP,
            *kind,
            &record.name,
            record.agent_id.as_deref(),
            payload,
        )
        .await?;
    }
    let entry = append_in_tx(
        &tx,
        OP,
        AuditKind::Registration,
        &record.name,
        record.agent_id.as_deref(),
        &new.registration,
    )
    .await?;
    let row = tx
        .query_one(
            "INSERT INTO tools (tier, owner, name, agent_id, session_id, artifact, manifest, created_seq)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &record.tier.as_str(),
                &new.owner,
                &record.name,
                &record.agent_id,
                &record.session_id,
                &record.artifact.as_str(),
                &new.manifest,
                &entry.seq,
            ],
        )
        .await
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::Conflict {
                    op: OP,
                    tier: record.tier.as_str(),
                    owner: new.owner.clone(),
                    name: record.name.clone(),
                }
            } else {
                pg(OP)(e)
            }
        })?;
    let tool_id: i64 = row.get(0);
    super::search::index_tool(&tx, OP, tool_id, &record.name, &new.manifest).await?;
    let mut carried = new.carried.clone();
    if let Some((agent, session)) = &new.from_session {
        let tool = super::sessions::take_tool(&tx, OP, agent, session, &record.name)
            .await?
            .ok_or_else(|| not_found(OP, &record.name, agent))?;
        carried
            .get_or_insert_with(Default::default)
            .add_since(&Default::default(), &tool.counters);
    }
    if let Some(counts) = &carried {
        insert_counts(&tx, OP, tool_id, counts).await?;
    }
    tx.commit().await.map_err(pg(OP))?;
    Ok(entry.seq)
}

pub(super) async fn tools(
    pool: Pool,
    loc: Arc<str>,
    agent: Option<String>,
) -> Result<Vec<ToolRecord>, StoreError> {
    let (op, filter) = match agent {
        Some(_) => ("tools_for_agent", "tier = 'agent' AND owner = $1"),
        None => ("shared_tools", "tier = 'shared'"),
    };
    let c = client(&pool, op, &loc).await?;
    let sql =
        format!("SELECT {TOOL_COLUMNS} FROM tools WHERE {filter} ORDER BY name COLLATE \"C\"");
    let rows = match &agent {
        Some(agent) => c.query(&sql, &[agent]).await,
        None => c.query(&sql, &[]).await,
    }
    .map_err(pg(op))?;
    rows.iter()
        .map(|r| record_from(op, r).map(|(_, rec)| rec))
        .collect()
}

pub(super) async fn agent_tool_count(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
) -> Result<usize, StoreError> {
    const OP: &str = "agent_tool_count";
    let c = client(&pool, OP, &loc).await?;
    let n: i64 = c
        .query_one(
            "SELECT COUNT(*) FROM tools WHERE tier = 'agent' AND owner = $1",
            &[&agent],
        )
        .await
        .map_err(pg(OP))?
        .get(0);
    Ok(n as usize)
}

pub(super) async fn get(
    pool: Pool,
    loc: Arc<str>,
    name: String,
    agent: String,
) -> Result<Option<ToolRecord>, StoreError> {
    const OP: &str = "get";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_opt(RESOLVE, &[&name, &agent])
        .await
        .map_err(pg(OP))?;
    row.map(|r| record_from(OP, &r).map(|(_, rec)| rec))
        .transpose()
}

pub(super) async fn delete(
    pool: Pool,
    loc: Arc<str>,
    name: String,
    agent: String,
) -> Result<ToolRecord, StoreError> {
    const OP: &str = "delete";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    lock_head(&tx, OP).await?;
    let row = tx
        .query_opt(&format!("{RESOLVE} FOR UPDATE"), &[&name, &agent])
        .await
        .map_err(pg(OP))?
        .ok_or_else(|| not_found(OP, &name, &agent))?;
    let (id, record) = record_from(OP, &row)?;
    tx.execute("DELETE FROM tools WHERE id = $1", &[&id])
        .await
        .map_err(pg(OP))?;
    append_in_tx(
        &tx,
        OP,
        AuditKind::Deletion,
        &name,
        Some(&agent),
        &deletion_payload(&record),
    )
    .await?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(record)
}

pub(super) async fn promote(
    pool: Pool,
    loc: Arc<str>,
    name: String,
    agent: String,
    approval: Option<Arc<Value>>,
) -> Result<ToolRecord, StoreError> {
    const OP: &str = "promote";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    lock_head(&tx, OP).await?;
    let row = tx
        .query_opt(
            &format!(
                "SELECT {TOOL_COLUMNS} FROM tools WHERE tier = 'agent' AND owner = $1 AND name = $2 FOR UPDATE"
            ),
            &[&agent, &name],
        )
        .await
        .map_err(pg(OP))?
        .ok_or_else(|| not_found(OP, &name, &agent))?;
    let (id, mut record) = record_from(OP, &row)?;
    if let Some(payload) = &approval {
        append_in_tx(&tx, OP, AuditKind::Approval, &name, Some(&agent), payload).await?;
    }
    tx.execute(
        "UPDATE tools SET tier = 'shared', owner = '' WHERE id = $1",
        &[&id],
    )
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict {
                op: OP,
                tier: "shared",
                owner: String::new(),
                name: name.clone(),
            }
        } else {
            pg(OP)(e)
        }
    })?;
    record.tier = Tier::Shared;
    append_in_tx(
        &tx,
        OP,
        AuditKind::Promotion,
        &name,
        Some(&agent),
        &promotion_payload(&record),
    )
    .await?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(record)
}

// ---- statistics -------------------------------------------------------------

pub(super) async fn record_calls(
    pool: Pool,
    loc: Arc<str>,
    batch: Arc<Vec<CallBatch>>,
) -> Result<usize, StoreError> {
    const OP: &str = "record_calls";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    let mut dropped = 0;
    for entry in batch.iter() {
        let counts = &entry.counters;
        if counts.total == 0 {
            continue;
        }
        if let Some(session) = &entry.session {
            if !super::sessions::add_calls(&tx, OP, session, entry).await? {
                dropped += 1;
            }
            continue;
        }
        // KEY SHARE, as for one call: a concurrent delete or promotion waits
        // for the batch (or the batch finds the tool gone).
        let Some(row) = tx
            .query_opt(
                &format!("{RESOLVE} FOR KEY SHARE"),
                &[&entry.name, &entry.agent],
            )
            .await
            .map_err(pg(OP))?
        else {
            dropped += 1;
            continue;
        };
        let tool_id: i64 = row.get(0);
        tx.execute(
            "INSERT INTO tool_stats (tool_id, total_calls, successes, total_latency_us)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (tool_id) DO UPDATE SET
                total_calls = tool_stats.total_calls + EXCLUDED.total_calls,
                successes = tool_stats.successes + EXCLUDED.successes,
                total_latency_us = tool_stats.total_latency_us + EXCLUDED.total_latency_us",
            &[
                &tool_id,
                &clamp(counts.total),
                &clamp(counts.successes),
                &clamp(counts.latency_sum_us),
            ],
        )
        .await
        .map_err(pg(OP))?;
        let skip = counts.recent_us.len().saturating_sub(LATENCY_WINDOW);
        let latencies: Vec<i64> = counts
            .recent_us
            .iter()
            .skip(skip)
            .map(|l| clamp(*l))
            .collect();
        tx.execute(
            "INSERT INTO invocations (tool_id, ok, latency_us)
             SELECT $1, true, l FROM unnest($2::bigint[]) WITH ORDINALITY AS t(l, n) ORDER BY n",
            &[&tool_id, &latencies],
        )
        .await
        .map_err(pg(OP))?;
        tx.execute(
            "DELETE FROM invocations WHERE tool_id = $1 AND id <= (
                SELECT id FROM invocations WHERE tool_id = $1
                ORDER BY id DESC LIMIT 1 OFFSET $2)",
            &[&tool_id, &(LATENCY_WINDOW as i64)],
        )
        .await
        .map_err(pg(OP))?;
    }
    tx.commit().await.map_err(pg(OP))?;
    Ok(dropped)
}

pub(super) async fn stats(
    pool: Pool,
    loc: Arc<str>,
    name: String,
    agent: String,
) -> Result<ToolStats, StoreError> {
    const OP: &str = "stats";
    let mut c = client(&pool, OP, &loc).await?;
    let tx = snapshot(&mut c, OP).await?;
    let row = tx
        .query_opt(RESOLVE, &[&name, &agent])
        .await
        .map_err(pg(OP))?
        .ok_or_else(|| not_found(OP, &name, &agent))?;
    let tool_id: i64 = row.get(0);
    let (total, successes, latency_sum) = tx
        .query_opt(
            "SELECT total_calls, successes, total_latency_us FROM tool_stats WHERE tool_id = $1",
            &[&tool_id],
        )
        .await
        .map_err(pg(OP))?
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2)))
        .unwrap_or((0, 0, 0));
    let latencies: Vec<u64> = tx
        .query(
            "SELECT latency_us FROM invocations WHERE tool_id = $1",
            &[&tool_id],
        )
        .await
        .map_err(pg(OP))?
        .iter()
        .map(|r| r.get::<_, i64>(0).max(0) as u64)
        .collect();
    tx.commit().await.map_err(pg(OP))?;
    Ok(ToolStats::from_counts(
        total.max(0) as u64,
        successes.max(0) as u64,
        latency_sum.max(0) as u64,
        latencies,
    ))
}
