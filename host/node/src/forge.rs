//! `Forge`: a registry-backed forge opened as `temper` opens one
//! (`temper_embed::Opened`), driven from JavaScript.

use std::path::PathBuf;
use std::sync::Arc;

use napi_derive::napi;
use serde_json::{Value, json};
use temper_embed::{Failure, ForgeOptions, JudgeChoice, Opened, RuntimeOptions};
use temper_policy::{HostPolicy, LimitsConfig};
use temper_store::Tier;

use crate::cancel;
use crate::errors::{self, to_napi};
use crate::pump::Channel;
use napi::bindgen_prelude::External;

/// How `Forge.open` opens a store. Every field is optional; the defaults
/// are the CLI's (the platform data dir, agent and session `default`, no
/// judge: every forge refused, a deny-all policy).
#[napi(object)]
#[derive(Default)]
pub struct OpenOptions {
    /// A store directory, or a PostgreSQL URL.
    pub store: Option<String>,
    /// This host's local state (default: the store directory).
    pub state_dir: Option<String>,
    /// The agent acting (default `default`).
    pub agent: Option<String>,
    /// The session (default `default`).
    pub session: Option<String>,
    /// `rules` (the offline rules judge) or `none` (default: every forge
    /// is refused).
    pub judge: Option<String>,
    /// The host policy: a TOML file's path, or an object with the policy
    /// file's keys (`{ allow: ['fetch'], fetch: { domains: [...] } }`).
    /// Default: everything denied.
    #[napi(ts_type = "string | Record<string, unknown>")]
    pub policy: Option<Value>,
    /// A tools file (TOML): hub tools, as `temper --tools`.
    pub tools: Option<String>,
    /// Forge settings (JSON file, the seed's `emergentConfig` names).
    pub forge_config: Option<String>,
    /// Wall clock per call, ms (overrides the policy's `[limits]`).
    pub timeout_ms: Option<u32>,
    /// Linear memory per call, MiB (overrides the policy's `[limits]`).
    pub memory_mb: Option<u32>,
    /// The compiled-component cache directory (default: the platform's).
    pub cache_dir: Option<String>,
    /// Names or globs of the hub tools this forge's calls may reach,
    /// directly or through any tool at any depth, on top of the policy's
    /// `[tools] allow` (as a token's `tools` narrows them over HTTP).
    /// Default: the policy's.
    pub allow_tools: Option<Vec<String>>,
}

/// The host policy of `value`: a path to a TOML file, or an object with
/// the TOML file's keys (checked the same way: unknown keys refused).
pub fn policy_of(value: Option<&Value>) -> napi::Result<HostPolicy> {
    match value {
        None | Some(Value::Null) => Ok(HostPolicy::deny_all()),
        // A policy that does not load is the caller's input, not a
        // capability a tool was refused.
        Some(Value::String(path)) => HostPolicy::from_file(std::path::Path::new(path))
            .map_err(|e| errors::input(format!("policy: {e}"))),
        Some(v @ Value::Object(_)) => {
            let text = toml::to_string(v).map_err(|e| errors::input(format!("policy: {e}")))?;
            HostPolicy::from_toml(&text).map_err(|e| errors::input(format!("policy: {e}")))
        }
        Some(_) => Err(errors::input(
            "policy: a TOML file's path or an object with its keys",
        )),
    }
}

/// A runtime as `temper` builds one: `policy` ([`policy_of`]), its
/// `[limits]` overridden by `timeout_ms` and `memory_mb`, the compile cache
/// in `cache_dir` (default: the platform's).
pub fn build_runtime(
    policy: Option<&Value>,
    timeout_ms: Option<u32>,
    memory_mb: Option<u32>,
    cache_dir: Option<String>,
) -> napi::Result<temper_runtime::Runtime> {
    RuntimeOptions {
        policy: policy_of(policy)?,
        limits: LimitsConfig {
            timeout_ms: timeout_ms.map(u64::from),
            memory_mb: memory_mb.map(u64::from),
            max_output_bytes: None,
        },
        cache_dir: cache_dir.map(PathBuf::from),
        promote_after: None,
    }
    .builder()
    .build()
    .map_err(|e| to_napi(Failure::from(e)))
}

