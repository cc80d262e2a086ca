//! The registry commands: `forge`, `tools`, `call`, `stats`, `promote`,
//! `approve`, `audit`, `session end`. They open the store and build a
//! [`Forge`] engine; the session tier (one per `--agent`/`--session`) lives
//! in the store between invocations. A session tier an older `temper` kept
//! in `STATE_DIR/sessions/` is moved into the store when the session is
//! next opened (see [`SessionFile`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use temper::forge::judge::{Judge, LlmJudge, LlmJudgeConfig, NoJudge, ReviewFocus, RulesJudge};
use temper::forge::session::SessionSnapshot;
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeResult, ToolInfo};
use temper::store::StoreLocation;

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
    /// persistSandboxSource).
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

fn rules_judge() -> RulesJudge {
    RulesJudge::standard()
}

impl JudgeArgs {
    /// (creation judge, safety reviewer, correctness reviewer).
    #[allow(clippy::type_complexity)]
    fn judges(&self) -> Result<(Arc<dyn Judge>, Arc<dyn Judge>, Arc<dyn Judge>), String> {
        Ok(match self.judge {
            JudgeKind::None => (Arc::new(NoJudge), Arc::new(NoJudge), Arc::new(NoJudge)),
            JudgeKind::Rules => {
                let j: Arc<dyn Judge> = Arc::new(rules_judge());
                (j.clone(), j.clone(), j)
            }
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
                let make = |focus| {
                    LlmJudge::new(cfg.clone())
                        .map(|j| Arc::new(j.with_focus(focus)) as Arc<dyn Judge>)
                        .map_err(|e| e.to_string())
                };
                (
                    make(ReviewFocus::Creation)?,
                    make(ReviewFocus::Safety)?,
                    make(ReviewFocus::Correctness)?,
                )
            }
        })
    }
}

/// A session tier an older `temper` kept on disk:
/// `STATE_DIR/sessions/<blake3(agent, session)>.json`. Opening the session
/// moves its tools into the store (each with a `forge_decision` entry
/// marked `restored`) and removes the file, under the file's lock
/// (`<file>.lock`) so that two processes do not both move it.
struct SessionFile {
    path: PathBuf,
}

impl SessionFile {
    fn new(state_dir: &Path, ctx: &ForgeContext) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(ctx.agent_id.as_bytes());
        h.update(b"\0");
        h.update(ctx.session_id.as_bytes());
        let name = format!("{}.json", &h.finalize().to_hex()[..32]);
        Self {
            path: state_dir.join("sessions").join(name),
        }
    }

    /// The saved snapshot, if there is one.
    fn read(&self) -> Result<Option<SessionSnapshot>, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("session file {} is damaged: {e}", self.path.display()))
    }

    /// Moves a saved tier into the store, if there is one.
    fn migrate(&self, forge: &Forge) -> Result<(), String> {
        if !self.path.exists() {
            return Ok(());
        }
        let _lock = self.lock()?;
        if let Some(snapshot) = self.read()? {
            forge
                .restore_session(snapshot)
                .map_err(|e| format!("moving {} into the store: {e}", self.path.display()))?;
        }
        self.remove_locked()
    }

    /// Holds the session's lock file, exclusively, until dropped.
    fn lock(&self) -> Result<std::fs::File, String> {
        let dir = self.path.parent().expect("has a parent");
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let lock_path = self.path.with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
        file.lock()
            .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
        Ok(file)
    }

    fn remove_locked(&self) -> Result<(), String> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {}: {e}", self.path.display())),
        }
    }
}

/// An opened registry: the engine and the context.
pub struct Opened {
    pub forge: Forge,
    pub ctx: ForgeContext,
    /// The started tool hub (its upstream children live as long as it).
    pub hub: Option<Arc<temper::hub::Hub>>,
}

impl Opened {
    /// Opens the store and builds the engine (with the judges, if given).
    /// The CLI's sessions never expire (`temper session end` ends one). A
    /// one-shot command runs no registry watch: it reads the store.
    pub fn open(
        registry: &Registry,
        common: &Common,
        judges: Option<&JudgeArgs>,
    ) -> Result<Self, String> {
        Self::open_with_idle(registry, common, judges, 0, None)
    }

