//! Foundation benchmark: the figures the foundation milestone is judged by.
//!
//! Run with `cargo bench -p temper --bench foundation`. Prints one line per
//! figure (with its goal and PASS/MISS where there is one) and writes the same
//! report as Markdown to `target/bench-foundation.md`.
//!
//! 1. forge → first call of a NEW tool (engine ready): `build` + `tool()` +
//!    first `call` (no per-tool compile: the shared engine loads the
//!    bytecode).
//! 2. Isolated call of the slugify tool, three ways: the request path with a
//!    pre-warmed instance waiting (the default for a hot tool); a fresh
//!    engine instance per call (instantiate + load bytecode + call + drop,
//!    pre-warming off); and, for comparison, the tool's own compiled
//!    per-tool snapshot (instantiate + call + drop; the design this replaced,
//!    and what a hot tool is promoted to), and a promoted tool's request
//!    path with its snapshot's instances pre-warmed.
//! 3. Calls/s with a fresh instance per call, N concurrent tasks, each way.
//! 4. Artifact, shim, engine and bytecode sizes.
//! 5. Host RSS (VmRSS / VmHWM from /proc/self/status).
//! 6. Cold compile of a never-seen artifact as its own component (no disk
//!    cache): what every new tool cost before the shared engine.
//!
//! Every run uses a fresh compile cache under `target/`, so the shim is
//! compiled from scratch at warm-up and results do not depend on earlier runs.
//! The load average is printed at start and end: figures taken while other
//! work runs on the machine (e.g. a build) are not comparable.
//!
//! `FOUNDATION_PROFILE_SECS=5` instead only loops slugify calls on a fresh
//! engine instance each for that long and prints the mean, for profiling the
//! call path, e.g. under `perf record`.

/// The allocator of the `temper` binary (see `host/Cargo.toml`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use temper::{Artifact, Runtime, Tool};

const SLUGIFY: &str = r#"function execute(input) {
  const slug = input.text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
  return { slug };
}
"#;
const INPUT: &str = r#"{"text":"Hello World!"}"#;
const EXPECTED: &str = r#"{"slug":"hello-world"}"#;

/// Forges measured in phase 1 (after `FORGE_UNTIMED` unmeasured ones).
const FORGES: usize = 30;
const FORGE_UNTIMED: usize = 2;
/// Phase 2, each way.
const CALL_WARMUP: usize = 200;
const CALLS: usize = 5_000;
/// Phase 3.
const CONCURRENCY: &[usize] = &[2, 8];
const CONCURRENCY_SECS: f64 = 3.0;
/// Phase 6.
const COLD_COMPILES: usize = 3;

const FORGE_GOAL: Duration = Duration::from_millis(5);
const FIRST_CALL_GOAL: Duration = Duration::from_millis(1);
const WARM_CALL_GOAL: Duration = Duration::from_micros(10);
const FRESH_CALL_GOAL: Duration = Duration::from_micros(30);
const CALLS_PER_SEC_GOAL: f64 = 60_000.0;
const ARTIFACT_GOAL_BYTES: usize = 1_258_291; // 1.2 MiB
/// Give up waiting for a pre-warmed instance after this long.
const WARM_WAIT_LIMIT: Duration = Duration::from_secs(10);

#[path = "foundation/report.rs"]
mod report;
use report::*;

// ---------------------------------------------------------------- helpers

async fn call_ok(runtime: &Runtime, tool: &Tool) -> temper::CallOutput {
    match runtime.call(tool, INPUT).await {
        Ok(out) => {
            assert_eq!(out.output, EXPECTED, "unexpected tool output");
            out
        }
        Err(e) => panic!("call failed: {e} (logs: {:?})", e.logs),
    }
}

/// Waits until a pre-warmed instance of `tool` is ready.
async fn wait_warm(runtime: &Runtime, tool: &Tool) {
    let start = Instant::now();
    while runtime.warm_ready(tool) == 0 {
        assert!(
            start.elapsed() < WARM_WAIT_LIMIT,
            "no pre-warmed instance appeared"
        );
        tokio::task::yield_now().await;
    }
}

/// Waits until every pre-warmed instance of `tool` is ready (no refill runs
/// beside the next call).
async fn wait_warm_full(runtime: &Runtime, tool: &Tool) {
    let start = Instant::now();
    let full = runtime.cache_limits().warm_per_tool;
    while runtime.warm_ready(tool) < full {
        assert!(
            start.elapsed() < WARM_WAIT_LIMIT,
            "no pre-warmed instance appeared"
        );
        tokio::task::yield_now().await;
    }
}

