//! Hub overhead: a call to an upstream stdio tool through Temper (`temper
//! mcp --tools FILE` as the gateway: JSON-RPC in, policy, the input checked
//! against the tool's input schema, the rmcp client call to the upstream,
//! the output checked against its output schema, JSON-RPC out) vs the same
//! call made directly to the upstream, with the same client code. One in
//! flight (p50, p99) at 10, 100 and 1,000 items per result, and calls/s
//! with 32 in flight. Prints the figures and writes `target/bench-hub.md`.
//!
//! The upstream is this bench's own binary run as a tiny MCP server over
//! stdio (`TEMPER_BENCH_HUB_UPSTREAM=1`): newline-delimited JSON-RPC,
//! results serialized once per size, so the figures are Temper's cost and
//! not an SDK's. It is written by hand rather than with rmcp's server side
//! (not built in this workspace: its `server` feature pulls schemars) since
//! it only needs `initialize`, `tools/list` and `tools/call`.
//!
//! Besides wall-clock latency it reports Temper's CPU time per call: the
//! on-CPU time of every thread of the `temper mcp` process (from
//! `/proc/PID/task/*/schedstat`, nanoseconds) over the measured rounds,
//! divided by the calls. Unlike latency it hardly moves with the load
//! other builds put on the machine, so before/after comparisons use it.
//!
//! Run: `cargo bench -p temper-cli --bench hub`. `TEMPER_BENCH_HUB_SIZES=10`
//! (a comma-separated list) measures only those sizes and skips the 32 in
//! flight part (for profiling one case). `TEMPER_BENCH_HUB_TEMPER=PATH`
//! runs another `temper` binary than the one built with the bench (to
//! compare two builds back to back).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Set in the environment of the upstream child.
const UPSTREAM_ENV: &str = "TEMPER_BENCH_HUB_UPSTREAM";
const WARMUP: usize = 200;
/// Result sizes (items per call).
const SIZES: [usize; 3] = [10, 100, 1000];
/// Set to a comma-separated list of sizes to measure only those.
const SIZES_ENV: &str = "TEMPER_BENCH_HUB_SIZES";
/// Calls per side when 32 are in flight.
const CONCURRENT_CALLS: usize = 20_000;
const IN_FLIGHT: usize = 32;

fn rounds(items: usize) -> usize {
    match items {
        0..=100 => 3000,
        _ => 1000,
    }
}