/// A forge on a store, for one agent and session.
#[napi]
pub struct Forge {
    opened: Arc<Opened>,
}

/// What `forge.call` and `forge.runCode` take besides their arguments.
/// `index.cjs` turns an `AbortSignal` into `cancelId`.
#[napi(object)]
#[derive(Default)]
pub struct CallOptions {
    /// Set by `index.cjs`: the id `cancel(id)` stops this call with.
    pub cancel_id: Option<u32>,
    /// `runCode` only: the tools the code may call (default: every tool
    /// the caller may call from code).
    pub tools: Option<Vec<String>>,
}

/// Calls `name` with the JSON text `input`, cancellable by `cancel_id`:
/// the output's JSON text.
async fn call_json(
    opened: &Opened,
    name: &str,
    input: &str,
    cancel_id: Option<u32>,
) -> napi::Result<String> {
    let input: Value = serde_json::from_str(input)
        .map_err(|e| errors::input(format!("the input is not JSON: {e}")))?;
    match cancel::run(cancel_id, opened.call(name, &input)).await {
        Ok(Ok(called)) => serde_json::to_string(called.output()).map_err(errors::host),
        Ok(Err(failure)) => Err(to_napi(failure)),
        Err(cancel::Cancelled) => Err(cancelled()),
    }
}

fn cancelled() -> napi::Error {
    // index.cjs rejects with the signal's reason before this surfaces.
    napi::Error::from_reason("TEMPER_CANCELLED")
}

#[napi]
impl Forge {
    /// Opens the store and builds the forge as `temper` does (a tool forged
    /// here has the same artifact id as `temper forge` of the same
    /// request), then attaches the tools file's hub, if any.
    #[napi(ts_args_type = "options?: OpenOptions")]
    pub async fn open(options: Option<OpenOptions>) -> napi::Result<Forge> {
        let o = options.unwrap_or_default();
        let runtime = build_runtime(o.policy.as_ref(), o.timeout_ms, o.memory_mb, o.cache_dir)?;
        let judge = JudgeChoice::from_name(o.judge.as_deref()).map_err(|e| to_napi(e.into()))?;
        let options = ForgeOptions {
            store: o.store,
            state_dir: o.state_dir.map(PathBuf::from),
            agent: o.agent.unwrap_or_else(|| "default".into()),
            session: o.session.unwrap_or_else(|| "default".into()),
            judge: Some(judge),
            forge_config: o.forge_config.map(PathBuf::from),
            allow_tools: o.allow_tools,
            ..Default::default()
        };
        let mut opened = Opened::open(&options, runtime).map_err(|e| to_napi(e.into()))?;
        if let Some(tools) = o.tools {
            opened
                .attach_hub(std::path::Path::new(&tools))
                .await
                .map_err(|e| to_napi(e.into()))?;
        }
        Ok(Forge {
            opened: Arc::new(opened),
        })
    }

