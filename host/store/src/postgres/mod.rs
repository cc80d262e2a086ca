//! The shared backend: one PostgreSQL database serving any number of
//! Temper hosts (`--store postgres://user:password@host:port/dbname`).
//! Tools, stats, the audit trail and the artifacts all live in the
//! database, so what one host forges another can call.
//!
//! # Runtime
//!
//! [`RegistryBackend`] is synchronous and is called from inside tokio
//! runtimes (the forge's, a `#[tokio::test]`'s current-thread one), where a
//! blocking PostgreSQL client would have to start a nested runtime and
//! panic. So the backend owns a small multi-thread tokio runtime of its own
//! ([`PostgresOptions::runtime_threads`]) on which the connection pool
//! (`deadpool-postgres` over `tokio-postgres`) and every transaction run.
//! A call spawns its transaction on that runtime and waits for the answer
//! on a `std::sync::mpsc` channel: the caller's thread blocks the way it
//! would on file I/O, and never enters a runtime itself, so any caller
//! context works (plain threads, worker threads, current-thread runtimes).
//! Dropping the backend shuts its runtime down without blocking.
//!
//! # Transactions and locking
//!
//! Transactions run at READ COMMITTED with row locks:
//! - every transaction that appends to the audit trail first locks the
//!   single `audit_head` row (`SELECT … FOR UPDATE`), then reads the head,
//!   inserts the entry and moves the head. That lock serializes appends
//!   from every connection of every host, so the chain has no gap and no
//!   fork; registrations, promotions and deletions append in the
//!   transaction of their change, and take the head lock before touching
//!   any tool row, so these writers always lock in the same order;
//! - name uniqueness is the `UNIQUE (tier, owner, name)` constraint: the
//!   loser of a race gets `unique_violation` (SQLSTATE 23505), reported as
//!   [`StoreError::Conflict`];
//! - a call is recorded under a `FOR KEY SHARE` lock on the tool row and
//!   the row lock of its `tool_stats` upsert, which serializes the latency
//!   window's insert-and-prune per tool;
//! - statistics and verification read in one REPEATABLE READ, read-only
//!   snapshot;
//! - a transaction that fails with `serialization_failure` or
//!   `deadlock_detected` (rolled back by the server) is retried a few times.
//!
//! A host killed in the middle of a transaction loses only that
//! transaction: the server rolls it back when the connection drops and
//! releases its locks.
//!
//! # Schema, pool, durability
//!
//! Migrations are versioned in `temper_migrations` and applied under an
//! advisory lock, once, however many hosts open a fresh database together
//! (see `schema.rs`). Connections come from a pool of
//! [`PostgresOptions::pool_size`] with a connect timeout, and each session
//! runs with a `statement_timeout` and `synchronous_commit=on`, so a commit
//! (and [`RegistryBackend::put_blob`]) returns once the server has flushed
//! it. TLS is not used (`NoTls`): reach a remote server through a tunnel or
//! a private network; `sslmode=require` fails to connect.
//!
//! The URL is a libpq connection string (`postgres://…` URL or
//! `key=value` form); messages and [`RegistryBackend::location`] show it
//! with the password replaced by `***`.

mod ops;
mod schema;
mod search;
mod sessions;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use super::audit::{AuditEntry, AuditKind, AuditReport};
use super::backend::{ArtifactForm, BackendKind, CallBatch, NewTool, RegistryBackend, ToolScope};
pub(crate) use super::error::describe;
use super::error::{AuditError, StoreError};
use super::sessions::{
    EndedSession, NewSessionTool, SessionEnd, SessionRecord, SessionToolRecord, SessionTouch,
};
use super::stats::ToolStats;
use super::{Registry, ToolRecord};
pub use schema::PG_SCHEMA_VERSION;
use temper_runtime::id::ArtifactId;

/// Tuning for [`PostgresBackend::connect`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Most connections this host keeps open. Default 8.
    pub pool_size: usize,
    /// How long opening a connection may take. Default 10 s.
    pub connect_timeout: Duration,
    /// How long a call waits for a free pooled connection. Default 30 s.
    pub pool_wait: Duration,
    /// The server-side `statement_timeout` of every session (this bounds a
    /// wait for the audit head's lock, too). Default 30 s.
    pub statement_timeout: Duration,
    /// Worker threads of the backend's own tokio runtime. Default 2.
    pub runtime_threads: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            pool_size: 8,
            connect_timeout: Duration::from_secs(10),
            pool_wait: Duration::from_secs(30),
            statement_timeout: Duration::from_secs(30),
            runtime_threads: 2,
        }
    }
}

