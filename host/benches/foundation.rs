//! Foundation benchmark: the figures the foundation milestone is judged by.
//!
//! Run with `cargo bench -p temper --bench foundation`. Prints one line per
//! figure (with its goal and PASS/MISS where there is one) and writes the same
//! report as Markdown to `target/bench-foundation.md`.
//!
//! 1. forge → first call of a NEW tool (shim warmed): `build` + `tool()` +
//!    first `call`, plus `build` alone and the background compile it starts.
//! 2. Isolated call of the slugify tool on the compiled artifact (steady
//!    state), and on the warm-up (uncompiled) path for comparison.
//! 3. Calls/s with a fresh instance per call, N concurrent tasks.
//! 4. Artifact and shim sizes.
//! 5. Host RSS (VmRSS / VmHWM from /proc/self/status).
//! 6. Cold compile of a never-seen artifact (no disk cache).
//!
//! Every run uses a fresh compile cache under `target/`, so the shim is
//! compiled from scratch at warm-up and results do not depend on earlier runs.
//! The load average is printed at start and end: figures taken while other
//! work runs on the machine (e.g. a build) are not comparable.
//!
//! `FOUNDATION_PROFILE_SECS=5` instead only loops compiled slugify calls for
//! that long (after warm-up and compile) and prints the mean, for profiling
//! the call path, e.g. under `perf record`.

use std::fmt::Write as _;
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
/// Phase 2: compiled path.
const CALL_WARMUP: usize = 200;
const CALLS: usize = 10_000;
/// Phase 2: warm-up path.
const WARM_PATH_WARMUP: usize = 10;
const WARM_PATH_CALLS: usize = 200;
/// Phase 3.
const CONCURRENCY: &[usize] = &[2, 8];
const CONCURRENCY_SECS: f64 = 3.0;
/// Phase 6.
const COLD_COMPILES: usize = 3;

const FORGE_GOAL: Duration = Duration::from_millis(50);
const CALL_P50_GOAL: Duration = Duration::from_micros(100);
const ARTIFACT_GOAL_BYTES: usize = 1_258_291; // 1.2 MiB
/// Give up waiting for a background compile after this long.
const COMPILE_WAIT_LIMIT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------- reporting

#[derive(Clone, Copy)]
enum Goal {
    None,
    MaxDuration(Duration),
    MaxBytes(usize),
}

struct Row {
    section: &'static str,
    name: String,
    value: String,
    goal: String,
    status: Option<bool>,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
}

impl Report {
    fn add(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        value: String,
        goal: Goal,
        pass: Option<bool>,
    ) {
        let goal_text = match goal {
            Goal::None => String::new(),
            Goal::MaxDuration(d) => format!("≤ {}", fmt_dur(d)),
            Goal::MaxBytes(b) => format!("≤ {} bytes", group(b as u64)),
        };
        let row = Row {
            section,
            name: name.into(),
            value,
            goal: goal_text,
            status: pass,
        };
        let suffix = match row.status {
            Some(true) => format!("   (goal {}: PASS)", row.goal),
            Some(false) => format!("   (goal {}: MISS)", row.goal),
            None => String::new(),
        };
        println!("  {:<46} {:>16}{}", row.name, row.value, suffix);
        self.rows.push(row);
    }

    fn duration(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        d: Duration,
        goal: Goal,
    ) {
        let pass = match goal {
            Goal::MaxDuration(g) => Some(d <= g),
            _ => None,
        };
        self.add(section, name, fmt_dur(d), goal, pass);
    }

    fn bytes(&mut self, section: &'static str, name: impl Into<String>, b: usize, goal: Goal) {
        let pass = match goal {
            Goal::MaxBytes(g) => Some(b <= g),
            _ => None,
        };
        let value = format!("{} bytes", group(b as u64));
        self.add(section, name, value, goal, pass);
    }

    fn info(&mut self, section: &'static str, name: impl Into<String>, value: String) {
        self.add(section, name, value, Goal::None, None);
    }

    fn note(&mut self, text: String) {
        println!("  note: {text}");
        self.notes.push(text);
    }

    fn markdown(&self, header: &str) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Temper foundation benchmark\n\n{header}\n");
        let mut section = "";
        for row in &self.rows {
            if row.section != section {
                section = row.section;
                let _ = writeln!(
                    md,
                    "\n## {section}\n\n| Figure | Value | Goal | Result |\n|---|---:|---|---|"
                );
            }
            let status = match row.status {
                Some(true) => "PASS",
                Some(false) => "**MISS**",
                None => "",
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                row.name, row.value, row.goal, status
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n## Notes\n");
            for note in &self.notes {
                let _ = writeln!(md, "- {note}");
            }
        }
        md
    }
}

fn section(title: &str) {
    println!("\n{title}");
}

