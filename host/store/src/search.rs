//! The tool search index: what `search_tools` ranks, kept in the store so
//! every host on it shares one index and no service is added.
//!
//! Each tool (session, agent and shared tier) has one **document** of three
//! fields, weighted in that order ([`FIELD_WEIGHTS`]):
//! 1. its name split into words (`parse_csv_rows`, `parseCsvRows` and
//!    `csv.parse_rows` all give `parse csv rows`, [`name_words`]);
//! 2. its description;
//! 3. its parameters' names (split the same way) and descriptions.
//!
//! - SQLite: an FTS5 table (`porter unicode61` tokens) over `tool_docs`,
//!   ranked by `bm25()` with the field weights;
//! - PostgreSQL: a generated `tsvector` column (`english`, `setweight` A, B,
//!   C) with a GIN index, ranked by `ts_rank_cd`.
//!
//! A document is written in the transaction that registers the tool (a
//! registration, an import, a promotion, a session tool's forge decision)
//! and goes with the tool's row (`ON DELETE CASCADE` from `tools` and
//! `session_tools`): a deletion, a session's end or expiry removes it in
//! the same transaction. A store migrated from before the index has its
//! tools indexed when it is migrated (on PostgreSQL in the migrating
//! transaction, under the migration lock).
//!
//! Scores are backend-specific (bm25 negated, or `ts_rank_cd`): compare
//! them within one answer only.

use serde_json::Value;

use super::{Registry, StoreError, Tier};

/// The weights of the name words, the description and the parameters.
pub const FIELD_WEIGHTS: [f64; 3] = [10.0, 4.0, 2.0];

/// Most results one search returns.
pub const MAX_SEARCH_LIMIT: usize = 50;

/// Most query terms used (the rest of a long query is ignored).
pub const MAX_QUERY_TERMS: usize = 24;

/// Longest query term kept, in bytes (longer ones are cut).
const MAX_TERM_BYTES: usize = 40;

/// One tool's document in the index (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SearchDoc {
    /// The name split into lowercase words.
    pub words: String,
    /// The description.
    pub description: String,
    /// The parameters' names (as words) and descriptions.
    pub params: String,
}

impl SearchDoc {
    /// The document of tool `name` with `manifest` (its `description` and
    /// `inputSchema.properties`; anything missing is empty).
    pub fn of(name: &str, manifest: &Value) -> Self {
        let description = manifest
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let schema = manifest
            .get("inputSchema")
            .or_else(|| manifest.get("input_schema"));
        SearchDoc {
            words: name_words(name),
            description,
            params: schema.map(params_text).unwrap_or_default(),
        }
    }

    /// The document of tool `name` whose manifest is the JSON `manifest`
    /// (as stored); a manifest that does not parse gives the name only.
    pub(crate) fn of_stored(name: &str, manifest: &str) -> Self {
        match serde_json::from_str::<Value>(manifest) {
            Ok(m) => Self::of(name, &m),
            Err(_) => SearchDoc {
                words: name_words(name),
                ..Default::default()
            },
        }
    }
}

/// The parameters of a JSON Schema as text: each property's name as words
/// and its description.
pub fn params_text(schema: &Value) -> String {
    let mut out = String::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (key, prop) in props {
            push_word(&mut out, &name_words(key));
            if let Some(d) = prop.get("description").and_then(Value::as_str) {
                push_word(&mut out, d);
            }
        }
    }
    out
}

fn push_word(out: &mut String, word: &str) {
    if word.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str(word);
}

/// `name` split into lowercase words: at anything not a letter or digit
/// (`_`, `.`, `-`), at a lower-to-upper change (`parseCsv`), before the
/// last capital of a run followed by a lower-case letter (`CSVRows`), and
/// between letters and digits (`sha256` stays one word: digits after
/// letters join them).
pub fn name_words(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|j| chars.get(j)) {
            let next = chars.get(i + 1).copied();
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase()
                    && c.is_uppercase()
                    && next.is_some_and(char::is_lowercase))
                || (prev.is_numeric() && c.is_alphabetic());
            if boundary && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.join(" ")
}

