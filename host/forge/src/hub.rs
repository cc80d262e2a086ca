//! The tool hub's tools as host-native tools: [`Forge::attach_hub`]
//! registers every hub tool the host policy's `[tools] allow` lists, so it
//! is a compose step (pinned by name in manifests) and callable by name
//! ([`Forge::call_native`]); a hub tool the policy does not list is not
//! registered at all, so it is refused as a step like any unknown tool.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use temper_hub::{CallOutput, Hub, HubError, Relay};

use super::builtins::is_builtin;
use super::grant::GrantError;
use super::native::{NativeFn, NativeFuture, NativeTool, NativeToolSpec, OutputFn, OutputFuture};
use super::schema::ToolSchemas;
use super::{Forge, ForgeContext, lock};
use temper_store::{StoreError, Tier};

/// Why the hub could not be attached. Names the tool and both sources.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// A hub tool has the name of a tool already registered on the host.
    #[error(transparent)]
    Clash(#[from] HubError),
}

/// Most entries of [`Unshadowed`]; when full it is emptied (it refills at
/// one registry read per (agent, hub tool)).
const MAX_UNSHADOWED: usize = 4096;

/// (agent, hub tool name) pairs known to have no agent- or shared-tier
/// tool of that name, each under the registry's tiers epoch read before
/// the registry was; used only while the registry's lease holds and under
/// the same epoch, as the name cache is (`names.rs`). Bounded by
/// [`MAX_UNSHADOWED`].
#[derive(Default)]
pub(crate) struct Unshadowed(Mutex<HashMap<(String, String), u64>>);

/// Most characters of a hub tool name.
const MAX_HUB_NAME: usize = 128;

