//! The provenance audit trail: an append-only, hash-chained table.
//!
//! Each entry's `hash` is the blake3 (hex) of this byte string:
//!
//! ```text
//! "temper-audit-v1\0"
//! seq        as 8 bytes, big-endian i64
//! kind       as len-prefixed UTF-8   (len = 8 bytes big-endian u64)
//! subject    as len-prefixed UTF-8
//! agent      as 0x00 (none) | 0x01 then len-prefixed UTF-8
//! ts_ms      as 8 bytes, big-endian i64 (milliseconds since the Unix epoch)
//! payload    as len-prefixed UTF-8 of the payload's canonical JSON
//! prev_hash  as len-prefixed ASCII hex (64 zeros for seq 1)
//! ```
//!
//! Canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace,
//! strings escaped as `serde_json` escapes them, numbers as `serde_json`
//! prints them. The canonical text is what the database stores, and
//! verification hashes the stored text itself, so no float re-parsing can
//! change a hash. Timestamps are provenance, not artifact content, and are
//! covered by the hash so that editing one is detected.
//!
//! A `meta` row pair (`audit_count`, `audit_head_hash`) is updated in the
//! same transaction as every append, so cutting the tail is detected too.
//! An attacker who can rewrite the whole database (chain and head record)
//! can forge a consistent chain; anchor [`AuditReport::head_hash`]
//! elsewhere to detect that.

use rusqlite::{Transaction, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{AuditError, StoreError};
use crate::canonical_json::canonical_json;

/// The `prev_hash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What an audit entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// The forge's judge accepted or rejected a candidate tool.
    ForgeDecision,
    /// A tool moved to a higher tier.
    Promotion,
    /// A human or policy approved something (e.g. a promotion).
    Approval,
    /// A tool call failed.
    InvocationFailure,
    /// A tool was deleted from the registry.
    Deletion,
    /// A tool was registered.
    Registration,
}

impl AuditKind {
    /// The stored (and hashed) name, e.g. `forge_decision`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::ForgeDecision => "forge_decision",
            AuditKind::Promotion => "promotion",
            AuditKind::Approval => "approval",
            AuditKind::InvocationFailure => "invocation_failure",
            AuditKind::Deletion => "deletion",
            AuditKind::Registration => "registration",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<AuditKind> {
        Some(match s {
            "forge_decision" => AuditKind::ForgeDecision,
            "promotion" => AuditKind::Promotion,
            "approval" => AuditKind::Approval,
            "invocation_failure" => AuditKind::InvocationFailure,
            "deletion" => AuditKind::Deletion,
            "registration" => AuditKind::Registration,
            _ => return None,
        })
    }
}

impl std::fmt::Display for AuditKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audit-trail entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Position in the chain, from 1, without gaps.
    pub seq: i64,
    /// What the entry records.
    pub kind: AuditKind,
    /// The tool name the entry is about.
    pub subject: String,
    /// The agent that acted, if any.
    pub agent: Option<String>,
    /// Details, e.g. the judge's reasons.
    pub payload: Value,
    /// When it was appended, milliseconds since the Unix epoch (hashed).
    pub ts_ms: i64,
    /// The previous entry's hash ([`GENESIS_HASH`] for seq 1).
    pub prev_hash: String,
    /// blake3 (hex) over the canonical encoding (see the module docs).
    pub hash: String,
}

/// The result of a successful [`Registry::verify_audit`](super::Registry::verify_audit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Entries in the chain.
    pub entries: u64,
    /// Hash of the last entry ([`GENESIS_HASH`] when empty): anchor it
    /// outside the store to detect a wholesale rewrite.
    pub head_hash: String,
}