/// Whether a timed call waits (untimed) for every pre-warmed instance.
#[derive(Clone, Copy, PartialEq)]
enum Pre {
    Warmed,
    Fresh,
}

/// `CALL_WARMUP` untimed then `CALLS` timed calls of `tool`, each checked
/// (its output, and whether it ran compiled).
async fn timed_calls(runtime: &Runtime, tool: &Tool, pre: Pre, compiled: bool) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(CALLS);
    for i in 0..CALL_WARMUP + CALLS {
        if pre == Pre::Warmed {
            wait_warm_full(runtime, tool).await;
        }
        let t = Instant::now();
        let out = runtime.call(tool, INPUT).await;
        let d = t.elapsed();
        let out = out.expect("call");
        assert_eq!(out.output, EXPECTED);
        assert_eq!(out.compiled, compiled);
        if i >= CALL_WARMUP {
            samples.push(d);
        }
    }
    samples
}

/// A runtime on the same cache with pre-warming off: every call makes a
/// fresh engine instance and loads the bytecode.
fn fresh_only_runtime(cache: &std::path::Path) -> Runtime {
    runtime_on(
        cache,
        temper::limits::CacheLimits {
            warm_per_tool: 0,
            // The engine path is what is measured: no promotion.
            promote_after_calls: 0,
            ..Default::default()
        },
    )
}

/// A runtime on `cache` with the default caches but for promotion, which
/// comes after `promote_after_calls` calls (0: never).
fn promoting_runtime(cache: &std::path::Path, promote_after_calls: u64) -> Runtime {
    runtime_on(
        cache,
        temper::limits::CacheLimits {
            promote_after_calls,
            ..Default::default()
        },
    )
}

fn runtime_on(cache: &std::path::Path, caches: temper::limits::CacheLimits) -> Runtime {
    Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .cache_limits(caches)
        .build()
        .expect("runtime")
}

/// The slugify tool with a distinct top-level constant, so every forge
/// produces a new artifact (a comment alone does not change the bytecode).
fn unique_slugify(tag: &str) -> String {
    format!("const FORGE_TAG = '{tag}';\n{SLUGIFY}")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `FOUNDATION_PROFILE_SECS` mode: compiled slugify calls in a loop.
fn profile_calls(rt: &tokio::runtime::Runtime, runtime: &Runtime, secs: f64) {
    rt.block_on(async {
        runtime.warm_up().await.expect("warm_up");
        let artifact = runtime.build(SLUGIFY).await.expect("build");
        let tool = runtime.tool(&artifact);
        eprintln!(
            "profiling engine calls for {secs} s (pid {})",
            std::process::id()
        );
        let start = Instant::now();
        let mut calls = 0u32;
        while start.elapsed().as_secs_f64() < secs {
            call_ok(runtime, &tool).await;
            calls += 1;
        }
        eprintln!(
            "{calls} calls, mean {}",
            fmt_dur(start.elapsed() / calls.max(1))
        );
    });
}

/// Runs `f` in a task on a worker thread (as a server's calls run) and
/// waits for it.
fn in_task<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async { tokio::spawn(f).await.expect("task") })
}

fn multi_thread_runtime(max_blocking: Option<usize>) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    b.enable_all();
    if let Some(n) = max_blocking {
        b.max_blocking_threads(n);
    }
    b.build().expect("tokio runtime")
}

// ---------------------------------------------------------------- main

