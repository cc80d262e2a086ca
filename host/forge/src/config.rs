//! The forge's own settings: tool-count limits, promotion thresholds and
//! source persistence. Field names follow the seed's `emergentConfig`
//! (`maxSessionTools`, `maxAgentTools`, `promotionThreshold`,
//! `persistSandboxSource`), so the same JSON (or TOML) configures both.

use serde::{Deserialize, Serialize};

/// Default `maxSessionTools`.
pub const DEFAULT_MAX_SESSION_TOOLS: usize = 10;
/// Default `maxAgentTools`.
pub const DEFAULT_MAX_AGENT_TOOLS: usize = 50;
/// Default `promotionThreshold.uses`.
pub const DEFAULT_PROMOTION_USES: u64 = 5;
/// Default `promotionThreshold.confidence` (strictly greater is required).
pub const DEFAULT_PROMOTION_CONFIDENCE: f64 = 0.8;
/// Longest tool name accepted.
pub const MAX_NAME_LEN: usize = 64;
/// Longest description accepted, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;
/// Most test cases a request may carry.
pub const MAX_TEST_CASES: usize = 64;
/// Default `forgeDeadlineMs`: one forge's whole budget, the test runs
/// included.
pub const DEFAULT_FORGE_DEADLINE_MS: u64 = 60_000;
/// Default `maxInFlightForges`.
pub const DEFAULT_IN_FLIGHT_FORGES: usize = 4;
/// Default `maxInFlightCalls`.
pub const DEFAULT_IN_FLIGHT_CALLS: usize = 256;
/// Default `maxQueued` (for forges and for calls, each).
pub const DEFAULT_QUEUED: usize = 1024;
/// Default `statsFlushMs`: agent- and shared-tier call counts are written
/// to the store at most this often (a crash loses at most this much).
pub const DEFAULT_STATS_FLUSH_MS: u64 = 1000;

/// Default `maxArtifactBytes`: the largest artifact an import (a file, a
/// Python or Node import, an OCI pull) accepts, 16 MiB. The largest
/// artifact a forge produces is the shim (0.87 MB) with the bytecode of a
/// source at the 1 MiB limit, the source itself (`persistSandboxSource`)
/// and the test cases, all from one forge request of at most an 8 MiB MCP
/// message: under 11 MB (docs/src/ref-forge-config.md); 16 MiB leaves
/// room above it. A compose bundle of many component steps can be larger:
/// raise the key to import one.
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 16 * 1024 * 1024;

/// What session → agent promotion requires (besides an approving panel).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromotionThreshold {
    /// Minimum successful invocations in the session tier.
    #[serde(default = "default_uses")]
    pub uses: u64,
    /// The forge verdict's confidence must be strictly greater than this.
    #[serde(default = "default_confidence")]
    pub confidence: f64,
}

fn default_uses() -> u64 {
    DEFAULT_PROMOTION_USES
}
fn default_confidence() -> f64 {
    DEFAULT_PROMOTION_CONFIDENCE
}

impl Default for PromotionThreshold {
    fn default() -> Self {
        Self {
            uses: DEFAULT_PROMOTION_USES,
            confidence: DEFAULT_PROMOTION_CONFIDENCE,
        }
    }
}

/// The forge's configuration. [`Default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForgeConfig {
    /// Most tools one session may hold (default 10).
    #[serde(default = "default_max_session")]
    pub max_session_tools: usize,
    /// Most agent-tier tools one agent may own (default 50).
    #[serde(default = "default_max_agent")]
    pub max_agent_tools: usize,
    /// Session → agent promotion thresholds.
    #[serde(default)]
    pub promotion_threshold: PromotionThreshold,
    /// Keep raw sandbox source in the registry (default false: only its
    /// blake3 is recorded, the artifact holds bytecode).
    #[serde(default)]
    pub persist_sandbox_source: bool,
    /// Capacities of the forge's in-memory caches (loaded tools, compose
    /// adapters, manifests, schemas); each evicts its least recently used
    /// entry when full.
    #[serde(default)]
    pub cache: super::cache::CacheCapacity,
    /// One forge's deadline, ms (default 60 s): past it the test stage
    /// stops and the forge is refused (the repeat run counts inside it).
    #[serde(default = "default_deadline")]
    pub forge_deadline_ms: u64,
    /// Forges (and imports) that run at once (default 4); more wait in a
    /// queue.
    #[serde(default = "default_in_flight_forges")]
    pub max_in_flight_forges: usize,
    /// Top-level calls ([`Forge::invoke`](super::Forge::invoke)) that run at
    /// once (default 256); more wait in a queue. Compose steps run inside
    /// their tool's call and take no slot of their own.
    #[serde(default = "default_in_flight_calls")]
    pub max_in_flight_calls: usize,
    /// How many forges, and how many calls, may wait for a slot (default
    /// 1024 each); past that they are refused as busy at once.
    #[serde(default = "default_queued")]
    pub max_queued: usize,
    /// Store a JavaScript tool this host built as its compact record
    /// (bytecode + manifest, about 1 KB) instead of the ~1.1 MB component
    /// (default true). The component is rebuilt byte for byte, and checked
    /// against its id, when it is exported or loaded cold; a record names
    /// the shim that built it, so a host with another Temper version cannot
    /// rebuild it (export first, or set this to false).
    #[serde(default = "default_true")]
    pub compact_artifacts: bool,
    /// How often, in ms, the calls of agent- and shared-tier tools counted
    /// in memory are written to the store, in one transaction (default
    /// 1000). A clean shutdown writes them all; a crash loses at most one
    /// interval. 0 writes each call as it ends (the call waits for it).
    #[serde(default = "default_stats_flush_ms")]
    pub stats_flush_ms: u64,
    /// How long, in seconds, a session made by its first tool (a stdio
    /// connection's, a library caller's) may stay unused before any host
    /// on the store may end it (default 1800; 0: never). Sessions opened
    /// explicitly ([`Forge::open_session`](super::Forge::open_session), an
    /// HTTP `initialize`) carry their own limit.
    #[serde(default = "default_session_idle_secs")]
    pub session_idle_secs: u64,
    /// The largest artifact an import accepts, in bytes (default
    /// [`DEFAULT_MAX_ARTIFACT_BYTES`]): a larger file, Python or Node
    /// import or OCI layer is refused before it is read whole.
    #[serde(default = "default_max_artifact_bytes")]
    pub max_artifact_bytes: u64,
    /// The budget of `tools/list`, in tokens (counted as characters / 4 of
    /// the tool definitions' JSON), for the tools beyond the built-ins: the
    /// session's working set (tools found, loaded or forged in it, most
    /// recent first; then the agent's and the shared tools most used).
    /// Every other tool stays callable and is found with `search_tools`.
    /// Default 4000.
    #[serde(default = "default_list_budget_tokens")]
    pub list_budget_tokens: usize,
}

