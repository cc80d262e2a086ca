//! [`MemoryIndex`]: the search index for documents that are not in the
//! store (the hub's tools), in an in-memory SQLite database with the same
//! FTS5 table, tokenizer and `bm25()` weights as the store's index, so a
//! hub tool and a forged tool are ranked alike.

use std::sync::Mutex;

use rusqlite::{Connection, params};

use crate::error::StoreError;
use crate::search::{FIELD_WEIGHTS, SearchDoc, fts5_query, query_terms};

/// An in-memory full-text index of named documents (see the module docs).
/// Built once per set of documents; `Send + Sync`.
#[derive(Debug)]
pub struct MemoryIndex {
    conn: Mutex<Connection>,
    len: usize,
}

impl MemoryIndex {
    /// An index of `docs` (name, document).
    pub fn new(docs: &[(String, SearchDoc)]) -> Result<MemoryIndex, StoreError> {
        const OP: &str = "memory_index";
        let conn = Connection::open_in_memory().map_err(StoreError::sqlite(OP))?;
        conn.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5 (
                 name UNINDEXED, words, description, params, tokenize = 'porter unicode61'
             );",
        )
        .map_err(StoreError::sqlite(OP))?;
        {
            let mut insert = conn
                .prepare(
                    "INSERT INTO docs (name, words, description, params) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(StoreError::sqlite(OP))?;
            for (name, doc) in docs {
                insert
                    .execute(params![name, doc.words, doc.description, doc.params])
                    .map_err(StoreError::sqlite(OP))?;
            }
        }
        Ok(MemoryIndex {
            conn: Mutex::new(conn),
            len: docs.len(),
        })
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The documents matching `query` (its [`query_terms`]), best first, as
    /// (name, score), higher better; at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<(String, f64)>, StoreError> {
        const OP: &str = "memory_search";
        let terms = query_terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let [w_name, w_desc, w_params] = FIELD_WEIGHTS;
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT name, bm25(docs, 0.0, {w_name:.1}, {w_desc:.1}, {w_params:.1}) AS rank
                 FROM docs WHERE docs MATCH ?1 ORDER BY rank, name LIMIT ?2"
            ))
            .map_err(StoreError::sqlite(OP))?;
        stmt.query_map(params![fts5_query(&terms), limit as i64], |r| {
            Ok((r.get::<_, String>(0)?, -r.get::<_, f64>(1)?))
        })
        .map_err(StoreError::sqlite(OP))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite(OP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_like_the_store() {
        let doc = |name: &str, description: &str| {
            (
                name.to_owned(),
                SearchDoc {
                    words: crate::name_words(name),
                    description: description.into(),
                    params: String::new(),
                },
            )
        };
        let index = MemoryIndex::new(&[
            doc("github__search_issues", "Search issues in a repository."),
            doc("fs__read_file", "Read a file from disk; issues none."),
        ])
        .unwrap();
        let hits = index.search("find repository issues", 5).unwrap();
        assert_eq!(hits[0].0, "github__search_issues");
        assert_eq!(hits.len(), 2);
        assert!(index.search("\"NEAR(", 5).unwrap().is_empty());
    }
}
