//! The session tier: tools that live in memory for one (agent, session) and
//! are discarded with it, with their call statistics.
//!
//! A [`SessionSnapshot`] lets a host whose "session" outlives one process
//! (the `temper` CLI keeps one per `--session`) save and restore the tier
//! explicitly. It carries raw source only when the tool's manifest does
//! (`persistSandboxSource`); otherwise source kept in memory is dropped from
//! the snapshot and must be handed back for a promotion panel.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::manifest::ToolManifest;
use crate::store::ArtifactId;
pub use crate::store::CallCounters;

/// One session-tier tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTool {
    /// Its artifact (already in the store's artifact directory).
    pub artifact: ArtifactId,
    /// Its manifest (source only with `persistSandboxSource`).
    pub manifest: ToolManifest,
    /// Source kept in memory for the promotion panel; never serialized.
    #[serde(skip)]
    pub source_in_memory: Option<String>,
    /// Its calls.
    pub counters: CallCounters,
}

/// The tools of one (agent, session), by name.
pub type SessionTools = BTreeMap<String, SessionTool>;

/// A saved session tier (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// Its tools, by name.
    pub tools: SessionTools,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LATENCY_WINDOW;

    #[test]
    fn counters_give_rate_mean_and_p95() {
        let mut c = CallCounters::default();
        for ms in 1..=100u64 {
            c.record(ms % 10 != 0, ms * 1000);
        }
        let s = c.stats();
        assert_eq!(s.total_calls, 100);
        assert_eq!(s.successes, 90);
        assert!((s.success_rate - 0.9).abs() < 1e-12);
        assert!((s.avg_latency_ms - 50.5).abs() < 1e-9);
        assert_eq!(s.p95_latency_ms, 95.0);
        assert_eq!(CallCounters::default().stats().p95_latency_ms, 0.0);
    }

    #[test]
    fn latency_window_is_bounded() {
        let mut c = CallCounters::default();
        for i in 0..(LATENCY_WINDOW as u64 + 10) {
            c.record(true, i);
        }
        assert_eq!(c.recent_us.len(), LATENCY_WINDOW);
        assert_eq!(c.recent_us.front(), Some(&10));
        assert_eq!(c.total, LATENCY_WINDOW as u64 + 10);
    }
}
