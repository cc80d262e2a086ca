//! The forge pipeline's costs: a whole forge (validate, build, test twice,
//! rules judge, artifact fsync, audit entry) per new tool; `invoke` of a
//! session-tier tool (schema checks, in-memory stats) and of an agent-tier
//! tool (plus a SQLite stats transaction with fsync) against a bare
//! `Runtime::call`. Prints the figures and writes `target/bench-forge.md`.
//!
//! Run: `cargo bench -p temper --bench forge`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use temper::Runtime;
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, PromotionThreshold};
use temper::request::ForgeRequest;
use temper::store::Registry;

const FORGES: usize = 30;
const CALLS: usize = 1000;

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

fn seed(name: &str) -> ForgeRequest {
    let path = format!(
        "{}/../../tests/fixtures/seeds/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = Runtime::builder().build().unwrap();
    runtime.warm_up().await.unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    let config = ForgeConfig {
        max_session_tools: FORGES + 1,
        promotion_threshold: PromotionThreshold {
            uses: 0,
            confidence: 0.8,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(
        runtime.clone(),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(judge)
    .config(config)
    .build();
    let ctx = ForgeContext::new("bench-agent", "bench-session");

    // Whole forges of distinct tools (distinct source: a new artifact each).
    let mut forges = Vec::new();
    for i in 0..FORGES {
        let mut r = seed("slugify");
        r.name = format!("slugify_{i}");
        if let temper::request::Implementation::Sandbox { code, .. } = &mut r.implementation {
            code.push_str(&format!("\n// variant {i}\n"));
        }
        let t = Instant::now();
        forge.forge(&r, &ctx).await.unwrap();
        forges.push(t.elapsed());
    }

    let input = json!({"text": "Hello World!"});
    let text = input.to_string();
    // Let the background compile of slugify_0 finish, so every figure below
    // is a compiled-artifact call.
    let tool_id = forge.session_tools(&ctx).expect("session tools")[0]
        .id
        .clone();
    let bytes = forge
        .store()
        .get_artifact(&temper::store::ArtifactId::from_hex(&tool_id).unwrap())
        .unwrap();
    let bare = runtime.load(bytes).await.unwrap();
    for _ in 0..50 {
        forge.invoke("slugify_0", &input, &ctx).await.unwrap();
        runtime.call(&bare, &text).await.unwrap();
    }

    let mut bare_calls = Vec::with_capacity(CALLS);
    let mut session_calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        runtime.call(&bare, &text).await.unwrap();
        bare_calls.push(t.elapsed());
        let t = Instant::now();
        forge.invoke("slugify_0", &input, &ctx).await.unwrap();
        session_calls.push(t.elapsed());
    }
    forge.promote("slugify_0", &ctx, None).await.unwrap();
    let mut agent_calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        forge.invoke("slugify_0", &input, &ctx).await.unwrap();
        agent_calls.push(t.elapsed());
    }

    let rows = [
        ("forge (whole pipeline, rules judge)", summary(forges)),
        ("Runtime::call (bare)", summary(bare_calls)),
        ("Forge::invoke, session tier", summary(session_calls)),
        (
            "Forge::invoke, agent tier (SQLite stats, fsync)",
            summary(agent_calls),
        ),
    ];
    let mut report = String::from(
        "# Forge pipeline bench\n\n| measurement | p50 | p95 | p99 |\n|---|---|---|---|\n",
    );
    for (name, (p50, p95, p99)) in rows {
        let line = format!("| {name} | {p50:.2?} | {p95:.2?} | {p99:.2?} |\n");
        print!("{line}");
        report.push_str(&line);
    }
    let out = format!("{}/../../target/bench-forge.md", env!("CARGO_MANIFEST_DIR"));
    std::fs::write(&out, report).unwrap();
    println!("report: {out}");
}
