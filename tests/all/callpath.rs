//! The call path of persisted tiers through `temper mcp` (issue 24): call
//! counts are written behind, so a clean shutdown (stdin closed, SIGTERM,
//! SIGINT) must write them all, and a SIGKILL may lose at most one flush
//! interval of them while the store stays whole.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cache_dir;
use temper::store::{Registry, StoreLocation, Tier};

/// Only a safety net against a hung server.
const HANG: Duration = Duration::from_secs(600);

fn seed(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A `temper mcp` process over stdio; every line it writes, with when it
/// was read.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<(Instant, Value)>,
    next_id: i64,
}

impl Server {
    /// Serves the store at `store` (a directory or a PostgreSQL URL), its
    /// forge config written into `scratch`.
    fn start(store: &StoreArg<'_>, extra: &[&str]) -> Server {
        let config = store.scratch.join("forge.json");
        std::fs::write(
            &config,
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--registry-poll-ms", "0"])
            .arg("--store")
            .arg(store.location)
            .arg("--forge-config")
            .arg(&config)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn temper mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
                if tx.send((Instant::now(), v)).is_err() {
                    return;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
        }
    }

    fn send(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
        self.next_id
    }

    /// The response to `id` (notifications skipped) and when it was read.
    fn answer(&mut self, id: i64) -> (Instant, Value) {
        loop {
            let (at, m) = self.lines.recv_timeout(HANG).expect("an answer");
            if m.get("id").is_some() {
                assert_eq!(m["id"], id, "{m}");
                return (at, m);
            }
        }
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let id = self.send("tools/call", json!({"name": name, "arguments": arguments}));
        let (_, m) = self.answer(id);
        assert!(m.get("error").is_none(), "{m}");
        m["result"].clone()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as libc::pid_t, sig) },
            0
        );
    }
}

/// What `temper mcp --store` is given, and a directory for its config.
struct StoreArg<'a> {
    location: &'a str,
    scratch: &'a Path,
}

impl<'a> StoreArg<'a> {
    /// A SQLite store in `dir` (the config beside it).
    fn dir(dir: &'a Path) -> Self {
        StoreArg {
            location: dir.to_str().expect("a UTF-8 temp path"),
            scratch: dir,
        }
    }

    fn open(&self) -> Registry {
        StoreLocation::parse(self.location)
            .expect("a store location")
            .open()
            .unwrap()
    }
}

/// Forges the slugify seed and promotes it to the agent tier of agent
/// `default`; returns how many calls it has (the session-tier ones carry
/// over).
fn agent_tier_slugify(store: &StoreArg<'_>) -> u64 {
    let mut s = Server::start(store, &[]);
    let forged = s.call("forge_tool", seed("slugify"));
    assert_eq!(forged["isError"], false, "{forged}");
    let r = s.call("slugify", json!({"text": "A B"}));
    assert_eq!(r["isError"], false, "{r}");
    let promoted = s.call("promote_tool", json!({"name": "slugify"}));
    assert_eq!(promoted["isError"], false, "{promoted}");
    drop(s.stdin.take());
    assert!(s.child.wait().unwrap().success());
    let rec = store
        .open()
        .get("slugify", "default")
        .unwrap()
        .expect("promoted");
    assert_eq!(rec.tier, Tier::Agent);
    1
}

fn stored_calls(store: &StoreArg<'_>) -> (u64, u64) {
    let s = store.open().stats("slugify", "default").unwrap();
    (s.total_calls, s.successes)
}

/// stdin closing, SIGTERM and SIGINT each end `temper mcp` with every
/// counted call written, although the flush interval is an hour: on
/// SQLite and, when `TEMPER_TEST_PG_URL` is set, on PostgreSQL.
#[test]
fn clean_shutdown_writes_every_counted_call() {
    for shared in crate::multihost::shared_stores("clean_shutdown_writes_every_counted_call") {
        let store = StoreArg {
            location: &shared.location,
            scratch: shared.scratch(),
        };
        clean_shutdown_on(&store, shared.label);
    }
}

