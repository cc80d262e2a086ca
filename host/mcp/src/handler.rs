//! The MCP methods, independent of the transport: `initialize`, `ping`,
//! `tools/list`, `tools/call` (the meta-tools `forge_tool`, `promote_tool`,
//! `tool_stats`, and the registered tools), for one caller: a
//! [`ForgeContext`] fixed by the transport (never taken from the client's
//! messages) and the [`Access`] it has.
//!
//! Notifications a request causes (progress, `tools/list_changed`) go
//! through the [`Notifier`] the transport passes in: stdio writes them to
//! its one output, Streamable HTTP to the request's SSE stream or the
//! session's GET stream. A change of the agent or shared tier is read back
//! from the audit trail through the transport's [`RegistryWatch`], so the
//! request that made it announces it once, to every session it concerns.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::access::Access;
use super::jsonrpc::{self, RpcError};
use super::protocol::results;
use super::tools::{self, DELETE_TOOL, FORGE_TOOL, PROMOTE_TOOL, STATS_TOOL};
use super::watch::{Changes, RegistryWatch};
use temper_forge::{Forge, ForgeContext, InvokeError, Stage, ToolInfo};

// Code mode (`run_code`, `describe_tools`): a child module, for this
// handler's view of the caller's tools.
#[path = "run_code.rs"]
pub mod run_code;
// A hub tool's output passed on as its upstream's text: a child module,
// for the same checks `invoke` makes.
#[path = "answer.rs"]
pub mod answer;
// The hub's upstream resources and prompts: a child module, for the
// caller's narrowing.
#[path = "hub_features.rs"]
pub mod hub_features;
// What an upstream sends during a hub call, relayed to its caller: a
// child module, for the caller's identity and transport.
#[path = "hub_relay.rs"]
pub(crate) mod hub_relay;
use run_code::{DESCRIBE_TOOLS, RUN_CODE};
// Discovery (`search_tools`, the budgeted listing): a child module, for
// this handler's view of the caller's tools.
#[path = "discovery.rs"]
pub mod discovery;
use discovery::SEARCH_TOOL;

/// The legacy (handshake) MCP revisions this server speaks, newest first:
/// what `initialize` negotiates. The modern revision (per-request `_meta`,
/// no handshake) is [`crate::protocol::MODERN_PROTOCOL_VERSIONS`].
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version to answer `initialize` with: the client's, when supported,
/// else the newest this server supports (the client then decides).
pub fn negotiate_version(requested: &str) -> &'static str {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(SUPPORTED_PROTOCOL_VERSIONS[0])
}

/// Where the notifications a request causes go.
pub trait Notifier: Send + Sync {
    /// A notification about this request (`notifications/progress`,
    /// `notifications/message`).
    fn request_note(&self, message: Value);
    /// Whether [`Self::request_note`] reaches the caller (over HTTP, only
    /// when the answer is an event stream).
    fn carries_notes(&self) -> bool {
        true
    }
    /// Sends the request `method` with `params` to a legacy caller that
    /// declared its capability (an upstream's elicitation or sampling,
    /// relayed): its answer comes on the receiver. `None` when this
    /// caller cannot be asked (the default).
    fn ask(&self, method: &str, params: Value) -> Option<hub_relay::AskReceiver> {
        let _ = (method, params);
        None
    }
    /// A notification for the caller's session
    /// (`notifications/tools/list_changed` after a forge).
    fn session_note(&self, message: Value);
    /// The registry changed (`changes`, read back from the audit trail
    /// after this request's promotion): the caller should hear `message`
    /// when `caller_reached`, and so should every other session the
    /// changes reach. By default only the caller does.
    fn registry_note(&self, changes: &Changes, caller_reached: bool, message: Value) {
        let _ = changes;
        if caller_reached {
            self.session_note(message)
        }
    }
}

