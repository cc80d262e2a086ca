//! The metric families (names and labels fixed: dashboards rely on them)
//! and the cheap handles the call paths record through.
//!
//! A call records through a [`ToolMetrics`]: counters and a histogram for
//! one tool, looked up once per call by name (a read lock and a hash) and
//! created on first sight. Past [`Metrics::max_tools`] distinct tools, new
//! names share the `_other` handles: the `tool` label stays bounded however
//! many tools agents forge. Every other label takes its values from a
//! fixed set ([`ErrorKind`], [`capability_label`], [`mcp_method_label`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use crate::kinds::{ErrorKind, Outcome, Tier};

/// The label the tools past the cap fold into.
pub const OTHER_TOOL: &str = "_other";

/// Default cap on distinct `tool` label values (`--metrics-max-tools`).
pub const DEFAULT_MAX_TOOLS: usize = 1000;

/// Buckets of `temper_tool_call_duration_seconds`: 10 µs to 10 s, 1-2.5-5
/// per decade.
pub const CALL_BUCKETS: [f64; 19] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Buckets of `temper_forge_duration_seconds`: 10 ms to 5 min (a forge
/// builds, runs tests and may wait for an LLM judge).
pub const FORGE_BUCKETS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: Arc<str>,
    tier: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    tool: Arc<str>,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CapabilityLabel {
    capability: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ForgeLabels {
    outcome: &'static str,
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabel {
    cache: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    transport: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: Arc<str>,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    shim: String,
}

/// Makes the histograms of a family with fixed buckets.
#[derive(Clone, Copy)]
struct Buckets(&'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// Updates gauges from the state they describe, right before a scrape
/// (pool instances, cache entries): nothing on the call path.
pub type Sampler = Box<dyn Fn(&Metrics) + Send + Sync>;

/// Every Temper metric family, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    max_tools: usize,
    tool_calls: Family<CallLabels, Counter>,
    tool_errors: Family<ErrorLabels, Counter>,
    tool_duration: Family<ToolLabel, Histogram, Buckets>,
    denials: Family<CapabilityLabel, Counter>,
    forges: Family<ForgeLabels, Counter>,
    forge_duration: Histogram,
    pool: Family<StateLabel, Gauge>,
    caches: Family<CacheLabel, Gauge>,
    requests: Family<RequestLabels, Counter>,
    upstream_calls: Family<UpstreamLabels, Counter>,
    /// The tools seen so far, by name (at most `max_tools`).
    tools: RwLock<HashMap<Arc<str>, Arc<ToolMetrics>>>,
    /// What the tools past the cap share.
    other: OnceLock<Arc<ToolMetrics>>,
    samplers: RwLock<Vec<Sampler>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("max_tools", &self.max_tools)
            .finish_non_exhaustive()
    }
}

/// One tool's counters and histogram, shared by its calls.
#[derive(Debug)]
pub struct ToolMetrics {
    name: Arc<str>,
    /// `[tier][outcome]`, created on first use (no zero series for tiers a
    /// tool never ran in).
    calls: [[OnceLock<Counter>; 2]; Tier::COUNT],
    errors: [OnceLock<Counter>; ErrorKind::COUNT],
    duration: Histogram,
}

impl ToolMetrics {
    /// The `tool` label this tool's series carry (`_other` past the cap).
    pub fn label(&self) -> &str {
        &self.name
    }
}

impl Metrics {
    /// Every family registered, the `tool` label capped at `max_tools`
    /// distinct values (at least 1), and `temper_build_info` set for
    /// `version` and `shim` (the JS shim's id).
    pub fn new(max_tools: usize, version: &str, shim: &str) -> Arc<Self> {
        let mut registry = Registry::default();
        let tool_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "temper_tool_calls",
            "Tool calls by tool, tier and outcome (ok, error)",
            tool_calls.clone(),
        );
        let tool_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "temper_tool_errors",
            "Failed tool calls by tool and error kind",
            tool_errors.clone(),
        );
        let tool_duration = Family::new_with_constructor(Buckets(&CALL_BUCKETS));
        registry.register(
            "temper_tool_call_duration_seconds",
            "Tool call latency (resolution, schema checks and the run), seconds",
            tool_duration.clone(),
        );
        let denials = Family::<CapabilityLabel, Counter>::default();
        registry.register(
            "temper_capability_denials",
            "Calls that used a capability their tool was not granted",
            denials.clone(),
        );
        let forges = Family::<ForgeLabels, Counter>::default();
        registry.register(
            "temper_forge",
            "Forges by outcome (ok, refused) and the stage that decided it",
            forges.clone(),
        );
        let forge_duration = Histogram::new(FORGE_BUCKETS.iter().copied());
        registry.register(
            "temper_forge_duration_seconds",
            "Forge latency, validate to register or refusal, seconds",
            forge_duration.clone(),
        );
        let pool = Family::<StateLabel, Gauge>::default();
        registry.register(
            "temper_pool_instances",
            "Instances: warm (pre-warmed, waiting) and live (running a call)",
            pool.clone(),
        );
        let caches = Family::<CacheLabel, Gauge>::default();
        registry.register(
            "temper_cache_entries",
            "Entries held by each bounded cache",
            caches.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "temper_mcp_requests",
            "MCP requests and notifications received, by method and transport",
            requests.clone(),
        );
        let upstream_calls = Family::<UpstreamLabels, Counter>::default();
        registry.register(
            "temper_upstream_calls",
            "Calls to upstream MCP servers by upstream and outcome (ok, error)",
            upstream_calls.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: version.to_string(),
                shim: shim.to_string(),
            })
            .set(1);
        registry.register("temper_build_info", "Temper's version and JS shim", build);
        Arc::new(Self {
            registry,
            max_tools: max_tools.max(1),
            tool_calls,
            tool_errors,
            tool_duration,
            denials,
            forges,
            forge_duration,
            pool,
            caches,
            requests,
            upstream_calls,
            tools: RwLock::new(HashMap::new()),
            other: OnceLock::new(),
            samplers: RwLock::new(Vec::new()),
        })
    }

    /// The cap on distinct `tool` label values.
    pub fn max_tools(&self) -> usize {
        self.max_tools
    }

    /// The handles of tool `name`: its own while fewer than
    /// [`Metrics::max_tools`] tools have been seen (or it is one of them),
    /// else the shared `_other` ones.
    pub fn tool(&self, name: &str) -> Arc<ToolMetrics> {
        if let Some(t) = read(&self.tools).get(name) {
            return t.clone();
        }
        let mut tools = write(&self.tools);
        if let Some(t) = tools.get(name) {
            return t.clone();
        }
        if tools.len() >= self.max_tools {
            drop(tools);
            return self
                .other
                .get_or_init(|| self.make_tool(OTHER_TOOL.into()))
                .clone();
        }
        let name: Arc<str> = name.into();
        let handles = self.make_tool(name.clone());
        tools.insert(name, handles.clone());
        handles
    }

    fn make_tool(&self, name: Arc<str>) -> Arc<ToolMetrics> {
        let duration = self
            .tool_duration
            .get_or_create(&ToolLabel { tool: name.clone() })
            .clone();
        Arc::new(ToolMetrics {
            name,
            calls: Default::default(),
            errors: Default::default(),
            duration,
        })
    }

    /// Records one call of `tool` in `tier`: its outcome (the error kind
    /// when it failed) and latency.
    pub fn record_call(
        &self,
        tool: &ToolMetrics,
        tier: Tier,
        error: Option<ErrorKind>,
        elapsed: Duration,
    ) {
        let outcome = if error.is_some() {
            Outcome::Error
        } else {
            Outcome::Ok
        };
        tool.calls[tier as usize][outcome as usize]
            .get_or_init(|| {
                self.tool_calls
                    .get_or_create(&CallLabels {
                        tool: tool.name.clone(),
                        tier: tier.as_str(),
                        outcome: outcome.as_str(),
                    })
                    .clone()
            })
            .inc();
        if let Some(kind) = error {
            tool.errors[kind as usize]
                .get_or_init(|| {
                    self.tool_errors
                        .get_or_create(&ErrorLabels {
                            tool: tool.name.clone(),
                            kind: kind.as_str(),
                        })
                        .clone()
                })
                .inc();
        }
        tool.duration.observe(elapsed.as_secs_f64());
    }

    /// Counts a call that used `capability` without the grant (`fetch`,
    /// `fs.readFile`, `crypto`, `tool:NAME`; see [`capability_label`]).
    pub fn capability_denied(&self, capability: &str) {
        self.denials
            .get_or_create(&CapabilityLabel {
                capability: capability_label(capability),
            })
            .inc();
    }

    /// Counts a forge: `ok` at the register stage, or refused at `stage`;
    /// and its latency.
    pub fn record_forge(&self, refused_at: Option<&'static str>, elapsed: Duration) {
        let labels = match refused_at {
            None => ForgeLabels {
                outcome: Outcome::Ok.as_str(),
                stage: "register",
            },
            Some(stage) => ForgeLabels {
                outcome: "refused",
                stage,
            },
        };
        self.forges.get_or_create(&labels).inc();
        self.forge_duration.observe(elapsed.as_secs_f64());
    }

    /// Counts an MCP message with `method` on `transport` (`stdio`,
    /// `http`); methods outside the MCP set count as `_other`.
    pub fn mcp_request(&self, method: &str, transport: &'static str) {
        self.requests
            .get_or_create(&RequestLabels {
                method: mcp_method_label(method),
                transport,
            })
            .inc();
    }

    /// Counts a call to upstream MCP server `upstream` (a name from the
    /// tools file: bounded by it).
    pub fn upstream_call(&self, upstream: &str, ok: bool) {
        let outcome = if ok { Outcome::Ok } else { Outcome::Error };
        self.upstream_calls
            .get_or_create(&UpstreamLabels {
                upstream: upstream.into(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Sets `temper_pool_instances{state}` (`warm` or `live`).
    pub fn set_pool(&self, state: &'static str, instances: usize) {
        self.pool
            .get_or_create(&StateLabel { state })
            .set(instances as i64);
    }

    /// Sets `temper_cache_entries{cache}`.
    pub fn set_cache(&self, cache: &'static str, entries: usize) {
        self.caches
            .get_or_create(&CacheLabel { cache })
            .set(entries as i64);
    }

    /// Adds a sampler run before each scrape.
    pub fn add_sampler(&self, sampler: Sampler) {
        write(&self.samplers).push(sampler);
    }

    /// The metrics in the Prometheus text format (0.0.4), after the
    /// samplers ran.
    pub fn encode(&self) -> String {
        for sample in read(&self.samplers).iter() {
            sample(self);
        }
        let mut out = String::new();
        // Writing to a String cannot fail; an encoder error would be a bug
        // in a label type, and an empty scrape says so to the scraper.
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::error!("cannot encode the metrics: {e}");
            out.clear();
        }
        out
    }
}

/// The `capability` label of a refused capability: `tool:NAME` is `tool`
/// (the callee's name would make the label unbounded), an unknown name is
/// `_other`.
pub fn capability_label(capability: &str) -> &'static str {
    match capability {
        "fetch" => "fetch",
        "fs.readFile" => "fs.readFile",
        "crypto" => "crypto",
        c if c.starts_with("tool:") => "tool",
        _ => "_other",
    }
}

/// The `method` label of an MCP message: the methods of the MCP
/// specification, anything else `_other` (a client cannot grow the
/// label set).
pub fn mcp_method_label(method: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    ];
    KNOWN
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("_other")
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
