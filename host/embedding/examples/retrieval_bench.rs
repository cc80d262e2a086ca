//! The retrieval-quality bench of tool discovery (docs/src/discovery.md,
//! "Retrieval quality"): recall@1/5/10 of
//! (a) a plain BM25 over each tool's whole text (tests/support/bm25.rs),
//!     the same three fields temper-store indexes ([`SearchDoc::of`]) in one;
//! (b) the lexical ranker of `search_tools` itself: a temper-store SQLite
//!     store in a temporary directory with every tool registered in the
//!     shared tier, searched with [`Registry::search_tools`] (its FTS5
//!     index, [`FIELD_WEIGHTS`], `query_terms`: no replica);
//! (c) (b) fused with all-MiniLM-L6-v2's cosine ranking by reciprocal rank
//!     fusion (k = 60), the hybrid `search_tools` uses with an embedder.
//!
//! ```text
//! bash scripts/embedding-model.sh && bash scripts/retrieval-sets.sh
//! cargo build --release --locked --offline --workspace --exclude temper-py --benches --examples
//! target/release/examples/retrieval_bench \
//!     target/bench-data/bfcl-simple-python.json target/bench-data/bfcl-multiple.json \
//!     target/bench-data/bfcl-live-simple.json host/embedding/tests/fixtures/paraphrase.json
//! ```
//! Set files: `{"name"?, "tools": [{"name", "description", "params"?: {name: description}}],
//! "queries": [{"query", "tool"}]}`.

#[path = "../tests/support/bm25.rs"]
mod bm25;

use std::path::PathBuf;
use std::time::Instant;

use serde::Deserialize;
use serde_json::json;
use temper_embedding::{CachedEmbedder, Embedder, LocalEmbedder, tool_text};
use temper_forge::discovery::{fuse_rrf, semantic_ranking};
use temper_store::{
    FIELD_WEIGHTS, MAX_SEARCH_LIMIT, Registry, SearchDoc, SearchQuery, SearchTiers, Tier,
    ToolRecord,
};

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

/// The parameters as a JSON Schema (what a tool's `inputSchema` holds).
fn input_schema(tool: &Tool) -> serde_json::Value {
    let props: serde_json::Map<String, serde_json::Value> = tool
        .params
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!({"description": v.as_str().unwrap_or_default()}),
            )
        })
        .collect();
    json!({"type": "object", "properties": props})
}

/// A tool's whole text for the plain BM25: the same three fields the
/// store indexes ([`SearchDoc::of`]), in one.
fn whole_text(tool: &Tool) -> String {
    let doc = SearchDoc::of(&tool.name, &manifest(tool));
    format!("{} {} {}", doc.words, doc.description, doc.params)
}

fn manifest(tool: &Tool) -> serde_json::Value {
    json!({"name": tool.name, "description": tool.description, "inputSchema": input_schema(tool)})
}

/// (b): the store's own index and ranker — a SQLite store in a temporary
/// directory, every tool registered in the shared tier (one placeholder
/// artifact), searched with [`Registry::search_tools`].
struct StoreIndex {
    registry: Registry,
    _dir: tempfile::TempDir,
}

impl StoreIndex {
    fn new(tools: &[Tool]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(dir.path()).unwrap();
        let artifact = registry
            .put_artifact(b"retrieval bench placeholder")
            .unwrap();
        for t in tools {
            registry
                .register(ToolRecord {
                    name: t.name.clone(),
                    agent_id: Some(AGENT.into()),
                    session_id: None,
                    tier: Tier::Shared,
                    artifact: artifact.clone(),
                    manifest: manifest(t),
                    created_seq: 0,
                })
                .unwrap_or_else(|e| panic!("register {}: {e}", t.name));
        }
        Self {
            registry,
            _dir: dir,
        }
    }

    fn rank(&self, query: &str) -> Vec<String> {
        self.registry
            .search_tools(&SearchQuery {
                text: query,
                agent: AGENT,
                session: AGENT,
                tiers: SearchTiers::ALL,
                limit: MAX_SEARCH_LIMIT,
            })
            .unwrap()
            .into_iter()
            .map(|h| h.name)
            .collect()
    }
}

const AGENT: &str = "bench";

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
            .map(|t| (t.name.clone(), whole_text(t)))
            .collect();
        let plain = bm25::Bm25::new(&whole);
        let fts = StoreIndex::new(&set.tools);
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
        let [wn, wd, wp] = FIELD_WEIGHTS;
        let store = format!("store FTS5 bm25, fields {wn}/{wd}/{wp}");
        let hybrid = "hybrid (store + MiniLM, RRF k=60)".to_string();
        for (ranker, results) in [("plain BM25".to_string(), &a), (store, &b), (hybrid, &c)] {
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