/// Why a hub tool's name cannot be registered: `None` when it can
/// (ASCII letters, digits, `_`, `-` and `.`, MCP's tool name characters,
/// at most [`MAX_HUB_NAME`], and not a built-in tool's).
fn hub_name_refusal(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("its name is empty".into());
    }
    if name.len() > MAX_HUB_NAME {
        return Some(format!("its name is longer than {MAX_HUB_NAME} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Some("its name is not ASCII letters, digits, `_`, `-`, `.`".into());
    }
    if is_builtin(name) {
        return Some(format!(
            "its name {name:?} is reserved by a built-in tool of this host"
        ));
    }
    None
}

impl Forge {
    /// Registers the hub's tools that the host policy's `[tools] allow`
    /// lists as host-native tools (an upstream tool without an output
    /// schema gets `{}`: anything), each bounded by its own `timeout_ms`.
    /// A name already taken by a native or another hub tool is refused
    /// naming both sources; a name outside the hub name rules, or a schema
    /// the forge does not accept, is skipped with a warning. Returns the
    /// names registered. Tools the hub gains later (an upstream's
    /// `list_changed`) are registered when the hub tools are next listed
    /// ([`Self::hub_tools`]) or one is called by a name not registered yet
    /// ([`Self::call_native`]).
    pub fn attach_hub(&self, hub: Arc<Hub>) -> Result<Vec<String>, AttachError> {
        {
            let natives = lock(&self.inner.natives);
            let existing: Vec<(String, String)> = natives
                .values()
                .map(|n| {
                    let source = n
                        .hub_source
                        .clone()
                        .unwrap_or_else(|| "a host-native tool of the embedder".into());
                    (n.spec.name.clone(), source)
                })
                .collect();
            hub.check_clashes(&existing)?;
        }
        *lock(&self.inner.hub) = Some(hub.clone());
        self.observe_hub(&hub);
        self.inner
            .hub_synced
            .store(hub.generation(), Ordering::Release);
        Ok(self.register_hub_tools(&hub))
    }

    /// Registers the hub tools not registered yet (see
    /// [`Self::attach_hub`]); one whose name a registered tool has is
    /// skipped with a warning. Returns the names registered.
    fn register_hub_tools(&self, hub: &Arc<Hub>) -> Vec<String> {
        let allow = self.runtime().policy().tools.clone();
        let tools = hub.tools();
        let mut natives = lock(&self.inner.natives);
        let mut registered = Vec::new();
        for tool in tools {
            if let Some(have) = natives.get(&tool.name) {
                if have.hub_source.as_deref() != Some(tool.source.as_str()) {
                    tracing::warn!(tool = %tool.name, source = %tool.source, "hub tool skipped: a host tool of that name is registered");
                }
                continue;
            }
            if !allow.allows(&tool.name) {
                tracing::debug!(tool = %tool.name, "hub tool not in the host policy's [tools] allow: not registered");
                continue;
            }
            if let Some(why) = hub_name_refusal(&tool.name) {
                tracing::warn!(tool = %tool.name, source = %tool.source, "hub tool skipped: {why}");
                continue;
            }
            let output_schema = tool.output_schema.clone().unwrap_or_else(|| json!({}));
            let schemas = match ToolSchemas::compile(&tool.input_schema, &output_schema) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(tool = %tool.name, source = %tool.source, error = %e, "hub tool skipped");
                    continue;
                }
            };
            let call: NativeFn = {
                let hub = hub.clone();
                let name = tool.name.clone();
                Arc::new(move |input: Value| -> NativeFuture {
                    let hub = hub.clone();
                    let name = name.clone();
                    Box::pin(async move { hub.call(&name, input).await.map_err(|e| e.to_string()) })
                })
            };
            let call_output: OutputFn = {
                let hub = hub.clone();
                let name = tool.name.clone();
                Arc::new(move |input: Value, relay: Option<Relay>| -> OutputFuture {
                    let hub = hub.clone();
                    let name = name.clone();
                    Box::pin(async move {
                        hub.call_output(&name, input, relay)
                            .await
                            .map_err(|e| e.to_string())
                    })
                })
            };
            natives.insert(
                tool.name.clone(),
                Arc::new(NativeTool {
                    spec: NativeToolSpec {
                        name: tool.name.clone(),
                        description: tool.description,
                        input_schema: tool.input_schema,
                        output_schema,
                    },
                    schemas,
                    call,
                    hub_source: Some(tool.source),
                    own_timeout: Some(tool.timeout),
                    // An upstream's output is checked by the hub against
                    // this same schema (`output_schema`, else `{}`).
                    checks_output: tool.checks_output,
                    // And its input against the schema it listed last
                    // (this copy may predate a `list_changed`).
                    checks_input: tool.checks_input,
                    call_output: Some(call_output),
                    live_in_tests: tool.live_in_tests,
                }),
            );
            registered.push(tool.name);
        }
        registered
    }

    /// Registers the tools the attached hub gained since (an upstream's
    /// `list_changed`). Copies the hub's tools only when its generation
    /// moved since the last registration, so a call pays one atomic read.
    fn sync_hub(&self) {
        let hub = lock(&self.inner.hub).clone();
        if let Some(hub) = hub {
            let now = hub.generation();
            if self.inner.hub_synced.swap(now, Ordering::AcqRel) == now {
                return;
            }
            let added = self.register_hub_tools(&hub);
            if !added.is_empty() {
                tracing::info!(tools = ?added, "hub tools that appeared since the start are registered");
            }
        }
    }

    /// The tier of the forged tool `name` as `ctx` resolves it (its
    /// session tier, then its agent's tier, then the shared tier), `None`
    /// when there is none: a forged tool takes precedence over a hub tool
    /// of its name. Answered from the session-tier cache, the name cache
    /// and the cache of hub names known to be no forged tool while the
    /// registry's lease holds, so a gateway call to a hub tool does not
    /// list the caller's tools; otherwise read from the registry on the
    /// blocking pool (never on an async worker).
    pub async fn forged_tier(
        &self,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<Option<Tier>, StoreError> {
        let session = match self.cached_session(ctx) {
            Some(tier) => tier,
            None => self.load_session_async(ctx).await?,
        };
        if session.contains(name) {
            return Ok(Some(Tier::Session));
        }
        let store = &self.inner.store;
        let leased = store.leased_name_epoch(name);
        if let Some(epoch) = leased {
            if let Some(target) = self.inner.names.get(&ctx.agent_id, name, epoch) {
                return Ok(Some(target.tier));
            }
            let known = lock(&self.inner.hub_unshadowed.0)
                .get(&(ctx.agent_id.clone(), name.to_string()))
                .is_some_and(|&at| at == epoch);
            if known {
                return Ok(None);
            }
        }
        let epoch = store.name_epoch(name);
        let (key, agent) = (name.to_owned(), ctx.agent_id.clone());
        match self.with_store("get", move |s| s.get(&key, &agent)).await? {
            Some(record) => Ok(Some(record.tier)),
            None => {
                let mut unshadowed = lock(&self.inner.hub_unshadowed.0);
                if unshadowed.len() >= MAX_UNSHADOWED {
                    unshadowed.clear();
                }
                unshadowed.insert((ctx.agent_id.clone(), name.to_string()), epoch);
                Ok(None)
            }
        }
    }

    /// The hub generation the registered hub tools are current with
    /// (`u64::MAX` without a hub).
    pub(crate) fn hub_generation(&self) -> u64 {
        self.sync_hub();
        self.inner.hub_synced.load(Ordering::Acquire)
    }

    /// Whether `name` is a registered hub tool (one that appeared since the
    /// start included), without copying the list.
    pub fn is_hub_tool(&self, name: &str) -> bool {
        self.sync_hub();
        lock(&self.inner.natives)
            .get(name)
            .is_some_and(|n| n.hub_source.is_some())
    }

    /// The definitions of the hub's upstream tools as their upstreams
    /// listed them last (every member: `title`, `annotations`,
    /// `execution`, `icons`, `outputSchema`, `_meta`, ...), with the
    /// exposed name and the tools file's annotation overrides, by name;
    /// a built-in has none. What a gateway's `tools/list` shows.
    pub fn hub_definitions(&self) -> HashMap<String, serde_json::Map<String, Value>> {
        let hub = lock(&self.inner.hub).clone();
        hub.map(|hub| {
            hub.tools()
                .into_iter()
                .filter_map(|t| Some((t.name, t.definition?)))
                .collect()
        })
        .unwrap_or_default()
    }

    /// The attached tool hub, if any (a gateway serves its upstreams'
    /// resources and prompts).
    pub fn hub(&self) -> Option<Arc<Hub>> {
        lock(&self.inner.hub).clone()
    }

    /// The registered hub tools (those the host policy allows), by name,
    /// tools the hub gained since its start included.
    pub fn hub_tools(&self) -> Vec<NativeToolSpec> {
        self.sync_hub();
        let mut out: Vec<NativeToolSpec> = lock(&self.inner.natives)
            .values()
            .filter(|n| n.hub_source.is_some())
            .map(|n| n.spec.clone())
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Calls the host-native tool `name` (a hub tool or the embedder's)
    /// for `ctx` with the input and output checks, bounded by a hub tool's
    /// own `timeout_ms` (else the runtime's timeout); errors name the tool.
    /// `None` when there is no such tool. A name `ctx`'s grant does not
    /// allow is refused first, whether or not there is such a tool
    /// ([`crate::grant`]).
    pub async fn call_native(
        &self,
        name: &str,
        input: &Value,
        ctx: &ForgeContext,
    ) -> Option<Result<Value, String>> {
        if let Err(refused) = self.check_native_call(name, ctx) {
            return Some(Err(refused.to_string()));
        }
        let tool = self.native(name)?;
        let timeout = self.runtime().limits().timeout;
        let call = tool.invoke_value(input.clone(), timeout);
        Some(self.observed_native(name, call, Result::is_err).await)
    }

    /// [`Self::call_native`] for a gateway: the output comes with its
    /// upstream's result as it came ([`CallOutput::result`]), an `isError`
    /// one included ([`CallOutput::error`]), for the gateway to pass on;
    /// what the upstream sends for the call goes to `relay` when given.
    /// The same checks, limits, span and metrics (an `isError` result
    /// counts as a failed call).
    pub async fn call_native_output(
        &self,
        name: &str,
        input: &Value,
        relay: Option<Relay>,
        ctx: &ForgeContext,
    ) -> Option<Result<CallOutput, String>> {
        if let Err(refused) = self.check_native_call(name, ctx) {
            return Some(Err(refused.to_string()));
        }
        let tool = self.native(name)?;
        let timeout = self.runtime().limits().timeout;
        let call = tool.invoke_output(input.clone(), timeout, relay);
        let failed = |r: &Result<CallOutput, String>| r.as_ref().is_ok_and(|o| o.error.is_some());
        Some(
            self.observed_native(name, call, |r| r.is_err() || failed(r))
                .await,
        )
    }

    /// Whether `ctx` (within the grant of the call it is made in, if any)
    /// may call the host-native tool `name` by name.
    pub fn check_native_call(&self, name: &str, ctx: &ForgeContext) -> Result<(), GrantError> {
        let grant = super::grant::effective(ctx.grant());
        if !grant.is_narrowed() {
            return Ok(());
        }
        let tool = self.native(name);
        super::grant::check_native(&grant, name, tool.as_deref())
    }

    /// The host-native tool `name`, a hub tool that appeared since the
    /// start included.
    fn native(&self, name: &str) -> Option<Arc<NativeTool>> {
        let found = lock(&self.inner.natives).get(name).cloned();
        match found {
            Some(tool) => Some(tool),
            None => {
                // Perhaps a hub tool that appeared since the start.
                self.sync_hub();
                lock(&self.inner.natives).get(name).cloned()
            }
        }
    }

    /// Runs a native tool's `call` inside its span, recording its metrics
    /// (`failed` says whether its outcome is a failure).
    async fn observed_native<T>(
        &self,
        name: &str,
        call: impl std::future::Future<Output = Result<T, String>>,
        failed: impl Fn(&Result<T, String>) -> bool,
    ) -> Result<T, String> {
        let started = std::time::Instant::now();
        let span = super::observe::execute_tool_span(name);
        if !span.is_disabled() {
            span.record("temper.tier", "hub");
        }
        let result = tracing::Instrument::instrument(call, span.clone()).await;
        let failed = failed(&result);
        if failed {
            super::observe::record_error(&span, "upstream");
        }
        if let Some(metrics) = self.metrics() {
            // A native tool's failure is its upstream's (or the built-in's).
            let error = failed.then_some(temper_observe::ErrorKind::Upstream);
            let tier = temper_observe::Tier::Hub;
            metrics.record_call(&metrics.tool(name), tier, error, started.elapsed());
        }
        result
    }
}
