//! Code mode, the forge's side: tools that call tools, and `run_code`.
//!
//! The runtime checks every tool call a sandbox tool makes (the `tool:NAME`
//! grant, the depth cap, the call tree's deadline, the input and output
//! caps) and asks a [`ToolCaller`] to run the callee. The forge's callers
//! run it through the normal path ([`Forge::call_artifact`]): its own fresh
//! instance, its own grants (never the caller's), the runtime's limits and
//! its schema checks; a host-native or hub tool through its registered
//! function with its schema checks. Nothing widens: a tool granted only
//! `tool:x` reaches the network only if `x` itself holds `fetch`, and only
//! inside `x`.
//!
//! - A **forged tool** calls what its manifest pins ([`PinnedCaller`]):
//!   forged callees by the blake3 of their artifact, hub and host-native
//!   ones by name, as VALIDATE resolved them for the agent that forged it.
//! - A **`run_code`** run ([`Forge::run_code`]) calls the tools its caller
//!   may call now (session, agent, shared tier, host-native and hub tools),
//!   narrowed by the `tools` it names, resolved once when the run starts.
//!
//! `forge_tool`, `promote_tool`, `run_code` and `describe_tools` are never
//! callable from code: VALIDATE refuses them as grants, the runtime refuses
//! them as calls ([`NEVER_CALLABLE`]), and they are not tools of the forge
//! (they are meta-tools of the MCP server) in any case.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use temper_runtime::artifact::ArtifactManifest;
use temper_runtime::capabilities::tool_calls::{
    NEVER_CALLABLE, ToolCallFailure, ToolCallFuture, ToolCallOutput, ToolCallRequest, ToolCaller,
};
use temper_runtime::error::{BuildError, RunError};
use temper_runtime::host_state::LogLine;
use temper_runtime::id::ArtifactId;
use temper_runtime::runtime::{CallFailure, Tool};
use temper_store::StoreError;
use temper_store::{CallCounters, ToolStats};

use super::error::InvokeError;
use super::{Forge, ForgeContext, Inner, lock};

/// Where a callee is: a forged tool's artifact, or a host-native (hub)
/// tool by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pin {
    /// A forged tool, by its artifact's blake3.
    Artifact(ArtifactId),
    /// A host-native or hub tool, by name.
    Native,
}

/// Runs the callees of one tool from a fixed table of pins.
pub(crate) struct PinnedCaller {
    /// The forge, weakly: the forge's caches hold tools that hold this.
    forge: Weak<Inner>,
    /// Tool name → where it is.
    pins: BTreeMap<String, Pin>,
}

impl PinnedCaller {
    fn forge(&self) -> Option<Forge> {
        self.forge.upgrade().map(|inner| Forge { inner })
    }
}

impl ToolCaller for PinnedCaller {
    fn call_tool(&self, request: ToolCallRequest) -> ToolCallFuture<'_> {
        Box::pin(async move {
            let Some(forge) = self.forge() else {
                return Err(failure("the forge has shut down"));
            };
            let Some(pin) = self.pins.get(&request.tool) else {
                return Err(failure(format!(
                    "tool {:?} is granted but not pinned in the caller's manifest",
                    request.tool
                )));
            };
            let span = super::observe::callee_span("code_mode_call", &request.tool);
            tracing::Instrument::instrument(forge.call_pinned(pin, &request), span.clone())
                .await
                .inspect_err(|_| super::observe::record_error(&span, "callee"))
        })
    }
}

fn failure(message: impl Into<String>) -> ToolCallFailure {
    ToolCallFailure {
        message: message.into(),
        logs: Vec::new(),
    }
}

/// The console lines a failed invocation carries.
fn invoke_failure(e: InvokeError) -> ToolCallFailure {
    let logs = match &e {
        InvokeError::Run { failure, .. } => failure.logs.clone(),
        _ => Vec::new(),
    };
    ToolCallFailure {
        message: e.to_string(),
        logs,
    }
}