fn clean_shutdown_on(store: &StoreArg<'_>, label: &str) {
    const CALLS: u64 = 25;
    let mut expected = agent_tier_slugify(store);
    assert_eq!(stored_calls(store), (expected, expected), "{label}");
    for how in ["stdin", "SIGTERM", "SIGINT"] {
        let mut s = Server::start(store, &["--stats-flush-ms", "3600000"]);
        for i in 0..CALLS {
            // Every fifth input is refused by the schema: a failed call.
            let input = if i % 5 == 0 {
                json!({"nope": 1})
            } else {
                json!({"text": format!("Call {i}")})
            };
            s.call("slugify", input);
        }
        // Nothing written yet (an hour's interval) ...
        assert_eq!(stored_calls(store).0, expected, "{label} {how}");
        match how {
            "stdin" => drop(s.stdin.take()),
            "SIGTERM" => s.signal(libc::SIGTERM),
            _ => s.signal(libc::SIGINT),
        }
        let status = s.child.wait().unwrap();
        assert!(status.success(), "{label} {how}: {status}");
        // ... and everything once it is gone.
        let ok_before = stored_calls(store).1;
        expected += CALLS;
        assert_eq!(
            stored_calls(store),
            (expected, ok_before),
            "{label} {how}: every call counted"
        );
    }
    assert_eq!(
        stored_calls(store).1,
        1 + 3 * (CALLS - CALLS / 5),
        "{label}"
    );
    store.open().verify_audit().unwrap();
}

/// SIGKILL during a call storm: the store opens, the audit chain verifies,
/// and every call answered more than one flush interval before the kill,
/// plus the write in progress (the stated bound; WRITE allows for it and
/// for the flusher's wake-up on a busy machine), is counted; none is
/// counted twice.
#[test]
fn sigkill_during_a_call_storm_loses_at_most_an_interval() {
    const FLUSH_MS: u64 = 200;
    let store = tempfile::tempdir().unwrap();
    let arg = StoreArg::dir(store.path());
    let before = agent_tier_slugify(&arg);
    let mut s = Server::start(&arg, &["--stats-flush-ms", &FLUSH_MS.to_string()]);
    let mut answered = Vec::new();
    let storm = Instant::now();
    while storm.elapsed() < Duration::from_millis(8 * FLUSH_MS) {
        let id = s.send(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "Storm"}}),
        );
        let (at, m) = s.answer(id);
        assert_eq!(m["result"]["isError"], false, "{m}");
        answered.push(at);
    }
    s.signal(libc::SIGKILL);
    let killed = Instant::now();
    assert!(!s.child.wait().unwrap().success());
    let registry = Registry::open(store.path()).unwrap();
    registry.verify_audit().unwrap();
    let counted = registry.stats("slugify", "default").unwrap().total_calls - before;
    // Batches are taken every FLUSH_MS at a fixed rate: the kill loses the
    // interval being counted and, if it lands in a write, that write's
    // batch, taken at most one write before. One interval plus a write.
    const WRITE_MS: u64 = 300;
    let bound = killed - Duration::from_millis(FLUSH_MS + WRITE_MS);
    let surely = answered.iter().filter(|&&at| at < bound).count() as u64;
    assert!(
        (surely..=answered.len() as u64).contains(&counted),
        "counted {counted} of {} answered; {surely} answered before the bound",
        answered.len()
    );
    assert!(surely > 0, "the storm outlasted the bound");
}

// ---- registry I/O off the async workers ------------------------------------

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeConfig, ForgeContext, PromotionThreshold};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{
    ArtifactForm, ArtifactId, AuditEntry, AuditError, AuditKind, AuditReport, BackendKind,
    CallBatch, NewTool, RegistryBackend, RegistryOptions, SqliteBackend, StoreError, ToolRecord,
    ToolScope, ToolStats,
};

/// How long each slowed registry operation takes.
const SLOW: Duration = Duration::from_millis(700);

/// A SQLite store whose tool lookups and writes (stats, audit) sleep for
/// [`SLOW`] while armed, and its tier listings while `listing` is: a slow
/// disk or a far database.
#[derive(Debug)]
struct SlowStore {
    inner: SqliteBackend,
    armed: AtomicBool,
    listing: AtomicBool,
}