/// One caller's view of the engine: what every request of a connection
/// (stdio) or session (HTTP) shares.
pub struct Handler {
    forge: Forge,
    /// The caller's context, with its grant (its tiers and its narrowing of
    /// the hub tools): the forge checks it on every call, at any depth.
    ctx: ForgeContext,
    watch: RegistryWatch,
    /// Whether `ctx` is a modern session ([`crate::protocol::modern_context`]):
    /// then `forge_tool`'s result names it in `_meta`.
    modern_session: bool,
    /// The caller's narrowing of the hub's resources (a token's `resources`).
    resources_allow: Option<temper_policy::ToolAllow>,
    /// The caller's narrowing of the hub's prompts (a token's `prompts`).
    prompts_allow: Option<temper_policy::ToolAllow>,
}

impl Handler {
    /// A handler acting as `ctx` with `access` (its grant's tiers narrowed
    /// to those); the registry changes it makes are read back through
    /// `watch` (the transport's, shared by its sessions).
    pub fn new(forge: Forge, ctx: ForgeContext, access: Access, watch: RegistryWatch) -> Self {
        let grant = ctx.grant().clone().with_tiers(access);
        Self {
            forge,
            ctx: ctx.with_grant(grant),
            watch,
            modern_session: false,
            resources_allow: None,
            prompts_allow: None,
        }
    }

    /// Marks `ctx` as a modern session: `forge_tool`'s result names it in
    /// `_meta["dev.temper/session"]`, so a client that did not name one
    /// learns which (its principal's default session) and can pin it.
    pub fn in_modern_session(mut self) -> Self {
        self.modern_session = true;
        self
    }

    /// Narrows the hub's resources and prompts this caller may list, read
    /// and get to those `resources` and `prompts` allow (on top of the host
    /// policy's `[resources] allow` and `[prompts] allow`); `None` leaves
    /// the policy's.
    pub fn with_features(
        mut self,
        resources: Option<temper_policy::ToolAllow>,
        prompts: Option<temper_policy::ToolAllow>,
    ) -> Self {
        self.resources_allow = resources;
        self.prompts_allow = prompts;
        self
    }

    /// Narrows the hub tools this caller may see and call, directly or
    /// through any tool at any depth, to those `tools` allows (on top of
    /// the host policy's `[tools] allow`): part of the caller's grant;
    /// `None` leaves it.
    pub fn with_tools(mut self, tools: Option<temper_forge::HubNarrowing>) -> Self {
        let grant = self.ctx.grant().clone().narrowed(tools);
        self.ctx = self.ctx.with_grant(grant);
        self
    }

    /// Whether `name` is a hub tool this caller may not use (invisible).
    fn hub_hidden(&self, name: &str) -> bool {
        !self.ctx.grant().allows_hub(name) && self.forge.is_hub_tool(name)
    }

    /// The hub tools this caller may see and call.
    fn hub_visible(&self) -> Vec<temper_forge::NativeToolSpec> {
        let mut tools = self.forge.hub_tools();
        tools.retain(|t| self.ctx.grant().allows_hub(&t.name));
        tools
    }

    /// The tiers this caller may use.
    pub fn access(&self) -> Access {
        self.ctx.grant().tiers()
    }

    /// The context requests act in.
    pub fn context(&self) -> &ForgeContext {
        &self.ctx
    }

    /// The engine.
    pub fn forge(&self) -> &Forge {
        &self.forge
    }

    /// Answers one request of a legacy (handshake) revision.
    pub async fn handle(
        &self,
        method: &str,
        params: Option<&Value>,
        notes: &dyn Notifier,
    ) -> Result<Value, RpcError> {
        match method {
            "initialize" => initialize(params, capabilities(&self.forge)),
            "ping" => Ok(json!({})),
            "logging/setLevel" => set_level(params),
            "tools/list" => self.list_tools(None).await,
            "tools/call" => self.call_tool(params, notes).await,
            _ => match self.hub_feature(method, params).await {
                Some(answer) => answer,
                None => Err(RpcError::method_not_found(method)),
            },
        }
    }

