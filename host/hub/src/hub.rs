//! [`Hub`]: every tool source of a tools file, started together, as one
//! set of named tools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::builtin::{Builtin, BuiltinError};
use crate::config::ToolsFile;
use crate::upstream::{CallOutput, Upstream, UpstreamError};

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
        let starts: Vec<_> = file
            .upstreams
            .values()
            .map(|cfg| {
                let cfg = cfg.clone();
                tokio::spawn(async move {
                    let optional = cfg.optional;
                    (optional, Upstream::start(cfg).await)
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
                u.tools().into_iter().map(move |t| HubTool {
                    source: format!("upstream {:?}", t.upstream),
                    name: t.name,
                    description: t.description,
                    input_schema: t.input_schema,
                    output_schema: t.output_schema,
                    timeout,
                    checks_output: true,
                    checks_input: true,
                })
            })
            .chain(self.builtins.iter().map(|b| b.tool()))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Calls the hub tool `name`. When its upstream no longer lists it, the
    /// error names the upstream and the tool.
    pub async fn call(&self, name: &str, input: Value) -> Result<Value, HubError> {
        self.call_output(name, input).await.map(|o| o.value)
    }

    /// [`Self::call`], with the upstream's own text of the output when it
    /// can be passed on as it is ([`CallOutput::raw`]; never for a
    /// built-in): what a gateway answers with.
    pub async fn call_output(&self, name: &str, input: Value) -> Result<CallOutput, HubError> {
        if let Some(b) = self.builtins.iter().find(|b| b.name() == name) {
            return Ok(CallOutput::value(b.call(input).await?));
        }
        let up = match self.upstreams.iter().find(|u| u.has_tool(name)) {
            Some(up) => up,
            // Gone since the start: the upstream that had it says so.
            None => match self.origin.get(name) {
                Some(&i) => &self.upstreams[i],
                None => return Err(HubError::Unknown(name.to_string())),
            },
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
            tracing::Instrument::instrument(up.call_output(name, input), span.clone()).await;
        if result.is_err() && !span.is_disabled() {
            span.record("error.type", "upstream");
        }
        if let Some(observe) = self.observer.0.get() {
            observe(up.name(), result.is_ok());
        }
        Ok(result?)
    }

    /// Tells `observer` of every upstream call from now on (once: `false`
    /// when one was set before).
    pub fn set_observer(&self, observer: UpstreamObserver) -> bool {
        self.observer.0.set(observer).is_ok()
    }
}