fn main() {
    if std::env::var_os(UPSTREAM_ENV).is_some() {
        upstream();
        return;
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[upstream.bench]\ncommand = [{:?}]\nenv = {{ {UPSTREAM_ENV} = \"1\" }}\ntools = [\"*\"]\ntimeout_ms = 60000\n",
            exe.display().to_string()
        ),
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tools]\nallow = [\"*\"]\n").unwrap();

    let direct = || {
        let mut cmd = Command::new(&exe);
        cmd.env(UPSTREAM_ENV, "1");
        cmd
    };
    let through = || {
        let temper = std::env::var_os("TEMPER_BENCH_HUB_TEMPER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_temper").into());
        let mut cmd = Command::new(temper);
        cmd.arg("mcp")
            .args(["--judge", "rules"])
            .arg("--tools")
            .arg(&tools)
            .arg("--policy")
            .arg(&policy)
            .arg("--store")
            .arg(dir.path().join("store"))
            .arg("--cache-dir")
            .arg(target.join("bench-cache"));
        cmd
    };

    let sizes: Vec<usize> = match std::env::var(SIZES_ENV) {
        Ok(list) => list
            .split(',')
            .map(|n| n.trim().parse().expect("TEMPER_BENCH_HUB_SIZES: numbers"))
            .collect(),
        Err(_) => SIZES.to_vec(),
    };
    let mut report = format!(
        "# Hub overhead (stdio upstream)\n\n{}\n\nA call to an upstream stdio tool through `temper mcp` (gateway) vs the same call made directly to the upstream, same client code, one in flight. The upstream is a tiny Rust MCP server (this bench's binary); each result carries `items` objects in `structuredContent` and again as text, as SDK servers send them. Temper checks the input and the output against the tool's schemas. Temper CPU per call: on-CPU time of all the `temper mcp` threads over the measured calls, per call (it moves little with the machine's load).\n\n| items per result | result bytes | direct p50 | direct p99 | through Temper p50 | through Temper p99 | Temper adds (p50) | Temper CPU per call |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        machine()
    );
    let mut overhead_10 = f64::NAN;
    for items in sizes.iter().copied() {
        let n = rounds(items);
        let (d, bytes, _) = latencies(direct(), items, n);
        let (t, _, cpu) = latencies(through(), items, n);
        let add = us(pct(&t, 0.5)) - us(pct(&d, 0.5));
        if items == 10 {
            overhead_10 = add;
        }
        let line = format!(
            "| {items} | {bytes} | {:.1} µs | {:.1} µs | {:.1} µs | {:.1} µs | {add:.1} µs | {cpu:.1} µs |\n",
            us(pct(&d, 0.5)),
            us(pct(&d, 0.99)),
            us(pct(&t, 0.5)),
            us(pct(&t, 0.99)),
        );
        print!("{line}");
        report.push_str(&line);
    }
    report.push_str(&format!(
        "\n{} rounds each (1,000 at 1,000 items) after {WARMUP} warm-up. Target: Temper adds ≤ 100 µs p50 (at 10 items: {overhead_10:.1} µs). Load average at the end: {}.\n",
        rounds(10),
        loadavg()
    ));
    if std::env::var_os(SIZES_ENV).is_some() {
        std::fs::write(target.join("bench-hub.md"), &report).unwrap();
        println!("wrote target/bench-hub.md ({SIZES_ENV} set: no {IN_FLIGHT} in flight part)");
        return;
    }
    report.push_str(&format!(
        "\n## {IN_FLIGHT} in flight\n\n| path | calls/s | wall |\n|---|---:|---:|\n"
    ));
    for (name, cmd) in [("direct", direct()), ("through Temper", through())] {
        let (rate, wall) = throughput(cmd, 10);
        let line = format!("| {name} (10 items) | {rate:.0} | {wall:.2} s |\n");
        print!("{line}");
        report.push_str(&line);
    }
    report.push_str(&format!(
        "\n{CONCURRENT_CALLS} calls per path, {IN_FLIGHT} client threads each with one call in flight, one MCP connection (one pipe) to the upstream.\n"
    ));
    std::fs::write(target.join("bench-hub.md"), &report).unwrap();
    println!("wrote target/bench-hub.md");
}

/// The 1, 5 and 15 minute load averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// On-CPU time of every thread of process `pid` so far (threads that have
/// exited are not counted: the runtime's workers and the reader live as
/// long as the process).
fn cpu_time(pid: u32) -> Duration {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
                ns += stat
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(ns)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The machine, for the report.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("Measured {date} on {cpu}, {cores} cores available (shared with other builds).")
}

// ---- the client (the same for both paths) ---------------------------------

/// An MCP client over a child's stdio, one request at a time.
struct Client {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    line: String,
}

impl Client {
    fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start");
        let mut c = Client {
            stdin: BufWriter::new(child.stdin.take().unwrap()),
            stdout: BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()),
            child,
            next: 0,
            line: String::new(),
        };
        c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, msg: &Value) {
        serde_json::to_writer(&mut self.stdin, msg).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            self.line.clear();
            assert!(self.stdout.read_line(&mut self.line).unwrap() > 0, "closed");
            let msg: Value = serde_json::from_str(&self.line).unwrap();
            if msg["id"] == json!(id) {
                assert!(msg.get("error").is_none(), "{msg}");
                return msg;
            }
        }
    }

    /// Into a pipelined client: a reader thread hands each response to
    /// the caller waiting for its id.
    fn pipelined(self) -> Pipelined {
        let Client {
            child,
            stdin,
            mut stdout,
            next,
            ..
        } = self;
        let waiting: Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>> = Arc::default();
        let w = waiting.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let msg: Value = serde_json::from_str(&line).unwrap();
                if let Some(id) = msg["id"].as_u64()
                    && let Some(tx) = w.lock().unwrap().remove(&id)
                {
                    let _ = tx.send(msg);
                }
            }
        });
        Pipelined {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            waiting,
            next: AtomicU64::new(next + 1),
        }
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