    /// Answers one request of the modern revision (2026-07-28), whose
    /// `_meta` the transport has checked ([`crate::protocol::envelope`]): results
    /// carry `resultType` and `_meta[serverInfo]`, `tools/list` and the
    /// hub's resources and prompts lists and reads their caching hints; `ping`, `logging/setLevel` and `initialize` do not exist there
    /// (`-32601`). `subscriptions/listen` is the transport's (a stream).
    pub async fn handle_modern(
        &self,
        method: &str,
        params: Option<&Value>,
        notes: &dyn Notifier,
    ) -> Result<Value, RpcError> {
        let mut result = match method {
            "server/discover" => {
                return Ok(encode(&results::discover(capabilities(&self.forge))));
            }
            "tools/list" => self.list_tools(Some(results::TOOLS_LIST_CACHE)).await?,
            "tools/call" => self.call_tool(params, notes).await?,
            _ => match self.hub_feature(method, params).await {
                Some(answer) => answer?,
                None => return Err(RpcError::method_not_found(method)),
            },
        };
        if results::hub_feature_cacheable(method) {
            results::set_cache_hints(&mut result, results::HUB_FEATURE_CACHE);
        }
        results::complete(&mut result);
        let forged = method == "tools/call"
            && params.and_then(|p| p.get("name")).and_then(Value::as_str) == Some(FORGE_TOOL);
        if forged
            && self.modern_session
            && let Some(id) = crate::protocol::client_session_id(&self.ctx)
            && let Some(result) = result.as_object_mut()
        {
            let meta = result
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(crate::protocol::meta::SESSION.into(), Value::from(id));
            }
        }
        Ok(result)
    }

    /// The registered tools this caller may see (tiers it may use), read
    /// from the forge's caches or on the blocking pool, never on this
    /// async worker.
    async fn visible(&self) -> Result<Vec<ToolInfo>, RpcError> {
        let mut tools = self
            .forge
            .visible_tools_async(&self.ctx)
            .await
            .map_err(|e| RpcError::internal(format!("cannot list the tools: {e}")))?;
        tools.retain(|t| self.access().allows(t.tier));
        Ok(tools)
    }

    /// The caller's tools: the meta-tools, then its working set within the
    /// listing budget (`discovery.rs`): forged tools by name, then hub
    /// tools by name (a deterministic order, so clients and prompt caches
    /// see the same list for the same working set).
    async fn list_tools(&self, cache: Option<results::CacheHints>) -> Result<Value, RpcError> {
        let mut list = Vec::new();
        if self.access().session {
            list.push(self.forge_tool_definition().await);
            list.push(tools::delete_tool_definition());
        }
        if self.access().session && self.access().agent {
            let uses = self.forge.config().promotion_threshold.uses;
            list.push(tools::promote_tool_definition(uses));
        }
        list.push(tools::stats_tool_definition());
        let mut visible = self.visible().await?;
        // A tool stored under a built-in's name (before names were
        // reserved) is not listed: names in tools/list are unique.
        visible.retain(|t| !temper_forge::builtins::is_builtin(&t.name));
        // Hub tools (Temper as a gateway), unless a forged tool the caller
        // sees has the name (forged tools keep precedence).
        let hub: Vec<_> = self
            .hub_visible()
            .into_iter()
            .filter(|h| !visible.iter().any(|t| t.name == h.name))
            .collect();
        let listing = self.listing(visible, hub).await?;
        // `run_code` declares the listed tools only; it can call the others.
        let mut declared = self.code_tools_of(listing.forged.clone());
        declared.retain(|t| {
            !self.forge.is_hub_tool(&t.name) || listing.hub.iter().any(|h| h.name == t.name)
        });
        list.push(run_code::run_code_definition(
            &declared,
            self.forge.runtime().policy(),
        ));
        list.push(run_code::describe_tools_definition());
        list.push(discovery::search_tools_definition(listing.more));
        list.extend(listing.definitions);
        Ok(encode(&results::ListToolsResult { tools: list, cache }))
    }

    async fn call_tool(
        &self,
        params: Option<&Value>,
        notes: &dyn Notifier,
    ) -> Result<Value, RpcError> {
        let params = params
            .filter(|p| p.is_object())
            .ok_or_else(|| RpcError::invalid_params("tools/call: params must be an object"))?;
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call: params.name must be a string"))?;
        // Borrowed from the request: the arguments are not copied per call.
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Cow::Owned(json!({})),
            Some(a @ Value::Object(_)) => Cow::Borrowed(a),
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "tools/call: params.arguments must be an object",
                ));
            }
        };
        let progress = Progress::of(params, notes);
        match name {
            FORGE_TOOL if self.access().session => self.forge_tool(&arguments, &progress).await,
            PROMOTE_TOOL if self.access().session && self.access().agent => {
                Ok(self.promote_tool(&arguments, notes).await)
            }
            DELETE_TOOL if self.access().session => Ok(self.delete_tool(&arguments, notes).await),
            STATS_TOOL if arguments.get("name").and_then(Value::as_str) == Some(RUN_CODE) => {
                Ok(self.run_code_stats())
            }
            STATS_TOOL => Ok(self.stats_tool(&arguments).await),
            SEARCH_TOOL => Ok(self.search_tool(&arguments, notes).await),
            RUN_CODE => self.run_code_tool(&arguments).await,
            DESCRIBE_TOOLS => self.describe_tools_tool(&arguments).await,
            _ => self.invoke(name, &arguments, &progress).await,
        }
    }

    async fn forge_tool(
        &self,
        request: &Value,
        progress: &Progress<'_>,
    ) -> Result<Value, RpcError> {
        let name = request
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("(unnamed)");
        // A step or a `tool:NAME` grant outside the caller's grant is
        // refused by the forge's VALIDATE, as an unknown tool.
        // One step per stage (validate, build, test, judge, register), then done.
        let report_stage = |stage: Stage| {
            let step = match stage {
                Stage::Validate => 0,
                Stage::Build => 1,
                Stage::Test => 2,
                Stage::Judge => 3,
                _ => 4,
            };
            progress.report(step, FORGE_STEPS, format!("{name}: {stage}"));
        };
        let hub = self.hub_visible();
        let scope = temper_forge::SearchScope {
            tiers: self.search_tiers(),
            hub: &hub,
        };
        let (result, outcome) = self
            .forge
            .forge_or_reuse_json(&request.to_string(), &self.ctx, &report_stage, scope)
            .await;
        let Some(outcome) = outcome else {
            // An existing tool has this content: it joins the working set.
            if let Some(tool) = &result.tool
                && let Ok(true) = self
                    .forge
                    .remember(&self.ctx, std::slice::from_ref(&tool.name))
                    .await
            {
                progress
                    .notes
                    .session_note(jsonrpc::notification(LIST_CHANGED, json!({})));
            }
            let value = serde_json::to_value(&result)
                .map_err(|e| RpcError::internal(format!("cannot encode the forge result: {e}")))?;
            return Ok(tools::tool_result(&value, false));
        };
        match &outcome {
            Ok(forged) => {
                if let Err(e) = self
                    .forge
                    .remember(&self.ctx, std::slice::from_ref(&forged.tool.name))
                    .await
                {
                    tracing::warn!("cannot add {} to the working set: {e}", forged.tool.name);
                }
                tracing::info!(
                    "{} forged {} ({})",
                    self.ctx.agent_id,
                    forged.tool.name,
                    &forged.tool.id[..12]
                );
                progress.report(FORGE_STEPS, FORGE_STEPS, format!("{name}: registered"));
                progress
                    .notes
                    .session_note(jsonrpc::notification(LIST_CHANGED, json!({})));
            }
            Err(e) => {
                tracing::info!("{}'s forge of {name} refused: {e}", self.ctx.agent_id);
                progress.report(
                    FORGE_STEPS,
                    FORGE_STEPS,
                    format!("{name}: refused at the {} stage", e.stage()),
                );
            }
        }
        let value = serde_json::to_value(&result)
            .map_err(|e| RpcError::internal(format!("cannot encode the forge result: {e}")))?;
        // forge_tool declares no outputSchema: the ForgeResult is structured
        // content on success and failure alike.
        Ok(tools::tool_result(&value, !result.success))
    }

    async fn promote_tool(&self, arguments: &Value, notes: &dyn Notifier) -> Value {
        let Some(name) = arguments.get("name").and_then(Value::as_str) else {
            return tools::tool_error("promote", "promote_tool: arguments.name must be a string");
        };
        let source = arguments.get("source").and_then(Value::as_str);
        // The cursor is held from right before the registration (after the
        // panel's review) until the change is read back: no poll announces
        // it meanwhile.
        let promoted = self
            .forge
            .promote_with(name, &self.ctx, source, self.watch.local_change())
            .await;
        match promoted {
            Ok((info, change)) => {
                tracing::info!("{} promoted {name} to its agent tier", self.ctx.agent_id);
                let changes = change.finish().await.unwrap_or_else(|e| {
                    tracing::warn!("cannot read the promotion back: {e}");
                    // At least the caller's agent hears of it.
                    let mut own = Changes::default();
                    own.agents.insert(self.ctx.agent_id.clone());
                    own
                });
                notes.registry_note(
                    &changes,
                    crate::watch::reach(&changes, &self.ctx.agent_id, self.access()),
                    jsonrpc::notification(LIST_CHANGED, json!({})),
                );
                match serde_json::to_value(&info) {
                    Ok(v) => tools::tool_result(&v, false),
                    Err(e) => tools::tool_error("promote", &format!("cannot encode: {e}")),
                }
            }
            Err(e) => tools::tool_error("promote", &e.to_string()),
        }
    }

    /// `forge_tool`'s definition for this caller: the session cap and the
    /// slots its session has left (read off the async worker).
    async fn forge_tool_definition(&self) -> Value {
        let (forge, ctx) = (self.forge.clone(), self.ctx.clone());
        let max = forge.max_session_tools();
        let left = tokio::task::spawn_blocking(move || forge.session_slots_left(&ctx))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(max);
        tools::forge_tool_definition_for(self.forge.runtime().policy(), max, left)
    }

    /// `delete_tool`: removes a tool from the caller's session tier and
    /// announces `tools/list_changed`.
    async fn delete_tool(&self, arguments: &Value, notes: &dyn Notifier) -> Value {
        let Some(name) = arguments.get("name").and_then(Value::as_str) else {
            return tools::tool_error("delete", "delete_tool: arguments.name must be a string");
        };
        let (forge, ctx, key) = (self.forge.clone(), self.ctx.clone(), name.to_owned());
        let deleted =
            tokio::task::spawn_blocking(move || forge.delete_session_tool(&key, &ctx)).await;
        match deleted {
            Ok(Ok(info)) => {
                tracing::info!(
                    "{} deleted {name} from session {}",
                    self.ctx.agent_id,
                    self.ctx.session_id
                );
                notes.session_note(jsonrpc::notification(LIST_CHANGED, json!({})));
                match serde_json::to_value(&info) {
                    Ok(v) => tools::tool_result(&json!({"deleted": v}), false),
                    Err(e) => tools::tool_error("delete", &format!("cannot encode: {e}")),
                }
            }
            Ok(Err(e)) => tools::tool_error("delete", &e.to_string()),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => tools::tool_error("delete", &format!("cannot delete: {e}")),
        }
    }

    async fn stats_tool(&self, arguments: &Value) -> Value {
        let Some(name) = arguments.get("name").and_then(Value::as_str) else {
            return tools::tool_error("stats", "tool_stats: arguments.name must be a string");
        };
        match self.visible().await {
            Ok(v) if v.iter().any(|t| t.name == name) => {}
            Ok(_) => return tools::tool_error("stats", &self.not_found(name)),
            Err(e) => return tools::tool_error("stats", &e.message),
        }
        // The stats are read (pending counts flushed first) on the
        // blocking pool, not on this async worker.
        let (forge, ctx, key) = (self.forge.clone(), self.ctx.clone(), name.to_owned());
        let read = tokio::task::spawn_blocking(move || forge.tool_stats(&key, &ctx)).await;
        match read {
            Ok(Ok(stats)) => tools::StatsAnswer::registered(name, &stats).result(),
            Ok(Err(e)) => tools::tool_error("stats", &e.to_string()),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => tools::tool_error("stats", &format!("cannot read the stats: {e}")),
        }
    }

    /// Calls a hub tool (Temper as a gateway): the upstream's result passed
    /// on, a built-in's output as a tool result (`answer.rs`).
    async fn call_hub(&self, name: &str, arguments: &Value, progress: &Progress<'_>) -> Value {
        let answers = hub_relay::Answers::of(None, false);
        self.hub_answer(name, arguments, progress, answers, false)
            .await
            .into_value()
    }

    /// The answer for a tool this caller cannot see, whether it does not
    /// exist or belongs to a tier or agent it may not use.
    fn not_found(&self, name: &str) -> String {
        format!("unknown tool {name:?}: no tool by that name is visible to this caller")
    }

    /// Whether a `tools/call` of `name` goes to the hub: a hub tool this
    /// caller may use, which no forged tool it sees shadows. Decided
    /// without listing the caller's tools (a listing reads the registry;
    /// `forged_tier` answers from caches). The one place that decides it,
    /// for [`Self::invoke`] and the pass-through path (`answer.rs`).
    async fn goes_to_hub(&self, name: &str) -> Result<bool, RpcError> {
        if !self.forge.is_hub_tool(name) || self.hub_hidden(name) {
            return Ok(false);
        }
        let shadow = self
            .forge
            .forged_tier(name, &self.ctx)
            .await
            .map_err(|e| RpcError::internal(format!("cannot resolve {name:?}: {e}")))?;
        Ok(shadow.is_none_or(|tier| !self.access().allows(tier)))
    }

    async fn invoke(
        &self,
        name: &str,
        arguments: &Value,
        progress: &Progress<'_>,
    ) -> Result<Value, RpcError> {
        // A tool this caller cannot see is a protocol error (`-32602`, as
        // the MCP spec answers an unknown tool), the same whether it does
        // not exist or is out of the caller's reach.
        // A hub tool this caller may use, which no forged tool it sees
        // shadows, is called without listing the caller's tools (a listing
        // reads the registry; `forged_tier` answers from caches).
        if self.goes_to_hub(name).await? {
            return Ok(self.call_hub(name, arguments, progress).await);
        }
        let needs_visible = !self.ctx.grant().is_unrestricted();
        let visible = if needs_visible || self.forge.is_hub_tool(name) {
            Some(self.visible().await?)
        } else {
            None
        };
        let forged = visible
            .as_ref()
            .and_then(|v| v.iter().find(|t| t.name == name));
        if let (Some(_), None) = (&visible, forged) {
            // Not a forged tool this caller sees: a hub tool it may use, or
            // nothing it may know of.
            if self.hub_visible().iter().any(|t| t.name == name) {
                return Ok(self.call_hub(name, arguments, progress).await);
            }
            if needs_visible {
                return Err(RpcError::invalid_params(self.not_found(name)));
            }
        }
        // What the tool reaches, at any depth, is checked by the forge
        // against the caller's grant (in the context).
        // The messages are made only for a client that asked for progress.
        let progressed = progress.token.is_some();
        if progressed {
            progress.report(0, 1, format!("calling {name}"));
        }
        let outcome = self.forge.invoke(name, arguments, &self.ctx).await;
        if progressed {
            progress.report(1, 1, format!("{name}: done"));
        }
        if let Err(InvokeError::NotFound { name: missing, .. }) = &outcome
            && missing == name
        {
            return Err(RpcError::invalid_params(self.not_found(name)));
        }
        Ok(match outcome {
            Ok(invocation) => {
                for line in &invocation.logs {
                    tracing::info!(target: "temper_mcp::console", "[{name} console.{}] {}", line.level, line.message);
                }
                tools::tool_result(&invocation.output, false)
            }
            Err(e) => {
                if let InvokeError::Run { failure, .. } = &e {
                    for line in &failure.logs {
                        tracing::info!(target: "temper_mcp::console", "[{name} console.{}] {}", line.level, line.message);
                    }
                }
                tools::tool_error("invoke", &e.to_string())
            }
        })
    }
}

