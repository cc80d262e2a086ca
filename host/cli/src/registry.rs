//! The registry commands: `forge`, `tools`, `call`, `stats`, `promote`,
//! `approve`, `audit`, `session end`. They open the store and build a
//! `Forge` engine through `temper_embed` (as the language bindings do); the
//! session tier (one per `--agent`/`--session`) lives in the store between
//! invocations. A session tier an older `temper` kept in
//! `STATE_DIR/sessions/` is moved into the store when the session is next
//! opened (`temper_embed::Opened::open`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use temper::forge::judge::LlmJudgeConfig;
use temper::forge::{ForgeResult, ToolInfo};
pub use temper_embed::Opened;
use temper_embed::{Called, ForgeOptions, JudgeChoice};

use crate::Common;

/// Where the registry lives and who is asking.
#[derive(Args)]
pub struct Registry {
    /// The store: a directory (embedded SQLite; default: the platform data
    /// dir, e.g. ~/.local/share/temper), or a PostgreSQL URL
    /// (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE) that several
    /// hosts share.
    #[arg(long, env = "TEMPER_STORE", value_name = "DIR|URL")]
    store: Option<String>,
    /// This host's local state (session tiers an older `temper` kept in
    /// `sessions/` are moved into the store from there).
    /// Default: the store directory; for a PostgreSQL store, a directory
    /// per database under the platform data dir
    /// (e.g. ~/.local/share/temper/hosts/<hash of the URL>).
    #[arg(long, env = "TEMPER_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The agent acting.
    #[arg(long, env = "TEMPER_AGENT", default_value = "default")]
    agent: String,
    /// The session (its tools last until `temper session end`).
    #[arg(long, env = "TEMPER_SESSION", default_value = "default")]
    session: String,
    /// Forge settings as JSON with the seed's `emergentConfig` names
    /// (maxSessionTools, maxAgentTools, promotionThreshold,
    /// persistSandboxSource) and Temper's own (maxArtifactBytes, ...).
    #[arg(long, value_name = "FILE")]
    forge_config: Option<PathBuf>,
    /// Write the call counts of agent- and shared-tier tools to the store
    /// at most this often (overrides the forge config's statsFlushMs;
    /// default 1000). A crash loses at most one interval of counts; 0
    /// writes each call as it ends.
    #[arg(long, env = "TEMPER_STATS_FLUSH_MS", value_name = "MS")]
    stats_flush_ms: Option<u64>,
    /// Trust policy (TOML): which publishers' signatures an artifact needs
    /// to be imported, and to stay enabled in the agent and shared tiers.
    /// Default: no policy (`level = "off"`).
    #[arg(long, env = "TEMPER_TRUST", value_name = "FILE")]
    pub(crate) trust: Option<PathBuf>,
    /// Rank `search_tools` semantically too, fused with the lexical rank:
    /// `local:DIR` (a sentence-embedding model's `model.safetensors`,
    /// `tokenizer.json` and `config.json`, e.g. all-MiniLM-L6-v2, run
    /// in-process) or `openai:URL` (an OpenAI-compatible `/v1/embeddings`
    /// endpoint; needs --embeddings-model). An endpoint that fails leaves
    /// the lexical results, with a warning. Default: lexical only.
    #[arg(long, env = "TEMPER_EMBEDDINGS", value_name = "local:DIR|openai:URL")]
    embeddings: Option<String>,
    /// The endpoint's model name (`openai:` only), e.g. text-embedding-3-small.
    #[arg(long, env = "TEMPER_EMBEDDINGS_MODEL", value_name = "NAME")]
    embeddings_model: Option<String>,
    /// The environment variable holding the endpoint's API key (default
    /// TEMPER_EMBEDDINGS_API_KEY; read at each request, never logged).
    #[arg(long, value_name = "VAR")]
    embeddings_key_env: Option<String>,
}

impl Registry {
    /// The embedder `--embeddings` names, built (a local model is loaded
    /// here, once); `None` without the flag.
    fn embedder(&self) -> Result<Option<temper_embed::SharedEmbedder>, String> {
        let Some(spec) = &self.embeddings else {
            return Ok(None);
        };
        let spec: temper_embedding::EmbeddingsSpec = spec.parse().map_err(|e| format!("{e}"))?;
        let embedder = spec
            .build(
                self.embeddings_model.as_deref(),
                self.embeddings_key_env.as_deref(),
            )
            .map_err(|e| format!("{e}"))?;
        Ok(Some(temper_embed::SharedEmbedder(embedder)))
    }
}