struct Pipelined {
    child: Mutex<Child>,
    stdin: Mutex<BufWriter<ChildStdin>>,
    waiting: Arc<Mutex<HashMap<u64, mpsc::Sender<Value>>>>,
    next: AtomicU64,
}

impl Pipelined {
    fn call(&self, items: usize) -> Value {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.waiting.lock().unwrap().insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "items", "arguments": {"n": items}}});
        {
            let mut w = self.stdin.lock().unwrap();
            serde_json::to_writer(&mut *w, &msg).unwrap();
            w.write_all(b"\n").unwrap();
            w.flush().unwrap();
        }
        rx.recv().unwrap()
    }
}

fn check(msg: &Value, items: usize) {
    let got = msg["result"]["structuredContent"]["items"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(got, items, "{msg}");
}

/// Sorted latencies of `rounds` calls, one in flight, the result's size on
/// the wire, and the server's CPU time per measured call in µs (for the
/// direct path, the upstream's).
fn latencies(cmd: Command, items: usize, rounds: usize) -> (Vec<Duration>, usize, f64) {
    let mut c = Client::start(cmd);
    let pid = c.child.id();
    let args = json!({"name": "items", "arguments": {"n": items}});
    let mut out = Vec::with_capacity(rounds);
    let mut bytes = 0;
    let mut cpu_start = Duration::ZERO;
    for i in 0..WARMUP + rounds {
        if i == WARMUP {
            cpu_start = cpu_time(pid);
        }
        let t = Instant::now();
        let msg = c.request("tools/call", args.clone());
        let took = t.elapsed();
        if i == 0 {
            check(&msg, items);
            bytes = c.line.len();
        }
        if i >= WARMUP {
            out.push(took);
        }
    }
    let cpu = us(cpu_time(pid).saturating_sub(cpu_start)) / rounds as f64;
    stop(&mut c.child);
    out.sort();
    (out, bytes, cpu)
}

/// Calls/s with IN_FLIGHT callers, and the wall time.
fn throughput(cmd: Command, items: usize) -> (f64, f64) {
    let c = Arc::new(Client::start(cmd).pipelined());
    for _ in 0..WARMUP {
        check(&c.call(items), items);
    }
    let per = CONCURRENT_CALLS / IN_FLIGHT;
    let t = Instant::now();
    let threads: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || {
                for _ in 0..per {
                    let msg = c.call(items);
                    assert!(msg["result"]["structuredContent"].is_object(), "{msg}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let wall = t.elapsed().as_secs_f64();
    stop(&mut c.child.lock().unwrap());
    ((per * IN_FLIGHT) as f64 / wall, wall)
}

// ---- the upstream ----------------------------------------------------------

/// A tiny MCP server over stdio with one tool, `items {n}`.
fn upstream() {
    let stdin = std::io::stdin();
    let mut input = BufReader::with_capacity(1 << 16, stdin.lock());
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let mut results: HashMap<u64, String> = HashMap::new();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let id = serde_json::to_string(&id).unwrap();
        let result = match msg["method"].as_str().unwrap_or("") {
            "initialize" => json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-upstream", "version": "0"}
            })
            .to_string(),
            "tools/list" => json!({"tools": [{
                "name": "items",
                "description": "Returns n items.",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 100000}}, "required": ["n"]},
                "outputSchema": {"type": "object", "properties": {"items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
                    "required": ["id", "name", "tags"]
                }}}, "required": ["items"]}
            }]})
            .to_string(),
            "tools/call" => {
                let n = msg["params"]["arguments"]["n"].as_u64().unwrap_or(0);
                results
                    .entry(n)
                    .or_insert_with(|| {
                        let items: Vec<Value> = (0..n)
                            .map(|i| json!({"id": i, "name": format!("item {i}"), "tags": ["a", "b"]}))
                            .collect();
                        let structured = json!({ "items": items });
                        json!({
                            "content": [{"type": "text", "text": structured.to_string()}],
                            "structuredContent": structured
                        })
                        .to_string()
                    })
                    .clone()
            }
            "ping" => "{}".to_string(),
            _ => {
                writeln!(
                    out,
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32601,\"message\":\"no such method\"}}}}"
                )
                .unwrap();
                out.flush().unwrap();
                continue;
            }
        };
        writeln!(
            out,
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"
        )
        .unwrap();
        out.flush().unwrap();
    }
}
