//! The retrieval-quality bench of tool discovery (docs/src/discovery.md,
//! "Retrieval quality"): recall@1/5/10 of
//! (a) a plain BM25 over each tool's whole text (tests/support/bm25.rs);
//! (b) the lexical ranker of `search_tools`: SQLite FTS5 `bm25()` over three
//!     fields — name words, description, parameters — weighted 10/4/2, with
//!     the `porter unicode61` tokenizer and OR'd query terms (what
//!     temper-store's index does);
//! (c) (b) fused with all-MiniLM-L6-v2's cosine ranking by reciprocal rank
//!     fusion (k = 60), the hybrid `search_tools` uses with `--embeddings`.
//!
//! ```text
//! bash scripts/embedding-model.sh && bash scripts/retrieval-sets.sh
//! cargo run --release -p temper-embedding --example retrieval_bench -- \
//!     target/bench-data/bfcl-simple-python.json target/bench-data/bfcl-multiple.json \
//!     target/bench-data/bfcl-live-simple.json host/embedding/tests/fixtures/paraphrase.json
//! ```
//! Set files: `{"name"?, "tools": [{"name", "description", "params"?: {name: description}}],
//! "queries": [{"query", "tool"}]}`.

#[path = "../tests/support/bm25.rs"]
mod bm25;

use std::path::PathBuf;
use std::time::Instant;

use rusqlite::{Connection, params};
use serde::Deserialize;
use temper_embedding::{CachedEmbedder, Embedder, LocalEmbedder, tool_text};
use temper_forge::discovery::{fuse_rrf, semantic_ranking};

#[derive(Deserialize)]
struct Set {
    #[serde(default)]
    name: Option<String>,
    tools: Vec<Tool>,
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    params: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    tool: String,
}

/// `name` split into lowercase words (as temper-store's `name_words`).
fn name_words(name: &str) -> String {
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
        if i > 0 {
            let (prev, next) = (chars[i - 1], chars.get(i + 1).copied());
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

fn params_text(tool: &Tool) -> String {
    let mut parts = Vec::new();
    for (k, v) in &tool.params {
        parts.push(name_words(k));
        if let Some(d) = v.as_str().filter(|d| !d.is_empty()) {
            parts.push(d.to_string());
        }
    }
    parts.join(" ")
}

/// (b): the store index's FTS5 ranking, in memory.
struct Fts5(Connection);

impl Fts5 {
    fn new(tools: &[Tool]) -> Self {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5 (name UNINDEXED, words, description, params, tokenize = 'porter unicode61');",
        )
        .unwrap();
        for t in tools {
            conn.execute(
                "INSERT INTO docs (name, words, description, params) VALUES (?1, ?2, ?3, ?4)",
                params![t.name, name_words(&t.name), t.description, params_text(t)],
            )
            .unwrap();
        }
        Self(conn)
    }

    fn rank(&self, query: &str) -> Vec<String> {
        let mut terms: Vec<String> = Vec::new();
        for word in name_words(query).split(' ') {
            let mut term: String = word.chars().filter(char::is_ascii_alphanumeric).collect();
            term.truncate(40);
            if !term.is_empty() && !terms.contains(&term) && terms.len() < 24 {
                terms.push(term);
            }
        }
        if terms.is_empty() {
            return Vec::new();
        }
        let q = terms
            .iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = self
            .0
            .prepare_cached(
                "SELECT name FROM docs WHERE docs MATCH ?1 ORDER BY bm25(docs, 0.0, 10.0, 4.0, 2.0), name LIMIT 50",
            )
            .unwrap();
        stmt.query_map([q], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }
}

fn recall(k: usize, results: &[(Vec<String>, &str)]) -> f64 {
    let hits = results
        .iter()
        .filter(|(r, want)| r.iter().take(k).any(|n| n == want))
        .count();
    hits as f64 / results.len().max(1) as f64
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if args.is_empty() {
        eprintln!("usage: retrieval_bench SET.json...");
        std::process::exit(2);
    }
    let model_dir = std::env::var_os("TEMPER_EMBEDDING_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/models/all-minilm-l6-v2")
        });
    let started = Instant::now();
    let model = LocalEmbedder::load(&model_dir).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("model loaded in {:?}", started.elapsed());

    println!("| set | tools | queries | ranker | recall@1 | recall@5 | recall@10 |");
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
    let mut timings = Vec::new();
    for path in &args {
        let set: Set = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let name = set
            .name
            .clone()
            .unwrap_or_else(|| path.file_stem().unwrap().to_string_lossy().into_owned());
        let docs: Vec<(String, String)> = set
            .tools
            .iter()
            .map(|t| (t.name.clone(), tool_text(&t.name, &t.description)))
            .collect();
        let whole: Vec<(String, String)> = set
            .tools
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    format!(
                        "{} {} {}",
                        name_words(&t.name),
                        t.description,
                        params_text(t)
                    ),
                )
            })
            .collect();
        let plain = bm25::Bm25::new(&whole);
        let fts = Fts5::new(&set.tools);
        let cached = CachedEmbedder::new(Shared(&model), docs.len() + set.queries.len() + 16);

        // Embed every tool once (timed), as registration would.
        let t0 = Instant::now();
        let texts: Vec<&str> = docs.iter().map(|(_, t)| t.as_str()).collect();
        cached.embed(&texts).unwrap();
        let per_tool = t0.elapsed() / docs.len().max(1) as u32;

        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        let t1 = Instant::now();
        for q in &set.queries {
            let lexical = fts.rank(&q.query);
            let semantic = semantic_ranking(&cached, &q.query, &docs).unwrap();
            let fused: Vec<String> = fuse_rrf(&[lexical.as_slice(), semantic.as_slice()])
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            a.push((plain.rank(&q.query), q.tool.as_str()));
            b.push((lexical, q.tool.as_str()));
            c.push((fused, q.tool.as_str()));
        }
        let per_query = t1.elapsed() / set.queries.len().max(1) as u32;
        for (ranker, results) in [
            ("plain BM25", &a),
            ("FTS5 bm25, fields 10/4/2", &b),
            ("hybrid (FTS5 + MiniLM, RRF k=60)", &c),
        ] {
            println!(
                "| {name} | {} | {} | {ranker} | {:.3} | {:.3} | {:.3} |",
                docs.len(),
                set.queries.len(),
                recall(1, results),
                recall(5, results),
                recall(10, results)
            );
        }
        timings.push((name, per_tool, per_query));
    }
    println!();
    for (name, per_tool, per_query) in timings {
        println!(
            "- {name}: embedding {per_tool:?} per tool (batches of 32); hybrid search {per_query:?} per query"
        );
    }
}

/// The one loaded model, shared by each set's cache.
struct Shared<'a>(&'a LocalEmbedder);

impl Embedder for Shared<'_> {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, temper_embedding::EmbedError> {
        self.0.embed(texts)
    }
}
