//! Growth benchmark: how a host's costs grow with the number of tools it
//! holds (issue 40). Run with `cargo bench -p temper-cli --bench growth`.
//!
//! For each path (`Forge`, the embedder's; `temper mcp` over stdio), each
//! placement of the tools already held (in one session, in the agent tier,
//! in the shared tier) and each N (`GROWTH_NS`, default 10,100,1000; add
//! 10000 for the full table), a fresh host process:
//! 1. places N distinct small sandbox tools: forged into the session, or
//!    built and imported (tests and judge run, as for any import) into the
//!    agent or shared tier;
//! 2. forges M = 40 new tools into the session, each called once right
//!    after its forge: **forge p50** and **first call after the forge p50**;
//! 3. calls a working set of the 64 most recently placed tools three times
//!    round robin: **2nd..Nth call p50** (the calls after each tool's first;
//!    the working set stays within the loaded-tool cache, 256 by default,
//!    so the figure measures the cost of N, not of a cache too small for
//!    a round robin over all N);
//! 4. reports the host's RSS at the end (after the placing, the forges and
//!    the calls) against its RSS before the placing: **RSS per tool**, and
//!    the marginal RSS per tool between two Ns (the target's figure; at
//!    small N the per-tool figure is dominated by the host's fixed costs
//!    of its first calls: pools, caches filling).
//!
//! The `Forge` path runs the forge's own registry watch (1 s, the
//! default), as an embedder gets it; the stdio path runs `temper mcp`
//! (release build of this workspace) with its defaults, driven over its
//! stdin/stdout by this process, one request at a time, timed from the
//! request's write to its answer's read.
//!
//! The report goes to `target/bench-growth.md` (and stdout), with each
//! latency's ratio to N = 10 in the same run. `GROWTH_PATHS=forge,stdio`
//! and `GROWTH_PLACEMENTS=session,agent,shared` choose parts.

/// The allocator of the `temper` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::Runtime;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeConfig, ForgeContext};
use temper::store::{Registry, Tier};

const DEFAULT_NS: &[usize] = &[10, 100, 1000];
/// New tools forged after the N are placed.
const NEW_TOOLS: usize = 40;
/// The working set of the 2nd..Nth calls.
const WORKING_SET: usize = 64;
const ROUNDS: usize = 3;
const AGENT: &str = "bench";
const SESSION: &str = "growth";

/// A small sandbox tool, distinct per `i` (a constant changes the bytecode).
fn source(i: usize) -> String {
    format!(
        "const TOOL_NO = {i};\nfunction execute(input) {{\n  const slug = input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');\n  return {{ slug, tool: TOOL_NO }};\n}}\n"
    )
}

fn request(name: &str, i: usize) -> Value {
    json!({
        "name": name,
        "description": "Turns text into a URL slug.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "outputSchema": {"type": "object", "properties": {"slug": {"type": "string"}, "tool": {"type": "integer"}}},
        "implementation": {"mode": "sandbox", "code": source(i), "allowlist": []},
        "testCases": [{"input": {"text": "Hello World!"}, "expectedOutput": {"slug": "hello-world", "tool": i}}],
    })
}

fn placed_name(i: usize) -> String {
    format!("held_{i}")
}

fn new_name(i: usize) -> String {
    format!("fresh_{i}")
}

fn config(n: usize) -> ForgeConfig {
    ForgeConfig {
        max_session_tools: n + NEW_TOOLS + 1,
        max_agent_tools: n + NEW_TOOLS + 1,
        ..ForgeConfig::default()
    }
}

fn rss_kib(pid: Option<u32>) -> u64 {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".into(),
    };
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|r| r.trim().trim_end_matches("kB").trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

