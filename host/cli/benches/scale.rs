//! Scale benchmark: thousands of tools on one host.
//!
//! Run with `cargo bench -p temper --bench scale`. For N in 10, 100 and
//! 1,000 (`SCALE_NS=10,100` to choose), a fresh host process (this binary
//! re-run as a child, so each N's RSS is its own) builds N distinct small
//! sandbox tools into one runtime, calls the first right after it is built,
//! then calls every tool twice more (round robin), and reports:
//!
//! - host RSS at the end (and its peak);
//! - store bytes per tool: the self-contained artifact the registry keeps
//!   today, and the compact form (bytecode + manifest) it could keep;
//! - compile-cache bytes per tool (what the on-disk cache grew by, over the
//!   shared engine, which the parent prepares once);
//! - first call right after its build (p50), and the 2nd..Nth calls (p50);
//! - build (static check, compile, load, snapshot) p50.
//!
//! Then, in one more child, the isolated-call figures of slugify: the
//! request path with a pre-warmed instance, a fresh engine instance per
//! call, and calls/s on all cores, each way.
//!
//! The report is written to `target/bench-scale.md`. The load average is
//! printed: figures taken while other work runs on the machine are not
//! comparable.

/// The allocator of the `temper` binary (see `host/Cargo.toml`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::Runtime;

const DEFAULT_NS: &[usize] = &[10, 100, 1000];
const INPUT: &str = r#"{"text":"Hello World!"}"#;
const CALLS_PER_TOOL: usize = 3;
/// The isolated-call child.
const ISOLATED_CALLS: usize = 3_000;
const THROUGHPUT_SECS: f64 = 3.0;
/// Isolated-call runs (fresh processes); the report gives medians.
const ISOLATED_RUNS: usize = 5;

/// A small sandbox tool, distinct per `i` (a top-level constant changes the
/// bytecode, so every build is a new artifact).
fn tool_source(i: usize) -> String {
    format!(
        "const TOOL_NO = {i};\nfunction execute(input) {{\n  const slug = input.text\n    .toLowerCase()\n    .replace(/[^a-z0-9]+/g, '-')\n    .replace(/^-|-$/g, '');\n  return {{ slug, tool: TOOL_NO }};\n}}\n"
    )
}

fn expected(i: usize) -> String {
    format!(r#"{{"slug":"hello-world","tool":{i}}}"#)
}

fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// CPU time of the calling thread: unlike wall time, not inflated when the
/// thread is preempted on a busy machine.
fn thread_cpu() -> (Duration, std::thread::ThreadId) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
        std::thread::current().id(),
    )
}

/// CPU time of the whole process (every thread: calls, refills, reaper).
/// CPU time since `start` (a [`thread_cpu`] reading and its thread), or
/// zero when the task moved to another thread meanwhile (then the reading
/// is not comparable; such samples are rare and left out of the CPU
/// figures).
fn cpu_since(start: (Duration, std::thread::ThreadId)) -> Option<Duration> {
    (std::thread::current().id() == start.1).then(|| thread_cpu().0.saturating_sub(start.0))
}

fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs `f` in a task on a worker thread and waits for it.
fn in_task<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async { tokio::spawn(f).await.expect("task") })
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A runtime on `cache` with hot-tool promotion off: this bench measures
/// the shared engine (a promoted tool's calls are in the foundation bench's
/// "own compiled snapshot" rows).
fn runtime(cache: &Path) -> Runtime {
    Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .cache_limits(temper::limits::CacheLimits {
            promote_after_calls: 0,
            ..Default::default()
        })
        .build()
        .expect("runtime")
}

// ---------------------------------------------------------------- children

/// The forge request of tool `i`: schemas, the source, one test case.
fn request_json(i: usize) -> String {
    json!({
        "name": format!("slug_{i}"),
        "description": "Turns text into a URL slug.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "outputSchema": {"type": "object", "properties": {"slug": {"type": "string"}, "tool": {"type": "integer"}}},
        "implementation": {"mode": "sandbox", "code": tool_source(i), "allowlist": []},
        "testCases": [{"input": {"text": "Hello World!"}, "expectedOutput": serde_json::from_str::<Value>(&expected(i)).unwrap()}],
    })
    .to_string()
}

