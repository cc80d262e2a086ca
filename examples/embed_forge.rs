//! Embedding the forge with the SQLite store (`temper-forge`, whose default
//! feature `sqlite` brings `temper-store`'s SQLite backend): forge a tool
//! from a request, call it, promote it to the agent tier, and call it again
//! from a new session on a new forge over the same store directory.
//!
//! Run: `cargo run --release --example embed_forge [STORE_DIR]`
//! (without `STORE_DIR`, a new directory under the system's temp dir).

use std::sync::Arc;

use serde_json::json;
use temper_forge::judge::RulesJudge;
use temper_forge::{Forge, ForgeContext};
use temper_runtime::Runtime;
use temper_store::Registry;

/// A forge request as an agent sends it: name, description, schemas, the
/// implementation and its test cases (the seed's `slugify`).
const REQUEST: &str = include_str!("../tests/fixtures/seeds/slugify.json");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("temper-embed-forge-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    println!("store: {}", dir.display());

    // One runtime (the shared engine) and the store; the rules judge
    // approves a tool whose tests pass and whose code passes the static
    // check, and reviews promotions as a panel of two.
    let runtime = Runtime::builder().build()?;
    let store = Arc::new(Registry::open(&dir)?);
    let judge = Arc::new(RulesJudge::standard());
    let forge = Forge::builder(runtime.clone(), store.clone())
        .judge(judge.clone())
        .panel(judge.clone(), judge.clone())
        .build();

    // VALIDATE -> BUILD -> TEST -> JUDGE -> REGISTER (session tier).
    let first = ForgeContext::new("agent-1", "session-1");
    let forged = forge.forge_json(REQUEST, &first).await?;
    println!(
        "forged {} ({}), tier {:?}, judge: {}",
        forged.tool.name,
        forged.tool.id,
        forged.tool.tier,
        forged.verdict.reasons.join("; ")
    );

    // Calls are checked against the tool's schemas and counted; promotion
    // to the agent tier needs enough successful uses.
    for text in [
        "Hello World",
        "Temper: forged tools",
        "a  b",
        "Ünïcode ok",
        "x",
    ] {
        let call = forge
            .invoke("slugify", &json!({ "text": text }), &first)
            .await?;
        println!("slugify({text:?}) = {}", call.output);
    }
    let promoted = forge.promote("slugify", &first, None).await?;
    println!("promoted to {:?}", promoted.tier);

    // A new forge on the same store directory, a new session of the same
    // agent: the agent-tier tool is there, persisted in SQLite.
    drop(forge);
    let store = Arc::new(Registry::open(&dir)?);
    let forge = Forge::builder(runtime, store).judge(judge).build();
    let later = ForgeContext::new("agent-1", "session-2");
    let call = forge
        .invoke(
            "slugify",
            &json!({ "text": "Persisted Across Forges" }),
            &later,
        )
        .await?;
    println!("from {:?}: {}", call.tier, call.output);
    let stats = forge.tool_stats("slugify", &later)?;
    println!("stats: {} calls, {} ok", stats.total_calls, stats.successes);
    Ok(())
}
