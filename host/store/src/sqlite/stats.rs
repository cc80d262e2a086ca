//! Call statistics in SQLite: the `tool_stats` counters and the recent
//! latencies in `invocations`, pruned to [`LATENCY_WINDOW`] per tool.

use rusqlite::{OptionalExtension, Transaction, params};

use super::{SqliteBackend, not_found, resolve};
use crate::backend::CallBatch;
use crate::error::StoreError;
use crate::stats::{CallCounters, LATENCY_WINDOW, ToolStats};

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

impl SqliteBackend {
    pub(super) fn record_calls_sql(&self, batch: &[CallBatch]) -> Result<usize, StoreError> {
        const OP: &str = "record_calls";
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.write(OP, |tx| {
            let mut dropped = 0;
            for entry in batch {
                let c = &entry.counters;
                if c.total == 0 {
                    continue;
                }
                if let Some(session) = &entry.session {
                    if !super::sessions::add_calls(tx, OP, session, entry)? {
                        dropped += 1;
                    }
                    continue;
                }
                let Some(row) = resolve(tx, OP, &entry.name, &entry.agent)? else {
                    dropped += 1;
                    continue;
                };
                tx.execute(
                    "INSERT INTO tool_stats (tool_id, total_calls, successes, total_latency_us)
                     VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (tool_id) DO UPDATE SET
                        total_calls = total_calls + excluded.total_calls,
                        successes = successes + excluded.successes,
                        total_latency_us = total_latency_us + excluded.total_latency_us",
                    params![
                        row.id,
                        clamp(c.total),
                        clamp(c.successes),
                        clamp(c.latency_sum_us)
                    ],
                )
                .map_err(StoreError::sqlite(OP))?;
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO invocations (tool_id, ok, latency_us) VALUES (?1, 1, ?2)",
                    )
                    .map_err(StoreError::sqlite(OP))?;
                let skip = c.recent_us.len().saturating_sub(LATENCY_WINDOW);
                for latency in c.recent_us.iter().skip(skip) {
                    insert
                        .execute(params![row.id, clamp(*latency)])
                        .map_err(StoreError::sqlite(OP))?;
                }
                tx.execute(
                    "DELETE FROM invocations WHERE tool_id = ?1 AND id <= (
                        SELECT id FROM invocations WHERE tool_id = ?1
                        ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                    params![row.id, LATENCY_WINDOW as i64],
                )
                .map_err(StoreError::sqlite(OP))?;
            }
            Ok(dropped)
        })
    }

    pub(super) fn stats_sql(&self, name: &str, agent: &str) -> Result<ToolStats, StoreError> {
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