    /// Forges a request (the seed's `forge_tool` format: an object or its
    /// JSON text) into the caller's session: validate, build, test, judge,
    /// register. Resolves to the seed's `ForgeResult` (`success: true`);
    /// a refusal rejects with `code` `EFORGE_REFUSED`, its `stage` and
    /// `result`.
    #[napi(
        ts_args_type = "request: Record<string, unknown> | string",
        ts_return_type = "Promise<ForgeResult>"
    )]
    pub async fn forge(&self, request: Value) -> napi::Result<Value> {
        let text = match request {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let forged = self.opened.forge_json(&text).await.map_err(to_napi)?;
        let outcome: Result<temper_forge::Forged, temper_forge::ForgeError> = Ok(forged);
        let result = temper_forge::ForgeResult::from(&outcome);
        serde_json::to_value(result).map_err(errors::host)
    }

    /// Calls the tool `name` with `input` (default `{}`): a forged tool the
    /// caller sees, else a hub tool. Resolves to its output. (The addon
    /// takes and returns JSON text: `index.cjs` stringifies the input and
    /// parses the output, and sends the call through the call pump; this
    /// `async fn` is the direct path.)
    #[napi(
        ts_args_type = "name: string, input?: unknown, options?: { signal?: AbortSignal }",
        ts_return_type = "Promise<any>"
    )]
    pub async fn call(
        &self,
        name: String,
        input: String,
        options: Option<CallOptions>,
    ) -> napi::Result<String> {
        call_json(
            &self.opened,
            &name,
            &input,
            options.and_then(|o| o.cancel_id),
        )
        .await
    }

    /// `call` through the call pump ([`crate::pump`]): queues the call and
    /// returns at once; its answer comes through `channel` under `ticket`.
    #[napi(skip_typescript)]
    pub fn call_start(
        &self,
        channel: &External<Channel>,
        ticket: u32,
        name: String,
        input: String,
        cancel_id: Option<u32>,
    ) {
        let opened = self.opened.clone();
        channel.submit(
            ticket,
            Box::pin(async move { call_json(&opened, &name, &input, cancel_id).await }),
        );
    }

    /// The tools the caller can call: forged ones (every tier it sees) and
    /// the hub's, each with its name, description, schemas and tier.
    #[napi(ts_return_type = "Promise<ToolInfo[]>")]
    pub async fn tools(&self) -> napi::Result<Value> {
        let forge = &self.opened.forge;
        let mut list: Vec<Value> = forge
            .visible_tools(&self.opened.ctx)
            .map_err(|e| to_napi(Failure::from(e)))?
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        list.extend(self.opened.hub_tools().into_iter().map(|t| {
            json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema,
                   "outputSchema": t.output_schema, "tier": "hub"})
        }));
        Ok(Value::Array(list))
    }

    /// The tools the caller can call that match `query` (the words of what
    /// they should do), best first: `name`, `description` (at most 200
    /// characters), `signature` (one TypeScript line), `tier` and `score`;
    /// at most `options.limit` (default 5, 1 to 50). They join the
    /// session's working set.
    #[napi(
        ts_args_type = "query: string, options?: { limit?: number }",
        ts_return_type = "Promise<Array<{ name: string, description: string, signature: string, tier: 'session' | 'agent' | 'shared' | 'hub', score: number }>>"
    )]
    pub async fn search(
        &self,
        query: String,
        options: Option<SearchOptions>,
    ) -> napi::Result<Value> {
        let limit = options.and_then(|o| o.limit).unwrap_or(5).max(1) as usize;
        let found = self.opened.search(&query, limit).await.map_err(to_napi)?;
        serde_json::to_value(found).map_err(|e| to_napi(Failure::host(e.to_string())))
    }

    /// The session's working set: the names of the tools found, reused or
    /// forged in it, most recent first.
    #[napi]
    pub async fn working_set(&self) -> napi::Result<Vec<String>> {
        self.opened.working_set().await.map_err(to_napi)
    }

    /// Runs `code` (the body of an async function; `return` gives the
    /// result) once in a fresh sandbox, with the tools the caller may call
    /// from code (narrowed by `options.tools`) as `tools.NAME(input)`.
    /// Nothing is registered. Resolves to the body's value.
    #[napi(
        ts_args_type = "code: string, options?: { tools?: string[], signal?: AbortSignal }",
        ts_return_type = "Promise<any>"
    )]
    pub async fn run_code(
        &self,
        code: String,
        options: Option<CallOptions>,
    ) -> napi::Result<Value> {
        let options = options.unwrap_or_default();
        let opened = &self.opened;
        let run = opened
            .forge
            .run_code(&code, options.tools.as_deref(), &opened.ctx);
        match cancel::run(options.cancel_id, run).await {
            Ok(Ok(run)) => Ok(run.output),
            Ok(Err(e)) => Err(to_napi(e.into())),
            Err(cancel::Cancelled) => Err(cancelled()),
        }
    }

    /// Promotes the session tool `name` to the agent tier (usage and
    /// confidence thresholds, then the promotion panel). Resolves to the
    /// tool as registered there.
    #[napi(ts_return_type = "Promise<ToolInfo>")]
    pub async fn promote(&self, name: String) -> napi::Result<Value> {
        let opened = &self.opened;
        let info = opened
            .forge
            .promote(&name, &opened.ctx, None)
            .await
            .map_err(|e| to_napi(e.into()))?;
        opened.save().map_err(|e| to_napi(e.into()))?;
        serde_json::to_value(info).map_err(errors::host)
    }

    /// Deletes the session tool `name` (frees one of the session's
    /// `maxSessionTools` slots; audited as a deletion). Agent-tier and
    /// shared tools are not deleted. Resolves to the deleted tool.
    #[napi(ts_return_type = "Promise<ToolInfo>")]
    pub async fn delete(&self, name: String) -> napi::Result<Value> {
        let opened = &self.opened;
        let info = opened
            .forge
            .delete_session_tool(&name, &opened.ctx)
            .map_err(|e| to_napi(e.into()))?;
        opened.save().map_err(|e| to_napi(e.into()))?;
        serde_json::to_value(info).map_err(errors::host)
    }

    /// Imports an AgentOS package (`agentos.emergent-tool.v1`, JSON or
    /// YAML text) into `tier` (default `agent`): built here, then its tests
    /// (`tests`, else the package's own), the judge and registration as
    /// for any import. Resolves to the seed's `ForgeResult`.
    #[napi(
        ts_args_type = "text: string, options?: { tests?: Array<{ input: unknown, expectedOutput?: unknown }>, tier?: 'session' | 'agent' | 'shared' }",
        ts_return_type = "Promise<ForgeResult>"
    )]
    pub async fn import_agentos(
        &self,
        text: String,
        options: Option<ImportOptions>,
    ) -> napi::Result<Value> {
        let options = options.unwrap_or_default();
        let tier = match options.tier.as_deref() {
            None | Some("agent") => Tier::Agent,
            Some("session") => Tier::Session,
            Some("shared") => Tier::Shared,
            Some(other) => {
                return Err(errors::input(format!(
                    "tier {other:?}: session, agent or shared"
                )));
            }
        };
        let tests = match options.tests {
            None => None,
            Some(v) => {
                Some(serde_json::from_value(v).map_err(|e| errors::input(format!("tests: {e}")))?)
            }
        };
        let opened = &self.opened;
        let outcome = opened
            .forge
            .import_agentos(&text, tests, &opened.ctx, tier)
            .await;
        if let Some(failure) = temper_embed::forge_failure(&outcome) {
            return Err(to_napi(failure));
        }
        opened.save().map_err(|e| to_napi(e.into()))?;
        serde_json::to_value(temper_forge::ForgeResult::from(&outcome)).map_err(errors::host)
    }

    /// Times `count` calls of `name` with `input` made inside Rust
    /// (`temper_embed::Opened::call`, what `call` makes, without crossing
    /// into JavaScript), one after another on a tokio worker: each call's
    /// wall time, µs. For comparing the cost of a call from JavaScript with
    /// the call itself.
    #[napi(ts_return_type = "Promise<number[]>")]
    pub async fn time_calls(
        &self,
        name: String,
        input: Value,
        count: u32,
    ) -> napi::Result<Vec<f64>> {
        let opened = &self.opened;
        let mut times = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let started = std::time::Instant::now();
            opened.call(&name, &input).await.map_err(to_napi)?;
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(times)
    }

    /// The tool `name` as an AgentOS package (JSON text that AgentOS's
    /// `parseEmergentToolPackage` accepts), with its source and tests.
    #[napi]
    pub fn export_agentos(&self, name: String) -> napi::Result<String> {
        let opened = &self.opened;
        opened
            .forge
            .export_agentos(&name, &opened.ctx, None)
            .map_err(|e| to_napi(e.into()))
    }
}

/// `forge.search`'s options.
#[napi(object)]
#[derive(Default)]
pub struct SearchOptions {
    /// Most results (default 5, at most 50).
    pub limit: Option<u32>,
}

/// What `forge.importAgentos` takes besides the package text.
#[napi(object)]
#[derive(Default)]
pub struct ImportOptions {
    /// Test cases replacing the package's own.
    #[napi(ts_type = "Array<{ input: unknown, expectedOutput?: unknown }>")]
    pub tests: Option<Value>,
    /// Where it lands (default `agent`).
    pub tier: Option<String>,
}