/// A PostgreSQL database opened by [`PostgresBackend::connect`]. `Send +
/// Sync`; one per host (it holds the pool), shared behind the
/// [`Registry`].
pub struct PostgresBackend {
    runtime: Option<tokio::runtime::Runtime>,
    pool: Pool,
    location: String,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("location", &self.location)
            .field("pool", &self.pool.status())
            .finish()
    }
}

impl Drop for PostgresBackend {
    fn drop(&mut self) {
        self.pool.close();
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, so a backend may be dropped inside async code.
            runtime.shutdown_background();
        }
    }
}

/// How often a transaction the server rolled back for a serialization
/// failure or a deadlock is tried again.
const RETRIES: u32 = 5;

/// `url` for messages: a `postgres://` URL with its password (in the
/// user-info or a `password` query parameter) replaced by `***`, or a
/// `key=value` string reduced to its host, port, user and database.
pub fn redact_url(url: &str) -> String {
    if let Ok(mut u) = url::Url::parse(url)
        && matches!(u.scheme(), "postgres" | "postgresql")
    {
        if u.password().is_some() {
            let _ = u.set_password(Some("***"));
        }
        if u.query_pairs().any(|(k, _)| k == "password") {
            let pairs: Vec<(String, String)> = u
                .query_pairs()
                .map(|(k, v)| {
                    let v = if k == "password" {
                        "***".to_owned()
                    } else {
                        v.into_owned()
                    };
                    (k.into_owned(), v)
                })
                .collect();
            u.query_pairs_mut().clear().extend_pairs(pairs);
        }
        return u.to_string();
    }
    match url.parse::<tokio_postgres::Config>() {
        Ok(config) => {
            let mut parts = Vec::new();
            let hosts: Vec<String> = config
                .get_hosts()
                .iter()
                .map(|h| match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                })
                .collect();
            if !hosts.is_empty() {
                parts.push(format!("host={}", hosts.join(",")));
            }
            let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
            if !ports.is_empty() {
                parts.push(format!("port={}", ports.join(",")));
            }
            if let Some(user) = config.get_user() {
                parts.push(format!("user={user}"));
            }
            if config.get_password().is_some() {
                parts.push("password=***".to_owned());
            }
            if let Some(db) = config.get_dbname() {
                parts.push(format!("dbname={db}"));
            }
            parts.join(" ")
        }
        Err(_) => "<unparseable connection string>".to_owned(),
    }
}

fn is_retryable(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Postgres { source, .. }
            if matches!(
                source.code(),
                Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED
            )
    )
}

impl PostgresBackend {
    /// Connects to the database at `url` (a libpq connection string), runs
    /// pending migrations, and keeps a pool of connections. Fails with
    /// [`StoreError::InvalidUrl`], [`StoreError::Pool`] (server unreachable,
    /// login refused), [`StoreError::SchemaTooNew`], or
    /// [`StoreError::Postgres`]; no message contains the password.
    pub fn connect(url: &str, options: PostgresOptions) -> Result<PostgresBackend, StoreError> {
        const OP: &str = "open";
        let location = redact_url(url);
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| StoreError::InvalidUrl {
                location: location.clone(),
                detail: describe(&e),
            })?;
        config.connect_timeout(options.connect_timeout);
        let mut session = config.get_options().unwrap_or("").to_owned();
        session.push_str(&format!(
            " -c statement_timeout={} -c synchronous_commit=on",
            options.statement_timeout.as_millis().max(1)
        ));
        config.options(session.trim_start());
        if config.get_application_name().is_none() {
            config.application_name("temper");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.runtime_threads.max(1))
            .thread_name("temper-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Pool {
                op: OP,
                location: location.clone(),
                detail: format!("cannot start the backend's runtime: {e}"),
            })?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // A pooled connection is checked with an empty query before
                // use, so one broken by a server restart is replaced.
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.pool_wait))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StoreError::Pool {
                op: OP,
                location: location.clone(),
                detail: format!("cannot build the connection pool: {e}"),
            })?;
        let backend = PostgresBackend {
            runtime: Some(runtime),
            pool,
            location,
        };
        backend.run(OP, |pool, location| async move {
            let mut client = ops::client(&pool, OP, &location).await?;
            schema::migrate(&mut client).await
        })?;
        Ok(backend)
    }

    /// Runs `f` (one transaction) on the backend's runtime and waits for
    /// its result without entering a runtime; retries it when the server
    /// rolled it back for a serialization failure or a deadlock.
    fn run<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(Pool, Arc<str>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let gone = || StoreError::Pool {
            op,
            location: self.location.clone(),
            detail: "the backend's runtime is gone or its task panicked".into(),
        };
        let Some(runtime) = self.runtime.as_ref() else {
            return Err(gone());
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let pool = self.pool.clone();
        let location: Arc<str> = Arc::from(self.location.as_str());
        runtime.spawn(async move {
            let mut attempt = 0;
            let result = loop {
                match f(pool.clone(), location.clone()).await {
                    Err(e) if attempt < RETRIES && is_retryable(&e) => {
                        attempt += 1;
                        let jitter = u64::from(std::process::id() % 7) + u64::from(attempt) * 3;
                        tokio::time::sleep(Duration::from_millis(jitter)).await;
                    }
                    other => break other,
                }
            };
            let _ = tx.send(result);
        });
        rx.recv().unwrap_or_else(|_| Err(gone()))
    }
}