impl SlowStore {
    fn pause(&self) {
        if self.armed.load(Ordering::SeqCst) {
            std::thread::sleep(SLOW);
        }
    }
}

impl RegistryBackend for SlowStore {
    fn open_session(
        &self,
        session: &temper::store::SessionRecord,
    ) -> Result<temper::store::SessionRecord, StoreError> {
        self.inner.open_session(session)
    }
    fn session(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Option<temper::store::SessionRecord>, StoreError> {
        self.inner.session(agent, session)
    }
    fn session_tools(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<temper::store::SessionToolRecord>, StoreError> {
        self.inner.session_tools(agent, session)
    }
    fn add_session_tool(&self, new: temper::store::NewSessionTool<'_>) -> Result<i64, StoreError> {
        self.inner.add_session_tool(new)
    }
    fn end_session(
        &self,
        agent: &str,
        session: &str,
        end: temper::store::SessionEnd,
    ) -> Result<Option<temper::store::EndedSession>, StoreError> {
        self.inner.end_session(agent, session, end)
    }
    fn delete_session_tool(
        &self,
        agent: &str,
        session: &str,
        name: &str,
        payload: &serde_json::Value,
    ) -> Result<Option<(temper::store::SessionToolRecord, temper::store::AuditEntry)>, StoreError>
    {
        self.inner
            .delete_session_tool(agent, session, name, payload)
    }
    fn expired_sessions(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.expired_sessions(now_ms, limit)
    }
    fn touch_sessions(&self, touches: &[temper::store::SessionTouch]) -> Result<(), StoreError> {
        self.inner.touch_sessions(touches)
    }
    fn lease_quota(&self, lease: &temper::store::QuotaLease) -> Result<u32, StoreError> {
        self.inner.lease_quota(lease)
    }
    fn search(
        &self,
        query: &temper::store::SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<temper::store::SearchHit>, StoreError> {
        self.inner.search(query, terms, fetch)
    }
    fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError> {
        self.inner.working_set(agent, session)
    }
    fn add_to_working_set(
        &self,
        session: &temper::store::SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.add_to_working_set(session, names, cap)
    }
    fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.inner.most_used(agent, limit)
    }
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn location(&self) -> String {
        self.inner.location()
    }
    fn put_blob(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        self.inner.put_blob(id, form, bytes)
    }
    fn get_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get_blob(id, form)
    }
    fn has_blob(&self, id: &ArtifactId, form: ArtifactForm) -> Result<bool, StoreError> {
        self.inner.has_blob(id, form)
    }
    fn artifact_ids(&self) -> Result<Vec<ArtifactId>, StoreError> {
        self.inner.artifact_ids()
    }
    fn register(&self, new: NewTool<'_>) -> Result<i64, StoreError> {
        self.inner.register(new)
    }
    fn tools(&self, scope: ToolScope<'_>) -> Result<Vec<ToolRecord>, StoreError> {
        if self.listing.load(Ordering::SeqCst) {
            std::thread::sleep(SLOW);
        }
        self.inner.tools(scope)
    }
    fn agent_tool_count(&self, agent: &str) -> Result<usize, StoreError> {
        self.inner.agent_tool_count(agent)
    }
    fn get(&self, name: &str, agent: &str) -> Result<Option<ToolRecord>, StoreError> {
        self.pause();
        self.inner.get(name, agent)
    }
    fn delete(&self, name: &str, agent: &str) -> Result<ToolRecord, StoreError> {
        self.inner.delete(name, agent)
    }
    fn promote(
        &self,
        name: &str,
        agent: &str,
        approval: Option<&Value>,
    ) -> Result<ToolRecord, StoreError> {
        self.inner.promote(name, agent, approval)
    }
    fn record_calls(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        // Slow for the agent tier only: session-tier calls (stored too, and
        // written per call here) are the other calls that must not wait.
        if batch.iter().any(|b| b.session.is_none()) {
            self.pause();
        }
        self.inner.record_calls(batch)
    }
    fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        self.inner.stats(name, agent)
    }
    fn append_audit(
        &self,
        kind: AuditKind,
        subject: &str,
        agent: Option<&str>,
        payload: &Value,
    ) -> Result<AuditEntry, StoreError> {
        self.pause();
        self.inner.append_audit(kind, subject, agent, payload)
    }
    fn audit_entries(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.audit_entries(after_seq, limit)
    }
    fn audit_head_seq(&self) -> Result<i64, StoreError> {
        self.inner.audit_head_seq()
    }
    fn verify_audit(&self) -> Result<AuditReport, AuditError> {
        self.inner.verify_audit()
    }
}