/// A host: a `Forge` on the SQLite store in `store` with the rules judge,
/// room for `n` session tools, and the session the bench uses.
fn host_forge(
    runtime: &Runtime,
    store: &Path,
    n: usize,
) -> (temper::forge::Forge, temper::forge::ForgeContext) {
    use temper::forge::judge::RulesJudge;
    use temper::forge::{Forge, ForgeConfig, ForgeContext};
    let registry = Arc::new(temper::store::Registry::open(store).expect("store"));
    let config = ForgeConfig {
        max_session_tools: n,
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime.clone(), registry)
        .judge(Arc::new(RulesJudge::standard()))
        .config(config)
        .build();
    (forge, ForgeContext::new("bench", "scale"))
}

/// N tools forged into one host (a `Forge` on a SQLite store, the rules
/// judge, the session tier), each called 3 times; prints one JSON line.
fn child_tools(n: usize, cache: &Path, store: &Path) -> Value {
    let rt = tokio_rt();
    let runtime = runtime(cache);
    rt.block_on(runtime.warm_up()).expect("warm_up");
    let cache_before = dir_bytes(cache);
    std::fs::create_dir_all(store).expect("store dir");
    let (forge, ctx) = host_forge(&runtime, store, n);
    let policy = temper::policy::HostPolicy::deny_all();
    let rss_start = proc_status_kib("VmRSS");
    let mut builds = Vec::with_capacity(n);
    let mut forges = Vec::with_capacity(n);
    let mut first = Vec::with_capacity(n);
    let mut later = Vec::with_capacity(n * (CALLS_PER_TOOL - 1));
    let mut first_cpu = Vec::with_capacity(n);
    let mut later_cpu = Vec::with_capacity(n * (CALLS_PER_TOOL - 1));
    let input: Value = serde_json::from_str(INPUT).unwrap();
    rt.block_on(async {
        for i in 0..n {
            let text = request_json(i);
            // VALIDATE + BUILD as the forge runs them (tests excluded).
            let t = Instant::now();
            let req = temper::request::ForgeRequest::from_json(&text).expect("request");
            temper::forge::validate::check(&req, &policy).expect("validate");
            let built = temper::forge::build::build_sandbox(&runtime, &req, false)
                .await
                .expect("build");
            builds.push(t.elapsed());
            drop(built);
            // The whole forge: validate, build, both test runs, judge, register.
            let t = Instant::now();
            forge.forge_json(&text, &ctx).await.expect("forge");
            forges.push(t.elapsed());
            let name = format!("slug_{i}");
            let (t, c) = (Instant::now(), thread_cpu());
            let out = forge.invoke(&name, &input, &ctx).await.expect("first call");
            first.push(t.elapsed());
            first_cpu.extend(cpu_since(c));
            assert_eq!(out.output.to_string(), expected(i));
        }
        for _ in 1..CALLS_PER_TOOL {
            for i in 0..n {
                let name = format!("slug_{i}");
                let (t, c) = (Instant::now(), thread_cpu());
                let out = forge.invoke(&name, &input, &ctx).await.expect("call");
                later.push(t.elapsed());
                later_cpu.extend(cpu_since(c));
                assert_eq!(out.output.to_string(), expected(i));
            }
        }
    });
    // Let background refills settle before reading RSS.
    std::thread::sleep(Duration::from_millis(200));
    let rss_end = proc_status_kib("VmRSS");
    let hwm = proc_status_kib("VmHWM");
    let cache_after = dir_bytes(cache);
    let artifacts = dir_bytes(&store.join("artifacts"));
    let store_total = dir_bytes(store) + artifacts;
    let stats = runtime.cache_stats();
    for v in [
        &mut builds,
        &mut forges,
        &mut first,
        &mut later,
        &mut first_cpu,
        &mut later_cpu,
    ] {
        v.sort();
    }
    let snapshot =
        serde_json::to_vec(&forge.snapshot_session(&ctx).expect("snapshot")).expect("snapshot");
    drop(forge);
    std::fs::write(store.join("session.json"), snapshot).expect("snapshot");
    json!({
        "n": n,
        "rss_start_kib": rss_start,
        "rss_end_kib": rss_end,
        "hwm_kib": hwm,
        "store_bytes_per_tool": store_total as f64 / n as f64,
        "artifact_bytes_per_tool": artifacts as f64 / n as f64,
        "cache_bytes_per_tool": cache_after.saturating_sub(cache_before) as f64 / n as f64,
        "build_p50_us": us(pct(&builds, 50.0)),
        "build_p95_us": us(pct(&builds, 95.0)),
        "forge_p50_us": us(pct(&forges, 50.0)),
        "forge_p95_us": us(pct(&forges, 95.0)),
        "first_p50_us": us(pct(&first, 50.0)),
        "first_p95_us": us(pct(&first, 95.0)),
        "later_p50_us": us(pct(&later, 50.0)),
        "later_p95_us": us(pct(&later, 95.0)),
        "first_cpu_p50_us": us(pct(&first_cpu, 50.0)),
        "later_cpu_p50_us": us(pct(&later_cpu, 50.0)),
        "warm_tools": stats.warm_tools,
        "warm_instances": stats.warm_instances,
        "compiled_tools": stats.compiled_tools,
    })
}

