//! Compose mode's costs. First the adapter alone: `Runtime::call_compose`
//! on generated adapters of 1, 2, 4, 8 and 16 steps whose steps are host
//! functions returning their input at once (step cost ≈ 0), so what is
//! measured is the adapter: a fresh store and instance, the compose core
//! evaluating each mapping, one host call per step. The per-step slope is
//! (p50(16) − p50(1)) / 15 (goal: ≤ 50 µs per step); the fixed cost is the
//! 1-step call. Then end to end through `Forge::invoke`: a compose tool of
//! two sandbox JS steps against invoking the two JS tools directly.
//! Prints the figures and writes `target/bench-compose.md`.
//!
//! Run: `cargo bench -p temper --bench compose`.

use std::sync::Arc;
use std::time::{Duration, Instant};
use temper::compose::ComposeRuntime;

use serde_json::{Value, json};
use temper::Runtime;
use temper::compose::adapter::generate;
use temper::compose::run::{LinkedStep, StepOutput, step_fn};
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext};
use temper::request::ForgeRequest;
use temper::store::Registry;

const SIZES: [usize; 5] = [1, 2, 4, 8, 16];
const WARMUP: usize = 50;
const CALLS: usize = 1000;
const INVOKES: usize = 500;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut d: Vec<Duration>) -> (Duration, Duration, Duration) {
    d.sort();
    (
        percentile(&d, 0.5),
        percentile(&d, 0.95),
        percentile(&d, 0.99),
    )
}

/// A pipeline of `n` steps, each passing `x` along.
fn pipeline(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let from = if i == 0 { "$input.x" } else { "$prev.x" };
            json!({"name": format!("s{i}"), "tool": "echo", "inputMapping": {"x": from}})
        })
        .collect()
}

/// Steps that return their input at once.
fn echo_steps(n: usize) -> Vec<LinkedStep> {
    let call = step_fn(|input: String| async move {
        Ok(StepOutput {
            output: input,
            logs: Vec::new(),
        })
    });
    (0..n)
        .map(|i| LinkedStep {
            name: format!("s{i}"),
            tool: "echo".into(),
            call: call.clone(),
        })
        .collect()
}

fn request(doc: Value) -> ForgeRequest {
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

fn sandbox(name: &str, code: &str) -> ForgeRequest {
    request(json!({
        "name": name,
        "description": format!("{name} for the compose bench"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": code},
        "testCases": [{"input": {"n": 1}}],
    }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runtime = Runtime::builder().build().unwrap();
    runtime.warm_up().await.unwrap();
    let mut report = String::from("# Compose bench\n\n");

    // ---- the adapter alone
    let input = json!({"x": "payload"}).to_string();
    let mut rows = Vec::new();
    for n in SIZES {
        let bytes = generate(&pipeline(n)).unwrap();
        let names = (0..n).map(|i| format!("s{i}")).collect();
        let tool = runtime.load_compose(Arc::new(bytes), names).await.unwrap();
        for _ in 0..WARMUP {
            runtime
                .call_compose(&tool, echo_steps(n), &input)
                .await
                .unwrap();
        }
        let mut times = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let steps = echo_steps(n);
            let t = Instant::now();
            let out = runtime.call_compose(&tool, steps, &input).await.unwrap();
            times.push(t.elapsed());
            assert_eq!(out.output, r#"{"x":"payload"}"#);
        }
        rows.push((n, summary(times)));
    }
    report.push_str(
        "## Adapter overhead (steps return at once)\n\n| steps | p50 | p95 | p99 |\n|---|---|---|---|\n",
    );
    for (n, (p50, p95, p99)) in &rows {
        report.push_str(&format!("| {n} | {p50:.2?} | {p95:.2?} | {p99:.2?} |\n"));
    }
    let p50 = |n: usize| rows.iter().find(|(k, _)| *k == n).unwrap().1.0;
    let p95 = |n: usize| rows.iter().find(|(k, _)| *k == n).unwrap().1.1;
    let slope =
        |p: &dyn Fn(usize) -> Duration| (p(16).as_secs_f64() - p(1).as_secs_f64()) / 15.0 * 1e6;
    report.push_str(&format!(
        "\nfixed cost (1 step): p50 {:.2?}, p95 {:.2?}\nper-step slope (p50(16) - p50(1)) / 15: {:.1} µs (p95: {:.1} µs); goal <= 50 µs\n",
        p50(1),
        p95(1),
        slope(&p50),
        slope(&p95),
    ));

    // ---- end to end through Forge::invoke
    let dir = tempfile::tempdir().unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    let forge = Forge::builder(
        runtime.clone(),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(judge)
    .config(ForgeConfig::default())
    .build();
    let ctx = ForgeContext::new("bench-agent", "bench-session");
    forge
        .forge(
            &sandbox("add_one", "function execute(i) { return { n: i.n + 1 }; }"),
            &ctx,
        )
        .await
        .unwrap();
    forge
        .forge(
            &sandbox("double", "function execute(i) { return { n: i.n * 2 }; }"),
            &ctx,
        )
        .await
        .unwrap();
    forge
        .forge(
            &request(json!({
                "name": "add_then_double",
                "description": "add_one then double, for the compose bench",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object"},
                "implementation": {"mode": "compose", "steps": [
                    {"name": "add", "tool": "add_one", "inputMapping": {"n": "$input.n"}},
                    {"name": "dbl", "tool": "double", "inputMapping": {"n": "$prev.n"}},
                ]},
                "testCases": [{"input": {"n": 1}, "expectedOutput": {"n": 4}}],
            })),
            &ctx,
        )
        .await
        .unwrap();
    let input = json!({"n": 20});
    for _ in 0..WARMUP {
        forge.invoke("add_then_double", &input, &ctx).await.unwrap();
        forge.invoke("add_one", &input, &ctx).await.unwrap();
        forge.invoke("double", &input, &ctx).await.unwrap();
    }
    let (mut composed, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..INVOKES {
        let t = Instant::now();
        let out = forge.invoke("add_then_double", &input, &ctx).await.unwrap();
        composed.push(t.elapsed());
        assert_eq!(out.output, json!({"n": 42}));
        let t = Instant::now();
        let a = forge.invoke("add_one", &input, &ctx).await.unwrap();
        let b = forge.invoke("double", &a.output, &ctx).await.unwrap();
        direct.push(t.elapsed());
        assert_eq!(b.output, json!({"n": 42}));
    }
    let (c50, c95, c99) = summary(composed);
    let (d50, d95, d99) = summary(direct);
    report.push_str(&format!(
        "\n## End to end: Forge::invoke, 2 sandbox JS steps\n\n| measurement | p50 | p95 | p99 |\n|---|---|---|---|\n\
         | compose tool (add_one -> double) | {c50:.2?} | {c95:.2?} | {c99:.2?} |\n\
         | add_one + double invoked directly | {d50:.2?} | {d95:.2?} | {d99:.2?} |\n\
         \ncompose overhead at p50: {:.1} µs ({:.1} µs per step)\n",
        (c50.as_secs_f64() - d50.as_secs_f64()) * 1e6,
        (c50.as_secs_f64() - d50.as_secs_f64()) * 1e6 / 2.0,
    ));

    print!("{report}");
    let out = format!(
        "{}/../../target/bench-compose.md",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(&out, report).unwrap();
    println!("report: {out}");
}
