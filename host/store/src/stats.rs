//! Per-tool call statistics: exact counters over all calls, and the last
//! [`LATENCY_WINDOW`] latencies for the p95, pruned on every insert.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How many recent per-call latencies are kept per tool for the p95.
pub const LATENCY_WINDOW: usize = 1000;

/// Call statistics of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStats {
    /// Calls recorded (all time).
    pub total_calls: u64,
    /// Calls that succeeded (all time).
    pub successes: u64,
    /// `successes / total_calls`; 0 when there were no calls.
    pub success_rate: f64,
    /// Mean latency over all calls, in milliseconds; 0 when there were none.
    pub avg_latency_ms: f64,
    /// 95th-percentile latency (nearest rank) over the last
    /// [`LATENCY_WINDOW`] calls, in milliseconds; 0 when there were none.
    pub p95_latency_ms: f64,
}

impl ToolStats {
    /// The figures from exact counters and the recent latencies (µs, any
    /// order): the p95 is the nearest rank over `recent_us`.
    pub fn from_counts(
        total: u64,
        successes: u64,
        latency_sum_us: u64,
        mut recent_us: Vec<u64>,
    ) -> Self {
        recent_us.sort_unstable();
        let p95_us = match recent_us.len() {
            0 => 0,
            // Nearest rank: the smallest value with at least 95% at or below it.
            n => recent_us[(n * 95).div_ceil(100).max(1) - 1],
        };
        let per_call = |x: u64| {
            if total > 0 {
                x as f64 / total as f64
            } else {
                0.0
            }
        };
        ToolStats {
            total_calls: total,
            successes,
            success_rate: per_call(successes),
            avg_latency_ms: per_call(latency_sum_us) / 1000.0,
            p95_latency_ms: p95_us as f64 / 1000.0,
        }
    }
}

/// Exact counters and the last [`LATENCY_WINDOW`] latencies of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallCounters {
    /// Calls recorded.
    pub total: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Sum of all latencies, µs.
    pub latency_sum_us: u64,
    /// The most recent latencies, µs, oldest first.
    pub recent_us: VecDeque<u64>,
}

impl CallCounters {
    /// Records one call.
    pub fn record(&mut self, ok: bool, latency_us: u64) {
        self.total += 1;
        self.successes += ok as u64;
        self.latency_sum_us = self.latency_sum_us.saturating_add(latency_us);
        if self.recent_us.len() == LATENCY_WINDOW {
            self.recent_us.pop_front();
        }
        self.recent_us.push_back(latency_us);
    }

    /// Adds what `mine` recorded since `base` (an earlier copy of the same
    /// counters) to these counters: how two holders of one tool's counters
    /// (two processes on one session) merge without losing calls.
    pub fn add_since(&mut self, base: &CallCounters, mine: &CallCounters) {
        let new_calls = mine.total.saturating_sub(base.total);
        self.total = self.total.saturating_add(new_calls);
        self.successes = self
            .successes
            .saturating_add(mine.successes.saturating_sub(base.successes));
        self.latency_sum_us = self
            .latency_sum_us
            .saturating_add(mine.latency_sum_us.saturating_sub(base.latency_sum_us));
        let keep = usize::try_from(new_calls).unwrap_or(usize::MAX);
        let skip = mine.recent_us.len().saturating_sub(keep);
        for &latency in mine.recent_us.iter().skip(skip) {
            if self.recent_us.len() == LATENCY_WINDOW {
                self.recent_us.pop_front();
            }
            self.recent_us.push_back(latency);
        }
    }

    /// The same figures the store reports for persisted tools.
    pub fn stats(&self) -> ToolStats {
        ToolStats::from_counts(
            self.total,
            self.successes,
            self.latency_sum_us,
            self.recent_us.iter().copied().collect(),
        )
    }
}
