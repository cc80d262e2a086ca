//! The audit trail's SQLite side: appends inside a write transaction and
//! reads for verification. The chain format and its checks live in
//! [`crate::audit`].

use rusqlite::{Transaction, params};
use serde_json::Value;

use crate::audit::{AuditEntry, AuditKind, AuditReport, RawEntry, verify_chain};
use crate::error::{AuditError, StoreError};

/// The head record: (count, head hash).
pub(super) fn read_head(
    conn: &rusqlite::Connection,
    op: &'static str,
) -> Result<(i64, String), StoreError> {
    let count: i64 = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'audit_count'",
            [],
            |r| r.get(0),
        )
        .map_err(StoreError::sqlite(op))?;
    let head: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'audit_head_hash'",
            [],
            |r| r.get(0),
        )
        .map_err(StoreError::sqlite(op))?;
    Ok((count, head))
}

/// Appends an entry inside `tx` (which must be an IMMEDIATE transaction so
/// the head cannot move underneath), updating the head record with it.
pub(super) fn append_in_tx(
    tx: &Transaction<'_>,
    op: &'static str,
    kind: AuditKind,
    subject: &str,
    agent: Option<&str>,
    payload: &Value,
) -> Result<AuditEntry, StoreError> {
    let e = RawEntry::next(read_head(tx, op)?, kind, subject, agent, payload);
    tx.execute(
        "INSERT INTO audit (seq, kind, subject, agent, payload, ts_ms, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            e.seq,
            e.kind,
            e.subject,
            e.agent,
            e.payload,
            e.ts_ms,
            e.prev_hash,
            e.hash
        ],
    )
    .map_err(StoreError::sqlite(op))?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'audit_count'",
        params![e.seq],
    )
    .map_err(StoreError::sqlite(op))?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'audit_head_hash'",
        params![e.hash],
    )
    .map_err(StoreError::sqlite(op))?;
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

const SELECT_RAW: &str =
    "SELECT seq, kind, subject, agent, payload, ts_ms, prev_hash, hash FROM audit";

fn raw_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEntry> {
    Ok(RawEntry {
        seq: r.get(0)?,
        kind: r.get(1)?,
        subject: r.get(2)?,
        agent: r.get(3)?,
        payload: r.get(4)?,
        ts_ms: r.get(5)?,
        prev_hash: r.get(6)?,
        hash: r.get(7)?,
    })
}

/// Verifies the whole chain and the head record inside one read transaction.
pub(super) fn verify(tx: &Transaction<'_>) -> Result<AuditReport, AuditError> {
    const OP: &str = "verify_audit";
    let head = read_head(tx, OP)?;
    let mut stmt = tx
        .prepare(&format!("{SELECT_RAW} ORDER BY seq"))
        .map_err(StoreError::sqlite(OP))?;
    let rows = stmt
        .query_map([], raw_from_row)
        .map_err(StoreError::sqlite(OP))?;
    verify_chain(head, rows.map(|r| r.map_err(StoreError::sqlite(OP))))
}

/// Reads up to `limit` entries with `seq > after_seq`, in order.
pub(super) fn read_entries(
    conn: &rusqlite::Connection,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    const OP: &str = "audit_entries";
    let mut stmt = conn
        .prepare(&format!(
            "{SELECT_RAW} WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))
        .map_err(StoreError::sqlite(OP))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let raws = stmt
        .query_map(params![after_seq, limit], raw_from_row)
        .map_err(StoreError::sqlite(OP))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite(OP))?;
    raws.into_iter().map(|e| e.into_entry(OP)).collect()
}
