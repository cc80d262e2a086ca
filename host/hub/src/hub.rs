//! [`Hub`]: every tool source of a tools file, started together, as one
//! set of named tools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::builtin::{Builtin, BuiltinError};
use crate::config::ToolsFile;
use crate::upstream::{
    CallOutput, Feature, LIST_CHANGES, ListChange, Relay, Upstream, UpstreamError,
};
use tokio::sync::broadcast;

/// A tool of the hub, as the host exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HubTool {
    /// The exposed name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its input.
    pub input_schema: Value,
    /// JSON Schema of its output, when it declares one.
    pub output_schema: Option<Value>,
    /// Where it comes from, for messages: `upstream "search"`, `built-in`.
    pub source: String,
    /// How long one call may take (its upstream's or built-in's
    /// `timeout_ms`): the bound a host puts around a call to it, also as
    /// a compose step.
    pub timeout: std::time::Duration,
    /// Whether [`Hub::call`] checks the output against `output_schema`
    /// itself (an upstream's tool: its output comes from another program),
    /// so a host need not check it again.
    pub checks_output: bool,
    /// Whether [`Hub::call`] checks the input against the tool's input
    /// schema itself before anything is sent (an upstream's tool), so a
    /// host need not check it first. The hub checks against the schema
    /// the upstream listed last, which a host's copy taken at
    /// registration may predate (an upstream's `list_changed`).
    pub checks_input: bool,
    /// The tool as its upstream listed it (every member: `title`,
    /// `annotations`, `execution`, `icons`, `_meta`, ...), with the exposed
    /// name and the tools file's annotation overrides; `None` for a
    /// built-in.
    pub definition: Option<serde_json::Map<String, Value>>,
    /// Whether a forge's tests may call it live: a built-in, an upstream
    /// tool marked `readOnlyHint: true` (by its upstream or the tools
    /// file's annotations), or any tool of an upstream with
    /// `allow_live_tests = true`. Otherwise calling it while testing would
    /// act on the upstream, and the forge serves recorded answers instead.
    pub live_in_tests: bool,
}

/// Whether a tool definition is marked `annotations.readOnlyHint: true`.
fn read_only(definition: &serde_json::Map<String, Value>) -> bool {
    definition
        .get("annotations")
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Why the hub did not start, or a call to it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// An upstream that is not `optional` did not start, or a call failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// A built-in did not start, or a call to it failed.
    #[error(transparent)]
    Builtin(#[from] BuiltinError),
    /// Two sources expose the same name.
    #[error(
        "hub tool {name:?} is exposed twice: by {first} and by {second} (give one upstream a `prefix`, or narrow its `tools`)"
    )]
    Clash {
        /// The name.
        name: String,
        /// One source.
        first: String,
        /// The other.
        second: String,
    },
    /// No hub tool has that name (now).
    #[error("no hub tool {0:?}")]
    Unknown(String),
    /// No upstream exposes that resource or prompt.
    #[error("no hub {what} {name:?}")]
    NoSuch {
        /// `resource` or `prompt`.
        what: &'static str,
        /// Its exposed URI or name.
        name: String,
    },
}

/// Told of every call to an upstream MCP server: the upstream's name
/// (from the tools file) and whether the call succeeded (metrics).
pub type UpstreamObserver = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// Where [`Hub::set_observer`] keeps its observer.
#[derive(Default)]
struct ObserverSlot(std::sync::OnceLock<UpstreamObserver>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "observed"
        } else {
            "unobserved"
        })
    }
}

/// The started tool sources of a tools file. Dropping it stops the
/// upstream children.
#[derive(Debug, Default)]
pub struct Hub {
    /// Who hears of upstream calls, once set.
    observer: ObserverSlot,
    upstreams: Vec<Arc<Upstream>>,
    /// The built-ins the tools file turns on.
    builtins: Vec<Arc<Builtin>>,
    /// Which upstream exposed each name at start (bounded by the tools
    /// listed then), so a tool gone later is reported against it.
    origin: BTreeMap<String, usize>,
    /// Where the upstreams announce their list changes.
    changes: Option<broadcast::Sender<ListChange>>,
}