/// The tool hub (`--tools FILE`).
#[derive(Args)]
pub struct HubArgs {
    /// Tools file (TOML): upstream MCP servers and built-in tools whose
    /// tools become host tools (compose steps; listed and callable through
    /// `temper mcp`). Only those the host policy's `[tools] allow` lists
    /// are used.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
}

/// Which judge reviews forges and promotions.
#[derive(Clone, Copy, ValueEnum)]
pub enum JudgeKind {
    /// No judge: every forge and promotion is rejected (fail closed).
    None,
    /// The offline rules judge.
    Rules,
    /// An OpenAI-compatible chat-completions endpoint.
    Llm,
}

/// Judge selection.
#[derive(Args)]
pub struct JudgeArgs {
    /// The judge (default none: every forge is rejected).
    #[arg(long, value_enum, env = "TEMPER_JUDGE", default_value = "none")]
    judge: JudgeKind,
    /// Base URL of the chat-completions API (`--judge llm`), e.g.
    /// http://127.0.0.1:8080/v1. The key is read from $TEMPER_JUDGE_API_KEY.
    #[arg(long, env = "TEMPER_JUDGE_URL")]
    judge_url: Option<String>,
    /// Model name (`--judge llm`).
    #[arg(long, env = "TEMPER_JUDGE_MODEL")]
    judge_model: Option<String>,
    /// Limit per review, in milliseconds (`--judge llm`, default 30000).
    #[arg(long)]
    judge_timeout_ms: Option<u64>,
}

impl JudgeArgs {
    /// The judge these flags choose.
    fn choice(&self) -> Result<JudgeChoice, String> {
        Ok(match self.judge {
            JudgeKind::None => JudgeChoice::None,
            JudgeKind::Rules => JudgeChoice::Rules,
            JudgeKind::Llm => {
                let url = self
                    .judge_url
                    .clone()
                    .ok_or("--judge llm needs --judge-url (or $TEMPER_JUDGE_URL)")?;
                let model = self
                    .judge_model
                    .clone()
                    .ok_or("--judge llm needs --judge-model (or $TEMPER_JUDGE_MODEL)")?;
                let mut cfg = LlmJudgeConfig::new(url, model);
                if let Some(ms) = self.judge_timeout_ms {
                    cfg.timeout = Duration::from_millis(ms);
                }
                JudgeChoice::Llm(cfg)
            }
        })
    }
}

/// Opens the store and builds the engine (with the judges, if given), as
/// [`temper_embed::Opened::open`] does for every embedder. The CLI's
/// sessions never expire (`temper session end` ends one). A one-shot
/// command runs no registry watch: it reads the store.
pub fn open(
    registry: &Registry,
    common: &Common,
    judges: Option<&JudgeArgs>,
) -> Result<Opened, String> {
    open_with_idle(registry, common, judges, 0, None)
}

/// [`open`] whose implicit sessions (a stdio connection's) expire after
/// `session_idle_secs` unused (0: never), with the forge's registry watch
/// polling every `registry_poll` (`None`: no watch; see
/// `ForgeBuilder::registry_poll`).
pub fn open_with_idle(
    registry: &Registry,
    common: &Common,
    judges: Option<&JudgeArgs>,
    session_idle_secs: u64,
    registry_poll: Option<std::time::Duration>,
) -> Result<Opened, String> {
    let options = ForgeOptions {
        store: registry.store.clone(),
        state_dir: registry.state_dir.clone(),
        agent: registry.agent.clone(),
        session: registry.session.clone(),
        judge: judges.map(JudgeArgs::choice).transpose()?,
        forge_config: registry.forge_config.clone(),
        stats_flush_ms: registry.stats_flush_ms,
        session_idle_secs,
        trust: registry.trust.clone(),
        registry_poll,
        allow_tools: None,
        embedder: registry.embedder()?,
    };
    Opened::open(&options, common.runtime()?).map_err(|e| e.to_string())
}