fn request(name: &str) -> ForgeRequest {
    ForgeRequest::from_json(&serde_json::to_string(&seed(name)).unwrap()).unwrap()
}

/// A forge on a [`SlowStore`] in `dir` (its slowness not yet armed), with
/// `slugify` forged and promoted to alice's agent tier and `add_numbers`
/// in her session `s1`; `stats_flush_ms` as given, else the default.
async fn slow_store_forge(
    dir: &std::path::Path,
    stats_flush_ms: Option<u64>,
) -> (Arc<SlowStore>, Forge, ForgeContext) {
    let slow = Arc::new(SlowStore {
        inner: SqliteBackend::open(dir, RegistryOptions::default()).unwrap(),
        armed: AtomicBool::new(false),
        listing: AtomicBool::new(false),
    });
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .unwrap();
    let defaults = ForgeConfig::default();
    let config = ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 0,
            confidence: 0.5,
        },
        stats_flush_ms: stats_flush_ms.unwrap_or(defaults.stats_flush_ms),
        ..defaults
    };
    // No registry watch: nothing cached, every lookup reads the store.
    let forge = Forge::builder(runtime, Arc::new(Registry::with_backend(slow.clone())))
        .judge(Arc::new(RulesJudge::standard()))
        .config(config)
        .registry_poll(None)
        .build();
    let ctx = ForgeContext::new("alice", "s1");
    forge.forge(&request("slugify"), &ctx).await.unwrap();
    forge.promote("slugify", &ctx, None).await.unwrap();
    forge.forge(&request("add_numbers"), &ctx).await.unwrap();
    (slow, forge, ctx)
}

/// On a runtime with a single thread for every task, an agent-tier call
/// whose registry reads and writes are slow (stats written per call, so a
/// write is on its path) does not stop session-tier calls (whose own store
/// reads and writes are fast here) or timers: the registry runs on the
/// blocking pool. Holding the thread instead, the
/// agent-tier call would finish first.
#[test]
fn a_slow_store_does_not_stall_other_calls() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (slow, forge, ctx) = slow_store_forge(dir.path(), Some(0)).await;
        let add = json!({"a": 2, "b": 3});
        forge.invoke("add_numbers", &add, &ctx).await.unwrap();

        slow.armed.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let agent_call = {
            let (forge, ctx) = (forge.clone(), ctx.clone());
            tokio::spawn(async move {
                let out = forge
                    .invoke("slugify", &json!({"text": "Slow Store"}), &ctx)
                    .await;
                (out, started.elapsed())
            })
        };
        // Let it start and reach the store.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..20 {
            let out = forge.invoke("add_numbers", &add, &ctx).await.unwrap();
            assert_eq!(out.output, json!({"sum": 5}));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(
            !agent_call.is_finished(),
            "the session-tier calls waited for the slow agent-tier call"
        );
        let (out, took) = agent_call.await.unwrap();
        assert_eq!(out.unwrap().output, json!({"slug": "slow-store"}));
        // Its lookup and its stats write were both slow.
        assert!(took >= SLOW * 2, "{took:?}");
        slow.armed.store(false, Ordering::SeqCst);
        assert_eq!(forge.tool_stats("slugify", &ctx).unwrap().total_calls, 1);
    });
}

/// Where a test's notifications go: nowhere.
struct NoNotes;

impl temper::mcp::handler::Notifier for NoNotes {
    fn request_note(&self, _: Value) {}
    fn session_note(&self, _: Value) {}
}

