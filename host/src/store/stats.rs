//! Per-tool call statistics: exact counters over all calls, and the last
//! [`LATENCY_WINDOW`] latencies for the p95, pruned on every insert.

use std::collections::VecDeque;

use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use super::{Registry, StoreError, not_found, resolve};

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

/// Writes `counts` as the first statistics of the tool row `tool_id` (a
/// promoted tool keeps the calls it had in the session tier).
pub(super) fn insert_counts(
    tx: &Transaction<'_>,
    op: &'static str,
    tool_id: i64,
    counts: &CallCounters,
) -> Result<(), StoreError> {
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    if counts.total == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO tool_stats (tool_id, total_calls, successes, total_latency_us)
         VALUES (?1, ?2, ?3, ?4)",
        params![
            tool_id,
            clamp(counts.total),
            clamp(counts.successes),
            clamp(counts.latency_sum_us)
        ],
    )
    .map_err(StoreError::sqlite(op))?;
    // Only the latencies of the recent calls are kept (their outcome is
    // in the counters): each is recorded as it was measured.
    for latency in counts.recent_us.iter().rev().take(LATENCY_WINDOW).rev() {
        tx.execute(
            "INSERT INTO invocations (tool_id, ok, latency_us) VALUES (?1, 1, ?2)",
            params![tool_id, clamp(*latency)],
        )
        .map_err(StoreError::sqlite(op))?;
    }
    Ok(())
}

impl Registry {
    /// Records one call of the tool `name` as `agent` sees it (see
    /// [`Registry::get`]). Failure details belong in an `invocation_failure`
    /// audit entry ([`Registry::append_audit`]).
    pub fn record_invocation(
        &self,
        name: &str,
        agent: &str,
        ok: bool,
        latency_us: u64,
    ) -> Result<(), StoreError> {
        const OP: &str = "record_invocation";
        let latency = i64::try_from(latency_us).unwrap_or(i64::MAX);
        self.write(OP, |tx| {
            let row = resolve(tx, OP, name, agent)?.ok_or_else(|| not_found(OP, name, agent))?;
            tx.execute(
                "INSERT INTO tool_stats (tool_id, total_calls, successes, total_latency_us)
                 VALUES (?1, 1, ?2, ?3)
                 ON CONFLICT (tool_id) DO UPDATE SET
                    total_calls = total_calls + 1,
                    successes = successes + excluded.successes,
                    total_latency_us = total_latency_us + excluded.total_latency_us",
                params![row.id, ok as i64, latency],
            )
            .map_err(StoreError::sqlite(OP))?;
            tx.execute(
                "INSERT INTO invocations (tool_id, ok, latency_us) VALUES (?1, ?2, ?3)",
                params![row.id, ok as i64, latency],
            )
            .map_err(StoreError::sqlite(OP))?;
            tx.execute(
                "DELETE FROM invocations WHERE tool_id = ?1 AND id <= (
                    SELECT id FROM invocations WHERE tool_id = ?1
                    ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                params![row.id, LATENCY_WINDOW as i64],
            )
            .map_err(StoreError::sqlite(OP))?;
            Ok(())
        })
    }

    /// Call statistics of the tool `name` as `agent` sees it.
    pub fn stats(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
        const OP: &str = "stats";
        let mut conn = self.conn();
        // One read transaction: counters and latencies from the same snapshot.
        let tx = conn.transaction().map_err(StoreError::sqlite(OP))?;
        let row = resolve(&tx, OP, name, agent)?.ok_or_else(|| not_found(OP, name, agent))?;
        let (total, successes, total_latency_us): (i64, i64, i64) = tx
            .query_row(
                "SELECT total_calls, successes, total_latency_us FROM tool_stats WHERE tool_id = ?1",
                [row.id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(StoreError::sqlite(OP))?
            .unwrap_or((0, 0, 0));
        let latencies = {
            let mut stmt = tx
                .prepare("SELECT latency_us FROM invocations WHERE tool_id = ?1")
                .map_err(StoreError::sqlite(OP))?;
            stmt.query_map([row.id], |r| r.get::<_, i64>(0))
                .map_err(StoreError::sqlite(OP))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(StoreError::sqlite(OP))?
        };
        Ok(ToolStats::from_counts(
            total as u64,
            successes as u64,
            total_latency_us as u64,
            latencies.into_iter().map(|l| l as u64).collect(),
        ))
    }
}