/// Starts the tools file's sources (`--tools`), if given, and registers
/// the hub tools the host policy allows as host tools.
pub async fn attach_hub(opened: &mut Opened, args: &HubArgs) -> Result<(), String> {
    if let Some(path) = &args.tools {
        opened.attach_hub(path).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes the calls counted in memory to the store (the session tier
/// itself is stored as it changes).
pub fn save(opened: &Opened) -> Result<(), String> {
    opened.save().map_err(|e| format!("stats flush: {e}"))
}

fn print_tool_line(t: &ToolInfo) {
    let caps = if t.allowlist.is_empty() {
        "-".to_string()
    } else {
        t.allowlist.join(",")
    };
    println!(
        "{:<28} {:<8} {}  caps {:<20} {}",
        t.name,
        t.tier.as_str(),
        &t.id[..12],
        caps,
        t.description
    );
}

/// `temper forge REQUEST`.
pub async fn forge(
    request: &Path,
    registry: &Registry,
    hub: &HubArgs,
    judge: &JudgeArgs,
    common: &Common,
) -> Result<(), String> {
    let mut opened = open(registry, common, Some(judge))?;
    attach_hub(&mut opened, hub).await?;
    let text = crate::read_source(request)?;
    let outcome = opened.forge.forge_json(&text, &opened.ctx).await;
    if outcome.is_ok() {
        save(&opened)?;
    }
    let result = ForgeResult::from(&outcome);
    if common.json {
        println!(
            "{}",
            serde_json::to_string(&result).map_err(|e| e.to_string())?
        );
    } else {
        match &outcome {
            Ok(f) => {
                println!(
                    "forged {} into session {:?} of agent {:?}",
                    f.tool.name, opened.ctx.session_id, opened.ctx.agent_id
                );
                println!("  id       {}", f.tool.id);
                println!(
                    "  verdict  approved by {} (safety {:.2}, correctness {:.2}, determinism {:.2}, confidence {:.2})",
                    f.verdict.judge,
                    f.verdict.safety,
                    f.verdict.correctness,
                    f.verdict.determinism,
                    f.verdict.confidence
                );
                println!("  tests    {} passed", f.test_results.len());
            }
            Err(e) => {
                for r in result.test_results.iter().filter(|r| !r.passed) {
                    eprintln!(
                        "  case {}: {}",
                        r.index,
                        r.failure.as_deref().unwrap_or("failed")
                    );
                }
                let _ = e;
            }
        }
    }
    outcome
        .map(|_| ())
        .map_err(|e| format!("forge refused at the {} stage: {e}", e.stage()))
}

/// `temper tools`.
pub async fn tools(registry: &Registry, hub: &HubArgs, common: &Common) -> Result<(), String> {
    let mut opened = open(registry, common, None)?;
    crate::signing::check_tiers(&opened).await?;
    attach_hub(&mut opened, hub).await?;
    let tools = opened
        .forge
        .visible_tools(&opened.ctx)
        .map_err(|e| e.to_string())?;
    let hub_tools = opened.forge.hub_tools();
    if common.json {
        let hub_json: Vec<Value> = hub_tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema, "outputSchema": t.output_schema}))
            .collect();
        println!("{}", json!({ "tools": tools, "hubTools": hub_json }));
    } else if tools.is_empty() && hub_tools.is_empty() {
        println!(
            "no tools for agent {:?} in session {:?}",
            opened.ctx.agent_id, opened.ctx.session_id
        );
    } else {
        for t in &tools {
            print_tool_line(t);
        }
        for t in &hub_tools {
            println!("{:<28} {:<8} {:<12}  {}", t.name, "hub", "", t.description);
        }
    }
    Ok(())
}

/// `temper call NAME --input JSON`.
pub async fn call(
    name: &str,
    input: &str,
    registry: &Registry,
    hub: &HubArgs,
    common: &Common,
) -> Result<(), String> {
    let mut opened = open(registry, common, None)?;
    crate::signing::check_tiers(&opened).await?;
    attach_hub(&mut opened, hub).await?;
    let input: Value =
        serde_json::from_str(input).map_err(|e| format!("--input is not valid JSON: {e}"))?;
    // A forged tool the caller sees, else a hub tool of that name.
    let outcome = opened.call(name, &input).await;
    save(&opened)?;
    match &outcome {
        Ok(Called::Hub(output)) => {
            if common.json {
                println!("{}", json!({"ok": true, "output": output, "tier": "hub"}));
            } else {
                println!("{output}");
            }
        }
        Ok(Called::Forged(inv)) => {
            if common.json {
                println!(
                    "{}",
                    json!({"ok": true, "output": inv.output, "logs": inv.logs, "tier": inv.tier, "id": inv.tool_id, "latencyMs": inv.latency_ms})
                );
            } else {
                for line in &inv.logs {
                    eprintln!("[console.{}] {}", line.level, line.message);
                }
                println!("{}", inv.output);
            }
        }
        Err(e) => {
            if common.json {
                println!("{}", json!({"ok": false, "error": e.message}));
            }
        }
    }
    outcome.map(|_| ()).map_err(|e| e.to_string())
}