impl Hub {
    /// Starts every upstream of `file` (concurrently) and its built-ins.
    /// An upstream that fails to start fails the whole start with its error
    /// (stderr tail included), unless it is `optional`: then a warning is
    /// logged and its tools are absent. Two sources exposing the same name
    /// are refused, naming both.
    pub async fn start(file: &ToolsFile) -> Result<Self, HubError> {
        let builtins = Builtin::start_all(file)?
            .into_iter()
            .map(Arc::new)
            .collect();
        let changes = broadcast::channel(LIST_CHANGES).0;
        let starts: Vec<_> = file
            .upstreams
            .values()
            .map(|cfg| {
                let cfg = cfg.clone();
                let changes = changes.clone();
                tokio::spawn(async move {
                    let optional = cfg.optional;
                    (optional, Upstream::start_reporting(cfg, changes).await)
                })
            })
            .collect();
        let mut upstreams = Vec::new();
        for start in starts {
            match start.await {
                Ok((_, Ok(up))) => upstreams.push(Arc::new(up)),
                Ok((true, Err(e))) => {
                    tracing::warn!(error = %e, "optional upstream did not start; its tools are absent");
                }
                Ok((false, Err(e))) => return Err(e.into()),
                Err(join) => {
                    return Err(HubError::Unknown(format!(
                        "upstream start task failed: {join}"
                    )));
                }
            }
        }
        let mut origin = BTreeMap::new();
        for (i, up) in upstreams.iter().enumerate() {
            for t in up.tools() {
                origin.insert(t.name, i);
            }
        }
        let hub = Hub {
            observer: ObserverSlot::default(),
            upstreams,
            builtins,
            origin,
            changes: Some(changes),
        };
        hub.check_clashes(&[])?;
        Ok(hub)
    }

    /// Refuses a name exposed twice among the hub's tools and `others`
    /// (`(name, source)` pairs, e.g. the host-native tools), naming both
    /// sources.
    pub fn check_clashes(&self, others: &[(String, String)]) -> Result<(), HubError> {
        let mut seen: BTreeMap<String, String> = others.iter().cloned().collect();
        for tool in self.tools() {
            if let Some(first) = seen.insert(tool.name.clone(), tool.source.clone()) {
                return Err(HubError::Clash {
                    name: tool.name,
                    first,
                    second: tool.source,
                });
            }
        }
        Ok(())
    }

    /// The upstreams' list changes from now on
    /// ([`ListChange`]; `Lagged` when the receiver fell behind: take every
    /// list as changed). `None` for a hub without upstreams' announcements
    /// (the default, empty hub).
    pub fn subscribe_list_changes(&self) -> Option<broadcast::Receiver<ListChange>> {
        self.changes.as_ref().map(broadcast::Sender::subscribe)
    }

    /// The upstreams that started.
    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    /// A counter that moves whenever an upstream's tool list is replaced
    /// (the built-ins never change): equal values mean [`Hub::tools`] is
    /// unchanged, so a caller need not copy it again.
    pub fn generation(&self) -> u64 {
        self.upstreams.iter().map(|u| u.generation()).sum()
    }

    /// Every tool the hub exposes now, sorted by name.
    pub fn tools(&self) -> Vec<HubTool> {
        let mut out: Vec<HubTool> = self
            .upstreams
            .iter()
            .flat_map(|u| {
                let timeout = u.config().timeout;
                let allow_live = u.config().allow_live_tests;
                u.tools().into_iter().map(move |t| HubTool {
                    live_in_tests: allow_live || read_only(&t.definition),
                    source: format!("upstream {:?}", t.upstream),
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema,
                    output_schema: t.output_schema,
                    timeout,
                    checks_output: true,
                    checks_input: true,
                    definition: Some(t.definition),
                })
            })
            .chain(self.builtins.iter().map(|b| b.tool()))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Calls the hub tool `name`: its value ([`CallOutput::value`]); an
    /// upstream's `isError` result is an error with the upstream's text.
    /// When its upstream no longer lists it, the error names the upstream
    /// and the tool.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, HubError> {
        let out = self.call_output(name, input, None).await?;
        match out.error {
            None => Ok(out.value),
            Some(message) => {
                let up = self
                    .upstream_of(name)
                    .map(|u| (u.name().to_string(), u.config().prefix.clone()));
                let (upstream, prefix) = up.unwrap_or_default();
                Err(HubError::Upstream(UpstreamError::Call {
                    upstream,
                    tool: name
                        .strip_prefix(prefix.as_str())
                        .unwrap_or(name)
                        .to_string(),
                    message,
                }))
            }
        }
    }

    /// The upstream that exposes (or exposed at the start) `name`.
    fn upstream_of(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams
            .iter()
            .find(|u| u.has_tool(name))
            .or_else(|| self.origin.get(name).map(|&i| &self.upstreams[i]))
    }