/// A cold host on a store another host filled: the first call of each tool
/// rebuilds its component from the compact record and checks it against
/// the id; prints one JSON line.
fn child_cold(n: usize, cache: &Path, store: &Path) -> Value {
    let rt = tokio_rt();
    let runtime = runtime(cache);
    rt.block_on(runtime.warm_up()).expect("warm_up");
    let (forge, ctx) = host_forge(&runtime, store, n);
    let snapshot: temper::forge::session::SessionSnapshot =
        serde_json::from_slice(&std::fs::read(store.join("session.json")).expect("snapshot"))
            .expect("snapshot");
    forge.restore_session(snapshot).expect("restore");
    let input: Value = serde_json::from_str(INPUT).unwrap();
    let mut first = Vec::with_capacity(n);
    rt.block_on(async {
        for i in 0..n {
            let t = Instant::now();
            let out = forge
                .invoke(&format!("slug_{i}"), &input, &ctx)
                .await
                .expect("cold call");
            first.push(t.elapsed());
            assert_eq!(out.output.to_string(), expected(i));
        }
    });
    first.sort();
    json!({
        "n": n,
        "cold_first_p50_us": us(pct(&first, 50.0)),
        "cold_first_p95_us": us(pct(&first, 95.0)),
    })
}

/// Isolated calls of one tool; prints one JSON line.
fn child_isolated(cache: &Path) -> Value {
    let rt = tokio_rt();
    let warm_rt = runtime(cache);
    let caches = temper::limits::CacheLimits {
        warm_per_tool: 0,
        // The engine path is what is measured: no promotion.
        promote_after_calls: 0,
        ..Default::default()
    };
    let fresh_rt = Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .cache_limits(caches)
        .build()
        .expect("runtime");
    rt.block_on(async {
        warm_rt.warm_up().await.expect("warm_up");
        fresh_rt.warm_up().await.expect("warm_up");
    });
    let built = rt.block_on(warm_rt.build(&tool_source(7))).expect("build");
    let warm_tool = warm_rt.tool(&built);
    let fresh_tool = fresh_rt.tool(&built);
    let want = expected(7);
    let (warm_rt2, fresh_rt2, warm_tool2, fresh_tool2, want2) = (
        warm_rt.clone(),
        fresh_rt.clone(),
        warm_tool.clone(),
        fresh_tool.clone(),
        want.clone(),
    );
    // In a task on a worker thread, as a server's calls run.
    let (warm, fresh, warm_cpu, fresh_cpu) = in_task(&rt, async move {
        let (warm_rt, fresh_rt, warm_tool, fresh_tool, want) =
            (warm_rt2, fresh_rt2, warm_tool2, fresh_tool2, want2);
        let mut warm = Vec::with_capacity(ISOLATED_CALLS);
        let mut fresh = Vec::with_capacity(ISOLATED_CALLS);
        let mut warm_cpu = Vec::with_capacity(ISOLATED_CALLS);
        let mut fresh_cpu = Vec::with_capacity(ISOLATED_CALLS);
        // The first call makes the tool hot.
        warm_rt.call(&warm_tool, INPUT).await.expect("call");
        for i in 0..ISOLATED_CALLS + 100 {
            let t0 = Instant::now();
            // Every instance ready: no refill runs beside the timed call.
            while warm_rt.warm_ready(&warm_tool) < warm_rt.cache_limits().warm_per_tool {
                assert!(t0.elapsed() < Duration::from_secs(10), "no warm instance");
                tokio::task::yield_now().await;
            }
            // The CPU clock (a system call) is read outside the wall-clock window.
            let c = thread_cpu();
            let t = Instant::now();
            let out = warm_rt.call(&warm_tool, INPUT).await.expect("call");
            let d = t.elapsed();
            let dc = cpu_since(c);
            assert_eq!(out.output, want);
            if i >= 100 {
                warm.push(d);
                warm_cpu.extend(dc);
            }
        }
        for i in 0..ISOLATED_CALLS + 100 {
            // The CPU clock (a system call) is read outside the wall-clock window.
            let c = thread_cpu();
            let t = Instant::now();
            let out = fresh_rt.call(&fresh_tool, INPUT).await.expect("call");
            let d = t.elapsed();
            let dc = cpu_since(c);
            assert_eq!(out.output, want);
            if i >= 100 {
                fresh.push(d);
                fresh_cpu.extend(dc);
            }
        }
        (warm, fresh, warm_cpu, fresh_cpu)
    });
    let (mut warm, mut fresh, mut warm_cpu, mut fresh_cpu) = (warm, fresh, warm_cpu, fresh_cpu);
    warm.sort();
    fresh.sort();
    warm_cpu.sort();
    fresh_cpu.sort();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut rates = serde_json::Map::new();
    for (label, runtime, tool) in [
        ("prewarmed", &warm_rt, &warm_tool),
        ("fresh", &fresh_rt, &fresh_tool),
    ] {
        let total = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let cpu_before = process_cpu();
        let elapsed = rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..cores * 2)
                .map(|_| {
                    let (runtime, tool, want) = (runtime.clone(), tool.clone(), want.clone());
                    let (total, stop) = (total.clone(), stop.clone());
                    tokio::spawn(async move {
                        while !stop.load(Ordering::Relaxed) {
                            if let Ok(out) = runtime.call(&tool, INPUT).await
                                && out.output == want
                            {
                                total.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_secs_f64(THROUGHPUT_SECS)).await;
            stop.store(true, Ordering::Relaxed);
            for task in tasks {
                task.await.expect("task");
            }
            start.elapsed()
        });
        // Let the last refills and the reaper finish: their CPU counts.
        std::thread::sleep(Duration::from_millis(50));
        let cpu = process_cpu() - cpu_before;
        let calls = total.load(Ordering::Relaxed) as f64;
        rates.insert(label.into(), json!(calls / elapsed.as_secs_f64()));
        // What all cores would do if the process had them to itself.
        rates.insert(
            format!("{label}_cpu_bound"),
            json!(calls / cpu.as_secs_f64() * cores as f64),
        );
    }
    json!({
        "cores": cores,
        "prewarmed_p50_us": us(pct(&warm, 50.0)),
        "prewarmed_p95_us": us(pct(&warm, 95.0)),
        "fresh_p50_us": us(pct(&fresh, 50.0)),
        "fresh_p95_us": us(pct(&fresh, 95.0)),
        "prewarmed_cpu_p50_us": us(pct(&warm_cpu, 50.0)),
        "fresh_cpu_p50_us": us(pct(&fresh_cpu, 50.0)),
        "rates": rates,
    })
}

/// `SCALE_PROFILE=warm|fresh SCALE_PROFILE_SECS=5`: calls of one tool in a
/// loop (for `perf record`); prints the mean of the timed calls. In `warm`
/// mode each call waits (untimed) for every pre-warmed instance to be ready.
fn profile(mode: &str, secs: f64) {
    let rt = tokio_rt();
    // `SCALE_CACHE=DIR` reuses a compile cache (no engine compile in the
    // profile); else a fresh one.
    let temp = tempfile::tempdir().expect("cache");
    let cache =
        std::env::var_os("SCALE_CACHE").map_or_else(|| temp.path().to_path_buf(), PathBuf::from);
    // `SCALE_PROFILE_CALLS=N`: exactly N timed calls (for instruction counts
    // per call), instead of a time budget.
    let max_calls: u32 = std::env::var("SCALE_PROFILE_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u32::MAX);
    let mut caches = temper::limits::CacheLimits {
        promote_after_calls: 0,
        ..Default::default()
    };
    if mode == "fresh" {
        caches.warm_per_tool = 0;
    }
    if let Some(bytes) = std::env::var("SCALE_KEEP_RESIDENT")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        caches.keep_resident_bytes = bytes;
    }
    let runtime = Runtime::builder()
        .cache_dir(Some(cache))
        .cache_limits(caches)
        .build()
        .expect("runtime");
    let mode = mode.to_string();
    in_task(&rt, async move {
        runtime.warm_up().await.expect("warm_up");
        let source = std::env::var("SCALE_TOOL_JS").unwrap_or_else(|_| tool_source(1));
        let built = runtime.build(&source).await.expect("build");
        let tool = runtime.tool(&built);
        runtime.call(&tool, INPUT).await.expect("call");
        eprintln!(
            "profiling {mode} calls for {secs} s (pid {})",
            std::process::id()
        );
        // `SCALE_PROFILE_TASKS=N` (N > 1): N tasks call at once (all cores
        // busy, as in the calls/s figures); only process CPU per call.
        let tasks: usize = std::env::var("SCALE_PROFILE_TASKS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        if tasks > 1 {
            let total = Arc::new(AtomicU64::new(0));
            let cpu_before = process_cpu();
            let start = Instant::now();
            let handles: Vec<_> = (0..tasks)
                .map(|_| {
                    let (runtime, tool, total) = (runtime.clone(), tool.clone(), total.clone());
                    tokio::spawn(async move {
                        while start.elapsed().as_secs_f64() < secs
                            && total.load(Ordering::Relaxed) < u64::from(max_calls)
                        {
                            runtime.call(&tool, INPUT).await.expect("call");
                            total.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for handle in handles {
                handle.await.expect("task");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            let calls = total.load(Ordering::Relaxed).max(1);
            eprintln!(
                "{calls} calls from {tasks} tasks, {:.1} µs CPU (process) per call",
                us((process_cpu() - cpu_before) / calls as u32)
            );
            return;
        }
        let start = Instant::now();
        let mut timed = Duration::ZERO;
        let mut cpu = Duration::ZERO;
        let mut calls = 0u32;
        let cpu_before = process_cpu();
        while start.elapsed().as_secs_f64() < secs && calls < max_calls {
            if mode == "warm" {
                while runtime.warm_ready(&tool) < runtime.cache_limits().warm_per_tool {
                    tokio::task::yield_now().await;
                }
            }
            let (t, c) = (Instant::now(), thread_cpu());
            runtime.call(&tool, INPUT).await.expect("call");
            timed += t.elapsed();
            cpu += cpu_since(c).unwrap_or_default();
            calls += 1;
        }
        // Let the reaper finish the last drops: their CPU counts.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let process = process_cpu() - cpu_before;
        eprintln!(
            "{calls} calls, mean {:.1} µs wall, {:.1} µs CPU (calling thread), {:.1} µs CPU (process, reaper and refills included)",
            us(timed / calls.max(1)),
            us(cpu / calls.max(1)),
            us(process / calls.max(1))
        );
    });
}

// ---------------------------------------------------------------- parent

fn run_child(args: &[(&str, String)]) -> Value {
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = std::process::Command::new(exe);
    for (k, v) in args {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run child");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("child printed no result");
    serde_json::from_str(line).expect("child JSON")
}

/// Each numeric figure's median over `runs` (same keys; `rates` too).
fn median_run(runs: &[Value]) -> Value {
    fn median(mut xs: Vec<f64>) -> f64 {
        xs.sort_by(f64::total_cmp);
        xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
    }
    let mut out = runs.first().cloned().unwrap_or(Value::Null);
    if let Some(obj) = out.as_object_mut() {
        for (key, value) in obj.iter_mut() {
            if value.is_f64() {
                *value = json!(median(runs.iter().map(|r| f(r, key)).collect()));
            }
        }
        if let Some(rates) = obj.get_mut("rates").and_then(Value::as_object_mut) {
            for (key, value) in rates.iter_mut() {
                *value = json!(median(runs.iter().map(|r| f(&r["rates"], key)).collect()));
            }
        }
    }
    out
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(f64::NAN)
}

fn main() {
    if let Ok(mode) = std::env::var("SCALE_PROFILE") {
        let secs = std::env::var("SCALE_PROFILE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0);
        profile(&mode, secs);
        return;
    }
    let cache_env = std::env::var_os("SCALE_CACHE").map(PathBuf::from);
    if let (Some(cache), Ok(n)) = (&cache_env, std::env::var("SCALE_CHILD_N")) {
        let store = PathBuf::from(std::env::var_os("SCALE_STORE").expect("SCALE_STORE"));
        let n: usize = n.parse().expect("SCALE_CHILD_N");
        println!("{}", child_tools(n, cache, &store));
        return;
    }
    if let (Some(cache), Ok(n)) = (&cache_env, std::env::var("SCALE_COLD_N")) {
        let store = PathBuf::from(std::env::var_os("SCALE_STORE").expect("SCALE_STORE"));
        let n: usize = n.parse().expect("SCALE_COLD_N");
        println!("{}", child_cold(n, cache, &store));
        return;
    }
    if let (Some(cache), Ok(_)) = (&cache_env, std::env::var("SCALE_CHILD_ISOLATED")) {
        println!("{}", child_isolated(cache));
        return;
    }

    let ns: Vec<usize> = std::env::var("SCALE_NS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| DEFAULT_NS.to_vec());
    let target_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target"));
    let work = tempfile::Builder::new()
        .prefix("bench-scale-")
        .tempdir_in(&target_dir)
        .expect("temp dir");
    let cache = work.path().join("cache");
    let load_start = load_average();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("Temper scale benchmark — {cores} cores, load average {load_start}");

    // The shared engine, once: snapshot and compile into the cache.
    let t = Instant::now();
    {
        let rt = tokio_rt();
        rt.block_on(runtime(&cache).warm_up()).expect("warm_up");
    }
    let engine_prep = t.elapsed();
    let engine_cache_bytes = dir_bytes(&cache);
    println!(
        "engine prepared in {:.2} s; shared compile cache {} bytes",
        engine_prep.as_secs_f64(),
        engine_cache_bytes
    );

    let mut rows = Vec::new();
    for &n in &ns {
        let store = work.path().join(format!("store-{n}"));
        let mut r = run_child(&[
            ("SCALE_CACHE", cache.display().to_string()),
            ("SCALE_CHILD_N", n.to_string()),
            ("SCALE_STORE", store.display().to_string()),
        ]);
        // A second host on the same store, in a fresh process.
        let cold = run_child(&[
            ("SCALE_CACHE", cache.display().to_string()),
            ("SCALE_COLD_N", n.to_string()),
            ("SCALE_STORE", store.display().to_string()),
        ]);
        for key in ["cold_first_p50_us", "cold_first_p95_us"] {
            r[key] = cold[key].clone();
        }
        // The next child starts from the shared engine alone.
        for entry in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with("bytecode-") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let _ = std::fs::remove_dir_all(&store);
        println!("N = {n}: {r}");
        rows.push(r);
    }
    // Several isolated runs, each in a fresh process: this machine's
    // figures move between runs (other work on the host), so the report
    // gives each figure's median over the runs and lists every run.
    let isolated_runs: Vec<Value> = (0..ISOLATED_RUNS)
        .map(|_| {
            let run = run_child(&[
                ("SCALE_CACHE", cache.display().to_string()),
                ("SCALE_CHILD_ISOLATED", "1".into()),
            ]);
            println!("isolated: {run}");
            run
        })
        .collect();
    let isolated = median_run(&isolated_runs);
    let load_end = load_average();

    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Temper scale benchmark\n\nHost: {cores} cores; load average {load_start} at start, {load_end} at end. \
         Each N runs in a fresh host process; the shared engine (snapshot + compiled form, {} bytes in the \
         compile cache, prepared once in {:.2} s) is on disk before it starts.\n",
        engine_cache_bytes,
        engine_prep.as_secs_f64()
    );
    let _ = writeln!(
        md,
        "## N distinct sandbox tools forged into one host, each called {CALLS_PER_TOOL} times\n\n\
         | N | host RSS at end (peak) | store per tool (of which artifacts) | compile cache per tool | validate + build p50 (p95) | whole forge p50 (p95) | first call after forge p50 (p95) [CPU p50] | 2nd..Nth call p50 (p95) [CPU p50] | cold host: first call p50 (p95) |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {:.1} MiB ({:.1} MiB) | {:.1} KiB ({:.1} KiB) | {:.2} KiB | {:.2} ms ({:.2} ms) | {:.1} ms ({:.1} ms) | {:.0} µs ({:.0} µs) [{:.0} µs] | {:.1} µs ({:.1} µs) [{:.1} µs] | {:.2} ms ({:.2} ms) |",
            r["n"],
            f(r, "rss_end_kib") / 1024.0,
            f(r, "hwm_kib") / 1024.0,
            f(r, "store_bytes_per_tool") / 1024.0,
            f(r, "artifact_bytes_per_tool") / 1024.0,
            f(r, "cache_bytes_per_tool") / 1024.0,
            f(r, "build_p50_us") / 1000.0,
            f(r, "build_p95_us") / 1000.0,
            f(r, "forge_p50_us") / 1000.0,
            f(r, "forge_p95_us") / 1000.0,
            f(r, "first_p50_us"),
            f(r, "first_p95_us"),
            f(r, "first_cpu_p50_us"),
            f(r, "later_p50_us"),
            f(r, "later_p95_us"),
            f(r, "later_cpu_p50_us"),
            f(r, "cold_first_p50_us") / 1000.0,
            f(r, "cold_first_p95_us") / 1000.0,
        );
    }
    let _ = writeln!(
        md,
        "\nRSS after warm-up, before the first tool: {}. Caches at the end (hot tools / pre-warmed instances / compiled components): {}.\n",
        rows.iter()
            .map(|r| format!("{:.1} MiB (N = {})", f(r, "rss_start_kib") / 1024.0, r["n"]))
            .collect::<Vec<_>>()
            .join(", "),
        rows.iter()
            .map(|r| format!(
                "{} / {} / {} (N = {})",
                r["warm_tools"], r["warm_instances"], r["compiled_tools"], r["n"]
            ))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let rates = &isolated["rates"];
    let _ = writeln!(
        md,
        "## Isolated call (one tool, slugify-sized)\n\n\
         | figure | wall clock | CPU time of the calling thread | target |\n|---|---:|---:|---:|\n\
         | request path with a pre-warmed instance, p50 (p95) | {:.1} µs ({:.1} µs) | {:.1} µs | ≤ 10 µs |\n\
         | fresh instance: instantiate + load bytecode + call (drop on the reaper), p50 (p95) | {:.1} µs ({:.1} µs) | {:.1} µs | ≤ 30 µs |\n\n\
         | isolated calls/s, {} cores, {} tasks | measured | CPU-bound (calls per process CPU-second × cores) | target |\n|---|---:|---:|---:|\n\
         | pre-warmed (refills and drops included) | {:.0} | {:.0} | ≥ 60,000 |\n\
         | fresh instance per call (drops included) | {:.0} | {:.0} | ≥ 60,000 |\n",
        f(&isolated, "prewarmed_p50_us"),
        f(&isolated, "prewarmed_p95_us"),
        f(&isolated, "prewarmed_cpu_p50_us"),
        f(&isolated, "fresh_p50_us"),
        f(&isolated, "fresh_p95_us"),
        f(&isolated, "fresh_cpu_p50_us"),
        isolated["cores"],
        isolated["cores"].as_u64().unwrap_or(1) * 2,
        rates["prewarmed"].as_f64().unwrap_or(f64::NAN),
        rates["prewarmed_cpu_bound"].as_f64().unwrap_or(f64::NAN),
        rates["fresh"].as_f64().unwrap_or(f64::NAN),
        rates["fresh_cpu_bound"].as_f64().unwrap_or(f64::NAN),
    );
    let _ = writeln!(
        md,
        "Each figure above is the median of {} runs, each in a fresh process:\n\n\
         | run | pre-warmed p50 | fresh p50 | pre-warmed calls/s | fresh calls/s |\n|---:|---:|---:|---:|---:|",
        isolated_runs.len()
    );
    for (i, r) in isolated_runs.iter().enumerate() {
        let _ = writeln!(
            md,
            "| {} | {:.1} µs | {:.1} µs | {:.0} | {:.0} |",
            i + 1,
            f(r, "prewarmed_p50_us"),
            f(r, "fresh_p50_us"),
            f(&r["rates"], "prewarmed"),
            f(&r["rates"], "fresh"),
        );
    }
    let _ = writeln!(
        md,
        "\n## Notes\n\n\
         - Tools are forged through `Forge` (request parsed, VALIDATE, BUILD, both test runs, the rules judge, \
           REGISTER into a SQLite store) into the session tier and called through `Forge::invoke` (schema checks \
           and stats included). *validate + build* times VALIDATE and BUILD alone, as the forge runs them.\n\
         - *store per tool* is the store directory (SQLite database with its WAL, and `artifacts/`) over N; the \
           artifacts are compact records (bytecode + manifest section), from which the self-contained component \
           is rebuilt byte for byte on export.\n\
         - *cold host* is a second host process on the same store: each tool's first call there rebuilds its \
           component from the record and checks it against the artifact id before it runs.\n\
         - *compile cache per tool* is what the on-disk cache grew by per tool: the bytecode record that lets \
           `Runtime::load` run a stored artifact on the shared engine. No per-tool component is compiled.\n\
         - The 2nd..Nth calls are round robin over all N tools: with more hot tools than the pre-warm LRU \
           holds ({} tools × {} instances by default), most of them make a fresh instance.\n\
         - The request-path figure times only the call, after waiting (untimed) for the background refill to \
           have an instance ready; the throughput figures include the refills, which share the cores.",
        temper::limits::CacheLimits::default().warm_tools,
        temper::limits::CacheLimits::default().warm_per_tool,
    );
    let path = target_dir.join("bench-scale.md");
    match std::fs::write(&path, &md) {
        Ok(()) => println!("\n{md}\nReport written to {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}
