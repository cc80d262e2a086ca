//! Several hosts on one store: library [`Forge`]s (each with its own
//! runtime, caches and registry connection, as separate hosts have) and
//! real `temper` processes sharing one registry.
//!
//! - a tool forged and promoted on one host is listed and callable on the
//!   other at once; its approval (shared tier) and its deletion are seen
//!   there on the next call, though that host had it loaded; the session
//!   tier stays with its host; a compose tool runs on a host that never
//!   loaded its steps;
//! - 1,000 calls spread over two hosts at once add up to exactly 1,000 in
//!   the stats either host reads;
//! - two hosts registering one name at once (import into the agent or
//!   shared tier, promotion from their session tiers) or the agent's last
//!   free slot: exactly one wins, the other gets the forge's typed
//!   refusal (name taken, agent full), and no half state is left;
//! - two `temper mcp --http` processes: forge on one, call on the other,
//!   1,000 calls over both;
//! - a `temper` process killed with SIGKILL mid-forge (in its judge stage,
//!   and at random points of imports) leaves the shared store consistent:
//!   `temper audit verify` passes, every registry row has its artifact, and
//!   the other host keeps working.
//!
//! Every test runs against a shared SQLite store directory and, when
//! `TEMPER_TEST_PG_URL` is set (`scripts/with-postgres.sh`), against a fresh
//! PostgreSQL database too. No assertion depends on timing: races are
//! forced with a barrier inside the judge, and kill points are checked for
//! consistency wherever they land.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::cache_dir;
use temper::forge::judge::{Judge, ReviewFuture, RulesJudge, ToolCandidate};
use temper::forge::{
    Forge, ForgeConfig, ForgeContext, ForgeError, InvokeError, PromoteError, PromotionThreshold,
    ValidateError,
};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation};
use temper::store::{
    ArtifactForm, ArtifactId, AuditEntry, AuditError, AuditKind, AuditReport, BackendKind,
    CallBatch, NewTool, Registry, RegistryBackend, StoreError, StoreLocation, Tier, ToolRecord,
    ToolScope, ToolStats,
};

/// Only a safety net against a hung process; no assertion depends on it.
const HANG: Duration = Duration::from_secs(600);

// ---- the shared stores ---------------------------------------------------

/// One store that several hosts open: a SQLite directory, or a PostgreSQL
/// database.
pub(crate) struct Shared {
    /// What `--store` is given.
    pub(crate) location: String,
    /// Which backend, for messages.
    pub(crate) label: &'static str,
    _dir: tempfile::TempDir,
    /// For PostgreSQL: (the cluster's URL, the database to drop).
    database: Option<(String, String)>,
}

impl Shared {
    /// A new registry connection to the store: what a host opens.
    fn open(&self) -> Arc<Registry> {
        Arc::new(
            StoreLocation::parse(&self.location)
                .expect("a store location")
                .open()
                .unwrap_or_else(|e| panic!("{}: open: {e}", self.label)),
        )
    }

    /// A scratch directory that lives as long as the store.
    pub(crate) fn scratch(&self) -> &Path {
        self._dir.path()
    }
}

/// The stores `test` runs against: a shared SQLite directory always;
/// PostgreSQL when `TEMPER_TEST_PG_URL` is set (a line says it is skipped
/// otherwise, and `TEMPER_REQUIRE_PG=1` makes that a failure).
pub(crate) fn shared_stores(test: &str) -> Vec<Shared> {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut out = vec![Shared {
        location: store.to_str().unwrap().to_string(),
        label: "sqlite",
        _dir: dir,
        database: None,
    }];
    match std::env::var("TEMPER_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => out.push(postgres_store(&url, test)),
        _ => {
            assert!(
                std::env::var("TEMPER_REQUIRE_PG").as_deref() != Ok("1"),
                "{test}: TEMPER_REQUIRE_PG=1 but TEMPER_TEST_PG_URL is not set"
            );
            eprintln!(
                "{test}: PostgreSQL run skipped: TEMPER_TEST_PG_URL is not set (scripts/with-postgres.sh sets it)"
            );
        }
    }
    out
}

/// A fresh database for `test` on the cluster at `url` (dropped with the
/// [`Shared`]), created through a plain client: the backend's own test
/// support is private to the library.
fn postgres_store(url: &str, test: &str) -> Shared {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "temper_mh{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    admin_exec(url, &format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("{test}: CREATE DATABASE {name}: {e}"));
    let mut location = url::Url::parse(url).expect("TEMPER_TEST_PG_URL is a postgres:// URL");
    location.set_path(&format!("/{name}"));
    Shared {
        location: location.to_string(),
        label: "postgres",
        _dir: tempfile::tempdir().unwrap(),
        database: Some((url.to_string(), name)),
    }
}

/// Runs `sql` on `url` with a plain client on a thread of its own.
pub(crate) fn admin_exec(url: &str, sql: &str) -> Result<(), String> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let conn = tokio::spawn(conn);
            let r = client.batch_execute(&sql).await.map_err(|e| e.to_string());
            drop(client);
            let _ = conn.await;
            r
        })
    })
    .join()
    .unwrap()
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some((admin, name)) = &self.database {
            let _ = admin_exec(
                admin,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
        }
    }
}

// ---- library hosts -------------------------------------------------------

fn seed(name: &str) -> ForgeRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// add_numbers as `name`, its sum offset by `k` (a distinct artifact per
/// `k`), tested on (2, 3).
fn adder(name: &str, k: i64) -> ForgeRequest {
    let mut r = seed("add_numbers");
    r.name = name.into();
    r.implementation = Implementation::Sandbox {
        code: format!("function execute(input) {{ return {{ sum: input.a + input.b + {k} }}; }}"),
        allowlist: vec![],
    };
    r.test_cases[0].expected_output = Some(json!({"sum": 5 + k}));
    r
}

fn config() -> ForgeConfig {
    ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 0,
            confidence: 0.5,
        },
        ..ForgeConfig::default()
    }
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

/// A host: its own runtime, caches and connection to the shared store.
fn host(shared: &Shared, judge: Arc<dyn Judge>, config: ForgeConfig) -> Forge {
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .expect("runtime");
    Forge::builder(runtime, shared.open())
        .judge(judge)
        .panel(rules(), rules())
        .config(config)
        .build()
}

/// A registry connection whose next registration first lets `hook` run:
/// another host's registration landing exactly between this host's last
/// check (name free, room under the limit) and its own insert, the window
/// a barrier cannot reach. Everything else goes straight to the store.
struct Interposed {
    inner: Arc<Registry>,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Interposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interposed")
    }
}