/// Why a `run_code` run failed. Each names its stage.
#[derive(Debug, thiserror::Error)]
pub enum RunCodeError {
    /// The code did not pass the static check or does not compile.
    #[error("run_code: build: {0}")]
    Build(#[from] BuildError),
    /// A tool named in `tools` is not one the caller may call from code.
    #[error(
        "run_code: tools: {tool:?} is not callable from code by agent {agent:?} in session {session:?}"
    )]
    NotCallable {
        /// The tool named.
        tool: String,
        /// The agent.
        agent: String,
        /// The session.
        session: String,
    },
    /// The host policy's `[run_code] allow` names a capability it does not
    /// allow.
    #[error("run_code: host policy: {0}")]
    Policy(#[from] temper_policy::PolicyError),
    /// Reading the registry failed.
    #[error("run_code: {0}")]
    Store(#[from] StoreError),
    /// The run failed (threw, timed out, ran out of memory, returned
    /// undefined, was refused a capability, ...), with its console lines.
    #[error("run_code: {0}")]
    Run(CallFailure),
}

impl RunCodeError {
    /// The run error, for a failed run.
    pub fn run_error(&self) -> Option<&RunError> {
        match self {
            RunCodeError::Run(f) => Some(&f.error),
            _ => None,
        }
    }
}

/// What a `run_code` run returned.
#[derive(Debug, Clone)]
pub struct CodeRun {
    /// The body's value, as JSON.
    pub output: Value,
    /// Its console lines (callees' prefixed `[tool NAME]`).
    pub logs: Vec<LogLine>,
    /// The tools it could call, sorted.
    pub tools: Vec<String>,
    /// Wall-clock time of the run, ms (build and call).
    pub latency_ms: f64,
}

/// The source `run_code` runs: the body inside `async function
/// execute(input)`, on the function's own line so line numbers match the
/// body's.
pub fn code_source(body: &str) -> String {
    format!("async function execute(input) {{ {body}\n}}\n")
}

/// The name `run_code` runs are counted under.
pub const RUN_CODE_STATS: &str = "run_code";

impl Forge {
    /// `tool` with its tool calls (its `tool:NAME` grants) run by the forge
    /// from manifest `m`'s pins; unchanged when it calls no tool.
    pub(crate) fn with_tool_calls(&self, tool: Tool, m: &ArtifactManifest) -> Tool {
        if tool.tool_calls().is_empty() {
            return tool;
        }
        let mut pins = BTreeMap::new();
        for call in &m.calls {
            let pin = match call.blake3.as_deref().map(ArtifactId::from_hex) {
                Some(Ok(id)) => Pin::Artifact(id),
                // A malformed pin pins nothing: the call fails naming it.
                Some(Err(_)) => continue,
                None => Pin::Native,
            };
            pins.insert(call.tool.clone(), pin);
        }
        tool.with_tool_caller(Arc::new(PinnedCaller {
            forge: Arc::downgrade(&self.inner),
            pins,
        }))
    }

    /// Runs the callee `pin` of `request` through the normal path.
    async fn call_pinned(
        &self,
        pin: &Pin,
        request: &ToolCallRequest,
    ) -> Result<ToolCallOutput, ToolCallFailure> {
        let name = &request.tool;
        match pin {
            Pin::Artifact(id) => {
                let manifest = self.step_manifest(id, name).await.map_err(invoke_failure)?;
                let input: Value = serde_json::from_str(&request.input)
                    .map_err(|e| failure(format!("{name}: input is not JSON: {e}")))?;
                let (output, logs, _) = self
                    .call_artifact(id, &manifest, &input, request.depth)
                    .await
                    .map_err(invoke_failure)?;
                Ok(ToolCallOutput {
                    output: output.to_string(),
                    logs,
                })
            }
            Pin::Native => {
                let native = lock(&self.inner.natives).get(name).cloned();
                let Some(native) = native else {
                    return Err(failure(format!(
                        "host-native tool {name:?} is not registered on this host"
                    )));
                };
                let left = request
                    .deadline
                    .saturating_duration_since(Instant::now())
                    .min(self.inner.runtime.limits().timeout);
                let output = native.invoke(&request.input, left).await.map_err(failure)?;
                Ok(ToolCallOutput {
                    output,
                    logs: Vec::new(),
                })
            }
        }
    }

    /// The tools `ctx` may call from code now, pinned: its visible forged
    /// tools (session, agent, shared) and the host-native and hub tools,
    /// minus the never-callable meta-tools; narrowed to `only` when given
    /// (a name there that is not callable is an error).
    pub async fn callable_from_code(
        &self,
        ctx: &ForgeContext,
        only: Option<&[String]>,
    ) -> Result<BTreeMap<String, Pin>, RunCodeError> {
        if let Some(only) = only
            && let Some(pins) = self.pins_by_name(ctx, only).await?
        {
            return Ok(pins);
        }
        let forge = self.clone();
        let c = ctx.clone();
        let visible = self
            .with_store("visible_tools", move |_| forge.visible_tools(&c))
            .await?;
        let mut all = BTreeMap::new();
        for native in self.native_tools() {
            all.insert(native.name, Pin::Native);
        }
        // A forged tool shadows a native one of the same name, as in VALIDATE.
        for info in visible {
            if let Ok(id) = ArtifactId::from_hex(&info.id) {
                all.insert(info.name, Pin::Artifact(id));
            }
        }
        all.retain(|name, _| !NEVER_CALLABLE.contains(&name.as_str()));
        let Some(only) = only else {
            return Ok(all);
        };
        let mut narrowed = BTreeMap::new();
        for name in only {
            let Some(pin) = all.remove(name) else {
                if narrowed.contains_key(name) {
                    continue;
                }
                return Err(RunCodeError::NotCallable {
                    tool: name.clone(),
                    agent: ctx.agent_id.clone(),
                    session: ctx.session_id.clone(),
                });
            };
            narrowed.insert(name.clone(), pin);
        }
        Ok(narrowed)
    }

    /// `only`'s pins, each name resolved as a call resolves it (session
    /// tier, then the agent's, then shared, through the name and session
    /// caches while the registry's lease holds; else a host-native or hub
    /// tool), instead of listing every visible tool: the same answer as
    /// [`Forge::callable_from_code`]'s listing, without reading the whole
    /// registry per run. `None` when a name resolves to something only the
    /// listing judges (e.g. an unreadable manifest): the caller lists.
    async fn pins_by_name(
        &self,
        ctx: &ForgeContext,
        only: &[String],
    ) -> Result<Option<BTreeMap<String, Pin>>, RunCodeError> {
        let mut pins = BTreeMap::new();
        for name in only {
            if pins.contains_key(name) {
                continue;
            }
            let not_callable = || RunCodeError::NotCallable {
                tool: name.clone(),
                agent: ctx.agent_id.clone(),
                session: ctx.session_id.clone(),
            };
            if NEVER_CALLABLE.contains(&name.as_str()) {
                return Err(not_callable());
            }
            // A forged tool shadows a native one of the same name.
            let pin = match self.resolve_for_call(name, ctx).await {
                Ok(target) => Pin::Artifact(target.artifact.clone()),
                Err(InvokeError::NotFound { .. }) => {
                    if lock(&self.inner.natives).contains_key(name) {
                        Pin::Native
                    } else {
                        return Err(not_callable());
                    }
                }
                Err(InvokeError::Store(e)) => return Err(RunCodeError::Store(e)),
                Err(_) => return Ok(None),
            };
            pins.insert(name.clone(), pin);
        }
        Ok(Some(pins))
    }

    /// Runs `body` (the body of an async function; `return` gives the
    /// result) once, in a fresh sandbox under the runtime's limits, with
    /// the tools `ctx` may call (narrowed by `tools`) and the capabilities
    /// the host policy's `[run_code] allow` grants (none by default).
    /// Nothing is registered; the run is counted in `ctx`'s agent's stats
    /// under [`RUN_CODE_STATS`] when the registry keeps stats for it.
    pub async fn run_code(
        &self,
        body: &str,
        tools: Option<&[String]>,
        ctx: &ForgeContext,
    ) -> Result<CodeRun, RunCodeError> {
        let started = Instant::now();
        let runtime = &self.inner.runtime;
        // The registry read (on the blocking pool) and the compile (in an
        // engine instance) do not depend on each other: both run at once.
        // The tools are still the first error reported, as before.
        let source = code_source(body);
        let (pins, base) = tokio::join!(
            self.callable_from_code(ctx, tools),
            runtime.one_shot_tool(&source)
        );
        let pins = pins?;
        let base = base?;
        let mut allowlist: Vec<String> = runtime.policy().run_code.clone();
        allowlist.extend(pins.keys().map(|n| format!("tool:{n}")));
        let tool = runtime.grant(&base, &allowlist)?;
        let names: Vec<String> = pins.keys().cloned().collect();
        let tool = tool.with_tool_caller(Arc::new(PinnedCaller {
            forge: Arc::downgrade(&self.inner),
            pins,
        }));
        let outcome = runtime.call(&tool, "{}").await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.count_run_code(&ctx.agent_id, outcome.is_ok(), started.elapsed());
        let out = outcome.map_err(RunCodeError::Run)?;
        let output: Value = serde_json::from_str(&out.output).map_err(|e| {
            RunCodeError::Run(CallFailure {
                error: RunError::Internal {
                    message: format!("the output is not JSON: {e}"),
                },
                logs: out.logs.clone(),
            })
        })?;
        Ok(CodeRun {
            output,
            logs: out.logs,
            tools: names,
            latency_ms,
        })
    }

    /// Counts one `run_code` run of `agent`.
    fn count_run_code(&self, agent: &str, ok: bool, took: Duration) {
        self.inner.run_code_stats.record(agent, ok, took);
    }

    /// `agent`'s `run_code` runs on this host so far, in the figures the
    /// store reports for a registered tool (no other agent's runs in them).
    pub fn run_code_stats(&self, agent: &str) -> ToolStats {
        self.inner.run_code_stats.of(agent)
    }
}

/// Agents whose `run_code` runs a forge counts, at most; past it, the agent
/// with the fewest runs is forgotten to make room.
pub const MAX_RUN_CODE_AGENTS: usize = 4096;

/// `run_code` runs per agent (they register nothing, so they have no row in
/// the registry's stats): kept by the forge, in memory, bounded by
/// [`MAX_RUN_CODE_AGENTS`].
#[derive(Debug, Default)]
pub(crate) struct RunCodeCounters {
    by_agent: Mutex<HashMap<String, CallCounters>>,
}

impl RunCodeCounters {
    fn record(&self, agent: &str, ok: bool, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let mut all = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = all.get_mut(agent) {
            c.record(ok, us);
            return;
        }
        if all.len() >= MAX_RUN_CODE_AGENTS
            && let Some(fewest) = all
                .iter()
                .min_by_key(|(name, c)| (c.total, (*name).clone()))
                .map(|(name, _)| name.clone())
        {
            all.remove(&fewest);
        }
        all.entry(agent.to_owned()).or_default().record(ok, us);
    }

    fn of(&self, agent: &str) -> ToolStats {
        let all = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        all.get(agent)
            .map(CallCounters::stats)
            .unwrap_or_else(|| CallCounters::default().stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_code_runs_are_counted_per_agent_within_a_bound() {
        let c = RunCodeCounters::default();
        c.record("alice", true, Duration::from_millis(4));
        c.record("alice", false, Duration::from_millis(2));
        let alice = c.of("alice");
        assert_eq!((alice.total_calls, alice.successes), (2, 1));
        assert_eq!(alice.avg_latency_ms, 3.0);
        assert_eq!(c.of("bob").total_calls, 0, "bob sees none of alice's runs");
        for i in 0..MAX_RUN_CODE_AGENTS {
            c.record(&format!("agent-{i}"), true, Duration::from_millis(1));
        }
        let held = c.by_agent.lock().unwrap().len();
        assert_eq!(held, MAX_RUN_CODE_AGENTS);
        assert_eq!(c.of("alice").total_calls, 2, "the busiest agent is kept");
    }

    #[test]
    fn the_body_keeps_its_line_numbers() {
        let src = code_source("const a = 1;\nthrow new Error('x');");
        assert_eq!(src.lines().nth(1), Some("throw new Error('x');"));
        assert!(src.starts_with("async function execute(input) { const a = 1;"));
    }
}
