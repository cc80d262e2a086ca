//! Typed errors of the store and of audit-chain verification.

use std::path::PathBuf;

use temper_runtime::id::{ArtifactId, InvalidArtifactId};

/// A failure of a [`Registry`](super::Registry) operation. Every variant names the
/// operation (`op`, e.g. `"register"`) or the artifact involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed (including `SQLITE_BUSY` after the busy timeout).
    #[cfg(feature = "sqlite")]
    #[error("store {op}: sqlite: {source}")]
    Sqlite {
        /// The store operation.
        op: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file-system operation failed.
    #[error("store {op}: i/o on {}: {source}", path.display())]
    Io {
        /// The store operation.
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An artifact file's bytes do not hash to its id.
    #[error("store {op}: artifact {id} is corrupt: its file hashes to {actual}")]
    Corrupt {
        /// The store operation.
        op: &'static str,
        /// The artifact whose file is corrupt.
        id: ArtifactId,
        /// blake3 (hex) of what was read.
        actual: String,
    },
    /// No artifact file exists for this id.
    #[error("store {op}: artifact {id} is not in the store")]
    MissingArtifact {
        /// The store operation.
        op: &'static str,
        /// The missing artifact.
        id: ArtifactId,
    },
    /// The artifact is stored as a compact record but no
    /// [`ArtifactCodec`](super::ArtifactCodec) is attached to expand it.
    #[error(
        "store {op}: artifact {id} is stored in compact form and this registry has no codec to expand it (open it through a Forge)"
    )]
    NoCodec {
        /// The store operation.
        op: &'static str,
        /// The artifact.
        id: ArtifactId,
    },
    /// The codec could not expand the artifact's compact record.
    #[error("store {op}: artifact {id}: its compact record cannot be expanded: {detail}")]
    Compact {
        /// The store operation.
        op: &'static str,
        /// The artifact.
        id: ArtifactId,
        /// Why.
        detail: String,
    },
    /// A string is not a blake3 hex digest (64 lowercase hex characters).
    #[error("store: {0}")]
    InvalidArtifactId(#[from] InvalidArtifactId),
    /// No tool with this name is visible to this agent.
    #[error("store {op}: no tool {name:?} for agent {agent:?}")]
    NotFound {
        /// The store operation.
        op: &'static str,
        /// The tool name.
        name: String,
        /// The agent asked for.
        agent: String,
    },
    /// A tool with this (tier, owner, name) already exists.
    #[error("store {op}: tool {name:?} already exists in tier {tier} (owner {owner:?})")]
    Conflict {
        /// The store operation.
        op: &'static str,
        /// The tier, `agent` or `shared`.
        tier: &'static str,
        /// The owning agent (`""` for the shared tier).
        owner: String,
        /// The tool name.
        name: String,
    },
    /// A session holds as many tools as it may.
    #[error("store {op}: session {session:?} of agent {agent:?} already holds {limit} tools")]
    SessionFull {
        /// The store operation.
        op: &'static str,
        /// The agent.
        agent: String,
        /// The session id.
        session: String,
        /// The limit.
        limit: usize,
    },
    /// The request is not valid for the store (e.g. a session-tier record,
    /// an agent-tier record without `agent_id`, a promotion to a lower tier).
    #[error("store {op}: invalid request: {detail}")]
    Invalid {
        /// The store operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A JSON value stored in the database could not be parsed.
    #[error("store {op}: stored JSON is malformed: {source}")]
    Json {
        /// The store operation.
        op: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// PostgreSQL failed a statement or the connection broke during one.
    /// `detail` is the server's message (severity, text, SQLSTATE) or the
    /// client's; it never contains the password.
    #[cfg(feature = "postgres")]
    #[error("store {op}: postgres: {detail}")]
    Postgres {
        /// The store operation.
        op: &'static str,
        /// What failed, readable (the server's message when there is one).
        detail: String,
        /// The client error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// No PostgreSQL connection could be had: the server cannot be reached
    /// or refused the login, no pooled connection became free in time, or
    /// the backend's runtime is gone.
    #[error("store {op}: postgres at {location}: {detail}")]
    Pool {
        /// The store operation.
        op: &'static str,
        /// The database URL with its password redacted.
        location: String,
        /// What went wrong.
        detail: String,
    },
    /// A registry call moved off the async workers (onto a blocking
    /// thread) did not run: the runtime is shutting down.
    #[error("store {op}: the blocking task did not run: {detail}")]
    Blocking {
        /// The store operation.
        op: &'static str,
        /// Why (the runtime's join error).
        detail: String,
    },
    /// The PostgreSQL URL cannot be used (never repeats its password).
    #[error("store open: invalid PostgreSQL URL {location}: {detail}")]
    InvalidUrl {
        /// The URL with its password redacted.
        location: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The database was written by a newer Temper (its `user_version` is
    /// higher than the latest migration this build knows).
    #[error(
        "store open: database schema version {found} is newer than this build supports ({supported})"
    )]
    SchemaTooNew {
        /// The database's schema version (`PRAGMA user_version` in SQLite,
        /// the highest version in `temper_migrations` in PostgreSQL).
        found: i64,
        /// The latest version this build migrates to.
        supported: i64,
    },
}

impl StoreError {
    #[cfg(feature = "sqlite")]
    pub(crate) fn sqlite(op: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| StoreError::Sqlite { op, source }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(op: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
        move |source| StoreError::Postgres {
            op,
            detail: describe(&source),
            source,
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { op, path, source }
    }
}

/// Why [`Registry::verify_audit`](super::Registry::verify_audit) rejected the audit
/// chain. Every chain variant names the `seq` where the chain breaks.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The entry at this position does not carry the next sequence number:
    /// an entry was removed, or entries were reordered or renumbered.
    #[error(
        "audit chain broken at seq {expected}: found seq {found} instead (entry removed or reordered)"
    )]
    SeqGap {
        /// The sequence number the chain needs next.
        expected: i64,
        /// The sequence number found there.
        found: i64,
    },
    /// The entry's `prev_hash` is not the previous entry's hash.
    #[error("audit chain broken at seq {seq}: prev_hash does not match the previous entry's hash")]
    PrevHashMismatch {
        /// The entry whose link is wrong.
        seq: i64,
    },
    /// The entry's fields do not hash to its stored `hash`: it was edited.
    #[error("audit chain broken at seq {seq}: entry content does not match its hash (edited)")]
    HashMismatch {
        /// The edited entry.
        seq: i64,
    },
    /// An entry cannot be decoded (unknown kind, non-JSON payload).
    #[error("audit chain broken at seq {seq}: malformed entry: {detail}")]
    Malformed {
        /// The malformed entry.
        seq: i64,
        /// What is wrong.
        detail: String,
    },
    /// Fewer entries exist than the head record counts: the tail was cut.
    #[error("audit chain truncated: head record counts {head_count} entries but the chain ends at seq {last_seq}; first missing seq {}", last_seq + 1)]
    Truncated {
        /// Entries the head record counts.
        head_count: i64,
        /// The last seq present.
        last_seq: i64,
    },
    /// The chain's last entry is not the one the head record names (the head
    /// record or the tail was rewritten, or entries were added outside the store).
    #[error(
        "audit chain head mismatch at seq {seq}: head record says count {head_count}, hash {head_hash}"
    )]
    HeadMismatch {
        /// The last seq present.
        seq: i64,
        /// Entries the head record counts.
        head_count: i64,
        /// The head hash the head record names.
        head_hash: String,
    },
    /// Reading the chain failed.
    #[error("audit verify: {0}")]
    Store(#[from] StoreError),
}

/// A readable account of a client error: the server's severity, message,
/// SQLSTATE and detail, or the client's error and its cause.
#[cfg(feature = "postgres")]
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            s.push_str("; ");
            s.push_str(detail);
        }
        s
    } else {
        match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        }
    }
}
