//! PostgreSQL schema migrations, tracked in `temper_migrations` (one row per
//! applied version; the schema version is the highest).
//!
//! `MIGRATIONS[i]` takes the schema from version `i` to `i + 1`, with the
//! same semantics as the SQLite schema (`store/sqlite/schema.rs`): tools
//! unique per (tier, owner, name), exact counters in `tool_stats`, the
//! latency window in `invocations`, the append-only hash-chained `audit`
//! table (triggers refuse UPDATE, DELETE and TRUNCATE) and its head record
//! `audit_head`, and the content-addressed `artifacts` (bytea, keyed by
//! (id, form)).
//!
//! All migrations run in one transaction that first takes a
//! transaction-level advisory lock ([`MIGRATION_LOCK`]) and only then reads
//! the version, so any number of hosts opening a fresh database at once
//! apply each migration exactly once: the others wait for the lock and then
//! find the schema current. Never edit a released migration; append one.

use tokio_postgres::Client;

use crate::error::StoreError;

/// The advisory-lock key under which migrations run (`pg_advisory_xact_lock`;
/// "temper" in ASCII). Advisory locks are per database.
pub(super) const MIGRATION_LOCK: i64 = 0x7465_6d70_6572;

const MIGRATIONS: &[&str] = &[
    // 0 -> 1: registry, stats, audit trail, head record, artifacts.
    r#"
    CREATE TABLE tools (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tier        TEXT NOT NULL CHECK (tier IN ('agent', 'shared')),
        owner       TEXT NOT NULL,          -- the agent for tier 'agent', '' for 'shared'
        name        TEXT NOT NULL,
        agent_id    TEXT,                   -- provenance: the agent that forged it
        session_id  TEXT,
        artifact    TEXT NOT NULL,
        manifest    TEXT NOT NULL,          -- canonical JSON, as hashed in the registration entry
        created_seq BIGINT NOT NULL,        -- seq of its registration audit entry
        UNIQUE (tier, owner, name)
    );
    CREATE INDEX tools_by_owner ON tools (owner, tier);

    CREATE TABLE tool_stats (
        tool_id          BIGINT PRIMARY KEY REFERENCES tools (id) ON DELETE CASCADE,
        total_calls      BIGINT NOT NULL,
        successes        BIGINT NOT NULL,
        total_latency_us BIGINT NOT NULL
    );

    CREATE TABLE invocations (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tool_id    BIGINT NOT NULL REFERENCES tools (id) ON DELETE CASCADE,
        ok         BOOLEAN NOT NULL,
        latency_us BIGINT NOT NULL
    );
    CREATE INDEX invocations_by_tool ON invocations (tool_id, id);

    CREATE TABLE audit (
        seq       BIGINT PRIMARY KEY,
        kind      TEXT NOT NULL,
        subject   TEXT NOT NULL,
        agent     TEXT,
        payload   TEXT NOT NULL,            -- canonical JSON, hashed as stored
        ts_ms     BIGINT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash      TEXT NOT NULL
    );
    CREATE FUNCTION temper_audit_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'audit is append-only';
        END
        $$;
    CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
        FOR EACH ROW EXECUTE FUNCTION temper_audit_append_only();
    CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
        FOR EACH STATEMENT EXECUTE FUNCTION temper_audit_append_only();

    -- The head record: one row, locked (SELECT ... FOR UPDATE) by every
    -- append, which serializes appends from all connections and hosts.
    CREATE TABLE audit_head (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        count     BIGINT NOT NULL,
        head_hash TEXT NOT NULL
    );
    INSERT INTO audit_head (id, count, head_hash)
        VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

    CREATE TABLE artifacts (
        id    TEXT NOT NULL,                -- blake3 hex of the component bytes
        form  TEXT NOT NULL CHECK (form IN ('wasm', 'compact')),
        bytes BYTEA NOT NULL,
        PRIMARY KEY (id, form)
    );
    -- Components and bytecode barely compress: store them out of line as they are.
    ALTER TABLE artifacts ALTER COLUMN bytes SET STORAGE EXTERNAL;
    "#,
    // 1 -> 2: the session tier (`store::sessions`).
    r#"
    CREATE TABLE sessions (
        agent        TEXT NOT NULL,
        session      TEXT NOT NULL,
        owner        TEXT NOT NULL,         -- who may use it ('' when made by a forge)
        created_ms   BIGINT NOT NULL,
        last_used_ms BIGINT NOT NULL,       -- written behind
        idle_ms      BIGINT NOT NULL,       -- 0: never expires
        PRIMARY KEY (agent, session)
    );
    CREATE INDEX sessions_by_expiry ON sessions ((last_used_ms + idle_ms)) WHERE idle_ms > 0;

    CREATE TABLE session_tools (
        agent            TEXT NOT NULL,
        session          TEXT NOT NULL,
        name             TEXT NOT NULL,
        artifact         TEXT NOT NULL,
        manifest         TEXT NOT NULL,
        created_seq      BIGINT NOT NULL,   -- seq of its forge_decision entry
        total_calls      BIGINT NOT NULL DEFAULT 0,
        successes        BIGINT NOT NULL DEFAULT 0,
        total_latency_us BIGINT NOT NULL DEFAULT 0,
        recent_us        TEXT NOT NULL DEFAULT '[]',  -- JSON array, oldest first
        PRIMARY KEY (agent, session, name),
        FOREIGN KEY (agent, session) REFERENCES sessions (agent, session) ON DELETE CASCADE
    );
    "#,
    // 2 -> 3: call quotas shared by the hosts (`store::quotas`).
    r#"
    CREATE TABLE quota_leases (
        key        TEXT NOT NULL,           -- a hash of the token's or agent's key
        win        BIGINT NOT NULL,         -- minute window (ms since epoch / 60000)
        used       BIGINT NOT NULL,         -- calls handed out to hosts in the window
        last_grant BIGINT NOT NULL,         -- what the last lease granted
        PRIMARY KEY (key, win)
    );
    "#,
    // 3 -> 4: the tool search index (`store::search`): one document per
    // tool, going with its row, with a weighted tsvector under a GIN index.
    r#"
    CREATE TABLE tool_docs (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tool_id     BIGINT UNIQUE REFERENCES tools (id) ON DELETE CASCADE,  -- agent/shared tier
        agent       TEXT,                   -- session tier: (agent, session, name)
        session     TEXT,
        name        TEXT NOT NULL,
        words       TEXT NOT NULL,
        description TEXT NOT NULL,
        params      TEXT NOT NULL,
        doc         TSVECTOR GENERATED ALWAYS AS (
            setweight(to_tsvector('english', words), 'A')
            || setweight(to_tsvector('english', description), 'B')
            || setweight(to_tsvector('english', params), 'C')
        ) STORED,
        UNIQUE (agent, session, name),
        FOREIGN KEY (agent, session, name) REFERENCES session_tools (agent, session, name) ON DELETE CASCADE
    );
    CREATE INDEX tool_docs_search ON tool_docs USING GIN (doc);
    -- The session's working set (JSON array of names, most recent first).
    ALTER TABLE sessions ADD COLUMN working_set TEXT NOT NULL DEFAULT '[]';
    "#,
];

