//! What metrics cost per call, at 10, 100 and 1,000 distinct tools
//! (`OBSERVE_NS=10,100` to choose).
//!
//! 1. **Through the forge.** Two forges on one runtime, each with the same
//!    N sandbox tools forged into its session tier: one without metrics,
//!    one with (`Forge::set_metrics`). Rounds of `Forge::invoke` over all N
//!    tools (round robin) alternate between the two, so that drift on the
//!    machine touches both alike; p50 and mean per call, and the
//!    difference.
//! 2. **The recording alone.** `Metrics::tool` + `Metrics::record_call`
//!    round robin over N tool names (what `Forge::invoke` adds with
//!    metrics on), single thread, ns per call: the figure the ≤ 1 µs goal
//!    is checked against (the end-to-end difference sits inside the
//!    noise of a ~30 µs call on a shared machine).
//! 3. **A disabled span.** Traces off (no subscriber exports them), what
//!    opening and recording an `execute_tool`-like span costs.
//!
//! Prints the figures and writes `target/bench-observe.md`. The load
//! average is printed: figures taken while other work runs on the machine
//! are not comparable.
//!
//! Run: `cargo bench -p temper-cli --bench observe`.

/// The allocator of the `temper` binary (see `host/cli/Cargo.toml`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use temper::Runtime;
use temper::forge::judge::Judge;
use temper::forge::{Forge, ForgeConfig, ForgeContext};
use temper::observe::{Metrics, Tier};
use temper::request::ForgeRequest;
use temper::store::Registry;

const DEFAULT_NS: &[usize] = &[10, 100, 1000];
/// Calls per variant and N (at least 3 rounds over the N tools).
const CALLS: usize = 3_000;
/// Recording-only operations per N.
const RECORDS: usize = 3_000_000;

/// Approves every candidate: the bench measures calls, not judging.
struct Approve;

impl Judge for Approve {
    fn review<'a>(
        &'a self,
        _c: &'a temper::forge::judge::ToolCandidate,
    ) -> temper::forge::judge::ReviewFuture<'a> {
        let scores = temper::forge::judge::Scores {
            safety: 1.0,
            correctness: 1.0,
            determinism: 1.0,
            confidence: 0.9,
        };
        let v = temper::forge::judge::Verdict::new(true, scores, vec![], "bench");
        Box::pin(async move { v })
    }
}