/// The terms of a query: its words as [`name_words`] splits them, ASCII
/// letters and digits only (so no term can carry FTS or tsquery syntax),
/// without duplicates, at most [`MAX_QUERY_TERMS`].
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in name_words(query).split(' ') {
        let mut term: String = word.chars().filter(char::is_ascii_alphanumeric).collect();
        term.truncate(MAX_TERM_BYTES);
        if !term.is_empty() && !terms.contains(&term) {
            terms.push(term);
            if terms.len() == MAX_QUERY_TERMS {
                break;
            }
        }
    }
    terms
}

/// Which tiers a search may look in (the caller's grants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchTiers {
    /// The caller's session's tools.
    pub session: bool,
    /// The caller's agent-tier tools.
    pub agent: bool,
    /// The shared tier.
    pub shared: bool,
}

impl SearchTiers {
    /// Every tier.
    pub const ALL: SearchTiers = SearchTiers {
        session: true,
        agent: true,
        shared: true,
    };

    /// Only `tier`, if `self` allows it.
    pub fn only(self, tier: Tier) -> SearchTiers {
        SearchTiers {
            session: self.session && tier == Tier::Session,
            agent: self.agent && tier == Tier::Agent,
            shared: self.shared && tier == Tier::Shared,
        }
    }

    fn any(self) -> bool {
        self.session || self.agent || self.shared
    }
}

/// A search of the tools one caller may see.
#[derive(Debug, Clone, Copy)]
pub struct SearchQuery<'a> {
    /// What the caller looks for, in words.
    pub text: &'a str,
    /// The caller's agent: its agent-tier tools are searched, no other's.
    pub agent: &'a str,
    /// The caller's session: its session tools are searched, no other's.
    pub session: &'a str,
    /// The tiers searched.
    pub tiers: SearchTiers,
    /// Most results (capped at [`MAX_SEARCH_LIMIT`]).
    pub limit: usize,
}

/// One tool found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// Its name.
    pub name: String,
    /// Its tier.
    pub tier: Tier,
    /// Its description, as stored.
    pub description: String,
    /// Its relevance, higher is better (comparable within one answer).
    pub score: f64,
}

/// Most names a session's working set holds (the oldest leave first).
pub const MAX_WORKING_SET: usize = 128;

