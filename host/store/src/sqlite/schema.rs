//! Schema migrations, tracked by `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`. They run in
//! one IMMEDIATE transaction that re-reads `user_version` first, so several
//! processes opening a fresh store at once migrate it exactly once. Never
//! edit a released migration; append a new one.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;

const MIGRATIONS: &[&str] = &[
    // 0 -> 1: registry, stats, audit trail, head record.
    r#"
    CREATE TABLE tools (
        id          INTEGER PRIMARY KEY,
        tier        TEXT NOT NULL CHECK (tier IN ('agent', 'shared')),
        owner       TEXT NOT NULL,          -- the agent for tier 'agent', '' for 'shared'
        name        TEXT NOT NULL,
        agent_id    TEXT,                   -- provenance: the agent that forged it
        session_id  TEXT,
        artifact    TEXT NOT NULL,
        manifest    TEXT NOT NULL,
        created_seq INTEGER NOT NULL,       -- seq of its registration audit entry
        UNIQUE (tier, owner, name)
    );
    CREATE INDEX tools_by_owner ON tools (owner, tier);

    CREATE TABLE tool_stats (
        tool_id          INTEGER PRIMARY KEY REFERENCES tools (id) ON DELETE CASCADE,
        total_calls      INTEGER NOT NULL,
        successes        INTEGER NOT NULL,
        total_latency_us INTEGER NOT NULL
    );

    CREATE TABLE invocations (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        tool_id    INTEGER NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
        ok         INTEGER NOT NULL,
        latency_us INTEGER NOT NULL
    );
    CREATE INDEX invocations_by_tool ON invocations (tool_id, id);

    CREATE TABLE audit (
        seq       INTEGER PRIMARY KEY,
        kind      TEXT NOT NULL,
        subject   TEXT NOT NULL,
        agent     TEXT,
        payload   TEXT NOT NULL,            -- canonical JSON, hashed as stored
        ts_ms     INTEGER NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL
    );
    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;

    CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
    INSERT INTO meta (key, value) VALUES
        ('audit_count', 0),
        ('audit_head_hash', '0000000000000000000000000000000000000000000000000000000000000000');
    "#,
    // 1 -> 2: the session tier (`store::sessions`).
    r#"
    CREATE TABLE sessions (
        agent        TEXT NOT NULL,
        session      TEXT NOT NULL,
        owner        TEXT NOT NULL,         -- who may use it ('' when made by a forge)
        created_ms   INTEGER NOT NULL,
        last_used_ms INTEGER NOT NULL,      -- written behind
        idle_ms      INTEGER NOT NULL,      -- 0: never expires
        PRIMARY KEY (agent, session)
    );
    CREATE INDEX sessions_by_expiry ON sessions (last_used_ms + idle_ms) WHERE idle_ms > 0;

    CREATE TABLE session_tools (
        agent            TEXT NOT NULL,
        session          TEXT NOT NULL,
        name             TEXT NOT NULL,
        artifact         TEXT NOT NULL,
        manifest         TEXT NOT NULL,
        created_seq      INTEGER NOT NULL,  -- seq of its forge_decision entry
        total_calls      INTEGER NOT NULL DEFAULT 0,
        successes        INTEGER NOT NULL DEFAULT 0,
        total_latency_us INTEGER NOT NULL DEFAULT 0,
        recent_us        TEXT NOT NULL DEFAULT '[]',  -- JSON array, oldest first
        PRIMARY KEY (agent, session, name),
        FOREIGN KEY (agent, session) REFERENCES sessions (agent, session) ON DELETE CASCADE
    );
    "#,
    // 2 -> 3: call quotas shared by the hosts (`store::quotas`).
    r#"
    CREATE TABLE quota_leases (
        key        TEXT NOT NULL,           -- a hash of the token's or agent's key
        win        INTEGER NOT NULL,        -- minute window (ms since epoch / 60000)
        used       INTEGER NOT NULL,        -- calls handed out to hosts in the window
        last_grant INTEGER NOT NULL,        -- what the last lease granted
        PRIMARY KEY (key, win)
    );
    "#,
    // 3 -> 4: the tool search index (`store::search`): one document per
    // tool, going with its row, and an FTS5 index over it kept by triggers.
    r#"
    CREATE TABLE tool_docs (
        id          INTEGER PRIMARY KEY,
        tool_id     INTEGER UNIQUE REFERENCES tools (id) ON DELETE CASCADE,   -- agent/shared tier
        agent       TEXT,                   -- session tier: (agent, session, name)
        session     TEXT,
        name        TEXT NOT NULL,
        words       TEXT NOT NULL,
        description TEXT NOT NULL,
        params      TEXT NOT NULL,
        UNIQUE (agent, session, name),
        FOREIGN KEY (agent, session, name) REFERENCES session_tools (agent, session, name) ON DELETE CASCADE
    );
    CREATE VIRTUAL TABLE tool_fts USING fts5 (
        words, description, params,
        content = 'tool_docs', content_rowid = 'id', tokenize = 'porter unicode61'
    );
    CREATE TRIGGER tool_docs_ai AFTER INSERT ON tool_docs BEGIN
        INSERT INTO tool_fts (rowid, words, description, params)
            VALUES (new.id, new.words, new.description, new.params);
    END;
    CREATE TRIGGER tool_docs_ad AFTER DELETE ON tool_docs BEGIN
        INSERT INTO tool_fts (tool_fts, rowid, words, description, params)
            VALUES ('delete', old.id, old.words, old.description, old.params);
    END;
    -- The session's working set (JSON array of names, most recent first).
    ALTER TABLE sessions ADD COLUMN working_set TEXT NOT NULL DEFAULT '[]';
    "#,
];

/// The schema version this build migrates to.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version that added the search index (`store::search`): a
/// store migrated from before it has its tools indexed on open.
pub(crate) const SEARCH_INDEX_VERSION: i64 = 4;

/// Brings the database to [`SCHEMA_VERSION`]; returns the version found.
pub(crate) fn migrate(conn: &mut Connection) -> Result<i64, StoreError> {
    const OP: &str = "open";
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::sqlite(OP))?;
    let found: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(StoreError::sqlite(OP))?;
    if found < 0 {
        return Err(StoreError::Invalid {
            op: OP,
            detail: format!("database schema version {found} is negative"),
        });
    }
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(found);
    }
    for migration in &MIGRATIONS[found as usize..] {
        tx.execute_batch(migration)
            .map_err(StoreError::sqlite(OP))?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
        .map_err(StoreError::sqlite(OP))?;
    tx.commit().map_err(StoreError::sqlite(OP))?;
    Ok(found)
}