fn hash_field(h: &mut blake3::Hasher, bytes: &[u8]) {
    h.update(&(bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// The entry hash over the canonical encoding (see the module docs).
pub(crate) fn entry_hash(
    seq: i64,
    kind: &str,
    subject: &str,
    agent: Option<&str>,
    ts_ms: i64,
    payload_canonical: &str,
    prev_hash: &str,
) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"temper-audit-v1\0");
    h.update(&seq.to_be_bytes());
    hash_field(&mut h, kind.as_bytes());
    hash_field(&mut h, subject.as_bytes());
    match agent {
        None => {
            h.update(&[0]);
        }
        Some(a) => {
            h.update(&[1]);
            hash_field(&mut h, a.as_bytes());
        }
    }
    h.update(&ts_ms.to_be_bytes());
    hash_field(&mut h, payload_canonical.as_bytes());
    hash_field(&mut h, prev_hash.as_bytes());
    h.finalize().to_hex().to_string()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The head record: (count, head hash).
pub(crate) fn read_head(
    tx: &rusqlite::Connection,
    op: &'static str,
) -> Result<(i64, String), StoreError> {
    let count: i64 = tx
        .query_row(
            "SELECT value FROM meta WHERE key = 'audit_count'",
            [],
            |r| r.get(0),
        )
        .map_err(StoreError::sqlite(op))?;
    let head: String = tx
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
pub(crate) fn append_in_tx(
    tx: &Transaction<'_>,
    op: &'static str,
    kind: AuditKind,
    subject: &str,
    agent: Option<&str>,
    payload: &Value,
) -> Result<AuditEntry, StoreError> {
    let (count, prev_hash) = read_head(tx, op)?;
    let seq = count + 1;
    let ts_ms = now_ms();
    let payload_text = canonical_json(payload);
    let hash = entry_hash(
        seq,
        kind.as_str(),
        subject,
        agent,
        ts_ms,
        &payload_text,
        &prev_hash,
    );
    tx.execute(
        "INSERT INTO audit (seq, kind, subject, agent, payload, ts_ms, prev_hash, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            seq,
            kind.as_str(),
            subject,
            agent,
            payload_text,
            ts_ms,
            prev_hash,
            hash
        ],
    )
    .map_err(StoreError::sqlite(op))?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'audit_count'",
        params![seq],
    )
    .map_err(StoreError::sqlite(op))?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'audit_head_hash'",
        params![hash],
    )
    .map_err(StoreError::sqlite(op))?;
    Ok(AuditEntry {
        seq,
        kind,
        subject: subject.to_owned(),
        agent: agent.map(str::to_owned),
        payload: payload.clone(),
        ts_ms,
        prev_hash,
        hash,
    })
}

struct RawEntry {
    seq: i64,
    kind: String,
    subject: String,
    agent: Option<String>,
    payload: String,
    ts_ms: i64,
    prev_hash: String,
    hash: String,
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
pub(crate) fn verify(tx: &Transaction<'_>) -> Result<AuditReport, AuditError> {
    const OP: &str = "verify_audit";
    let (head_count, head_hash) = read_head(tx, OP)?;
    let mut stmt = tx
        .prepare(&format!("{SELECT_RAW} ORDER BY seq"))
        .map_err(StoreError::sqlite(OP))?;
    let rows = stmt
        .query_map([], raw_from_row)
        .map_err(StoreError::sqlite(OP))?;
    let mut expected = 1i64;
    let mut prev = GENESIS_HASH.to_owned();
    for row in rows {
        let e = row.map_err(StoreError::sqlite(OP))?;
        if e.seq != expected {
            return Err(AuditError::SeqGap {
                expected,
                found: e.seq,
            });
        }
        if e.prev_hash != prev {
            return Err(AuditError::PrevHashMismatch { seq: e.seq });
        }
        let recomputed = entry_hash(
            e.seq,
            &e.kind,
            &e.subject,
            e.agent.as_deref(),
            e.ts_ms,
            &e.payload,
            &e.prev_hash,
        );
        if recomputed != e.hash {
            return Err(AuditError::HashMismatch { seq: e.seq });
        }
        if AuditKind::parse(&e.kind).is_none() {
            return Err(AuditError::Malformed {
                seq: e.seq,
                detail: format!("unknown kind {:?}", e.kind),
            });
        }
        prev = e.hash;
        expected += 1;
    }
    let last_seq = expected - 1;
    if head_count > last_seq {
        return Err(AuditError::Truncated {
            head_count,
            last_seq,
        });
    }
    if head_count != last_seq || head_hash != prev {
        return Err(AuditError::HeadMismatch {
            seq: last_seq,
            head_count,
            head_hash,
        });
    }
    Ok(AuditReport {
        entries: last_seq as u64,
        head_hash: prev,
    })
}

/// Reads up to `limit` entries with `seq > after_seq`, in order.
pub(crate) fn read_entries(
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
    raws.into_iter()
        .map(|e| {
            let kind = AuditKind::parse(&e.kind).ok_or_else(|| StoreError::Invalid {
                op: OP,
                detail: format!("audit seq {} has unknown kind {:?}", e.seq, e.kind),
            })?;
            Ok(AuditEntry {
                seq: e.seq,
                kind,
                subject: e.subject,
                agent: e.agent,
                payload: serde_json::from_str(&e.payload)
                    .map_err(|source| StoreError::Json { op: OP, source })?,
                ts_ms: e.ts_ms,
                prev_hash: e.prev_hash,
                hash: e.hash,
            })
        })
        .collect()
}
