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
//! A head record (`audit_count`, `audit_head_hash`; a `meta` row pair in
//! SQLite, the `audit_head` row in PostgreSQL) (`audit_count`, `audit_head_hash`) is updated in the
//! same transaction as every append, so cutting the tail is detected too.
//! An attacker who can rewrite the whole database (chain and head record)
//! can forge a consistent chain; anchor [`AuditReport::head_hash`]
//! elsewhere to detect that.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{AuditError, StoreError};
use temper_runtime::canonical_json::canonical_json;

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
    /// A registered tool failed the trust policy (a host start or a policy
    /// change re-checked its tier) and was disabled, not deleted.
    TrustDisabled,
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
            AuditKind::TrustDisabled => "trust_disabled",
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
            "trust_disabled" => AuditKind::TrustDisabled,
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

/// An audit row as stored: the payload as its canonical JSON text, which is
/// what the hash covers.
#[derive(Debug, Clone)]
pub(crate) struct RawEntry {
    pub(crate) seq: i64,
    pub(crate) kind: String,
    pub(crate) subject: String,
    pub(crate) agent: Option<String>,
    pub(crate) payload: String,
    pub(crate) ts_ms: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

impl RawEntry {
    /// The next entry after the head `(count, prev_hash)`, stamped now.
    pub(crate) fn next(
        head: (i64, String),
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> RawEntry {
        let (count, prev_hash) = head;
        let seq = count + 1;
        let ts_ms = now_ms();
        let payload = canonical_json(payload);
        let hash = entry_hash(
            seq,
            kind.as_str(),
            subject,
            agent,
            ts_ms,
            &payload,
            &prev_hash,
        );
        RawEntry {
            seq,
            kind: kind.as_str().to_owned(),
            subject: subject.to_owned(),
            agent: agent.map(str::to_owned),
            payload,
            ts_ms,
            prev_hash,
            hash,
        }
    }

    /// Decodes the stored row (kind and payload parsed).
    pub(crate) fn into_entry(self, op: &'static str) -> Result<AuditEntry, StoreError> {
        let kind = AuditKind::parse(&self.kind).ok_or_else(|| StoreError::Invalid {
            op,
            detail: format!("audit seq {} has unknown kind {:?}", self.seq, self.kind),
        })?;
        Ok(AuditEntry {
            seq: self.seq,
            kind,
            subject: self.subject,
            agent: self.agent,
            payload: serde_json::from_str(&self.payload)
                .map_err(|source| StoreError::Json { op, source })?,
            ts_ms: self.ts_ms,
            prev_hash: self.prev_hash,
            hash: self.hash,
        })
    }
}

/// Checks a whole chain, read in `seq` order from one snapshot, against the
/// head record `(count, head hash)` of the same snapshot. Every backend
/// verifies through [`ChainVerifier`]; this is it over an iterator.
pub(crate) fn verify_chain(
    head: (i64, String),
    rows: impl IntoIterator<Item = Result<RawEntry, StoreError>>,
) -> Result<AuditReport, AuditError> {
    let mut verifier = ChainVerifier::new();
    for row in rows {
        verifier.push(row?)?;
    }
    verifier.finish(head)
}

/// Verifies a chain one entry at a time, in `seq` order, holding only the
/// previous entry's hash: a chain of any length is checked in constant
/// memory (the PostgreSQL backend feeds it page by page).
pub(crate) struct ChainVerifier {
    expected: i64,
    prev: String,
}

impl ChainVerifier {
    /// A verifier expecting entry 1.
    pub(crate) fn new() -> Self {
        Self {
            expected: 1,
            prev: GENESIS_HASH.to_owned(),
        }
    }

    /// Checks the next entry: its seq, its link to the previous entry, its
    /// hash and its kind.
    pub(crate) fn push(&mut self, e: RawEntry) -> Result<(), AuditError> {
        let expected = self.expected;
        if e.seq != expected {
            return Err(AuditError::SeqGap {
                expected,
                found: e.seq,
            });
        }
        if e.prev_hash != self.prev {
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
        self.prev = e.hash;
        self.expected += 1;
        Ok(())
    }

    /// The seq of the last entry pushed (0 before any).
    pub(crate) fn last_seq(&self) -> i64 {
        self.expected - 1
    }

    /// Checks the entries pushed against the head record `(count, head
    /// hash)` of the same snapshot.
    pub(crate) fn finish(self, head: (i64, String)) -> Result<AuditReport, AuditError> {
        let (head_count, head_hash) = head;
        let last_seq = self.last_seq();
        if head_count > last_seq {
            return Err(AuditError::Truncated {
                head_count,
                last_seq,
            });
        }
        if head_count != last_seq || head_hash != self.prev {
            return Err(AuditError::HeadMismatch {
                seq: last_seq,
                head_count,
                head_hash,
            });
        }
        Ok(AuditReport {
            entries: last_seq as u64,
            head_hash: self.prev,
        })
    }
}