/// The notification that a caller's tool list changed.
pub(super) const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// Progress steps of a forge: the five stages, then done.
const FORGE_STEPS: u32 = 5;

/// Progress notifications for one request, when the client asked for them
/// (`_meta.progressToken`).
struct Progress<'n> {
    notes: &'n dyn Notifier,
    token: Option<Value>,
    /// The lowest level of the upstream log messages relayed to the
    /// caller of a hub call (`hub_relay::log_level`); `None`: none.
    log_level: Option<usize>,
}

impl<'n> Progress<'n> {
    /// The progress of a request with `params`: reported to `notes` when
    /// the caller sent a `_meta.progressToken` (a string or a number).
    fn of(params: &Value, notes: &'n dyn Notifier) -> Self {
        Self {
            notes,
            token: params
                .pointer("/_meta/progressToken")
                .filter(|t| t.is_string() || t.is_number())
                .cloned(),
            log_level: None,
        }
    }

    fn report(&self, progress: u32, total: u32, message: String) {
        if let Some(token) = &self.token {
            self.notes.request_note(jsonrpc::notification(
                "notifications/progress",
                json!({ "progressToken": token, "progress": progress, "total": total, "message": message }),
            ));
        }
    }
}

/// What `forge`'s server offers: tools, and its hub's resources and
/// prompts when the tools file selects some.
pub fn capabilities(forge: &Forge) -> results::ServerCapabilities {
    let hub = forge.hub();
    let offers = |f| hub.as_ref().is_some_and(|h| h.offers(f));
    results::ServerCapabilities::served(
        offers(temper_hub::Feature::Resources) || offers(temper_hub::Feature::ResourceTemplates),
        offers(temper_hub::Feature::Prompts),
    )
}

