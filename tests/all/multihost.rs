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
//!
//! This module keeps the shared stores and hosts (`callpath` and `scale_out`
//! use them too); the tests are in its submodules.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::cache_dir;
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, PromotionThreshold};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation};
use temper::store::{AuditKind, Registry, StoreLocation, Tier};

mod cache;
mod cli;
mod kill;
mod library;
mod processes;
mod races;

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
    // No registry watch: these hosts' caches are not trusted, so each
    // lookup sees the other hosts' changes at once (the cache tests start
    // a watch of their own, `Forge::start_watch`).
    Forge::builder(runtime, shared.open())
        .judge(judge)
        .panel(rules(), rules())
        .config(config)
        .registry_poll(None)
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