fn p50_us(xs: &mut [Duration]) -> f64 {
    xs.sort();
    xs.get(xs.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn runtime() -> Runtime {
    Runtime::builder()
        .cache_limits(temper::limits::CacheLimits {
            promote_after_calls: 0,
            ..Default::default()
        })
        .build()
        .expect("runtime")
}

fn forge_on(store: &Path, runtime: &Runtime, n: usize) -> Forge {
    Forge::builder(
        runtime.clone(),
        Arc::new(Registry::open(store).expect("store")),
    )
    .judge(Arc::new(RulesJudge::standard()))
    .config(config(n))
    .build()
}

/// Places the N tools with `forge` (this process): forged into the session,
/// or built and imported into the agent or shared tier.
async fn place(forge: &Forge, runtime: &Runtime, placement: &str, n: usize) {
    let ctx = ForgeContext::new(AGENT, SESSION);
    for i in 0..n {
        let text = request(&placed_name(i), i).to_string();
        match placement {
            "session" => {
                forge.forge_json(&text, &ctx).await.expect("forge");
            }
            tier => {
                let req = temper::request::ForgeRequest::from_json(&text).expect("request");
                let built = temper::forge::build::build_sandbox(runtime, &req, false)
                    .await
                    .expect("build");
                let tier = if tier == "agent" {
                    Tier::Agent
                } else {
                    Tier::Shared
                };
                let bytes = built.artifact.bytes.to_vec();
                forge.import(bytes, &ctx, tier).await.expect("import");
            }
        }
    }
}

/// The `Forge` path in this (child) process: one JSON line of figures.
fn child_forge(placement: &str, n: usize, store: &Path) -> Value {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = runtime();
    rt.block_on(runtime.warm_up()).expect("warm up");
    let forge = forge_on(store, &runtime, n);
    let ctx = ForgeContext::new(AGENT, SESSION);
    let rss_before = rss_kib(None);
    let input = json!({"text": "Hello World!"});
    rt.block_on(async {
        let t = Instant::now();
        place(&forge, &runtime, placement, n).await;
        let placing = t.elapsed();
        let (mut forges, mut firsts, mut later) = (Vec::new(), Vec::new(), Vec::new());
        for j in 0..NEW_TOOLS {
            let name = new_name(j);
            let text = request(&name, 1_000_000 + j).to_string();
            let t = Instant::now();
            forge.forge_json(&text, &ctx).await.expect("forge");
            forges.push(t.elapsed());
            let t = Instant::now();
            let out = forge.invoke(&name, &input, &ctx).await.expect("first call");
            firsts.push(t.elapsed());
            assert_eq!(out.output["tool"], 1_000_000 + j);
        }
        let set: Vec<usize> = (n.saturating_sub(WORKING_SET)..n).collect();
        for round in 0..ROUNDS {
            for &i in &set {
                let t = Instant::now();
                let out = forge
                    .invoke(&placed_name(i), &input, &ctx)
                    .await
                    .expect("call");
                if round > 0 {
                    later.push(t.elapsed());
                }
                assert_eq!(out.output["tool"], i);
            }
        }
        // Let background refills settle before reading RSS.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rss_placed = rss_kib(None);
        figures(placing, [forges, firsts, later], rss_before, rss_placed)
    })
}

/// `temper mcp` over stdio: a child process and its pipes.
struct McpStdio {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpStdio {
    fn start(temper: &Path, store: &Path, forge_config: &Path) -> Self {
        let mut child = Command::new(temper)
            .args([
                "mcp",
                "--judge",
                "rules",
                "--agent",
                AGENT,
                "--session",
                SESSION,
            ])
            .arg("--store")
            .arg(store)
            .arg("--forge-config")
            .arg(forge_config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start temper mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "growth", "version": "0"}}),
        );
        writeln!(
            s.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        s
    }

    /// Sends a request and waits for its answer (notifications skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut buf = String::new();
        loop {
            buf.clear();
            assert!(
                self.stdout.read_line(&mut buf).unwrap() > 0,
                "temper mcp ended"
            );
            let v: Value = serde_json::from_str(&buf).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    fn call(&mut self, name: &str, arguments: Value) -> (Duration, Value) {
        let t = Instant::now();
        let r = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let took = t.elapsed();
        assert_eq!(r["isError"], false, "{name}: {r}");
        (took, r)
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stdio path: the agent and shared tiers are placed by this process
/// (a `Forge` on the same store) before `temper mcp` starts; the session
/// is placed through `forge_tool`, as a client does. One JSON line.
fn child_stdio(placement: &str, n: usize, store: &Path, temper: &Path) -> Value {
    let forge_config = store.join("forge.json");
    std::fs::create_dir_all(store).unwrap();
    std::fs::write(
        &forge_config,
        json!({"maxSessionTools": n + NEW_TOOLS + 1, "maxAgentTools": n + NEW_TOOLS + 1})
            .to_string(),
    )
    .unwrap();
    let t = Instant::now();
    if placement != "session" {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let runtime = runtime();
        rt.block_on(async {
            let forge = forge_on(store, &runtime, n);
            place(&forge, &runtime, placement, n).await;
        });
    }
    let mut mcp = McpStdio::start(temper, store, &forge_config);
    let pid = mcp.child.id();
    let rss_before = rss_kib(Some(pid));
    if placement == "session" {
        for i in 0..n {
            mcp.call("forge_tool", request(&placed_name(i), i));
        }
    }
    let placing = t.elapsed();
    let input = json!({"text": "Hello World!"});
    let (mut forges, mut firsts, mut later) = (Vec::new(), Vec::new(), Vec::new());
    for j in 0..NEW_TOOLS {
        let name = new_name(j);
        let (took, _) = mcp.call("forge_tool", request(&name, 1_000_000 + j));
        forges.push(took);
        let (took, out) = mcp.call(&name, input.clone());
        firsts.push(took);
        assert_eq!(out["structuredContent"]["tool"], 1_000_000 + j);
    }
    let set: Vec<usize> = (n.saturating_sub(WORKING_SET)..n).collect();
    for round in 0..ROUNDS {
        for &i in &set {
            let (took, out) = mcp.call(&placed_name(i), input.clone());
            if round > 0 {
                later.push(took);
            }
            assert_eq!(out["structuredContent"]["tool"], i);
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let rss_placed = rss_kib(Some(pid));
    figures(placing, [forges, firsts, later], rss_before, rss_placed)
}

/// One child's figures: how long placing took, the p50 of the forges, the
/// first calls and the later calls, RSS before placing and at the end.
fn figures(placing: Duration, mut samples: [Vec<Duration>; 3], before: u64, end: u64) -> Value {
    let [forges, firsts, later] = &mut samples;
    json!({
        "placing_s": placing.as_secs_f64(),
        "forge_p50_us": p50_us(forges),
        "first_p50_us": p50_us(firsts),
        "later_p50_us": p50_us(later),
        "rss_before_kib": before,
        "rss_placed_kib": end,
    })
}

fn list(var: &str, default: &[&str]) -> Vec<String> {
    std::env::var(var)
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_else(|_| default.iter().map(|s| s.to_string()).collect())
}

fn run_child(path: &str, placement: &str, n: usize) -> Value {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .env("GROWTH_CHILD", format!("{path}:{placement}:{n}"))
        .env("GROWTH_STORE", store.path())
        .stderr(Stdio::inherit())
        .output()
        .expect("run child");
    assert!(out.status.success(), "child {path}/{placement}/{n} failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("child printed no result");
    serde_json::from_str(line).unwrap()
}

fn temper_binary() -> PathBuf {
    // target/release/deps/growth-… -> target/release/temper
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("temper")
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if let Ok(spec) = std::env::var("GROWTH_CHILD") {
        let mut parts = spec.split(':');
        let (path, placement, n) = (
            parts.next().unwrap().to_string(),
            parts.next().unwrap().to_string(),
            parts.next().unwrap().parse::<usize>().unwrap(),
        );
        let store = PathBuf::from(std::env::var("GROWTH_STORE").unwrap());
        let figures = match path.as_str() {
            "forge" => child_forge(&placement, n, &store),
            "stdio" => child_stdio(&placement, n, &store, &temper_binary()),
            other => panic!("unknown path {other}"),
        };
        println!("{figures}");
        return;
    }
    let ns: Vec<usize> = list("GROWTH_NS", &[])
        .into_iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    let ns = if ns.is_empty() {
        DEFAULT_NS.to_vec()
    } else {
        ns
    };
    let paths = list("GROWTH_PATHS", &["forge", "stdio"]);
    let placements = list("GROWTH_PLACEMENTS", &["session", "agent", "shared"]);
    if paths.iter().any(|p| p == "stdio") {
        assert!(
            temper_binary().exists(),
            "build the temper binary first: cargo build --release -p temper-cli"
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut report = format!(
        "# Growth bench\n\nLoad average at the start: {}. Machine: {} cores.\n\n\
         Latency cells: p50 in µs, and (×) its ratio to the same figure at N = {} in this run. \
         RSS/tool: (RSS at the end − RSS before placing) / N; marginal: between this N and the previous one.\n\n",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        ns[0],
    );
    for path in &paths {
        for placement in &placements {
            let _ = writeln!(
                report,
                "## {path}, tools held in the {placement}{}\n",
                if placement == "session" { "" } else { " tier" }
            );
            report.push_str(
                "| N | placing (s) | forge p50 | first call after forge p50 | 2nd..Nth call p50 | RSS/tool (KiB) | marginal RSS/tool (KiB) |\n|---:|---:|---:|---:|---:|---:|---:|\n",
            );
            let mut base: Option<Value> = None;
            let mut prev: Option<(usize, f64)> = None;
            for &n in &ns {
                let v = run_child(path, placement, n);
                eprintln!("growth {path}/{placement}/{n}: {v}");
                let b = base.get_or_insert_with(|| v.clone()).clone();
                let cell = |key: &str| {
                    let x = v[key].as_f64().unwrap();
                    let r = x / b[key].as_f64().unwrap().max(1e-9);
                    format!("{x:.0} ({r:.2}×)")
                };
                let placed = v["rss_placed_kib"].as_f64().unwrap();
                let per_tool = (placed - v["rss_before_kib"].as_f64().unwrap()) / n as f64;
                let marginal = prev.map_or("".to_string(), |(pn, prss)| {
                    format!("{:.1}", (placed - prss) / (n - pn) as f64)
                });
                prev = Some((n, placed));
                let _ = writeln!(
                    report,
                    "| {n} | {:.1} | {} | {} | {} | {per_tool:.1} | {marginal} |",
                    v["placing_s"].as_f64().unwrap(),
                    cell("forge_p50_us"),
                    cell("first_p50_us"),
                    cell("later_p50_us"),
                );
            }
            report.push('\n');
        }
    }
    println!("{report}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-growth.md");
    std::fs::write(&out, &report).expect("write the report");
    eprintln!("growth: report written to {}", out.display());
}