/// On a runtime with a single thread for every task, a `tools/list` whose
/// registry listing is slow (no registry watch: nothing cached) does not
/// stop `ping` or a session-tier call through the same MCP handler: the
/// handler lists the tiers on the blocking pool. Listing on the thread,
/// the `tools/list` would finish first.
#[test]
fn a_slow_listing_does_not_stall_other_requests() {
    use temper::mcp::access::Access;
    use temper::mcp::handler::Handler;
    use temper::mcp::watch::RegistryWatch;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (slow, forge, ctx) = slow_store_forge(dir.path(), None).await;
        let watch = RegistryWatch::start(forge.store_handle()).await.unwrap();
        let handler = Arc::new(Handler::new(forge.clone(), ctx, Access::ALL, watch));
        let add = json!({"name": "add_numbers", "arguments": {"a": 2, "b": 3}});
        handler
            .handle("tools/call", Some(&add), &NoNotes)
            .await
            .unwrap();

        slow.listing.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let list = {
            let handler = handler.clone();
            tokio::spawn(async move {
                let listed = handler.handle("tools/list", None, &NoNotes).await;
                (listed, started.elapsed())
            })
        };
        // Let it start and reach the store.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..20 {
            let pong = handler.handle("ping", None, &NoNotes).await.unwrap();
            assert_eq!(pong, json!({}));
            let out = handler
                .handle("tools/call", Some(&add), &NoNotes)
                .await
                .unwrap();
            assert_eq!(out["structuredContent"], json!({"sum": 5}), "{out}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(
            !list.is_finished(),
            "ping and the session-tier calls waited for the slow listing"
        );
        let (listed, took) = list.await.unwrap();
        slow.listing.store(false, Ordering::SeqCst);
        let names: Vec<&str> = listed.as_ref().unwrap()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(
            names.contains(&"slugify") && names.contains(&"add_numbers"),
            "{names:?}"
        );
        // The agent tier's and the shared tier's listings were both slow.
        assert!(took >= SLOW * 2, "{took:?}");
    });
}

// ---- invocation failures ---------------------------------------------------

/// 10,000 bad calls: the trail gets the first failure with its error and
/// one summary counting the rest by kind; the stats count all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_storm_gives_bounded_audit_entries_and_exact_counts() {
    const BAD: u64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Registry::open(dir.path()).unwrap());
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .build()
        .unwrap();
    let config = ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 0,
            confidence: 0.5,
        },
        // One window for the whole storm.
        stats_flush_ms: 3_600_000,
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime, store.clone())
        .judge(Arc::new(RulesJudge::standard()))
        .config(config)
        .build();
    let ctx = ForgeContext::new("alice", "s1");
    forge.forge(&request("add_numbers"), &ctx).await.unwrap();
    forge.promote("add_numbers", &ctx, None).await.unwrap();
    let failures = || {
        store
            .audit_entries(0, 1_000_000)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == AuditKind::InvocationFailure)
            .collect::<Vec<_>>()
    };
    let head = store.audit_head_seq().unwrap();
    for i in 0..BAD {
        let bad = json!({"a": "not a number", "b": i});
        assert!(forge.invoke("add_numbers", &bad, &ctx).await.is_err());
    }
    let ok = forge
        .invoke("add_numbers", &json!({"a": 1, "b": 2}), &ctx)
        .await
        .unwrap();
    assert_eq!(ok.output, json!({"sum": 3}));
    // During the window: only the first failure, with its error.
    let seen = failures();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].payload["error"]
            .as_str()
            .unwrap()
            .contains("add_numbers")
    );
    assert_eq!(store.audit_head_seq().unwrap(), head + 1);
    // The window closes: one summary counts the rest, by kind.
    store.close_failure_windows().unwrap();
    let seen = failures();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].payload["failures"], BAD - 1, "{}", seen[1].payload);
    assert_eq!(seen[1].payload["kinds"], json!({"input": BAD - 1}));
    let stats = forge.tool_stats("add_numbers", &ctx).unwrap();
    assert_eq!((stats.total_calls, stats.successes), (BAD + 1, 1));
    store.verify_audit().unwrap();
    // A later failure opens a new window: audited at once.
    store.set_stats_flush(Duration::ZERO);
    assert!(forge.invoke("add_numbers", &json!({}), &ctx).await.is_err());
    assert_eq!(failures().len(), 3);
}