    /// [`Opened::open`] whose implicit sessions (a stdio connection's)
    /// expire after `session_idle_secs` unused (0: never), with the
    /// forge's registry watch polling every `registry_poll` (`None`: no
    /// watch; see `ForgeBuilder::registry_poll`).
    pub fn open_with_idle(
        registry: &Registry,
        common: &Common,
        judges: Option<&JudgeArgs>,
        session_idle_secs: u64,
        registry_poll: Option<std::time::Duration>,
    ) -> Result<Self, String> {
        let location =
            StoreLocation::from_arg(registry.store.as_deref()).map_err(|e| e.to_string())?;
        let state_dir = match &registry.state_dir {
            Some(d) => d.clone(),
            None => location
                .default_state_dir()
                .ok_or("no platform data directory for this host's state: pass --state-dir DIR")?,
        };
        let store = location.open().map_err(|e| e.to_string())?;
        let mut config = match &registry.forge_config {
            None => ForgeConfig::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                serde_json::from_str(&text)
                    .map_err(|e| format!("{}: bad forge config: {e}", path.display()))?
            }
        };
        if let Some(ms) = registry.stats_flush_ms {
            config.stats_flush_ms = ms;
        }
        if registry.forge_config.is_none() {
            config.session_idle_secs = session_idle_secs;
        }
        let runtime = common.runtime()?;
        let trust = crate::signing::trust_policy(registry.trust.as_deref())?;
        let mut builder = Forge::builder(runtime, Arc::new(store))
            .config(config)
            .trust(trust)
            .registry_poll(registry_poll);
        if let Some(j) = judges {
            let (creation, safety, correctness) = j.judges()?;
            builder = builder.judge(creation).panel(safety, correctness);
        }
        let forge = builder.build();
        let ctx = ForgeContext::new(registry.agent.clone(), registry.session.clone());
        SessionFile::new(&state_dir, &ctx).migrate(&forge)?;
        Ok(Self {
            forge,
            ctx,
            hub: None,
        })
    }

    /// Starts the tools file's sources and registers the hub tools the
    /// host policy allows as host tools.
    pub async fn attach_hub(&mut self, args: &HubArgs) -> Result<(), String> {
        let Some(path) = &args.tools else {
            return Ok(());
        };
        let file = temper::hub::ToolsFile::load(path).map_err(|e| e.to_string())?;
        let hub = Arc::new(
            temper::hub::Hub::start(&file)
                .await
                .map_err(|e| format!("tools file {}: {e}", path.display()))?,
        );
        let registered = self
            .forge
            .attach_hub(hub.clone())
            .map_err(|e| format!("tools file {}: {e}", path.display()))?;
        let offered = hub.tools().len();
        if registered.len() < offered {
            tracing::info!(
                "tools file {}: {} of {offered} hub tools allowed by the host policy's [tools] allow",
                path.display(),
                registered.len()
            );
        }
        self.hub = Some(hub);
        Ok(())
    }

    /// Writes the calls counted in memory to the store (the session tier
    /// itself is stored as it changes).
    pub fn save(&self) -> Result<(), String> {
        self.forge
            .store()
            .flush_stats()
            .map_err(|e| format!("stats flush: {e}"))
    }
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
    let mut opened = Opened::open(registry, common, Some(judge))?;
    opened.attach_hub(hub).await?;
    let text = crate::read_source(request)?;
    let outcome = opened.forge.forge_json(&text, &opened.ctx).await;
    if outcome.is_ok() {
        opened.save()?;
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
    let mut opened = Opened::open(registry, common, None)?;
    crate::signing::check_tiers(&opened).await?;
    opened.attach_hub(hub).await?;
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
    let mut opened = Opened::open(registry, common, None)?;
    crate::signing::check_tiers(&opened).await?;
    opened.attach_hub(hub).await?;
    let input: Value =
        serde_json::from_str(input).map_err(|e| format!("--input is not valid JSON: {e}"))?;
    // A hub tool, unless a forged tool the caller sees has the name.
    let forged = opened
        .forge
        .visible_tools(&opened.ctx)
        .map_err(|e| e.to_string())?
        .iter()
        .any(|t| t.name == name);
    if !forged && opened.forge.hub_tools().iter().any(|t| t.name == name) {
        let outcome = opened
            .forge
            .call_native(name, &input)
            .await
            .unwrap_or_else(|| Err(format!("no hub tool {name:?}")));
        return match outcome {
            Ok(output) => {
                if common.json {
                    println!("{}", json!({"ok": true, "output": output, "tier": "hub"}));
                } else {
                    println!("{output}");
                }
                Ok(())
            }
            Err(e) => {
                if common.json {
                    println!("{}", json!({"ok": false, "error": e}));
                }
                Err(e)
            }
        };
    }
    let outcome = opened.forge.invoke(name, &input, &opened.ctx).await;
    opened.save()?;
    match &outcome {
        Ok(inv) => {
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
                println!("{}", json!({"ok": false, "error": e.to_string()}));
            }
        }
    }
    outcome.map(|_| ()).map_err(|e| e.to_string())
}

/// `temper stats NAME`.
pub fn stats(name: &str, registry: &Registry, common: &Common) -> Result<(), String> {
    let opened = Opened::open(registry, common, None)?;
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
    let opened = Opened::open(registry, common, Some(judge))?;
    let source = source.map(crate::read_source).transpose()?;
    let outcome = opened
        .forge
        .promote(name, &opened.ctx, source.as_deref())
        .await;
    opened.save()?;
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

/// `temper approve NAME --by PERSON`.
pub fn approve(
    name: &str,
    by: &str,
    note: Option<&str>,
    registry: &Registry,
    common: &Common,
) -> Result<(), String> {
    let opened = Opened::open(registry, common, None)?;
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
    let opened = Opened::open(registry, common, None)?;
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
    let opened = Opened::open(registry, common, None)?;
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
    let opened = Opened::open(registry, common, None)?;
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