fn default_max_artifact_bytes() -> u64 {
    DEFAULT_MAX_ARTIFACT_BYTES
}

/// The default of [`ForgeConfig::list_budget_tokens`].
pub const DEFAULT_LIST_BUDGET_TOKENS: usize = 4000;

fn default_list_budget_tokens() -> usize {
    DEFAULT_LIST_BUDGET_TOKENS
}

/// The default of [`ForgeConfig::session_idle_secs`]: 30 minutes.
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 30 * 60;

fn default_session_idle_secs() -> u64 {
    DEFAULT_SESSION_IDLE_SECS
}

fn default_stats_flush_ms() -> u64 {
    DEFAULT_STATS_FLUSH_MS
}

fn default_true() -> bool {
    true
}

fn default_deadline() -> u64 {
    DEFAULT_FORGE_DEADLINE_MS
}
fn default_in_flight_forges() -> usize {
    DEFAULT_IN_FLIGHT_FORGES
}
fn default_in_flight_calls() -> usize {
    DEFAULT_IN_FLIGHT_CALLS
}
fn default_queued() -> usize {
    DEFAULT_QUEUED
}

fn default_max_session() -> usize {
    DEFAULT_MAX_SESSION_TOOLS
}
fn default_max_agent() -> usize {
    DEFAULT_MAX_AGENT_TOOLS
}

impl Default for ForgeConfig {
    fn default() -> Self {
        Self {
            max_session_tools: DEFAULT_MAX_SESSION_TOOLS,
            max_agent_tools: DEFAULT_MAX_AGENT_TOOLS,
            promotion_threshold: PromotionThreshold::default(),
            persist_sandbox_source: false,
            cache: super::cache::CacheCapacity::default(),
            forge_deadline_ms: DEFAULT_FORGE_DEADLINE_MS,
            max_in_flight_forges: DEFAULT_IN_FLIGHT_FORGES,
            max_in_flight_calls: DEFAULT_IN_FLIGHT_CALLS,
            max_queued: DEFAULT_QUEUED,
            compact_artifacts: true,
            stats_flush_ms: DEFAULT_STATS_FLUSH_MS,
            session_idle_secs: DEFAULT_SESSION_IDLE_SECS,
            max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
            list_budget_tokens: DEFAULT_LIST_BUDGET_TOKENS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emergent_config_fields_parse_and_default() {
        let cfg: ForgeConfig = serde_json::from_str(
            r#"{"maxSessionTools": 3, "promotionThreshold": {"uses": 2}, "persistSandboxSource": true}"#,
        )
        .unwrap();
        assert_eq!(cfg.max_session_tools, 3);
        assert_eq!(cfg.max_agent_tools, DEFAULT_MAX_AGENT_TOOLS);
        assert_eq!(cfg.promotion_threshold.uses, 2);
        assert_eq!(
            cfg.promotion_threshold.confidence,
            DEFAULT_PROMOTION_CONFIDENCE
        );
        assert!(cfg.persist_sandbox_source);
        assert_eq!(cfg.stats_flush_ms, DEFAULT_STATS_FLUSH_MS);
        assert_eq!(cfg.max_artifact_bytes, DEFAULT_MAX_ARTIFACT_BYTES);
        let cfg: ForgeConfig = serde_json::from_str(r#"{"maxArtifactBytes": 1024}"#).unwrap();
        assert_eq!(cfg.max_artifact_bytes, 1024);
        let cfg: ForgeConfig = serde_json::from_str(r#"{"statsFlushMs": 0}"#).unwrap();
        assert_eq!(cfg.stats_flush_ms, 0);
        assert_eq!(cfg.list_budget_tokens, DEFAULT_LIST_BUDGET_TOKENS);
        let cfg: ForgeConfig = serde_json::from_str(r#"{"listBudgetTokens": 0}"#).unwrap();
        assert_eq!(cfg.list_budget_tokens, 0);
        let err = serde_json::from_str::<ForgeConfig>(r#"{"maxSesionTools": 3}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `maxSesionTools`"),
            "{err}"
        );
    }
}