    /// [`Self::call`] for a gateway: with the upstream's result as it came
    /// ([`CallOutput::result`]; `None` for a built-in), an `isError`
    /// result included ([`CallOutput::error`]); what the upstream sends
    /// for the call goes to `relay` when given ([`Relay`]).
    pub async fn call_output(
        &self,
        name: &str,
        input: Value,
        relay: Option<Relay>,
    ) -> Result<CallOutput, HubError> {
        if let Some(b) = self.builtins.iter().find(|b| b.name() == name) {
            return Ok(CallOutput::value(b.call(input).await?));
        }
        let Some(up) = self.upstream_of(name) else {
            return Err(HubError::Unknown(name.to_string()));
        };
        // A client span per upstream call (off unless traces are exported).
        let span = tracing::info_span!(
            target: "temper_hub::trace",
            "upstream_call",
            otel.name = tracing::field::Empty,
            otel.kind = "client",
            temper.upstream = tracing::field::Empty,
            gen_ai.tool.name = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        // Formatted only when the span is enabled.
        if !span.is_disabled() {
            span.record(
                "otel.name",
                format!("upstream {} {name}", up.name()).as_str(),
            );
            span.record("temper.upstream", up.name());
            span.record("gen_ai.tool.name", name);
        }
        let result =
            tracing::Instrument::instrument(up.call_output(name, input, relay), span.clone()).await;
        let ok = result.as_ref().is_ok_and(|o| o.error.is_none());
        if !ok && !span.is_disabled() {
            span.record("error.type", "upstream");
        }
        if let Some(observe) = self.observer.0.get() {
            observe(up.name(), ok);
        }
        Ok(result?)
    }

    /// Whether some upstream exposes any of `feature` (the tools file
    /// selects some).
    pub fn offers(&self, feature: Feature) -> bool {
        self.upstreams.iter().any(|u| u.offers(feature))
    }

    /// Every upstream's selected items of `feature` (resources, resource
    /// templates or prompts), with their exposed names, in the order of
    /// the tools file's upstreams; an upstream that cannot list them now is
    /// left out with a warning.
    pub async fn list_feature(&self, feature: Feature) -> Vec<serde_json::Map<String, Value>> {
        let mut out = Vec::new();
        for up in self.upstreams.iter().filter(|u| u.offers(feature)) {
            match up.list_feature(feature).await {
                Ok(items) => out.extend(items),
                Err(e) => tracing::warn!(error = %e, "an upstream's listing is left out"),
            }
        }
        out
    }

    /// The upstream that exposes the item `name` of `feature` (the first,
    /// in the tools file's order, when several could).
    fn exposing(&self, feature: Feature, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams
            .iter()
            .find(|u| u.remote_item(feature, name).is_some())
    }

    /// Reads the resource whose exposed URI is `uri` from its upstream.
    pub async fn read_resource(
        &self,
        uri: &str,
    ) -> Result<serde_json::Map<String, Value>, HubError> {
        let up = self
            .exposing(Feature::Resources, uri)
            .ok_or_else(|| HubError::NoSuch {
                what: "resource",
                name: uri.to_string(),
            })?;
        Ok(up.read_resource(uri).await?)
    }

    /// Gets the prompt whose exposed name is `name` from its upstream.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<&Value>,
    ) -> Result<serde_json::Map<String, Value>, HubError> {
        let up = self
            .exposing(Feature::Prompts, name)
            .ok_or_else(|| HubError::NoSuch {
                what: "prompt",
                name: name.to_string(),
            })?;
        Ok(up.get_prompt(name, arguments).await?)
    }

    /// Asks the upstream exposing the prompt (`feature` = prompts) or
    /// resource template (resource templates) `name` to complete an
    /// argument of it (`completion/complete` with the caller's `params`).
    pub async fn complete(
        &self,
        feature: Feature,
        name: &str,
        params: &serde_json::Map<String, Value>,
    ) -> Result<serde_json::Map<String, Value>, HubError> {
        let up = self
            .exposing(feature, name)
            .ok_or_else(|| HubError::NoSuch {
                what: if feature == Feature::Prompts {
                    "prompt"
                } else {
                    "resource template"
                },
                name: name.to_string(),
            })?;
        Ok(up.complete(feature, name, params).await?)
    }

    /// Tells `observer` of every upstream call from now on (once: `false`
    /// when one was set before).
    pub fn set_observer(&self, observer: UpstreamObserver) -> bool {
        self.observer.0.set(observer).is_ok()
    }
}