/// The schema version this build migrates a PostgreSQL database to.
pub const PG_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version that added the search index (`store::search`): a
/// database migrated from before it has its tools indexed, in the
/// migrating transaction (under the migration lock: once, whatever the
/// number of hosts opening it at once).
const SEARCH_INDEX_VERSION: i64 = 4;

/// Brings the database to [`PG_SCHEMA_VERSION`] (see the module docs);
/// [`StoreError::SchemaTooNew`] if it is already past it.
pub(super) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    const OP: &str = "open";
    let pg = StoreError::postgres;
    let tx = client.transaction().await.map_err(pg(OP))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg(OP))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS temper_migrations (
             version    BIGINT PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(pg(OP))?;
    let found: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0)::BIGINT FROM temper_migrations",
            &[],
        )
        .await
        .map_err(pg(OP))?
        .get(0);
    if found < 0 {
        return Err(StoreError::Invalid {
            op: OP,
            detail: format!("database schema version {found} is negative"),
        });
    }
    if found > PG_SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: PG_SCHEMA_VERSION,
        });
    }
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(migration).await.map_err(pg(OP))?;
        let version = i as i64 + 1;
        tx.execute(
            "INSERT INTO temper_migrations (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(pg(OP))?;
    }
    if found < SEARCH_INDEX_VERSION {
        let indexed = super::search::index_missing_in(&tx).await?;
        if indexed > 0 {
            tracing::info!("indexed {indexed} tools for search");
        }
    }
    tx.commit().await.map_err(pg(OP))
}