fn main() {
    let started = Instant::now();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let target_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target");
    std::fs::create_dir_all(target_dir).expect("target dir");
    let cache = tempfile::Builder::new()
        .prefix("bench-foundation-cache-")
        .tempdir_in(target_dir)
        .expect("temp cache dir");
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let mut report = Report::default();
    let rss_start = proc_status_kib("VmRSS");

    let load_start = load_average();
    println!(
        "Temper foundation benchmark — {cores} cores ({}), load average {load_start}, fresh cache {}",
        cpu_model(),
        cache.path().display()
    );

    let rt = multi_thread_runtime(None);
    // The shared engine is what rows 1-3 measure (a promoted tool runs as
    // the "own compiled snapshot" rows do): no promotion.
    let runtime = promoting_runtime(cache.path(), 0);
    if let Ok(secs) = std::env::var("FOUNDATION_PROFILE_SECS") {
        profile_calls(
            &rt,
            &fresh_only_runtime(cache.path()),
            secs.parse().expect("FOUNDATION_PROFILE_SECS: seconds"),
        );
        return;
    }

    // ------------------------------------------------------------ warm-up
    section("0. Shim and engine warm-up");
    let t = Instant::now();
    rt.block_on(runtime.warm_up()).expect("warm_up");
    report.duration(
        "0. Shim and engine warm-up",
        "warm_up, fresh cache (compile shim; snapshot and compile engine)",
        t.elapsed(),
        Goal::None,
    );
    {
        let second = Runtime::builder()
            .cache_dir(Some(cache.path().to_path_buf()))
            .build()
            .expect("runtime");
        let t = Instant::now();
        rt.block_on(second.warm_up()).expect("warm_up");
        report.duration(
            "0. Shim and engine warm-up",
            "warm_up, new runtime, disk cache hit",
            t.elapsed(),
            Goal::None,
        );
    }

    // ------------------------------------------------------------ 1. forge
    const S1: &str = "1. Forge → first call of a new tool (engine warm)";
    section(S1);
    let mut forge = Vec::new();
    let mut build_only = Vec::new();
    let mut first_call = Vec::new();
    let mut first_forge = None;
    let mut ids = std::collections::HashSet::new();
    rt.block_on(async {
        for i in 0..FORGE_UNTIMED + FORGES {
            let source = unique_slugify(&format!("{nonce}-{i}"));
            let t0 = Instant::now();
            let artifact = runtime.build(&source).await.expect("build");
            let t1 = Instant::now();
            let tool = runtime.tool(&artifact);
            let out = call_ok(&runtime, &tool).await;
            let t2 = Instant::now();
            assert!(!out.compiled, "a new tool runs on the shared engine");
            assert!(
                ids.insert(artifact.id.clone()),
                "forge {i} produced an artifact seen before"
            );
            // Let this tool's pre-warming finish before the next forge.
            wait_warm(&runtime, &tool).await;
            if i == 0 {
                first_forge = Some(t2 - t0);
            }
            if i >= FORGE_UNTIMED {
                forge.push(t2 - t0);
                build_only.push(t1 - t0);
                first_call.push(t2 - t1);
            }
        }
    });
    let forge = sorted(forge);
    let build_only = sorted(build_only);
    let first_call = sorted(first_call);
    let g = Goal::MaxDuration(FORGE_GOAL);
    report.duration(
        S1,
        format!("forge (build) → first call p50 ({FORGES} tools)"),
        pct(&forge, 50.0),
        Goal::None,
    );
    report.duration(S1, "forge → first call p95", pct(&forge, 95.0), Goal::None);
    report.duration(S1, "build alone p50", pct(&build_only, 50.0), g);
    report.duration(S1, "build alone p95", pct(&build_only, 95.0), Goal::None);
    report.duration(
        S1,
        "build alone max",
        *build_only.last().unwrap(),
        Goal::None,
    );
    report.duration(
        S1,
        "first call after build p50",
        pct(&first_call, 50.0),
        Goal::MaxDuration(FIRST_CALL_GOAL),
    );
    report.duration(
        S1,
        "first call after build max",
        *first_call.last().unwrap(),
        Goal::None,
    );
    report.duration(
        S1,
        "first-ever forge after warm_up (untimed)",
        first_forge.unwrap(),
        Goal::None,
    );

    // ------------------------------------------------------------ 2. isolated call
    const S2: &str = "2. Isolated call of slugify";
    section(S2);
    let artifact: Artifact = rt.block_on(runtime.build(SLUGIFY)).expect("build slugify");
    let fresh_runtime = fresh_only_runtime(cache.path());
    let tool = runtime.tool(&artifact);
    let fresh_tool = fresh_runtime.tool(&artifact);

    // (a) Request path with a pre-warmed instance waiting: each sample
    // waits (untimed) until the refill has made one.
    // Each loop runs in a task on a worker thread, as a server's calls do.
    let (r, t) = (runtime.clone(), tool.clone());
    let warm_samples = in_task(&rt, async move {
        // The first call makes the tool hot.
        call_ok(&r, &t).await;
        timed_calls(&r, &t, Pre::Warmed, false).await
    });
    // (b) Fresh engine instance per call, pre-warming off.
    let (r, t) = (fresh_runtime.clone(), fresh_tool.clone());
    let fresh_samples = in_task(
        &rt,
        async move { timed_calls(&r, &t, Pre::Fresh, false).await },
    );
    // (c) The tool's own compiled snapshot (compiled once here: the disk
    // cache is cold for it).
    let (r, bytes) = (runtime.clone(), artifact.bytes.clone());
    let (compile_own, compiled_tool, compiled_samples) = in_task(&rt, async move {
        let t = Instant::now();
        let loaded = r.load_compiled(bytes.to_vec()).await.expect("load");
        let compile_own = t.elapsed();
        let samples = timed_calls(&r, &loaded, Pre::Fresh, true).await;
        (compile_own, loaded, samples)
    });
    // (d) A promoted tool (its own compiled snapshot, pre-warmed): the
    // request path once the promotion has finished.
    let promoted_runtime = promoting_runtime(cache.path(), 1);
    let promoted_tool = promoted_runtime.tool(&artifact);
    let (r, t) = (promoted_runtime.clone(), promoted_tool.clone());
    let promoted_samples = in_task(&rt, async move {
        let start = Instant::now();
        while r.cache_stats().promoted_tools == 0 {
            assert!(start.elapsed() < WARM_WAIT_LIMIT, "no promotion");
            call_ok(&r, &t).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        timed_calls(&r, &t, Pre::Warmed, true).await
    });
    let fresh_mean = mean(&fresh_samples);
    for (label, samples, goal) in [
        (
            "pre-warmed request path",
            warm_samples,
            Goal::MaxDuration(WARM_CALL_GOAL),
        ),
        (
            "fresh engine instance (instantiate+load+call+drop)",
            fresh_samples,
            Goal::MaxDuration(FRESH_CALL_GOAL),
        ),
        (
            "own compiled snapshot (instantiate+call+drop)",
            compiled_samples,
            Goal::None,
        ),
        (
            "promoted tool, pre-warmed request path",
            promoted_samples,
            Goal::None,
        ),
    ] {
        let samples = sorted(samples);
        report.duration(
            S2,
            format!("{label} p50 ({CALLS} calls)"),
            pct(&samples, 50.0),
            goal,
        );
        report.duration(S2, format!("{label} p95"), pct(&samples, 95.0), Goal::None);
        report.duration(S2, format!("{label} p99"), pct(&samples, 99.0), Goal::None);
    }
    report.info(
        S2,
        "sequential fresh-engine calls/s (1 / mean)",
        format!("{:.0} calls/s", 1.0 / fresh_mean.as_secs_f64()),
    );
    report.duration(
        S2,
        "Cranelift compile of the tool's own component (cold)",
        compile_own,
        Goal::None,
    );

    // ------------------------------------------------------------ 3. concurrency
    const S3: &str = "3. Throughput, fresh instance per call";
    section(S3);
    let rss_before = proc_status_kib("VmRSS");
    for (label, rt_for, tool_for, goal) in [
        (
            "engine, pre-warmed",
            runtime.clone(),
            tool.clone(),
            Some(CALLS_PER_SEC_GOAL),
        ),
        (
            "engine, fresh instance",
            fresh_runtime.clone(),
            fresh_tool.clone(),
            Some(CALLS_PER_SEC_GOAL),
        ),
        (
            "own compiled snapshot",
            runtime.clone(),
            compiled_tool.clone(),
            None,
        ),
        (
            "promoted tool, pre-warmed",
            promoted_runtime.clone(),
            promoted_tool.clone(),
            None,
        ),
    ] {
        for &n in CONCURRENCY {
            let total = Arc::new(AtomicU64::new(0));
            let failures = Arc::new(AtomicU64::new(0));
            let stop = Arc::new(AtomicBool::new(false));
            let elapsed = rt.block_on(async {
                let start = Instant::now();
                let tasks: Vec<_> = (0..n)
                    .map(|_| {
                        let (runtime, tool) = (rt_for.clone(), tool_for.clone());
                        let (total, failures, stop) =
                            (total.clone(), failures.clone(), stop.clone());
                        tokio::spawn(async move {
                            while !stop.load(Ordering::Relaxed) {
                                match runtime.call(&tool, INPUT).await {
                                    Ok(out) if out.output == EXPECTED => {
                                        total.fetch_add(1, Ordering::Relaxed)
                                    }
                                    other => {
                                        // The first failure is shown: a failed call is a bug.
                                        if failures.fetch_add(1, Ordering::Relaxed) == 0 {
                                            eprintln!(
                                                "first failed call: {:?}",
                                                other.map(|o| o.output)
                                            );
                                        }
                                        0
                                    }
                                };
                            }
                        })
                    })
                    .collect();
                tokio::time::sleep(Duration::from_secs_f64(CONCURRENCY_SECS)).await;
                stop.store(true, Ordering::Relaxed);
                for task in tasks {
                    task.await.expect("task");
                }
                start.elapsed()
            });
            let calls = total.load(Ordering::Relaxed);
            let rate = calls as f64 / elapsed.as_secs_f64();
            let (goal_text, pass) = match goal {
                Some(g) => (format!("≥ {g:.0} calls/s"), Some(rate >= g)),
                None => (String::new(), None),
            };
            let value = format!("{rate:.0} calls/s");
            let name = format!("{label}: {n} tasks, {:.1} s", elapsed.as_secs_f64());
            report.add(S3, name, value, Goal::None, None);
            if let (Some(row), Some(pass)) = (report.rows.last_mut(), pass) {
                row.goal = goal_text;
                row.status = Some(pass);
            }
            let failed = failures.load(Ordering::Relaxed);
            if failed > 0 {
                report.note(format!("{failed} calls failed ({label}, {n} tasks)"));
            }
        }
    }
    let rss_after = proc_status_kib("VmRSS");

    // ------------------------------------------------------------ 4. sizes
    const S4: &str = "4. Sizes";
    section(S4);
    report.bytes(
        S4,
        "slugify artifact",
        artifact.bytes.len(),
        Goal::MaxBytes(ARTIFACT_GOAL_BYTES),
    );
    report.bytes(
        S4,
        "shim (SHIM_WASM)",
        temper::shim::SHIM_WASM.len(),
        Goal::None,
    );
    report.bytes(
        S4,
        "engine (ENGINE_WASM)",
        temper::shim::ENGINE_WASM.len(),
        Goal::None,
    );
    report.bytes(S4, "slugify bytecode", artifact.bytecode.len(), Goal::None);

    // ------------------------------------------------------------ 6. cold compile
    // (Measured before the final RSS reading so the peak covers it.)
    const S6: &str = "6. Cold compile of a new artifact (no disk cache)";
    let cold = {
        let uncached = Runtime::builder().cache_dir(None).build().expect("runtime");
        let mut samples = Vec::new();
        for i in 0..COLD_COMPILES {
            let source = unique_slugify(&format!("{nonce}-cold-{i}"));
            let artifact = rt.block_on(runtime.build(&source)).expect("build");
            let bytes = artifact.bytes.to_vec();
            let t = Instant::now();
            let tool = rt
                .block_on(uncached.load_compiled(bytes))
                .expect("cold load");
            samples.push(t.elapsed());
            assert!(!tool.runs_on_engine());
            rt.block_on(async { assert!(call_ok(&uncached, &tool).await.compiled) });
        }
        sorted(samples)
    };

    // ------------------------------------------------------------ 5. memory
    const S5: &str = "5. Host memory";
    section(S5);
    report.info(S5, "RSS at start", mib(rss_start));
    report.info(S5, "RSS before concurrency phase", mib(rss_before));
    report.info(S5, "RSS after concurrency phase", mib(rss_after));
    report.info(S5, "RSS at end", mib(proc_status_kib("VmRSS")));
    report.info(S5, "peak RSS (VmHWM) at end", mib(proc_status_kib("VmHWM")));

    section(S6);
    report.duration(
        S6,
        format!("runtime.load_compiled, cache_dir None, p50 of {COLD_COMPILES}"),
        pct(&cold, 50.0),
        Goal::None,
    );
    report.duration(
        S6,
        "runtime.load_compiled, cache_dir None, max",
        *cold.last().unwrap(),
        Goal::None,
    );

    let total = started.elapsed();
    let load_end = load_average();
    println!(
        "\nTotal bench time: {}; load average at start {load_start}, at end {load_end}",
        fmt_dur(total)
    );

    let header = format!(
        "Host: {cores} cores ({}); load average {load_start} at start, {load_end} at end. \
         Fresh compile cache per run. Total bench time {}. Unix time {}.",
        cpu_model(),
        fmt_dur(total),
        nonce / 1_000_000_000
    );
    let mut notes = vec![
        format!(
            "Phase 1 forges {FORGES} tools with distinct sources ({FORGE_UNTIMED} untimed forges \
             first); after each first call it waits until that tool's first pre-warmed instance \
             is ready, so each forge competes only with its own pre-warming."
        ),
        "Phase 2's pre-warmed figure times only the call, after waiting (untimed) for the \
         background refill to make an instance; the refill's own cost shows in phase 3's \
         throughput, where it shares the cores with the calls."
            .to_string(),
    ];
    notes.append(&mut report.notes);
    report.notes = notes;
    let path = std::path::Path::new(target_dir).join("bench-foundation.md");
    match std::fs::write(&path, report.markdown(&header)) {
        Ok(()) => println!("Report written to {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
    drop(runtime);
    drop(rt);
    drop(cache);
}