/// `held` (most recent first) with `added` in front, in their order,
/// each name once, at most `cap`.
pub fn merge_working_set(held: &[String], added: &[String], cap: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(cap.min(held.len() + added.len()));
    for name in added.iter().chain(held) {
        if out.len() == cap {
            break;
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

impl Registry {
    /// The working set of (`agent`, `session`): the tools found, loaded or
    /// forged in it, most recent first (empty when it is not stored).
    pub fn working_set(&self, agent: &str, session: &str) -> Result<Vec<String>, StoreError> {
        self.backend.working_set(agent, session)
    }

    /// Puts `names` at the front of `session`'s working set (stored with
    /// these fields if it is not yet), keeping at most
    /// [`MAX_WORKING_SET`]; returns the new set.
    pub fn add_to_working_set(
        &self,
        session: &super::SessionRecord,
        names: &[String],
    ) -> Result<Vec<String>, StoreError> {
        if names.is_empty() {
            return self.working_set(&session.agent, &session.session);
        }
        self.backend
            .add_to_working_set(session, names, MAX_WORKING_SET)
    }

    /// Up to `limit` of the agent- and shared-tier tools `agent` may call,
    /// most called first (as written so far: calls are written behind),
    /// tools never called left out.
    pub fn most_used(&self, agent: &str, limit: usize) -> Result<Vec<String>, StoreError> {
        self.backend.most_used(agent, limit)
    }

    /// The tools matching `query` that its agent may see in its session, in
    /// the tiers it allows, best first: one per name (the session's tool
    /// shadows the agent's, which shadows the shared one), at most
    /// `query.limit`. No terms, no tiers or a limit of 0: nothing.
    pub fn search_tools(&self, query: &SearchQuery<'_>) -> Result<Vec<SearchHit>, StoreError> {
        let terms = query_terms(query.text);
        let limit = query.limit.min(MAX_SEARCH_LIMIT);
        if terms.is_empty() || !query.tiers.any() || limit == 0 {
            return Ok(Vec::new());
        }
        // Room for the shadowed duplicates dropped below.
        let fetch = limit * 2 + 4;
        let hits = self.backend.search(query, &terms, fetch)?;
        Ok(shadowed(hits, limit))
    }
}

/// `hits` (best first) with one per name, the nearest tier's (session,
/// then agent, then shared) at the best rank any of them had, at most
/// `limit`.
fn shadowed(hits: Vec<SearchHit>, limit: usize) -> Vec<SearchHit> {
    let rank = |t: Tier| match t {
        Tier::Session => 0,
        Tier::Agent => 1,
        Tier::Shared => 2,
    };
    let mut out: Vec<SearchHit> = Vec::new();
    for hit in hits {
        match out.iter_mut().find(|h| h.name == hit.name) {
            Some(kept) if rank(hit.tier) < rank(kept.tier) => {
                let score = kept.score.max(hit.score);
                *kept = SearchHit { score, ..hit };
            }
            Some(_) => {}
            None => out.push(hit),
        }
    }
    out.truncate(limit);
    out
}

/// The FTS5 query for `terms`: each quoted, OR'd (a document matching
/// more terms ranks higher).
pub(crate) fn fts5_query(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The tsquery text for `terms`, OR'd (for `to_tsquery('english', …)`).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn tsquery(terms: &[String]) -> String {
    terms.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_split_into_words() {
        assert_eq!(name_words("parse_csv_rows"), "parse csv rows");
        assert_eq!(name_words("parseCsvRows"), "parse csv rows");
        assert_eq!(name_words("parseCSVRows"), "parse csv rows");
        assert_eq!(name_words("csv.parse-rows"), "csv parse rows");
        assert_eq!(name_words("sha256_hex"), "sha256 hex");
        assert_eq!(name_words("__"), "");
    }

    #[test]
    fn query_terms_carry_no_syntax() {
        assert_eq!(
            query_terms("\"a\" OR b* NEAR(c) -- 'x' | y & !z"),
            vec!["a", "or", "b", "near", "c", "x", "y", "z"]
        );
        assert!(query_terms("***").is_empty());
        let long = "w ".repeat(100) + &"q".repeat(500);
        assert!(query_terms(&long).len() <= MAX_QUERY_TERMS);
        assert!(query_terms(&"q".repeat(500))[0].len() <= MAX_TERM_BYTES);
    }

    #[test]
    fn a_document_has_the_weighted_fields() {
        let doc = SearchDoc::of(
            "slugifyTitle",
            &json!({"description": "Makes a URL slug.",
                    "inputSchema": {"properties": {"maxLength": {"description": "cut here"}}}}),
        );
        assert_eq!(doc.words, "slugify title");
        assert_eq!(doc.description, "Makes a URL slug.");
        assert_eq!(doc.params, "max length cut here");
        assert_eq!(SearchDoc::of_stored("a_b", "not json").words, "a b");
    }

    #[test]
    fn the_working_set_puts_the_newest_first_and_is_bounded() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            merge_working_set(&v(&["a", "b", "c"]), &v(&["c", "d"]), 4),
            v(&["c", "d", "a", "b"])
        );
        assert_eq!(merge_working_set(&v(&["a"]), &v(&["b", "b"]), 1), v(&["b"]));
    }

    #[test]
    fn the_nearest_tier_shadows() {
        let hit = |name: &str, tier, score| SearchHit {
            name: name.into(),
            tier,
            description: String::new(),
            score,
        };
        let out = shadowed(
            vec![
                hit("a", Tier::Shared, 3.0),
                hit("b", Tier::Agent, 2.0),
                hit("a", Tier::Session, 1.0),
            ],
            5,
        );
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].tier, out[0].score), (Tier::Session, 3.0));
    }
}