/// A small tool, distinct per `i` (its own artifact).
fn request(i: usize) -> ForgeRequest {
    let doc = json!({
        "name": format!("tool_{i}"),
        "description": "adds one",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": format!("const NO = {i};\nfunction execute(x) {{ return {{ n: x.n + 1, no: NO }}; }}")},
        "testCases": [{"input": {"n": 1}}],
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn p50(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    let mean = d.iter().sum::<Duration>() / d.len().max(1) as u32;
    (d[d.len() / 2], mean)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

async fn forge_with(runtime: &Runtime, n: usize, ctx: &ForgeContext) -> (Forge, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(
        runtime.clone(),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(Arc::new(Approve))
    .config(ForgeConfig {
        max_session_tools: n,
        ..ForgeConfig::default()
    })
    .build();
    for i in 0..n {
        forge.forge(&request(i), ctx).await.unwrap();
    }
    (forge, dir)
}

/// One round of calls over `names`, each timed.
async fn round(forge: &Forge, names: &[String], ctx: &ForgeContext, into: &mut Vec<Duration>) {
    let input = json!({"n": 1});
    for name in names {
        let t = Instant::now();
        let out = forge.invoke(name, &input, ctx).await.unwrap();
        into.push(t.elapsed());
        assert_eq!(out.output["n"], json!(2));
    }
}

fn record_only(n: usize) -> f64 {
    let metrics = Metrics::new(1000, "bench", "bench");
    let names: Vec<String> = (0..n).map(|i| format!("tool_{i}")).collect();
    let elapsed = Duration::from_micros(30);
    // First sight of each tool (creates its series) is not timed.
    for name in &names {
        metrics.record_call(&metrics.tool(name), Tier::Session, None, elapsed);
    }
    let t = Instant::now();
    for i in 0..RECORDS {
        let name = &names[i % n];
        metrics.record_call(&metrics.tool(name), Tier::Session, None, elapsed);
    }
    t.elapsed().as_secs_f64() * 1e9 / RECORDS as f64
}

fn disabled_span() -> f64 {
    const SPANS: usize = 10_000_000;
    let t = Instant::now();
    for i in 0..SPANS {
        // As the forge opens `execute_tool`: the name is formatted only
        // when the span is enabled.
        let span = tracing::info_span!(
            target: "temper_forge::trace",
            "execute_tool",
            otel.name = tracing::field::Empty,
            gen_ai.tool.name = i,
            temper.tier = tracing::field::Empty,
        );
        if !span.is_disabled() {
            span.record("otel.name", format!("execute_tool {i}"));
            span.record("temper.tier", "session");
        }
        std::hint::black_box(&span);
    }
    t.elapsed().as_secs_f64() * 1e9 / SPANS as f64
}

fn noop_loop() -> f64 {
    const SPANS: usize = 10_000_000;
    let t = Instant::now();
    for i in 0..SPANS {
        std::hint::black_box(i);
    }
    t.elapsed().as_secs_f64() * 1e9 / SPANS as f64
}

/// The filter of the `temper` binary's printed layer: events, never spans.
struct EventsOnly;

impl<S> tracing_subscriber::layer::Filter<S> for EventsOnly {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        meta.is_event() && *meta.level() <= tracing::Level::INFO
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if meta.is_event() && *meta.level() <= tracing::Level::INFO {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let ns: Vec<usize> = std::env::var("OBSERVE_NS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| DEFAULT_NS.to_vec());
    let load_before = load_average();
    let runtime = Runtime::builder().build().unwrap();
    runtime.warm_up().await.unwrap();
    let ctx = ForgeContext::new("bench-agent", "bench-session");
    let mut md = format!(
        "# Observe bench: metrics per call\n\nLoad average before: {load_before}\n\n\
         ## Through the forge (`Forge::invoke`, round robin over N tools; off and on rounds alternate)\n\n\
         | tools N | calls each | off p50 | on p50 | Δ p50 | off mean | on mean | Δ mean |\n|---|---|---|---|---|---|---|---|\n"
    );
    for &n in &ns {
        let started = Instant::now();
        let (off, _d1) = forge_with(&runtime, n, &ctx).await;
        let (on, _d2) = forge_with(&runtime, n, &ctx).await;
        on.set_metrics(Metrics::new(1000, "bench", "bench"));
        let forged = started.elapsed();
        let names: Vec<String> = (0..n).map(|i| format!("tool_{i}")).collect();
        // Warm-up: one round each.
        let (mut scratch, mut t_off, mut t_on) = (Vec::new(), Vec::new(), Vec::new());
        round(&off, &names, &ctx, &mut scratch).await;
        round(&on, &names, &ctx, &mut scratch).await;
        let rounds = CALLS.div_ceil(n).max(3);
        // Which goes first alternates too: a round leaves the shared
        // runtime refilling the pre-warmed instances of the same tools.
        for r in 0..rounds {
            if r % 2 == 0 {
                round(&off, &names, &ctx, &mut t_off).await;
                round(&on, &names, &ctx, &mut t_on).await;
            } else {
                round(&on, &names, &ctx, &mut t_on).await;
                round(&off, &names, &ctx, &mut t_off).await;
            }
        }
        let calls = t_off.len();
        let (off50, off_mean) = p50(t_off);
        let (on50, on_mean) = p50(t_on);
        let row = format!(
            "| {n} | {calls} | {off50:.2?} | {on50:.2?} | {:+.2} µs | {off_mean:.2?} | {on_mean:.2?} | {:+.2} µs |\n",
            us(on50) - us(off50),
            us(on_mean) - us(off_mean),
        );
        println!("{} (forged 2 × {n} tools in {forged:.1?})", row.trim_end());
        md.push_str(&row);
        if let Some(m) = on.metrics() {
            let text = m.encode();
            let series = text
                .lines()
                .filter(|l| l.starts_with("temper_tool_calls_total{"))
                .count();
            md.push_str(&format!(
                "|  | (with metrics on: {series} `temper_tool_calls_total` series) |||||||\n"
            ));
        }
    }
    md.push_str(
        "\n## The recording alone (`Metrics::tool` + `Metrics::record_call`, one thread)\n\n| tools N | ns per call |\n|---|---|\n",
    );
    for &n in &ns {
        let ns_per = record_only(n);
        let row = format!("| {n} | {ns_per:.0} ns |\n");
        print!("{row}");
        md.push_str(&row);
    }
    let bare_ns = disabled_span();
    println!("empty loop: {:.1} ns", noop_loop());
    // The `temper` binary's subscriber with traces off: a layer for the
    // printed events only, which wants no span (see diagnostics.rs).
    {
        use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
        let printed = tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(EventsOnly);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(printed))
            .unwrap();
    }
    let cli_ns = disabled_span();
    md.push_str(&format!(
        "\n## Traces off\n\nAn `execute_tool`-like span opened, recorded and dropped, nothing exporting spans:\n\n\
         | subscriber | ns per span |\n|---|---|\n\
         | none installed (an embedder without one) | {bare_ns:.1} |\n\
         | the `temper` binary's with traces off (a layer for printed events only) | {cli_ns:.1} |\n"
    ));
    md.push_str(&format!(
        "\nLoad average after: {}\n\nGoal: metrics on ≤ 1 µs per call (the recording alone), metrics and traces off: nothing measurable.\n",
        load_average()
    ));
    let out = format!(
        "{}/../../target/bench-observe.md",
        env!("CARGO_MANIFEST_DIR")
    );
    match std::fs::write(&out, &md) {
        Ok(()) => println!("\n{md}\nreport: {out}"),
        Err(e) => eprintln!("could not write {out}: {e}"),
    }
}
