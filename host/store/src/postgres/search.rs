//! The search index on PostgreSQL (`store::search`): documents in
//! `tool_docs` with a generated, weighted `tsvector` (GIN-indexed), ranked
//! with `ts_rank_cd`.

use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio_postgres::Transaction;

use super::ops::{begin, client, pg};
use crate::Tier;
use crate::error::StoreError;
use crate::search::{SearchDoc, SearchHit, merge_working_set, tsquery};
use crate::sessions::SessionRecord;

/// Indexes the agent- or shared-tier tool with row id `tool_id`.
pub(super) async fn index_tool(
    tx: &Transaction<'_>,
    op: &'static str,
    tool_id: i64,
    name: &str,
    manifest: &str,
) -> Result<(), StoreError> {
    let doc = SearchDoc::of_stored(name, manifest);
    tx.execute(
        "INSERT INTO tool_docs (tool_id, name, words, description, params) VALUES ($1, $2, $3, $4, $5)",
        &[&tool_id, &name, &doc.words, &doc.description, &doc.params],
    )
    .await
    .map_err(pg(op))?;
    Ok(())
}

/// Indexes the session tool (agent, session, name).
pub(super) async fn index_session_tool(
    tx: &Transaction<'_>,
    op: &'static str,
    agent: &str,
    session: &str,
    name: &str,
    manifest: &str,
) -> Result<(), StoreError> {
    let doc = SearchDoc::of_stored(name, manifest);
    tx.execute(
        "INSERT INTO tool_docs (agent, session, name, words, description, params)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &agent,
            &session,
            &name,
            &doc.words,
            &doc.description,
            &doc.params,
        ],
    )
    .await
    .map_err(pg(op))?;
    Ok(())
}

/// Indexes the tools that have no document (a database migrated from
/// before the index) in `tx`; returns how many.
pub(super) async fn index_missing_in(tx: &Transaction<'_>) -> Result<usize, StoreError> {
    const OP: &str = "index_tools";
    let tools = tx
        .query(
            "SELECT id, name, manifest FROM tools t
             WHERE NOT EXISTS (SELECT 1 FROM tool_docs d WHERE d.tool_id = t.id)",
            &[],
        )
        .await
        .map_err(pg(OP))?;
    let sessions = tx
        .query(
            "SELECT s.agent, s.session, s.name, s.manifest FROM session_tools s
             WHERE NOT EXISTS (SELECT 1 FROM tool_docs d
                 WHERE d.agent = s.agent AND d.session = s.session AND d.name = s.name)",
            &[],
        )
        .await
        .map_err(pg(OP))?;
    for r in &tools {
        index_tool(tx, OP, r.get(0), r.get(1), r.get(2)).await?;
    }
    for r in &sessions {
        index_session_tool(tx, OP, r.get(0), r.get(1), r.get(2), r.get(3)).await?;
    }
    Ok(tools.len() + sessions.len())
}

/// What [`search`] looks for (owned, for the backend's runtime).
#[derive(Debug)]
pub(super) struct OwnedSearch {
    pub(super) terms: Vec<String>,
    pub(super) agent: String,
    pub(super) session: String,
    pub(super) tiers: crate::SearchTiers,
    pub(super) fetch: usize,
}

