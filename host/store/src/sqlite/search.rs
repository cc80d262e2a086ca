//! The search index on SQLite (`store::search`): documents in `tool_docs`,
//! an FTS5 table over them kept by triggers, ranked with `bm25()`.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::SqliteBackend;
use crate::Tier;
use crate::error::StoreError;
use crate::search::{
    FIELD_WEIGHTS, SearchDoc, SearchHit, SearchQuery, fts5_query, merge_working_set,
};
use crate::sessions::SessionRecord;

/// Indexes the agent- or shared-tier tool with row id `tool_id`.
pub(super) fn index_tool(
    tx: &Transaction<'_>,
    op: &'static str,
    tool_id: i64,
    name: &str,
    manifest: &str,
) -> Result<(), StoreError> {
    let doc = SearchDoc::of_stored(name, manifest);
    tx.execute(
        "INSERT INTO tool_docs (tool_id, name, words, description, params) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![tool_id, name, doc.words, doc.description, doc.params],
    )
    .map_err(StoreError::sqlite(op))?;
    Ok(())
}

/// Indexes the session tool (agent, session, name).
pub(super) fn index_session_tool(
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
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![agent, session, name, doc.words, doc.description, doc.params],
    )
    .map_err(StoreError::sqlite(op))?;
    Ok(())
}

/// Indexes the tools that have no document (a store migrated from before
/// the index); returns how many.
pub(super) fn index_missing(conn: &mut Connection) -> Result<usize, StoreError> {
    const OP: &str = "index_tools";
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(StoreError::sqlite(OP))?;
    let tools: Vec<(i64, String, String)> = {
        let mut stmt = tx
            .prepare(
                "SELECT id, name, manifest FROM tools
                 WHERE id NOT IN (SELECT tool_id FROM tool_docs WHERE tool_id IS NOT NULL)",
            )
            .map_err(StoreError::sqlite(OP))?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(StoreError::sqlite(OP))?
            .collect::<Result<_, _>>()
            .map_err(StoreError::sqlite(OP))?
    };
    let sessions: Vec<(String, String, String, String)> = {
        let mut stmt = tx
            .prepare(
                "SELECT s.agent, s.session, s.name, s.manifest FROM session_tools s
                 WHERE NOT EXISTS (SELECT 1 FROM tool_docs d
                     WHERE d.agent = s.agent AND d.session = s.session AND d.name = s.name)",
            )
            .map_err(StoreError::sqlite(OP))?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(StoreError::sqlite(OP))?
            .collect::<Result<_, _>>()
            .map_err(StoreError::sqlite(OP))?
    };
    for (id, name, manifest) in &tools {
        index_tool(&tx, OP, *id, name, manifest)?;
    }
    for (agent, session, name, manifest) in &sessions {
        index_session_tool(&tx, OP, agent, session, name, manifest)?;
    }
    tx.commit().map_err(StoreError::sqlite(OP))?;
    Ok(tools.len() + sessions.len())
}

impl SqliteBackend {
    pub(super) fn search_sql(
        &self,
        q: &SearchQuery<'_>,
        terms: &[String],
        fetch: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        const OP: &str = "search_tools";
        let [w_name, w_desc, w_params] = FIELD_WEIGHTS;
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT d.name, COALESCE(t.tier, 'session'), d.description,
                        bm25(tool_fts, {w_name:.1}, {w_desc:.1}, {w_params:.1}) AS rank
                 FROM tool_fts
                 JOIN tool_docs d ON d.id = tool_fts.rowid
                 LEFT JOIN tools t ON t.id = d.tool_id
                 WHERE tool_fts MATCH ?1
                   AND ((d.tool_id IS NULL AND ?2 AND d.agent = ?3 AND d.session = ?4)
                     OR (t.tier = 'agent' AND ?5 AND t.owner = ?3)
                     OR (t.tier = 'shared' AND ?6))
                 ORDER BY rank, d.name
                 LIMIT ?7"
            ))
            .map_err(StoreError::sqlite(OP))?;
        let rows = stmt
            .query_map(
                params![
                    fts5_query(terms),
                    q.tiers.session,
                    q.agent,
                    q.session,
                    q.tiers.agent,
                    q.tiers.shared,
                    fetch as i64
                ],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, f64>(3)?,
                    ))
                },
            )
            .map_err(StoreError::sqlite(OP))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::sqlite(OP))?;
        rows.into_iter()
            .map(|(name, tier, description, rank)| {
                let tier = Tier::parse(&tier).ok_or_else(|| StoreError::Invalid {
                    op: OP,
                    detail: format!("tool {name:?} has unknown tier {tier:?}"),
                })?;
                Ok(SearchHit {
                    name,
                    tier,
                    description,
                    // bm25() is lower for better matches.
                    score: -rank,
                })
            })
            .collect()
    }

    pub(super) fn working_set_sql(
        &self,
        agent: &str,
        session: &str,
    ) -> Result<Vec<String>, StoreError> {
        const OP: &str = "working_set";
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT working_set FROM sessions WHERE agent = ?1 AND session = ?2",
                params![agent, session],
                |r| r.get(0),
            )
            .optional()
            .map_err(StoreError::sqlite(OP))?;
        parse_set(OP, text.as_deref())
    }

    pub(super) fn add_to_working_set_sql(
        &self,
        s: &SessionRecord,
        names: &[String],
        cap: usize,
    ) -> Result<Vec<String>, StoreError> {
        const OP: &str = "add_to_working_set";
        self.write(OP, |tx| {
            tx.execute(
                "INSERT INTO sessions (agent, session, owner, created_ms, last_used_ms, idle_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (agent, session) DO NOTHING",
                params![
                    s.agent,
                    s.session,
                    s.owner,
                    s.created_ms,
                    s.last_used_ms,
                    s.idle_ms
                ],
            )
            .map_err(StoreError::sqlite(OP))?;
            let held: String = tx
                .query_row(
                    "SELECT working_set FROM sessions WHERE agent = ?1 AND session = ?2",
                    params![s.agent, s.session],
                    |r| r.get(0),
                )
                .map_err(StoreError::sqlite(OP))?;
            let set = merge_working_set(&parse_set(OP, Some(&held))?, names, cap);
            let text = serde_json::to_string(&set)
                .map_err(|source| StoreError::Json { op: OP, source })?;
            tx.execute(
                "UPDATE sessions SET working_set = ?3 WHERE agent = ?1 AND session = ?2",
                params![s.agent, s.session, text],
            )
            .map_err(StoreError::sqlite(OP))?;
            Ok(set)
        })
    }

    pub(super) fn most_used_sql(
        &self,
        agent: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        const OP: &str = "most_used";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT t.name FROM tools t JOIN tool_stats s ON s.tool_id = t.id
                 WHERE ((t.tier = 'agent' AND t.owner = ?1) OR t.tier = 'shared')
                   AND s.total_calls > 0
                 ORDER BY s.total_calls DESC, t.name
                 LIMIT ?2",
            )
            .map_err(StoreError::sqlite(OP))?;
        stmt.query_map(params![agent, limit as i64], |r| r.get(0))
            .map_err(StoreError::sqlite(OP))?
            .collect::<Result<Vec<String>, _>>()
            .map_err(StoreError::sqlite(OP))
    }
}

/// A stored working set (a JSON array of names; none stored: empty).
pub(crate) fn parse_set(op: &'static str, text: Option<&str>) -> Result<Vec<String>, StoreError> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(t).map_err(|source| StoreError::Json { op, source }),
    }
}