fn fmt_dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// `1234567` → `1,234,567`.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Nearest-rank percentile of sorted samples.
fn pct(sorted: &[Duration], p: f64) -> Duration {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
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

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

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

/// Waits until `tool` runs on its compiled artifact; `None` on time-out.
async fn wait_compiled(tool: &Tool) -> Option<Instant> {
    let start = Instant::now();
    while !tool.is_compiled() {
        if start.elapsed() > COMPILE_WAIT_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    Some(Instant::now())
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
        let tool = runtime.load(artifact.bytes.to_vec()).await.expect("load");
        eprintln!(
            "profiling compiled calls for {secs} s (pid {})",
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
    let target_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
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
    let runtime = Runtime::builder()
        .cache_dir(Some(cache.path().to_path_buf()))
        .build()
        .expect("runtime");
    if let Ok(secs) = std::env::var("FOUNDATION_PROFILE_SECS") {
        profile_calls(
            &rt,
            &runtime,
            secs.parse().expect("FOUNDATION_PROFILE_SECS: seconds"),
        );
        return;
    }

    // ------------------------------------------------------------ warm-up
    section("0. Shim warm-up");
    let t = Instant::now();
    rt.block_on(runtime.warm_up()).expect("warm_up");
    report.duration(
        "0. Shim warm-up",
        "warm_up, fresh cache (compile shim)",
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
            "0. Shim warm-up",
            "warm_up, new runtime, disk cache hit",
            t.elapsed(),
            Goal::None,
        );
    }

    // ------------------------------------------------------------ 1. forge
    const S1: &str = "1. Forge → first call of a new tool (shim warm)";
    section(S1);
    let mut forge = Vec::new();
    let mut build_only = Vec::new();
    let mut first_call = Vec::new();
    let mut bg_compile = Vec::new();
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
            assert!(
                !out.compiled,
                "first call of a new tool should take the warm-up path"
            );
            assert!(
                ids.insert(artifact.id.clone()),
                "forge {i} produced an artifact seen before"
            );
            // Let this tool's background compile finish before the next forge,
            // so each forge competes only with its own compile.
            let done = wait_compiled(&tool)
                .await
                .expect("background compile did not finish");
            if i == 0 {
                first_forge = Some(t2 - t0);
            }
            if i >= FORGE_UNTIMED {
                forge.push(t2 - t0);
                build_only.push(t1 - t0);
                first_call.push(t2 - t1);
                bg_compile.push(done - t1);
            }
        }
    });
    let forge = sorted(forge);
    let build_only = sorted(build_only);
    let first_call = sorted(first_call);
    let bg_compile = sorted(bg_compile);
    let g = Goal::MaxDuration(FORGE_GOAL);
    report.duration(
        S1,
        format!("forge→first call p50 ({FORGES} tools)"),
        pct(&forge, 50.0),
        g,
    );
    report.duration(S1, "forge→first call p95", pct(&forge, 95.0), g);
    report.duration(S1, "forge→first call max", *forge.last().unwrap(), g);
    report.duration(S1, "build alone p50", pct(&build_only, 50.0), Goal::None);
    report.duration(S1, "build alone p95", pct(&build_only, 95.0), Goal::None);
    report.duration(
        S1,
        "build alone max",
        *build_only.last().unwrap(),
        Goal::None,
    );
    report.duration(
        S1,
        "first call (warm-up path) p50",
        pct(&first_call, 50.0),
        Goal::None,
    );
    report.duration(
        S1,
        "first call (warm-up path) max",
        *first_call.last().unwrap(),
        Goal::None,
    );
    report.duration(
        S1,
        "first-ever forge after warm_up (untimed)",
        first_forge.unwrap(),
        Goal::None,
    );
    report.duration(
        S1,
        "background compile, first call → compiled p50",
        pct(&bg_compile, 50.0),
        Goal::None,
    );

    // ------------------------------------------------------------ 2. isolated call
    const S2: &str = "2. Isolated call of slugify";
    section(S2);
    let artifact: Artifact = rt.block_on(runtime.build(SLUGIFY)).expect("build slugify");

    // Warm-up path, measured with the background compile held back: a
    // dedicated tokio runtime with one blocking thread, kept busy, so the
    // compile (spawn_blocking) queues until the measurement is done and
    // the figures are not skewed by a compile running on the same cores.
    let side = multi_thread_runtime(Some(1));
    let tool = runtime.tool(&artifact);
    let mut warm_path = Vec::with_capacity(WARM_PATH_CALLS);
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let warm_compile = side.block_on(async {
        let blocker = tokio::task::spawn_blocking(move || {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
        });
        started_rx.recv().expect("blocker started");
        for i in 0..WARM_PATH_WARMUP + WARM_PATH_CALLS {
            let t = Instant::now();
            let out = call_ok(&runtime, &tool).await;
            let d = t.elapsed();
            assert!(!out.compiled, "compile should be held back");
            if i >= WARM_PATH_WARMUP {
                warm_path.push(d);
            }
        }
        release_tx.send(()).expect("release blocker");
        blocker.await.expect("blocker");
        let t = Instant::now();
        wait_compiled(&tool)
            .await
            .expect("background compile did not finish");
        t.elapsed()
    });
    drop(side);
    let warm_path = sorted(warm_path);

    let (load_cached, compiled_samples) = rt.block_on(async {
        // The background compile above wrote the disk cache: this is a hit.
        let t = Instant::now();
        let loaded = runtime.load(artifact.bytes.to_vec()).await.expect("load");
        let load_cached = t.elapsed();
        assert!(loaded.is_compiled());
        for _ in 0..CALL_WARMUP {
            assert!(call_ok(&runtime, &loaded).await.compiled);
        }
        let mut samples = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let t = Instant::now();
            let out = runtime.call(&loaded, INPUT).await;
            samples.push(t.elapsed());
            let out = out.expect("call");
            debug_assert!(out.compiled && out.output == EXPECTED);
        }
        (load_cached, samples)
    });
    let seq_mean = mean(&compiled_samples);
    let compiled_samples = sorted(compiled_samples);
    report.duration(
        S2,
        format!("compiled call p50 ({CALLS} calls)"),
        pct(&compiled_samples, 50.0),
        Goal::MaxDuration(CALL_P50_GOAL),
    );
    report.duration(
        S2,
        "compiled call p95",
        pct(&compiled_samples, 95.0),
        Goal::None,
    );
    report.duration(
        S2,
        "compiled call p99",
        pct(&compiled_samples, 99.0),
        Goal::None,
    );
    report.duration(
        S2,
        "compiled call max",
        *compiled_samples.last().unwrap(),
        Goal::None,
    );
    report.info(
        S2,
        "sequential calls/s (1 / mean)",
        format!("{:.0} calls/s", 1.0 / seq_mean.as_secs_f64()),
    );
    report.duration(
        S2,
        format!("warm-up path call p50 ({WARM_PATH_CALLS} calls)"),
        pct(&warm_path, 50.0),
        Goal::None,
    );
    report.duration(
        S2,
        "warm-up path call p95",
        pct(&warm_path, 95.0),
        Goal::None,
    );
    report.duration(
        S2,
        "background compile, no call running",
        warm_compile,
        Goal::None,
    );
    report.duration(S2, "load(bytes), disk cache hit", load_cached, Goal::None);

    // ------------------------------------------------------------ 3. concurrency
    const S3: &str = "3. Throughput, fresh instance per call";
    section(S3);
    let rss_before = proc_status_kib("VmRSS");
    let compiled_tool = rt
        .block_on(runtime.load(artifact.bytes.to_vec()))
        .expect("load");
    for &n in CONCURRENCY {
        let total = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let elapsed = rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..n)
                .map(|_| {
                    let (runtime, tool) = (runtime.clone(), compiled_tool.clone());
                    let (total, failures, stop) = (total.clone(), failures.clone(), stop.clone());
                    tokio::spawn(async move {
                        while !stop.load(Ordering::Relaxed) {
                            match runtime.call(&tool, INPUT).await {
                                Ok(out) if out.output == EXPECTED => {
                                    total.fetch_add(1, Ordering::Relaxed)
                                }
                                _ => failures.fetch_add(1, Ordering::Relaxed),
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
        report.info(
            S3,
            format!("{n} concurrent tasks, {:.1} s", elapsed.as_secs_f64()),
            format!("{:.0} calls/s", calls as f64 / elapsed.as_secs_f64()),
        );
        let failed = failures.load(Ordering::Relaxed);
        if failed > 0 {
            report.note(format!("{failed} calls failed with {n} concurrent tasks"));
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
            let tool = rt.block_on(uncached.load(bytes)).expect("cold load");
            samples.push(t.elapsed());
            assert!(tool.is_compiled());
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
        format!("runtime.load, cache_dir None, p50 of {COLD_COMPILES}"),
        pct(&cold, 50.0),
        Goal::None,
    );
    report.duration(
        S6,
        "runtime.load, cache_dir None, max",
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
            "Phase 1 forges {FORGES} tools with distinct sources ({FORGE_UNTIMED} untimed forges first); \
             after each first call it waits for that tool's background compile, so each forge \
             competes only with its own compile (which starts during its first call)."
        ),
        "Phase 2's warm-up path figures are measured with the background compile held back \
         (a tokio runtime whose single blocking thread is kept busy), i.e. without a compile \
         running on the same cores."
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
