//! [`Hub`]: every tool source of a tools file, started together, as one
//! set of named tools.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::builtin::{Builtin, BuiltinError};
use crate::config::ToolsFile;
use crate::upstream::{Upstream, UpstreamError};

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

/// The started tool sources of a tools file. Dropping it stops the
/// upstream children.
#[derive(Debug, Default)]
pub struct Hub {
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
        if let Some(b) = self.builtins.iter().find(|b| b.name() == name) {
            return Ok(b.call(input).await?);
        }
        if let Some(up) = self
            .upstreams
            .iter()
            .find(|u| u.tools().iter().any(|t| t.name == name))
        {
            return Ok(up.call(name, input).await?);
        }
        // Gone since the start: the upstream that had it says so.
        match self.origin.get(name) {
            Some(&i) => Ok(self.upstreams[i].call(name, input).await?),
            None => Err(HubError::Unknown(name.to_string())),
        }
    }
}