pub(super) async fn search(
    pool: Pool,
    loc: Arc<str>,
    q: Arc<OwnedSearch>,
) -> Result<Vec<SearchHit>, StoreError> {
    const OP: &str = "search_tools";
    let c = client(&pool, OP, &loc).await?;
    // Weights {D, C, B, A}: parameters (C), description (B), name words (A)
    // in the ratio of `FIELD_WEIGHTS`.
    let rows = c
        .query(
            "SELECT d.name, COALESCE(t.tier, 'session'), d.description,
                    ts_rank_cd('{0.0, 0.2, 0.4, 1.0}', d.doc, q)::FLOAT8 AS rank
             FROM tool_docs d
             CROSS JOIN to_tsquery('english', $1) AS q
             LEFT JOIN tools t ON t.id = d.tool_id
             WHERE d.doc @@ q
               AND ((d.tool_id IS NULL AND $2 AND d.agent = $3 AND d.session = $4)
                 OR (t.tier = 'agent' AND $5 AND t.owner = $3)
                 OR (t.tier = 'shared' AND $6))
             ORDER BY rank DESC, d.name
             LIMIT $7",
            &[
                &tsquery(&q.terms),
                &q.tiers.session,
                &q.agent,
                &q.session,
                &q.tiers.agent,
                &q.tiers.shared,
                &(q.fetch as i64),
            ],
        )
        .await
        .map_err(pg(OP))?;
    rows.iter()
        .map(|r| {
            let (name, tier): (String, String) = (r.get(0), r.get(1));
            let tier = Tier::parse(&tier).ok_or_else(|| StoreError::Invalid {
                op: OP,
                detail: format!("tool {name:?} has unknown tier {tier:?}"),
            })?;
            Ok(SearchHit {
                name,
                tier,
                description: r.get(2),
                score: r.get(3),
            })
        })
        .collect()
}

/// A stored working set (a JSON array of names; none stored: empty).
fn parse_set(op: &'static str, text: Option<&str>) -> Result<Vec<String>, StoreError> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(t).map_err(|source| StoreError::Json { op, source }),
    }
}

pub(super) async fn working_set(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    session: String,
) -> Result<Vec<String>, StoreError> {
    const OP: &str = "working_set";
    let c = client(&pool, OP, &loc).await?;
    let row = c
        .query_opt(
            "SELECT working_set FROM sessions WHERE agent = $1 AND session = $2",
            &[&agent, &session],
        )
        .await
        .map_err(pg(OP))?;
    let text: Option<String> = row.map(|r| r.get(0));
    parse_set(OP, text.as_deref())
}

pub(super) async fn add_to_working_set(
    pool: Pool,
    loc: Arc<str>,
    s: Arc<(SessionRecord, Vec<String>, usize)>,
) -> Result<Vec<String>, StoreError> {
    const OP: &str = "add_to_working_set";
    let (s, names, cap) = (&s.0, &s.1, s.2);
    let mut c = client(&pool, OP, &loc).await?;
    let tx = begin(&mut c, OP).await?;
    tx.execute(
        "INSERT INTO sessions (agent, session, owner, created_ms, last_used_ms, idle_ms)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (agent, session) DO NOTHING",
        &[
            &s.agent,
            &s.session,
            &s.owner,
            &s.created_ms,
            &s.last_used_ms,
            &s.idle_ms,
        ],
    )
    .await
    .map_err(pg(OP))?;
    // The row lock serializes two hosts adding to one session.
    let held: String = tx
        .query_one(
            "SELECT working_set FROM sessions WHERE agent = $1 AND session = $2 FOR UPDATE",
            &[&s.agent, &s.session],
        )
        .await
        .map_err(pg(OP))?
        .get(0);
    let set = merge_working_set(&parse_set(OP, Some(&held))?, names, cap);
    let text = serde_json::to_string(&set).map_err(|source| StoreError::Json { op: OP, source })?;
    tx.execute(
        "UPDATE sessions SET working_set = $3 WHERE agent = $1 AND session = $2",
        &[&s.agent, &s.session, &text],
    )
    .await
    .map_err(pg(OP))?;
    tx.commit().await.map_err(pg(OP))?;
    Ok(set)
}

pub(super) async fn most_used(
    pool: Pool,
    loc: Arc<str>,
    agent: String,
    limit: usize,
) -> Result<Vec<String>, StoreError> {
    const OP: &str = "most_used";
    let c = client(&pool, OP, &loc).await?;
    let rows = c
        .query(
            "SELECT t.name FROM tools t JOIN tool_stats s ON s.tool_id = t.id
             WHERE ((t.tier = 'agent' AND t.owner = $1) OR t.tier = 'shared')
               AND s.total_calls > 0
             ORDER BY s.total_calls DESC, t.name
             LIMIT $2",
            &[&agent, &(limit as i64)],
        )
        .await
        .map_err(pg(OP))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