/// `temper stats NAME`.
pub fn stats(name: &str, registry: &Registry, common: &Common) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    let s = opened
        .forge
        .tool_stats(name, &opened.ctx)
        .map_err(|e| e.to_string())?;
    if common.json {
        println!(
            "{}",
            json!({"name": name, "totalCalls": s.total_calls, "successes": s.successes, "successRate": s.success_rate, "avgLatencyMs": s.avg_latency_ms, "p95LatencyMs": s.p95_latency_ms})
        );
    } else {
        println!(
            "{name}: {} calls, {:.1}% success, avg {:.2} ms, p95 {:.2} ms",
            s.total_calls,
            s.success_rate * 100.0,
            s.avg_latency_ms,
            s.p95_latency_ms
        );
    }
    Ok(())
}

/// `temper promote NAME`.
pub async fn promote(
    name: &str,
    source: Option<&Path>,
    registry: &Registry,
    judge: &JudgeArgs,
    common: &Common,
) -> Result<(), String> {
    let opened = open(registry, common, Some(judge))?;
    let source = source.map(crate::read_source).transpose()?;
    let outcome = opened
        .forge
        .promote(name, &opened.ctx, source.as_deref())
        .await;
    save(&opened)?;
    let t = outcome.map_err(|e| e.to_string())?;
    if common.json {
        println!("{}", json!({"ok": true, "tool": t}));
    } else {
        println!(
            "promoted {} to the agent tier of {:?}",
            t.name, opened.ctx.agent_id
        );
    }
    Ok(())
}

/// `temper delete NAME`: removes a session tool (the session of
/// `--session`).
pub fn delete(name: &str, registry: &Registry, common: &Common) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    let outcome = opened.forge.delete_session_tool(name, &opened.ctx);
    save(&opened)?;
    let t = outcome.map_err(|e| e.to_string())?;
    if common.json {
        println!("{}", json!({"ok": true, "deleted": t}));
    } else {
        println!(
            "deleted {} from session {:?}",
            t.name, opened.ctx.session_id
        );
    }
    Ok(())
}

/// `temper approve NAME --by PERSON`.
pub fn approve(
    name: &str,
    by: &str,
    note: Option<&str>,
    registry: &Registry,
    common: &Common,
) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    let t = opened
        .forge
        .approve(name, &opened.ctx.agent_id, by, note)
        .map_err(|e| e.to_string())?;
    if common.json {
        println!("{}", json!({"ok": true, "tool": t}));
    } else {
        println!("approved by {by}: {} is now shared", t.name);
    }
    Ok(())
}

/// `temper audit verify`.
pub fn audit_verify(registry: &Registry, common: &Common) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    match opened.forge.store().verify_audit() {
        Ok(report) => {
            if common.json {
                println!(
                    "{}",
                    json!({"ok": true, "entries": report.entries, "headHash": report.head_hash})
                );
            } else {
                println!(
                    "audit chain intact: {} entries, head {}",
                    report.entries, report.head_hash
                );
            }
            Ok(())
        }
        Err(e) => {
            if common.json {
                println!("{}", json!({"ok": false, "error": e.to_string()}));
            }
            Err(e.to_string())
        }
    }
}

/// `temper audit log`.
pub fn audit_log(
    after: i64,
    limit: usize,
    registry: &Registry,
    common: &Common,
) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    let entries = opened
        .forge
        .store()
        .audit_entries(after, limit)
        .map_err(|e| e.to_string())?;
    if common.json {
        println!("{}", json!({ "entries": entries }));
    } else {
        for e in &entries {
            println!(
                "{:>6}  {:<18} {:<24} {}  {}",
                e.seq,
                e.kind.as_str(),
                e.subject,
                e.agent.as_deref().unwrap_or("-"),
                e.payload
            );
        }
    }
    Ok(())
}

/// `temper session end`.
pub fn session_end(registry: &Registry, common: &Common) -> Result<(), String> {
    let opened = open(registry, common, None)?;
    let n = opened
        .forge
        .cleanup_session(&opened.ctx)
        .map_err(|e| e.to_string())?;
    if common.json {
        println!("{}", json!({"ok": true, "discarded": n}));
    } else {
        println!(
            "session {:?} ended: {n} tool(s) discarded",
            opened.ctx.session_id
        );
    }
    Ok(())
}