impl RegistryBackend for PostgresBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Postgres
    }

    fn location(&self) -> String {
        self.location.clone()
    }

    fn put_blob(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let (id, bytes) = (id.clone(), Arc::<[u8]>::from(bytes));
        self.run("put_artifact", move |pool, loc| {
            ops::put_blob(pool, loc, id.clone(), form, bytes.clone())
        })
    }

    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError> {
        let id = id.clone();
        self.run("get_artifact", move |pool, loc| {
            ops::get_blob(pool, loc, id.clone(), form)
        })
    }

    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError> {
        let id = id.clone();
        self.run("has_artifact", move |pool, loc| {
            ops::has_blob(pool, loc, id.clone(), form)
        })
    }

    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.run("artifact_ids", ops::artifact_ids)
    }

    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError> {
        let new = Arc::new(ops::OwnedNewTool {
            record: new.record.clone(),
            owner: new.owner.to_owned(),
            manifest: new.manifest.to_owned(),
            first: new.first.map(|(k, v)| (k, v.clone())),
            registration: new.registration.clone(),
            carried: new.carried.cloned(),
            from_session: new.from_session.map(|(a, s)| (a.to_owned(), s.to_owned())),
        });
        self.run("register", move |pool, loc| {
            ops::register(pool, loc, new.clone())
        })
    }

    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError> {
        match scope {
            ToolScope::Agent(agent) => {
                let agent = agent.to_owned();
                self.run("tools_for_agent", move |pool, loc| {
                    ops::tools(pool, loc, Some(agent.clone()))
                })
            }
            ToolScope::Shared => {
                self.run("shared_tools", move |pool, loc| ops::tools(pool, loc, None))
            }
        }
    }

    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        let agent = agent.to_owned();
        self.run("agent_tool_count", move |pool, loc| {
            ops::agent_tool_count(pool, loc, agent.clone())
        })
    }

    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        let (name, agent) = (name.to_owned(), agent.to_owned());
        self.run("get", move |pool, loc| {
            ops::get(pool, loc, name.clone(), agent.clone())
        })
    }

    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        let (name, agent) = (name.to_owned(), agent.to_owned());
        self.run("delete", move |pool, loc| {
            ops::delete(pool, loc, name.clone(), agent.clone())
        })
    }

    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        let (name, agent) = (name.to_owned(), agent.to_owned());
        let approval = approval.cloned().map(Arc::new);
        self.run("promote", move |pool, loc| {
            ops::promote(pool, loc, name.clone(), agent.clone(), approval.clone())
        })
    }

    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        let batch = Arc::new(batch.to_vec());
        self.run("record_calls", move |pool, loc| {
            ops::record_calls(pool, loc, batch.clone())
        })
    }

    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        let (name, agent) = (name.to_owned(), agent.to_owned());
        self.run("stats", move |pool, loc| {
            ops::stats(pool, loc, name.clone(), agent.clone())
        })
    }

    fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError> {
        let (subject, agent) = (subject.to_owned(), agent.map(str::to_owned));
        let payload = Arc::new(payload.clone());
        self.run("append_audit", move |pool, loc| {
            ops::append_audit(
                pool,
                loc,
                kind,
                subject.clone(),
                agent.clone(),
                payload.clone(),
            )
        })
    }

    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.run("audit_entries", move |pool, loc| {
            ops::audit_entries(pool, loc, after_seq, limit)
        })
    }

    fn audit_head_seq(&self) -> Result<i64, StoreError> {
        self.run("audit_head_seq", ops::audit_head_seq)
    }

    fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        // Read in one snapshot on the backend's runtime, page by page.
        self.run("verify_audit", ops::audit_verify)?
    }

    fn open_session(&self, session: &SessionRecord) -> Result<SessionRecord, StoreError> {
        let session = Arc::new(session.clone());
        self.run("open_session", move |pool, loc| {
            sessions::open_session(pool, loc, session.clone())
        })
    }

    fn session(&self, agent: &str, session: &str) -> Result<Option<SessionRecord>, StoreError> {
        let (agent, session) = (agent.to_owned(), session.to_owned());
        self.run("session", move |pool, loc| {
            sessions::session(pool, loc, agent.clone(), session.clone())
        })
    }

    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<SessionToolRecord>, StoreError> {
        let (agent, session) = (agent.to_owned(), session.to_owned());
        self.run("session_tools", move |pool, loc| {
            sessions::session_tools(pool, loc, agent.clone(), session.clone())
        })
    }

    fn add_session_tool(&self, new: NewSessionTool<'_>) -> Result<i64, StoreError> {
        let new = Arc::new(sessions::OwnedNewSessionTool {
            session: new.session.clone(),
            name: new.name.to_owned(),
            artifact: new.artifact.clone(),
            manifest: new.manifest.to_owned(),
            decision: new.decision.clone(),
            max_tools: new.max_tools,
        });
        self.run("add_session_tool", move |pool, loc| {
            sessions::add_session_tool(pool, loc, new.clone())
        })
    }

    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: SessionEnd,
    ) -> Result<Option<EndedSession>, StoreError> {
        let (agent, session) = (agent.to_owned(), session.to_owned());
        self.run("end_session", move |pool, loc| {
            sessions::end_session(pool, loc, agent.clone(), session.clone(), end)
        })
    }

    fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &Value,
    ) -> Result<Option<(SessionToolRecord, AuditEntry)>, StoreError> {
        let (agent, session, name, payload) = (
            agent.to_owned(),
            session.to_owned(),
            name.to_owned(),
            payload.clone(),
        );
        self.run("delete_session_tool", move |pool, loc| {
            sessions::delete_session_tool(
                pool,
                loc,
                agent.clone(),
                session.clone(),
                name.clone(),
                payload.clone(),
            )
        })
    }

    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.run("expired_sessions", move |pool, loc| {
            sessions::expired_sessions(pool, loc, now_ms, limit)
        })
    }

    fn touch_sessions(&self, touches: &[SessionTouch]) -> Result<(), StoreError> {
        let mut touches = touches.to_vec();
        // One order on every host: two batches never wait on each other.
        touches.sort_by(|a, b| (&a.agent, &a.session).cmp(&(&b.agent, &b.session)));
        let touches = Arc::new(touches);
        self.run("touch_sessions", move |pool, loc| {
            sessions::touch_sessions(pool, loc, touches.clone())
        })
    }

    fn lease_quota(&self, lease: &crate::QuotaLease) -> Result<u32, StoreError> {
        let lease = Arc::new(lease.clone());
        self.run("lease_quota", move |pool, loc| {
            sessions::lease_quota(pool, loc, lease.clone())
        })
    }

    fn search(
        &self,
        query: &crate::SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<crate::SearchHit>, StoreError> {
        let q = Arc::new(search::OwnedSearch {
            terms: terms.to_vec(),
            agent: query.agent.to_owned(),
            session: query.session.to_owned(),
            tiers: query.tiers,
            fetch,
        });
        self.run("search_tools", move |pool, loc| {
            search::search(pool, loc, q.clone())
        })
    }

    fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError> {
        let (agent, session) = (agent.to_owned(), session.to_owned());
        self.run("working_set", move |pool, loc| {
            search::working_set(pool, loc, agent.clone(), session.clone())
        })
    }

    fn add_to_working_set(
        &self,
        session: &SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError> {
        let args = Arc::new((session.clone(), names.to_vec(), cap));
        self.run("add_to_working_set", move |pool, loc| {
            search::add_to_working_set(pool, loc, args.clone())
        })
    }

    fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        let agent = agent.to_owned();
        self.run("most_used", move |pool, loc| {
            search::most_used(pool, loc, agent.clone(), limit)
        })
    }
}

impl Registry {
    /// Opens the PostgreSQL store at `url` (a libpq connection string, e.g.
    /// `postgres://temper:secret@db.internal:5432/temper`) with default
    /// [`PostgresOptions`]: connects, migrates, and keeps a pool. Several
    /// hosts may open the same database; see [`PostgresBackend`].
    pub fn open_postgres(url: &str) -> Result<Registry, StoreError> {
        Registry::open_postgres_with(url, PostgresOptions::default())
    }

    /// [`Registry::open_postgres`] with explicit options.
    pub fn open_postgres_with(url: &str, options: PostgresOptions) -> Result<Registry, StoreError> {
        let backend = PostgresBackend::connect(url, options)?;
        Ok(Registry::with_backend(Arc::new(backend)))
    }
}