impl RegistryBackend for Interposed {
    fn open_session(
        &self,
        session: &temper::store::SessionRecord,
    ) -> Result<temper::store::SessionRecord, StoreError> {
        self.inner.backend().open_session(session)
    }
    fn session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<temper::store::SessionRecord>, StoreError> {
        self.inner.backend().session(agent, session)
    }
    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<temper::store::SessionToolRecord>, StoreError> {
        self.inner.backend().session_tools(agent, session)
    }
    fn add_session_tool(&self, new: temper::store::NewSessionTool<'_>) -> Result<i64, StoreError> {
        self.inner.backend().add_session_tool(new)
    }
    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: temper::store::SessionEnd,
    ) -> Result<Option<temper::store::EndedSession>, StoreError> {
        self.inner.backend().end_session(agent, session, end)
    }
    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.backend().expired_sessions(now_ms, limit)
    }
    fn touch_sessions(&self, touches: &[temper::store::SessionTouch]) -> Result<(), StoreError> {
        self.inner.backend().touch_sessions(touches)
    }
    fn kind(&self) -> BackendKind {
        self.inner.backend().kind()
    }
    fn location(&self) -> String {
        self.inner.backend().location()
    }
    fn put_blob(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        self.inner.backend().put_blob(id, form, bytes)
    }
    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.backend().get_blob(id, form)
    }
    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError> {
        self.inner.backend().has_blob(id, form)
    }
    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.inner.backend().artifact_ids()
    }
    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError> {
        let hook = self.hook.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        self.inner.backend().register(new)
    }
    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError> {
        self.inner.backend().tools(scope)
    }
    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        self.inner.backend().agent_tool_count(agent)
    }
    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        self.inner.backend().get(name, agent)
    }
    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        self.inner.backend().delete(name, agent)
    }
    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        self.inner.backend().promote(name, agent, approval)
    }
    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        self.inner.backend().record_calls(batch)
    }
    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        self.inner.backend().stats(name, agent)
    }
    fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError> {
        self.inner
            .backend()
            .append_audit(kind, subject, agent, payload)
    }
    fn audit_head_seq(&self) -> Result<i64, StoreError> {
        self.inner.backend().audit_head_seq()
    }
    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.backend().audit_entries(after_seq, limit)
    }
    fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        self.inner.backend().verify_audit()
    }
}

/// A host whose next registration is preceded by `other` importing
/// `bytes` for `other_ctx` into the agent tier (run to completion, on its
/// own connection).
fn host_raced_by(
    shared: &Shared,
    config: ForgeConfig,
    other: Forge,
    bytes: Vec<u8>,
    other_ctx: ForgeContext,
) -> Forge {
    let hook = move || {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                other
                    .import(bytes, &other_ctx, Tier::Agent)
                    .await
                    .expect("the other host registers first");
            })
        })
    };
    let interposed = Interposed {
        inner: shared.open(),
        hook: Mutex::new(Some(Box::new(hook))),
    };
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .expect("runtime");
    Forge::builder(
        runtime,
        Arc::new(Registry::with_backend(Arc::new(interposed))),
    )
    .judge(rules())
    .panel(rules(), rules())
    .config(config)
    .build()
}

/// The kinds of the audit entries about `subject`, in order.
fn trail(store: &Registry, subject: &str) -> Vec<AuditKind> {
    store
        .audit_entries(0, 1_000_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.subject == subject)
        .map(|e| e.kind)
        .collect()
}

/// How many rejected imports the trail records with a reason containing
/// `needle`.
fn refused_imports(store: &Registry, needle: &str) -> usize {
    store
        .audit_entries(0, 1_000_000)
        .unwrap()
        .iter()
        .filter(|e| {
            e.kind == AuditKind::ForgeDecision
                && e.subject == "(import)"
                && e.payload["approved"] == false
                && e.payload["reasons"][0]
                    .as_str()
                    .is_some_and(|r| r.contains(needle))
        })
        .count()
}

/// Approves once every holder of the barrier has reached the judge: the
/// hosts that share it have all passed VALIDATE and TEST (and their
/// pre-registration checks) before any of them registers.
struct BarrierJudge(Arc<tokio::sync::Barrier>);

impl Judge for BarrierJudge {
    fn review<'a>(&'a self, c: &'a ToolCandidate) -> ReviewFuture<'a> {
        Box::pin(async move {
            self.0.wait().await;
            RulesJudge::standard().review(c).await
        })
    }
}

/// The `.wasm` artifacts of `requests`, forged on a scratch host with its
/// own store (so that the shared store has never seen them).
async fn artifacts_of(requests: &[ForgeRequest]) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .unwrap();
    let forge = Forge::builder(runtime, Arc::new(Registry::open(dir.path()).unwrap()))
        .judge(rules())
        .build();
    let mut out = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        // A session each: two requests may share a name.
        let ctx = ForgeContext::new("scratch", format!("scratch-{i}"));
        forge.forge(request, &ctx).await.expect("scratch forge");
        let exported = forge
            .export(&request.name, &ctx, false, None)
            .expect("export");
        out.push(exported.bytes);
    }
    out
}

fn names(tools: &[temper::forge::ToolInfo]) -> Vec<(String, Tier)> {
    tools.iter().map(|t| (t.name.clone(), t.tier)).collect()
}

fn ab(a: i64, b: i64) -> Value {
    json!({"a": a, "b": b})
}