/// The `initialize` result for `params`, offering `capabilities`.
pub fn initialize(
    params: Option<&Value>,
    capabilities: results::ServerCapabilities,
) -> Result<Value, RpcError> {
    let requested = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::invalid_params("initialize: params.protocolVersion must be a string")
        })?;
    Ok(encode(&results::InitializeResult {
        protocol_version: negotiate_version(requested),
        capabilities,
        server_info: results::SERVER_INFO,
        instructions: results::INSTRUCTIONS,
    }))
}

/// The syslog levels `logging/setLevel` takes, lowest first.
pub(crate) const LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Legacy `logging/setLevel`: accepted (an empty result) for a valid level.
/// This server sends no `notifications/message` at any level (its
/// diagnostics go to the embedder's log), so there is nothing to change.
fn set_level(params: Option<&Value>) -> Result<Value, RpcError> {
    match params.and_then(|p| p.get("level")).and_then(Value::as_str) {
        Some(level) if LOG_LEVELS.contains(&level) => Ok(json!({})),
        _ => Err(RpcError::invalid_params(format!(
            "logging/setLevel: params.level must be one of {}",
            LOG_LEVELS.join(", ")
        ))),
    }
}

/// A typed result as JSON (the protocol types hold strings, numbers and
/// JSON values only, so this cannot fail).
fn encode<T: serde::Serialize>(result: &T) -> Value {
    serde_json::to_value(result).expect("protocol results serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiates_the_clients_version_or_the_newest() {
        assert_eq!(negotiate_version("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_version("2024-11-05"), "2024-11-05");
        assert_eq!(
            negotiate_version("1999-01-01"),
            SUPPORTED_PROTOCOL_VERSIONS[0]
        );
        let r = initialize(
            Some(&json!({"protocolVersion": "2025-03-26"})),
            results::CAPABILITIES,
        )
        .unwrap();
        assert_eq!(r["protocolVersion"], "2025-03-26");
        assert_eq!(r["capabilities"], json!({"tools": {"listChanged": true}}));
        assert_eq!(r["serverInfo"]["name"], "temper");
        assert_eq!(
            initialize(Some(&json!({})), results::CAPABILITIES)
                .unwrap_err()
                .code,
            jsonrpc::INVALID_PARAMS
        );
        assert_eq!(r["instructions"], results::INSTRUCTIONS);
    }

    #[test]
    fn legacy_set_level_takes_valid_levels_only() {
        assert_eq!(
            set_level(Some(&json!({"level": "debug"}))).unwrap(),
            json!({})
        );
        for bad in [json!({"level": "loud"}), json!({}), json!({"level": 3})] {
            assert_eq!(
                set_level(Some(&bad)).unwrap_err().code,
                jsonrpc::INVALID_PARAMS
            );
        }
        assert!(set_level(None).is_err());
    }
}