/// What a crash or a race must never break: the audit chain verifies;
/// every registry row's artifact is present and hashes to its id; every
/// row's `created_seq` is its registration entry.
fn assert_consistent(store: &Registry, agents: &[&str]) -> usize {
    store.verify_audit().expect("audit chain intact");
    let entries = store.audit_entries(0, 1_000_000).unwrap();
    let mut rows = store.shared_tools().unwrap();
    for a in agents {
        rows.extend(store.tools_for_agent(a).unwrap());
    }
    for r in &rows {
        store
            .get_artifact(&r.artifact)
            .unwrap_or_else(|e| panic!("row {:?} without its artifact: {e}", r.name));
        let reg = entries
            .iter()
            .find(|e| e.seq == r.created_seq)
            .expect("registration entry");
        assert_eq!(
            (reg.kind, reg.subject.as_str()),
            (AuditKind::Registration, r.name.as_str())
        );
    }
    rows.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_promoted_and_deleted_on_one_host_as_seen_on_the_other() {
    for shared in shared_stores("forged_promoted_and_deleted_on_one_host_as_seen_on_the_other") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        // The same agent and session id on both hosts.
        let alice = ForgeContext::new("alice", "s1");
        let bob = ForgeContext::new("bob", "s1");

        a.forge(&seed("add_numbers"), &alice).await.unwrap();
        // The session tier is in the store: B serves Alice's session, at
        // once; Bob's session of the same id is another session.
        assert!(
            names(&b.visible_tools(&alice).unwrap())
                .contains(&("add_numbers".to_string(), Tier::Session)),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(1, 2), &alice).await.unwrap();
        assert_eq!(out.tier, Tier::Session, "{label}");
        let err = b.invoke("add_numbers", &ab(1, 2), &bob).await.unwrap_err();
        assert!(
            matches!(err, InvokeError::NotFound { .. }),
            "{label}: {err}"
        );

        // Promoted on A: listed and callable on B at once.
        let promoted = a.promote("add_numbers", &alice, None).await.unwrap();
        assert_eq!(promoted.tier, Tier::Agent);
        let listed = b.visible_tools(&alice).unwrap();
        let seen = listed.iter().find(|t| t.name == "add_numbers").unwrap();
        assert_eq!(
            (seen.tier, &seen.id),
            (Tier::Agent, &promoted.id),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(1, 2), &alice).await.unwrap();
        assert_eq!((out.output, out.tier), (json!({"sum": 3}), Tier::Agent));
        assert_eq!(out.tool_id, promoted.id);
        a.invoke("add_numbers", &ab(2, 2), &alice).await.unwrap();
        // Another agent sees nothing of Alice's agent tier on either host.
        for h in [&a, &b] {
            let err = h.invoke("add_numbers", &ab(1, 1), &bob).await.unwrap_err();
            assert!(
                matches!(err, InvokeError::NotFound { .. }),
                "{label}: {err}"
            );
        }

        // Approved on A: shared on B, for Bob too (B has it loaded already).
        a.approve("add_numbers", "alice", "reviewer", Some("ok"))
            .unwrap();
        assert!(
            names(&b.visible_tools(&bob).unwrap())
                .contains(&("add_numbers".to_string(), Tier::Shared)),
            "{label}"
        );
        let out = b.invoke("add_numbers", &ab(3, 4), &bob).await.unwrap();
        assert_eq!((out.output, out.tier), (json!({"sum": 7}), Tier::Shared));

        // The stats add up over both hosts, read on either once each has
        // written its counted calls (every interval; here, by hand).
        for h in [&a, &b] {
            h.store().flush_stats().unwrap();
        }
        for (h, who) in [(&a, &alice), (&b, &bob)] {
            let s = h.tool_stats("add_numbers", who).unwrap();
            assert_eq!((s.total_calls, s.successes), (3, 3), "{label}");
        }

        // Deleted on A: B's next call fails, though B had it loaded.
        a.store().delete("add_numbers", "alice").unwrap();
        for who in [&alice, &bob] {
            let err = b.invoke("add_numbers", &ab(1, 2), who).await.unwrap_err();
            assert!(
                matches!(err, InvokeError::NotFound { .. }),
                "{label}: {err}"
            );
            assert!(
                !names(&b.visible_tools(who).unwrap())
                    .iter()
                    .any(|(n, _)| n == "add_numbers")
            );
        }
        // The name is free again for either host.
        b.forge(&seed("add_numbers"), &bob).await.unwrap();
        assert_eq!(assert_consistent(b.store(), &["alice", "bob"]), 0);
        a.store().verify_audit().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compose_tool_forged_on_one_host_runs_on_the_other() {
    for shared in shared_stores("a_compose_tool_forged_on_one_host_runs_on_the_other") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        let ctx = ForgeContext::new("alice", "s1");
        for step in ["convert_temperature", "add_numbers"] {
            a.forge(&seed(step), &ctx).await.unwrap();
        }
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/compose/fahrenheit_plus.json");
        let compose = ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        a.forge(&compose, &ctx).await.unwrap();
        a.promote("fahrenheit_plus", &ctx, None).await.unwrap();
        // B has never loaded anything: the adapter and both steps (pinned
        // by artifact, in the session tier by name) come from the store.
        let out = b
            .invoke(
                "fahrenheit_plus",
                &json!({"celsius": 100, "offset": 8}),
                &ctx,
            )
            .await
            .unwrap();
        assert_eq!(
            (out.output, out.tier),
            (json!({"sum": 220}), Tier::Agent),
            "{label}"
        );
        // The steps' names are in the session, which B serves too.
        let out = b.invoke("add_numbers", &ab(1, 2), &ctx).await.unwrap();
        assert_eq!(
            (out.output, out.tier),
            (json!({"sum": 3}), Tier::Session),
            "{label}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_calls_over_two_hosts_add_up() {
    for shared in shared_stores("a_thousand_calls_over_two_hosts_add_up") {
        let label = shared.label;
        // Each host writes its counted calls behind, every 100 ms.
        let flush = Duration::from_millis(100);
        let config = ForgeConfig {
            stats_flush_ms: flush.as_millis() as u64,
            ..config()
        };
        let a = host(&shared, rules(), config.clone());
        let b = host(&shared, rules(), config);
        let ctx = ForgeContext::new("alice", "s1");
        a.forge(&seed("add_numbers"), &ctx).await.unwrap();
        a.promote("add_numbers", &ctx, None).await.unwrap();

        // 1,000 calls: 4 tasks per host at once, every 10th with an input
        // its schema refuses (a counted failure).
        let mut tasks = tokio::task::JoinSet::new();
        for (h, forge) in [&a, &b].into_iter().enumerate() {
            for t in 0..4 {
                let forge = forge.clone();
                let ctx = ctx.clone();
                tasks.spawn(async move {
                    for i in 0..125 {
                        let n = (h * 4 + t) * 125 + i;
                        let input = if n % 10 == 0 {
                            json!({"a": "x", "b": 1})
                        } else {
                            ab(n as i64, 1)
                        };
                        let out = forge.invoke("add_numbers", &input, &ctx).await;
                        assert_eq!(out.is_ok(), n % 10 != 0, "call {n}: {out:?}");
                    }
                });
            }
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        // A host reads its own calls at once and the other's once that
        // host has written them: after one interval (polled; the deadline
        // only bounds a failure).
        let deadline = std::time::Instant::now() + flush * 50;
        for h in [&a, &b] {
            let mut s = h.tool_stats("add_numbers", &ctx).unwrap();
            while s.total_calls < 1000 && std::time::Instant::now() < deadline {
                tokio::time::sleep(flush / 4).await;
                s = h.tool_stats("add_numbers", &ctx).unwrap();
            }
            assert_eq!((s.total_calls, s.successes), (1000, 900), "{label}");
        }
        // Every failure is in the trail: on its own (the first of a
        // window) or counted in a window's summary.
        for h in [&a, &b] {
            h.store().close_failure_windows().unwrap();
        }
        let failures: u64 = a
            .store()
            .audit_entries(0, 1_000_000)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == AuditKind::InvocationFailure && e.subject == "add_numbers")
            .map(|e| e.payload["failures"].as_u64().unwrap_or(1))
            .sum();
        assert_eq!(failures, 100, "{label}");
        assert_consistent(b.store(), &["alice"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_registering_one_name_at_once_one_wins() {
    for shared in shared_stores("two_hosts_registering_one_name_at_once_one_wins") {
        let label = shared.label;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let judge = || Arc::new(BarrierJudge(barrier.clone())) as Arc<dyn Judge>;
        let a = host(&shared, judge(), config());
        let b = host(&shared, judge(), config());

        // One artifact imported on both hosts at once, into the agent tier
        // of one agent, then into the shared tier by two agents: both pass
        // the name check, both are tested and judged, one registers first.
        for (tier, name, agents) in [
            (Tier::Agent, "raced_agent", ["alice", "alice"]),
            (Tier::Shared, "raced_shared", ["alice", "bob"]),
        ] {
            let bytes = artifacts_of(&[adder(name, 0)]).await.remove(0);
            let (ca, cb) = (
                ForgeContext::new(agents[0], "on-a"),
                ForgeContext::new(agents[1], "on-b"),
            );
            let (ra, rb) = tokio::join!(
                a.import(bytes.clone(), &ca, tier),
                b.import(bytes.clone(), &cb, tier)
            );
            let (won, lost) = match (ra, rb) {
                (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
                (ra, rb) => panic!("{label} {tier}: exactly one must win: {ra:?} / {rb:?}"),
            };
            assert_eq!(won.tool.tier, tier);
            assert!(
                matches!(&lost, ForgeError::Validate(ValidateError::NameTaken { name: n, tier: t }) if n == name && *t == tier),
                "{label} {tier}: the loser gets the typed conflict: {lost:?}"
            );
            // One row; callable from both hosts.
            let store = a.store();
            let rows: Vec<_> = match tier {
                Tier::Shared => store.shared_tools().unwrap(),
                _ => store.tools_for_agent("alice").unwrap(),
            };
            assert_eq!(rows.iter().filter(|r| r.name == name).count(), 1, "{label}");
            for (h, c) in [(&a, &ca), (&b, &cb)] {
                let out = h.invoke(name, &ab(2, 3), c).await.unwrap();
                assert_eq!(out.output, json!({"sum": 5}));
            }
            // The trail: one registration, the loser's refusal.
            let entries = store.audit_entries(0, 1_000_000).unwrap();
            let count = |kind: AuditKind, approved: Option<bool>| {
                entries
                    .iter()
                    .filter(|e| {
                        e.kind == kind
                            && e.subject == name
                            && approved.is_none_or(|ok| e.payload["approved"] == ok)
                    })
                    .count()
            };
            assert_eq!(count(AuditKind::Registration, None), 1, "{label}");
            assert_eq!(count(AuditKind::ForgeDecision, Some(true)), 1, "{label}");
            assert_eq!(
                refused_imports(store, &format!("{name:?} already exists")),
                1,
                "{label}"
            );
        }

        // Promotion from two hosts' session tiers at once: no name check
        // before the store's, so the store decides every time.
        let (ca, cb) = (
            ForgeContext::new("carol", "on-a"),
            ForgeContext::new("carol", "on-b"),
        );
        let (pa, pb) = (
            host(&shared, rules(), config()),
            host(&shared, rules(), config()),
        );
        pa.forge(&adder("raced_promotion", 1), &ca).await.unwrap();
        pb.forge(&adder("raced_promotion", 2), &cb).await.unwrap();
        let (ra, rb) = tokio::join!(
            pa.promote("raced_promotion", &ca, None),
            pb.promote("raced_promotion", &cb, None)
        );
        let (won, lost, loser, lctx) = match (ra, rb) {
            (Ok(w), Err(l)) => (w, l, &pb, &cb),
            (Err(l), Ok(w)) => (w, l, &pa, &ca),
            (ra, rb) => panic!("{label}: exactly one promotion must win: {ra:?} / {rb:?}"),
        };
        assert!(
            matches!(&lost, PromoteError::NameTaken { tier: Tier::Agent, name, .. } if name == "raced_promotion"),
            "{label}: {lost:?}"
        );
        // The loser's tool is still in its session tier, where it shadows
        // the winner's for that session.
        assert_eq!(
            names(&loser.session_tools(lctx).unwrap()),
            [("raced_promotion".to_string(), Tier::Session)]
        );
        assert_eq!(pa.store().tools_for_agent("carol").unwrap().len(), 1);
        assert_eq!(
            pa.store()
                .get("raced_promotion", "carol")
                .unwrap()
                .unwrap()
                .artifact
                .as_str(),
            won.id
        );

        // The exact window: B's registration lands after A's last check,
        // before A's insert. The store refuses A's row; A reports the name
        // taken, and nothing of A's attempt stays but its refusal.
        let mut files = artifacts_of(&[adder("raced_exact", 1), adder("raced_exact", 2)]).await;
        let (theirs, mine) = (files.remove(0), files.remove(0));
        let other = host(&shared, rules(), config());
        let ours = host_raced_by(
            &shared,
            config(),
            other.clone(),
            theirs,
            ForgeContext::new("erin", "on-b"),
        );
        let lost = ours
            .import(mine, &ForgeContext::new("erin", "on-a"), Tier::Agent)
            .await
            .unwrap_err();
        assert!(
            matches!(&lost, ForgeError::Validate(ValidateError::NameTaken { tier: Tier::Agent, name }) if name == "raced_exact"),
            "{label}: {lost:?}"
        );
        let rows = ours.store().tools_for_agent("erin").unwrap();
        assert_eq!(rows.len(), 1, "{label}");
        let out = ours
            .invoke("raced_exact", &ab(2, 3), &ForgeContext::new("erin", "x"))
            .await
            .unwrap();
        assert_eq!(
            out.output,
            json!({"sum": 6}),
            "{label}: B's tool, seen on A"
        );
        assert_eq!(
            trail(ours.store(), "raced_exact"),
            [AuditKind::ForgeDecision, AuditKind::Registration],
            "{label}: B's decision and registration only"
        );
        assert_eq!(
            refused_imports(ours.store(), "\"raced_exact\" already exists"),
            1
        );
        assert_consistent(a.store(), &["alice", "bob", "carol", "erin"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agent_tool_limit_holds_when_two_hosts_register_at_once() {
    for shared in shared_stores("the_agent_tool_limit_holds_when_two_hosts_register_at_once") {
        let label = shared.label;
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let a = host(
            &shared,
            Arc::new(BarrierJudge(barrier.clone())),
            limited.clone(),
        );
        let b = host(&shared, Arc::new(BarrierJudge(barrier.clone())), limited);
        let ctx = ForgeContext::new("dave", "s");
        // One slot: both hosts see it free, both test, judge and register
        // two different tools.
        let mut files = artifacts_of(&[adder("slot_x", 1), adder("slot_y", 2)]).await;
        let (y, x) = (files.pop().unwrap(), files.pop().unwrap());
        let (rx, ry) = tokio::join!(
            a.import(x, &ctx, Tier::Agent),
            b.import(y, &ctx, Tier::Agent)
        );
        let (won, lost) = match (rx, ry) {
            (Ok(w), Err(l)) | (Err(l), Ok(w)) => (w, l),
            (rx, ry) => panic!("{label}: exactly one must fit: {rx:?} / {ry:?}"),
        };
        assert!(
            matches!(
                &lost,
                ForgeError::Validate(ValidateError::AgentFull { limit: 1, agent }) if agent == "dave"
            ),
            "{label}: the loser gets the typed limit refusal: {lost:?}"
        );
        let rows = a.store().tools_for_agent("dave").unwrap();
        assert_eq!(rows.len(), 1, "{label}");
        assert_eq!(rows[0].name, won.tool.name);
        let sum = if won.tool.name == "slot_x" { 6 } else { 7 };
        for h in [&a, &b] {
            let out = h.invoke(&won.tool.name, &ab(2, 3), &ctx).await.unwrap();
            assert_eq!(out.output, json!({"sum": sum}));
        }
        assert_eq!(refused_imports(a.store(), "maxAgentTools"), 1, "{label}");

        // The exact window: B's registration takes the last slot after A's
        // last check, before A's insert. A's row goes in, A counts again,
        // finds itself over the limit as the later registration, and
        // withdraws it: A reports the agent full, B's tool stays.
        let mut files = artifacts_of(&[adder("slot_b", 1), adder("slot_a", 2)]).await;
        let (theirs, mine) = (files.remove(0), files.remove(0));
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let other = host(&shared, rules(), limited.clone());
        let ours = host_raced_by(
            &shared,
            limited,
            other,
            theirs,
            ForgeContext::new("frank", "on-b"),
        );
        let lost = ours
            .import(mine, &ForgeContext::new("frank", "on-a"), Tier::Agent)
            .await
            .unwrap_err();
        assert!(
            matches!(
                &lost,
                ForgeError::Validate(ValidateError::AgentFull { limit: 1, .. })
            ),
            "{label}: {lost:?}"
        );
        let rows = ours.store().tools_for_agent("frank").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["slot_b"],
            "{label}"
        );
        assert_eq!(
            trail(ours.store(), "slot_a"),
            [
                AuditKind::ForgeDecision,
                AuditKind::Registration,
                AuditKind::Deletion
            ],
            "{label}: the withdrawn registration and its deletion"
        );
        assert_eq!(refused_imports(ours.store(), "maxAgentTools"), 2, "{label}");

        // The same window for a promotion from the session tier: the
        // promotion is withdrawn and the tool stays in its session.
        let theirs = artifacts_of(&[adder("promo_b", 1)]).await.remove(0);
        let limited = ForgeConfig {
            max_agent_tools: 1,
            ..config()
        };
        let other = host(&shared, rules(), limited.clone());
        let ours = host_raced_by(
            &shared,
            limited,
            other,
            theirs,
            ForgeContext::new("gina", "on-b"),
        );
        let mine = ForgeContext::new("gina", "on-a");
        ours.forge(&adder("promo_a", 2), &mine).await.unwrap();
        let lost = ours.promote("promo_a", &mine, None).await.unwrap_err();
        assert!(
            matches!(&lost, PromoteError::AgentFull { limit: 1, .. }),
            "{label}: {lost:?}"
        );
        assert_eq!(
            names(&ours.session_tools(&mine).unwrap()),
            [("promo_a".to_string(), Tier::Session)],
            "{label}: still in its session"
        );
        let rows = ours.store().tools_for_agent("gina").unwrap();
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["promo_b"],
            "{label}"
        );
        assert_eq!(
            trail(ours.store(), "promo_a"),
            [
                AuditKind::ForgeDecision,
                AuditKind::Promotion,
                AuditKind::Registration,
                AuditKind::Deletion,
                // Back in its session (restored).
                AuditKind::ForgeDecision
            ],
            "{label}"
        );
        assert_consistent(ours.store(), &["dave", "frank", "gina"]);
        assert_consistent(b.store(), &["dave"]);
    }
}

// ---- processes -------------------------------------------------------------

/// A `temper mcp --http 127.0.0.1:0` process on the shared store.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(shared: &Shared, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args([
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--judge",
                "rules",
                "--store",
            ])
            .arg(&shared.location)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn temper mcp --http");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                eprintln!("[server] {line}");
                if let Some(rest) = line.strip_prefix("temper mcp: listening on http://") {
                    let _ = tx.send(rest.trim_end_matches("/mcp").to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(HANG)
            .expect("the server says where it listens")
            .parse()
            .unwrap();
        Self { child, addr }
    }

    /// A new MCP session on this server.
    async fn session(&self) -> Mcp {
        let mut m = Mcp {
            client: reqwest::Client::new(),
            url: format!("http://{}/mcp", self.addr),
            session: None,
            next_id: 0,
        };
        m.open().await;
        m
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal Streamable HTTP MCP client (JSON answers).
struct Mcp {
    client: reqwest::Client,
    url: String,
    session: Option<String>,
    next_id: i64,
}

impl Mcp {
    async fn post(&mut self, message: Value) -> (reqwest::header::HeaderMap, Option<Value>) {
        let mut r = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        let resp = r.send().await.expect("send");
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        // A JSON body, or SSE events whose last is the response.
        let last = support::sse::sse_messages(&body)
            .pop()
            .or_else(|| (!body.trim().is_empty()).then(|| serde_json::from_str(&body).unwrap()));
        (headers, last)
    }

    /// Opens the session's GET stream; the JSON-RPC messages it carries
    /// arrive on the returned channel.
    async fn open_stream(&self) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let resp = self
            .client
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", self.session.as_deref().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        support::sse::sse_receiver(resp)
    }

    /// One JSON-RPC request; the whole response object.
    async fn rpc_answer(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let (_, answer) = self
            .post(json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
            .await;
        answer.expect("a response")
    }

    async fn rpc(&mut self, method: &str, params: Value) -> Value {
        let answer = self.rpc_answer(method, params).await;
        assert!(answer.get("error").is_none(), "{answer}");
        answer["result"].clone()
    }

    async fn open(&mut self) {
        self.next_id += 1;
        let (headers, answer) = self
            .post(json!({"jsonrpc": "2.0", "id": self.next_id, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "multihost", "version": "0"}}}))
            .await;
        assert!(answer.unwrap().get("result").is_some());
        self.session = Some(headers["mcp-session-id"].to_str().unwrap().to_string());
        self.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// `tools/call`: (isError, the structured or text result).
    async fn call(&mut self, name: &str, arguments: Value) -> (bool, Value) {
        let r = self
            .rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        let content = r
            .get("structuredContent")
            .cloned()
            .unwrap_or_else(|| r["content"][0]["text"].clone());
        (r["isError"] == true, content)
    }

    async fn tool_names(&mut self) -> Vec<String> {
        self.rpc("tools/list", json!({})).await["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }
}

fn seed_json(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `temper ARGS --store SHARED --json --cache-dir CACHE`: (success,
/// stdout as JSON, stderr).
fn temper_cli(shared: &Shared, args: &[&str]) -> (bool, Value, String) {
    let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    all.push("--store".into());
    all.push(shared.location.clone().into());
    support::temper_json(shared.scratch(), &[], all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_temper_mcp_processes_share_one_store() {
    for shared in shared_stores("two_temper_mcp_processes_share_one_store") {
        let label = shared.label;
        let config = shared.scratch().join("forge.json");
        std::fs::write(
            &config,
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        // Each process writes its counted calls every 100 ms.
        let extra = [
            "--forge-config",
            config.to_str().unwrap(),
            "--registry-poll-ms",
            "50",
            "--stats-flush-ms",
            "100",
        ];
        let (sa, sb) = (
            Server::start(&shared, &extra),
            Server::start(&shared, &extra),
        );
        let mut on_a = sa.session().await;
        let mut on_b = sb.session().await;
        let mut b_stream = on_b.open_stream().await;
        let list_changed =
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}});
        // (The servers poll every 50 ms; 30 s only bounds a failure.)
        let heard = Duration::from_secs(30);

        // Forged on A: in A's session only.
        let r = on_a.call("forge_tool", seed_json("slugify")).await;
        assert!(!r.0, "{label}: {r:?}");
        assert!(!on_b.tool_names().await.contains(&"slugify".to_string()));
        assert_eq!(
            on_a.call("slugify", json!({"text": "A B"})).await,
            (false, json!({"slug": "a-b"}))
        );
        // Promoted on A: B's session hears of it on its GET stream, and
        // lists and calls it.
        let r = on_a.call("promote_tool", json!({"name": "slugify"})).await;
        assert!(!r.0, "{label}: {r:?}");
        let note = tokio::time::timeout(heard, b_stream.recv()).await;
        assert_eq!(note, Ok(Some(list_changed.clone())), "{label}");
        assert!(on_b.tool_names().await.contains(&"slugify".to_string()));
        assert_eq!(
            on_b.call("slugify", json!({"text": "On B"})).await,
            (false, json!({"slug": "on-b"}))
        );

        // 1,000 calls over both processes at once (4 sessions each).
        let mut tasks = tokio::task::JoinSet::new();
        for (h, server) in [&sa, &sb].into_iter().enumerate() {
            for t in 0..4 {
                let mut m = server.session().await;
                tasks.spawn(async move {
                    for i in 0..125 {
                        let text = format!("H{h} t{t} c{i}");
                        let (err, out) = m.call("slugify", json!({"text": text})).await;
                        assert!(!err, "{out}");
                        assert_eq!(out["slug"], format!("h{h}-t{t}-c{i}"));
                    }
                });
            }
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        // 1 call before the promotion (carried), 1 on B, then 1,000: each
        // process reads the other's calls once written (an interval; the
        // deadline only bounds a failure).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for m in [&mut on_a, &mut on_b] {
            let stats = loop {
                let (err, stats) = m.call("tool_stats", json!({"name": "slugify"})).await;
                assert!(!err, "{stats}");
                let stats: Value = match stats {
                    Value::String(s) => serde_json::from_str(&s).unwrap(),
                    v => v,
                };
                if stats["total_calls"] == 1002 || std::time::Instant::now() > deadline {
                    break stats;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            };
            assert_eq!(stats["total_calls"], 1002, "{label}: {stats}");
            assert_eq!(stats["successes"], 1002, "{label}: {stats}");
        }

        // Deleted by a third host: B hears of it, and it is gone from B.
        shared.open().delete("slugify", "default").unwrap();
        let note = tokio::time::timeout(heard, b_stream.recv()).await;
        assert_eq!(note, Ok(Some(list_changed.clone())), "{label}");
        // An unknown tool is a protocol error (-32602), not a tool result.
        let answer = on_b
            .rpc_answer(
                "tools/call",
                json!({"name": "slugify", "arguments": {"text": "x"}}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32602, "{label}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("unknown tool"), "{label}: {answer}");
        assert!(!on_b.tool_names().await.contains(&"slugify".to_string()));

        let (ok, doc, stderr) = temper_cli(&shared, &["audit", "verify"]);
        assert!(ok && doc["ok"] == true, "{label}: {doc} {stderr}");
    }
}

// ---- the name cache --------------------------------------------------------

/// The forge caches resolved names while a registry watch keeps them
/// current (here one that read the trail once and will not again for an
/// hour). This host's own changes invalidate them at once: a promotion
/// that shadows a shared tool, a deletion. Another host's deletion is not
/// seen until the watch reads the trail (the window exists, which shows the
/// cache is used), and is seen by the first call after that read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn own_changes_invalidate_cached_names_at_once_and_others_at_the_next_read() {
    use temper::mcp::watch::{self, RegistryWatch};
    for shared in shared_stores("own_changes_invalidate_cached_names") {
        let label = shared.label;
        let a = host(&shared, rules(), config());
        let b = host(&shared, rules(), config());
        let watch = RegistryWatch::start(b.store_handle()).await.unwrap();
        let (polled_tx, mut polled) = tokio::sync::mpsc::unbounded_channel();
        let poller = tokio::spawn(watch::poll_loop(
            watch.clone(),
            Duration::from_secs(3600),
            move |_| polled_tx.send(()).is_ok(),
        ));
        // The loop's first read (at once) gives B its lease for an hour.
        let lease = std::time::Instant::now() + Duration::from_secs(30);
        while b.store().leased_epoch().is_none() {
            assert!(std::time::Instant::now() < lease, "{label}: no lease");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        // "calc" (+0) forged by alice on A and promoted; bob forges his
        // own "calc" (+100) on B, in his session s1.
        let alice = ForgeContext::new("alice", "a1");
        a.forge(&adder("calc", 0), &alice).await.unwrap();
        a.promote("calc", &alice, None).await.unwrap();
        let bob = ForgeContext::new("bob", "s1");
        b.forge(&adder("calc", 100), &bob).await.unwrap();
        // Alice's is approved (shared); bob, in another session s2, calls
        // the shared one: B resolves and caches (bob, calc).
        a.approve("calc", "alice", "ops", None).unwrap();
        let bob2 = ForgeContext::new("bob", "s2");
        let sum = |o: temper::forge::Invocation| (o.output["sum"].as_i64().unwrap(), o.tier);
        for _ in 0..3 {
            let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
            assert_eq!(sum(out), (5, Tier::Shared), "{label}");
        }
        // bob promotes his on B: his agent-tier tool shadows the shared one
        // from the next call on.
        b.promote("calc", &bob, None).await.unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(sum(out), (105, Tier::Agent), "{label}");
        // B deletes bob's: the shared one again, at once.
        b.store().delete("calc", "bob").unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(sum(out), (5, Tier::Shared), "{label}");

        // A deletes the shared one. B has not read the trail since: its
        // cached resolution still stands (the window) ...
        a.store().delete("calc", "alice").unwrap();
        let out = b.invoke("calc", &ab(2, 3), &bob2).await.unwrap();
        assert_eq!(
            sum(out),
            (5, Tier::Shared),
            "{label}: served from the cache"
        );
        // ... until the next read: then the first call is refused.
        let changes = watch.poll().await.unwrap();
        assert!(changes.shared, "{label}: {changes:?}");
        let refused = b.invoke("calc", &ab(2, 3), &bob2).await;
        assert!(
            matches!(refused, Err(InvokeError::NotFound { .. })),
            "{label}: {refused:?}"
        );
        assert!(polled.try_recv().is_err(), "{label}: the loop did not poll");
        poller.abort();
    }
}

/// Two `temper mcp` hosts on one store, and a third process deleting an
/// agent-tier tool both had called (so resolved and cached): host B, which
/// polls every POLL_MS, refuses every call that starts later than POLL_MS
/// after the deletion committed (the stated bound; each accepted call was
/// sent no later than that), and keeps refusing; host C, run with
/// `--registry-poll-ms 0`, caches nothing and refuses the first call after
/// the deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deletion_on_another_host_stops_calls_within_the_poll_interval() {
    const POLL_MS: u64 = 400;
    for shared in shared_stores("a_deletion_on_another_host_stops_calls") {
        let label = shared.label;
        let config = shared.scratch().join("forge.json");
        std::fs::write(
            &config,
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        let config = config.to_str().unwrap();
        let poll = POLL_MS.to_string();
        let sa = Server::start(&shared, &["--forge-config", config]);
        let sb = Server::start(
            &shared,
            &["--forge-config", config, "--registry-poll-ms", &poll],
        );
        let sc = Server::start(
            &shared,
            &["--forge-config", config, "--registry-poll-ms", "0"],
        );
        let (mut on_a, mut on_b, mut on_c) =
            (sa.session().await, sb.session().await, sc.session().await);
        let r = on_a.call("forge_tool", seed_json("slugify")).await;
        assert!(!r.0, "{label}: {r:?}");
        assert!(!on_a.call("slugify", json!({"text": "A B"})).await.0);
        let r = on_a.call("promote_tool", json!({"name": "slugify"})).await;
        assert!(!r.0, "{label}: {r:?}");
        // B and C call it for longer than B's poll interval: resolved,
        // cached on B, and B's lease renewed.
        let warm = std::time::Instant::now();
        while warm.elapsed() < Duration::from_millis(2 * POLL_MS) {
            for m in [&mut on_b, &mut on_c] {
                assert_eq!(
                    m.call("slugify", json!({"text": "Warm Up"})).await,
                    (false, json!({"slug": "warm-up"})),
                    "{label}"
                );
            }
        }

        shared.open().delete("slugify", "default").unwrap();
        let deleted = std::time::Instant::now();
        let refused = |answer: &Value| answer["error"]["code"] == -32602;
        let call = json!({"name": "slugify", "arguments": {"text": "x"}});

        // C: no cache, so at once.
        let answer = on_c.rpc_answer("tools/call", call.clone()).await;
        assert!(
            refused(&answer),
            "{label}: C served a deleted tool: {answer}"
        );

        // B: every call sent later than POLL_MS after the deletion is
        // refused; poll until the first refusal (30 s only bounds a
        // failure), then a few more.
        let bound = Duration::from_millis(POLL_MS);
        let mut last_served = None;
        let mut first_refused = None;
        let mut after = 0;
        while after < 10 {
            let sent = std::time::Instant::now();
            assert!(
                sent - deleted < Duration::from_secs(30),
                "{label}: B still serves the deleted tool"
            );
            let answer = on_b.rpc_answer("tools/call", call.clone()).await;
            if refused(&answer) {
                first_refused.get_or_insert(sent - deleted);
                after += 1;
            } else {
                assert!(answer.get("result").is_some(), "{label}: {answer}");
                assert!(
                    first_refused.is_none(),
                    "{label}: served again after a refusal"
                );
                last_served = Some(sent - deleted);
                assert!(
                    sent - deleted <= bound,
                    "{label}: served a call sent {:?} after the deletion (bound {bound:?})",
                    sent - deleted
                );
            }
        }
        eprintln!(
            "{label}: poll {POLL_MS} ms: last call served {last_served:?}, first refused {:?} after the deletion",
            first_refused.unwrap()
        );
    }
}

/// Serves a chat-completions judge that never answers; each request's
/// arrival is sent on the returned channel (the forging process is then
/// in its JUDGE stage, its tests run).
async fn hanging_judge() -> (String, std::sync::mpsc::Receiver<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let url = support::chat::serve(move |_body| {
        let _ = tx.lock().unwrap().send(());
        support::chat::Reply {
            delay: HANG,
            ..support::chat::Reply::content("{}")
        }
    })
    .await;
    (url, rx)
}

fn spawn_temper(shared: &Shared, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_temper"))
        .current_dir(shared.scratch())
        .args(args)
        .arg("--store")
        .arg(&shared.location)
        .arg("--cache-dir")
        .arg(cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn temper")
}

/// SIGKILL (`Child::kill` on Unix) and reap.
fn sigkill(mut child: Child) -> std::process::ExitStatus {
    child.kill().unwrap();
    child.wait().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_killed_mid_forge_leaves_the_shared_store_consistent() {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    for shared in shared_stores("a_host_killed_mid_forge_leaves_the_shared_store_consistent") {
        let label = shared.label;
        // Host B: a library forge in this process, calling throughout.
        let b = host(&shared, rules(), config());
        let ctx = ForgeContext::new("default", "b");
        b.forge(&seed("add_numbers"), &ctx).await.unwrap();
        b.promote("add_numbers", &ctx, None).await.unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (b, ctx, calls, stop) = (b.clone(), ctx.clone(), calls.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Acquire) {
                    let out = b.invoke("add_numbers", &ab(1, 2), &ctx).await.unwrap();
                    assert_eq!(out.output, json!({"sum": 3}));
                    calls.fetch_add(1, Ordering::AcqRel);
                }
            })
        };

        // Host A: `temper` processes killed with SIGKILL in their JUDGE
        // stage (VALIDATE, BUILD and TEST done, REGISTER next): a forge,
        // then an import into the agent tier.
        let (judge_url, judged) = hanging_judge().await;
        let llm = [
            "--judge",
            "llm",
            "--judge-url",
            judge_url.as_str(),
            "--judge-model",
            "m",
        ];
        let request = shared.scratch().join("killed.json");
        let mut r = seed_json("slugify");
        r["name"] = json!("killed_forge");
        std::fs::write(&request, r.to_string()).unwrap();
        let mut files = artifacts_of(
            &std::iter::once(adder("killed_import", 0))
                .chain((0..16).map(|i| adder(&format!("k_{i}"), 10 + i)))
                .collect::<Vec<_>>(),
        )
        .await;
        let killed_import = shared.scratch().join("killed_import.wasm");
        std::fs::write(&killed_import, files.remove(0)).unwrap();
        for args in [
            vec!["forge", request.to_str().unwrap(), "--session", "a"],
            vec!["import", killed_import.to_str().unwrap(), "--tier", "agent"],
        ] {
            let child = spawn_temper(&shared, &[&args[..], &llm[..]].concat());
            judged
                .recv_timeout(HANG)
                .expect("the child reaches its judge");
            let status = sigkill(child);
            assert_eq!(status.signal(), Some(9), "{label}: {status}");
            // Read through a forge's registry: artifacts may be stored in
            // compact form, which only a forge's codec expands.
            assert_consistent(b.store(), &["default"]);
        }
        let store = shared.open();
        assert!(store.get("killed_import", "default").unwrap().is_none());
        let (ok, doc, stderr) = temper_cli(&shared, &["tools", "--session", "a"]);
        assert!(ok, "{label}: {stderr}");
        assert!(
            !doc.to_string().contains("killed_forge"),
            "{label}: a killed forge is in no tier: {doc}"
        );

        // Imports killed at random points of their run: the first runs to
        // the end and sets the span (T) the others are killed within, at a
        // uniform random point of [0, T) (some may still finish first).
        // The store stays consistent after each, and B keeps calling.
        let (mut finished, mut span) = (0, Duration::ZERO);
        let runs = files.len();
        for (i, bytes) in files.into_iter().enumerate() {
            let file = shared.scratch().join(format!("k_{i}.wasm"));
            std::fs::write(&file, bytes).unwrap();
            let started = std::time::Instant::now();
            let mut child = spawn_temper(
                &shared,
                &[
                    "import",
                    file.to_str().unwrap(),
                    "--tier",
                    "agent",
                    "--judge",
                    "rules",
                ],
            );
            if i == 0 {
                let status = tokio::task::block_in_place(|| child.wait().unwrap());
                assert!(status.success(), "{label}: import k_0: {status}");
                span = started.elapsed();
                assert!(b.store().get("k_0", "default").unwrap().is_some());
                finished += 1;
            } else {
                let delay = rand::random_range(0..span.as_micros().max(1) as u64);
                tokio::time::sleep(Duration::from_micros(delay)).await;
                match child.try_wait().unwrap() {
                    Some(status) => {
                        assert!(status.success(), "{label}: import k_{i}: {status}");
                        finished += 1;
                    }
                    None => {
                        sigkill(child);
                    }
                }
            }
            let store = b.store();
            assert_consistent(store, &["default"]);
            // A registered tool is complete: B calls it.
            let name = format!("k_{i}");
            if store.get(&name, "default").unwrap().is_some() {
                let out = b.invoke(&name, &ab(2, 3), &ctx).await.unwrap();
                assert_eq!(out.output, json!({"sum": 15 + i as i64}));
            }
        }
        eprintln!(
            "{label}: {} of {runs} imports killed within an import's span of {span:?}",
            runs - finished
        );

        stop.store(true, Ordering::Release);
        worker.await.unwrap();
        let made = calls.load(Ordering::Acquire);
        assert!(made > 0, "{label}");
        let s = b.tool_stats("add_numbers", &ctx).unwrap();
        assert_eq!(s.total_calls, made, "{label}: every call of B counted once");
        // B still forges and promotes; the chain verifies from the CLI.
        b.forge(&adder("after_the_kills", 0), &ctx).await.unwrap();
        b.promote("after_the_kills", &ctx, None).await.unwrap();
        let (ok, doc, stderr) = temper_cli(&shared, &["audit", "verify"]);
        assert!(ok && doc["ok"] == true, "{label}: {doc} {stderr}");
    }
}

#[test]
fn cli_store_urls_and_state_dirs() {
    // Values that are not a store: refused by name, the password never
    // printed.
    let cwd = tempfile::tempdir().unwrap();
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("postgres://temper:hunter2@127.0.0.1:{closed_port}/temper");
    for (store, expect) in [
        (
            "mysql://temper:hunter2@127.0.0.1/x",
            "unsupported URL scheme \"mysql\"",
        ),
        ("postgres://temper:hunter2@127.0.0.1", "no database name"),
        (
            "postgresql://temper:hunter2@127.0.0.1:notaport/x",
            "bad PostgreSQL URL",
        ),
        (
            unreachable.as_str(),
            &*format!("server 127.0.0.1:{closed_port}"),
        ),
    ] {
        for args in [
            vec!["tools", "--store", store],
            vec!["mcp", "--store", store],
        ] {
            let (ok, _, stderr) = support::temper_json(cwd.path(), &[], &args);
            assert!(!ok, "{args:?}");
            assert!(stderr.contains(expect), "{args:?}: {stderr}");
            assert!(!stderr.contains("hunter2"), "{args:?} leaks: {stderr}");
        }
        // $TEMPER_STORE is read the same way.
        let (ok, _, stderr) =
            support::temper_json(cwd.path(), &[("TEMPER_STORE", store.as_ref())], ["tools"]);
        assert!(!ok && stderr.contains(expect), "{stderr}");
    }

    // Two hosts on one store, each with its state dir: a session tool is
    // in the store (both hosts see the session); an imported agent tool is
    // everyone's.
    for shared in shared_stores("cli_store_urls_and_state_dirs") {
        let label = shared.label;
        let (host_a, host_b) = (shared.scratch().join("a"), shared.scratch().join("b"));
        let on = |host: &Path, args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--state-dir", host.to_str().unwrap()]);
            temper_cli(&shared, &all)
        };
        let request = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds/slugify.json");
        let (ok, doc, stderr) = on(
            &host_a,
            &["forge", request.to_str().unwrap(), "--judge", "rules"],
        );
        assert!(ok, "{label}: {doc} {stderr}");
        assert!(
            !host_a.join("sessions").exists(),
            "{label}: no session file: the session is in the store"
        );
        let listed = |host: &Path| -> Vec<(String, String)> {
            let (ok, doc, stderr) = on(host, &["tools"]);
            assert!(ok, "{stderr}");
            doc["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_string(),
                        t["tier"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(listed(&host_a), [("slugify".into(), "session".into())]);
        assert_eq!(
            listed(&host_b),
            [("slugify".into(), "session".into())],
            "{label}: the session is in the store"
        );
        // Exported from A's session, imported on B into the agent tier:
        // both hosts list and call it.
        let file = shared.scratch().join("slugify.wasm");
        let (ok, _, stderr) = on(
            &host_a,
            &["export", "slugify", "-o", file.to_str().unwrap()],
        );
        assert!(ok, "{stderr}");
        let (ok, _, stderr) = on(
            &host_b,
            &[
                "import",
                file.to_str().unwrap(),
                "--tier",
                "agent",
                "--judge",
                "rules",
                "--session",
                "other",
            ],
        );
        assert!(ok, "{label}: {stderr}");
        // The session tool still comes first (each name once).
        assert_eq!(listed(&host_b), [("slugify".into(), "session".into())]);
        assert_eq!(listed(&host_a), [("slugify".into(), "session".into())]);
        for host in [&host_a, &host_b] {
            let (ok, doc, stderr) = on(host, &["call", "slugify", "--input", r#"{"text": "X Y"}"#]);
            assert!(ok, "{label}: {stderr}");
            assert_eq!(doc["output"], json!({"slug": "x-y"}));
        }
        let (ok, _, stderr) = on(&host_a, &["session", "end"]);
        assert!(ok, "{stderr}");
        assert_eq!(listed(&host_a), [("slugify".into(), "agent".into())]);

        // Without --state-dir: the store directory, or for a database a
        // directory per database under the platform data dir. That is where
        // a session file an older `temper` wrote is looked for (and moved
        // into the store): a damaged one there is reported.
        let xdg = shared.scratch().join("xdg");
        let expected = StoreLocation::parse(&shared.location)
            .unwrap()
            .default_state_dir()
            .unwrap();
        let expected = match shared.label {
            "sqlite" => expected,
            _ => xdg.join(expected.strip_prefix(dirs_data_dir()).unwrap()),
        };
        let mut h = blake3::Hasher::new();
        h.update(b"default\0default-dir");
        let legacy = expected
            .join("sessions")
            .join(format!("{}.json", &h.finalize().to_hex()[..32]));
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::write(&legacy, "{ not a session").unwrap();
        let (ok, _, stderr) = support::temper_json(
            shared.scratch(),
            &[("XDG_DATA_HOME", xdg.as_os_str())],
            [
                "forge",
                request.with_file_name("add_numbers.json").to_str().unwrap(),
                "--judge",
                "rules",
                "--session",
                "default-dir",
                "--store",
                &shared.location,
            ],
        );
        assert!(
            !ok && stderr.contains("is damaged") && stderr.contains(&legacy.display().to_string()),
            "{label}: the legacy session file in {} is read: {stderr}",
            expected.display()
        );
    }
}

/// This process's platform data dir (the test's child gets another one
/// through `XDG_DATA_HOME`).
fn dirs_data_dir() -> PathBuf {
    StoreLocation::parse("postgres://u@h/x")
        .unwrap()
        .default_state_dir()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf()
}
