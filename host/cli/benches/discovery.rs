//! Discovery benchmark (issue 46): what `tools/list` and `search_tools`
//! cost as the tools a caller may see grow. Run with
//! `cargo bench -p temper-cli --bench discovery` (the `temper` binary of
//! this workspace's release build must be built: `cargo build --release`).
//!
//! For each N (`DISCOVERY_NS`, default 10,100,1000,10000), a fresh store:
//! 1. one tool (the slugify seed) forged into the session, the other N−1
//!    registered in the shared tier from its artifact, each with its own
//!    name, description and parameters (from a vocabulary of 40 verbs and
//!    60 nouns), so the index holds N documents;
//! 2. **search in-process**: [`Forge::search_tools`] for 20 queries, 10
//!    rounds: p50 and p99;
//! 3. **over stdio**: `temper mcp` on the store, `tools/list` (the tokens,
//!    characters / 4, of the whole list and of its tools beyond the
//!    built-ins) and `search_tools` for the same queries, 5 rounds, timed
//!    from the request's write to the answer's read: p50 and p99;
//! 4. **index bytes per tool**: the pages of `tool_docs` and the FTS5
//!    tables (`dbstat`) divided by N;
//! 5. **forge cost**: M = 8 new tools forged into the session (p50), and
//!    the index's part of it: the same documents inserted into the index
//!    in a transaction that is rolled back (p50), as a share of the forge;
//!    the forge without indexing is the difference;
//! 6. **embedding time per tool**: when the local model is there
//!    (`target/models/all-minilm-l6-v2`, `scripts/embedding-model.sh`, or
//!    `TEMPER_EMBEDDING_MODEL_DIR`), the texts `search_tools` embeds
//!    ([`temper_embedding::tool_text`]: name words and description) of the
//!    first min(N, 256) tools, embedded by
//!    [`temper_embedding::LocalEmbedder`] in one call (batches of 32),
//!    divided by their number; else "skipped: no model".
//!
//! The report goes to `target/bench-discovery.md` (and stdout), with each
//! figure's ratio to N = 10 in the same run.

/// The allocator of the `temper` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::Runtime;
use temper::forge::builtins::is_builtin;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeConfig, ForgeContext, SearchRequest, SearchScope};
use temper::store::{Registry, SearchDoc, SearchTiers, Tier, ToolRecord};

const DEFAULT_NS: &[usize] = &[10, 100, 1000, 10000];
const AGENT: &str = "bench";
const SESSION: &str = "discovery";
const ROUNDS_IN_PROCESS: usize = 10;
const ROUNDS_STDIO: usize = 5;
const NEW_TOOLS: usize = 8;
const EMBED_SAMPLE: usize = 256;

const VERBS: [&str; 40] = [
    "parse",
    "render",
    "merge",
    "split",
    "rotate",
    "index",
    "archive",
    "tally",
    "shuffle",
    "encode",
    "decode",
    "trim",
    "rank",
    "convert",
    "validate",
    "format",
    "compress",
    "extract",
    "filter",
    "sort",
    "count",
    "hash",
    "sign",
    "verify",
    "fetch",
    "resize",
    "translate",
    "summarize",
    "classify",
    "normalize",
    "dedupe",
    "join",
    "diff",
    "patch",
    "schedule",
    "escape",
    "mask",
    "round",
    "score",
    "slice",
];
const NOUNS: [&str; 60] = [
    "csv",
    "json",
    "yaml",
    "xml",
    "markdown",
    "html",
    "url",
    "email",
    "phone",
    "date",
    "time",
    "currency",
    "invoice",
    "ledger",
    "widget",
    "sprite",
    "playlist",
    "recipe",
    "roster",
    "voucher",
    "parcel",
    "image",
    "audio",
    "video",
    "pdf",
    "table",
    "matrix",
    "vector",
    "graph",
    "tree",
    "queue",
    "stack",
    "token",
    "password",
    "address",
    "postcode",
    "isbn",
    "iban",
    "color",
    "temperature",
    "distance",
    "weight",
    "volume",
    "speed",
    "angle",
    "timezone",
    "locale",
    "language",
    "sentence",
    "paragraph",
    "word",
    "number",
    "fraction",
    "percent",
    "uuid",
    "slug",
    "header",
    "cookie",
    "query",
    "path",
];
const QUERIES: [&str; 20] = [
    "make a url friendly slug from a title",
    "parse csv rows",
    "convert temperature celsius fahrenheit",
    "validate an email address",
    "format a date in a timezone",
    "hash a password",
    "extract words from a sentence",
    "sort a table by a column",
    "compress an image",
    "translate a paragraph",
    "count tokens",
    "normalize a phone number",
    "diff two json documents",
    "resize video",
    "escape html",
    "round currency amounts",
    "verify an iban",
    "summarize markdown",
    "dedupe a queue",
    "score a playlist",
];

fn seed() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("tests/fixtures/seeds/slugify.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn new_request(i: usize) -> Value {
    let mut r = seed();
    r["name"] = json!(format!("fresh_slug_{i}"));
    r["description"] = json!(format!("Fresh slug maker number {i}."));
    let code = r["implementation"]["code"].as_str().unwrap().to_owned();
    r["implementation"]["code"] = json!(format!("const FRESH = {i};\n{code}"));
    r
}

fn spec(i: usize) -> (String, String, Value) {
    let (verb, noun) = (VERBS[i % 40], NOUNS[(i / 40) % 60]);
    let other = NOUNS[(i * 7 + 3) % 60];
    (
        format!("{verb}_{noun}_{i}"),
        format!("{verb}s a {noun} and returns the {other} it yields (tool {i})."),
        json!({"type": "object", "properties": {
            "input": {"type": "string", "description": format!("the {noun}")},
            "options": {"type": "object", "description": format!("how to {verb}")}}}),
    )
}

fn pct(xs: &mut [Duration], p: f64) -> f64 {
    xs.sort();
    if xs.is_empty() {
        return 0.0;
    }
    let at = ((xs.len() as f64 - 1.0) * p).round() as usize;
    xs[at].as_secs_f64() * 1e3
}

fn temper_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("temper")
}

struct Row {
    n: usize,
    list_tokens: usize,
    listed_tokens: usize,
    listed: usize,
    search_p50: f64,
    search_p99: f64,
    stdio_p50: f64,
    stdio_p99: f64,
    index_bytes_per_tool: f64,
    forge_p50: f64,
    index_write_p50: f64,
    /// Milliseconds per tool, when the model was there.
    embed_per_tool: Option<f64>,
}

/// The local model, if it was fetched (`scripts/embedding-model.sh`).
fn load_model() -> Option<temper_embedding::LocalEmbedder> {
    let dir = std::env::var_os("TEMPER_EMBEDDING_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/models/all-minilm-l6-v2")
        });
    if !dir.join("model.safetensors").exists() {
        return None;
    }
    Some(temper_embedding::LocalEmbedder::load(&dir).unwrap_or_else(|e| panic!("{e}")))
}

/// Milliseconds per tool to embed the first min(`n`, [`EMBED_SAMPLE`])
/// tools' texts.
fn embed_per_tool(model: &temper_embedding::LocalEmbedder, n: usize) -> f64 {
    use temper_embedding::Embedder as _;
    let mut texts = vec![temper_embedding::tool_text(
        "slugify",
        seed()["description"].as_str().unwrap_or_default(),
    )];
    for i in 0..n.min(EMBED_SAMPLE).saturating_sub(1) {
        let (name, description, _) = spec(i);
        texts.push(temper_embedding::tool_text(&name, &description));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let vectors = model.embed(&refs).expect("embed");
    let elapsed = t.elapsed();
    assert_eq!(vectors.len(), refs.len());
    elapsed.as_secs_f64() * 1e3 / refs.len() as f64
}

fn measure(n: usize, runtime: &Runtime, model: Option<&temper_embedding::LocalEmbedder>) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let store = Arc::new(Registry::open(&store_dir).unwrap());
    let forge = Forge::builder(runtime.clone(), store.clone())
        .judge(Arc::new(RulesJudge::standard()))
        .config(ForgeConfig {
            max_session_tools: NEW_TOOLS + 2,
            ..ForgeConfig::default()
        })
        .build();
    let ctx = ForgeContext::new(AGENT, SESSION);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let request = temper::request::ForgeRequest::from_json(&seed().to_string()).unwrap();
    rt.block_on(forge.forge(&request, &ctx))
        .expect("forge slugify");
    let template = store
        .session_tools(AGENT, SESSION)
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    for i in 0..n.saturating_sub(1) {
        let (name, description, input) = spec(i);
        let mut manifest = template.manifest.clone();
        manifest["name"] = json!(name);
        manifest["description"] = json!(description);
        manifest["inputSchema"] = input;
        store
            .register(ToolRecord {
                name,
                agent_id: Some(AGENT.into()),
                session_id: None,
                tier: Tier::Shared,
                artifact: template.artifact.clone(),
                manifest,
                created_seq: 0,
            })
            .unwrap();
    }

    // In-process search.
    let scope = SearchScope {
        tiers: SearchTiers::ALL,
        hub: &[],
    };
    let mut times = Vec::new();
    for round in 0..=ROUNDS_IN_PROCESS {
        for q in QUERIES {
            let req = SearchRequest {
                query: q.into(),
                limit: 5,
                tier: None,
                capability: None,
            };
            let t = Instant::now();
            let found = rt.block_on(forge.search_tools(&ctx, &req, scope)).unwrap();
            if round > 0 {
                times.push(t.elapsed());
            }
            assert!(found.len() <= 5);
        }
    }
    let search_p50 = pct(&mut times, 0.5);
    let search_p99 = pct(&mut times, 0.99);

    // Index bytes.
    let conn = rusqlite::Connection::open(store_dir.join("temper.db")).unwrap();
    let index_bytes: i64 = conn
        .query_row(
            "SELECT SUM(pgsize) FROM dbstat WHERE name = 'tool_docs' OR name LIKE 'tool_fts%'
                OR name LIKE 'sqlite_autoindex_tool_docs%'",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);

    // Forge cost, and the index's part of it.
    let mut forges = Vec::new();
    for i in 0..NEW_TOOLS {
        let request =
            temper::request::ForgeRequest::from_json(&new_request(i).to_string()).unwrap();
        let t = Instant::now();
        rt.block_on(forge.forge(&request, &ctx)).expect("forge");
        forges.push(t.elapsed());
    }
    let mut writes = Vec::new();
    for i in 0..NEW_TOOLS {
        let r = new_request(100 + i);
        let doc = SearchDoc::of(r["name"].as_str().unwrap(), &r);
        let t = Instant::now();
        let tx = conn.unchecked_transaction().unwrap();
        tx.execute(
            "INSERT INTO tool_docs (name, words, description, params) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![
                r["name"].as_str().unwrap(),
                doc.words,
                doc.description,
                doc.params
            ],
        )
        .unwrap();
        tx.rollback().unwrap();
        writes.push(t.elapsed());
    }
    drop(conn);
    drop(forge);
    drop(store);

    // Over stdio.
    let mut child = Command::new(temper_binary())
        .args([
            "mcp",
            "--judge",
            "rules",
            "--agent",
            AGENT,
            "--session",
            SESSION,
            "--store",
        ])
        .arg(&store_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("temper mcp (cargo build --release first)");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = 0;
    let mut call = |method: &str, params: Value| -> (Value, Duration) {
        next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": next, "method": method, "params": params});
        let t = Instant::now();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        loop {
            let line = lines.next().unwrap().unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(&json!(next)) {
                return (v, t.elapsed());
            }
        }
    };
    call(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    );
    let (list, _) = call("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap().clone();
    let beyond: Vec<&Value> = tools
        .iter()
        .filter(|t| !is_builtin(t["name"].as_str().unwrap()))
        .collect();
    let listed_tokens: usize = beyond
        .iter()
        .map(|t| t.to_string().chars().count() / 4)
        .sum();
    let listed = beyond.len();
    let list_tokens = list["result"].to_string().chars().count() / 4;
    let mut stdio = Vec::new();
    for round in 0..=ROUNDS_STDIO {
        for q in QUERIES {
            let (r, d) = call(
                "tools/call",
                json!({"name": "search_tools", "arguments": {"query": q, "limit": 5}}),
            );
            assert!(r["result"]["structuredContent"]["tools"].is_array(), "{r}");
            if round > 0 {
                stdio.push(d);
            }
        }
    }
    drop(stdin);
    let _ = child.wait();
    let embed_per_tool = model.map(|m| embed_per_tool(m, n));
    Row {
        n,
        list_tokens,
        listed_tokens,
        listed,
        search_p50,
        search_p99,
        stdio_p50: pct(&mut stdio, 0.5),
        stdio_p99: pct(&mut stdio, 0.99),
        index_bytes_per_tool: index_bytes as f64 / n as f64,
        forge_p50: pct(&mut forges, 0.5),
        index_write_p50: pct(&mut writes, 0.5),
        embed_per_tool,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let ns: Vec<usize> = std::env::var("DISCOVERY_NS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| DEFAULT_NS.to_vec());
    let runtime = Runtime::builder().build().expect("runtime");
    let model = load_model();
    if model.is_none() {
        eprintln!("discovery bench: no local model, embedding skipped");
    }
    let rows: Vec<Row> = ns
        .iter()
        .map(|&n| {
            eprintln!("discovery bench: N = {n}");
            let started = Instant::now();
            let row = measure(n, &runtime, model.as_ref());
            eprintln!("discovery bench: N = {n} took {:?}", started.elapsed());
            row
        })
        .collect();
    let base = &rows[0];
    let ratio = |x: f64, b: f64| if b > 0.0 { x / b } else { 0.0 };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| N | tools/list tokens (listed beyond built-ins, tools) | search p50 / p99 in-process (ms) | search p50 / p99 stdio (ms) | index bytes/tool | forge p50 with index / without (ms) | index write p50 (ms, % of forge) | embedding per tool (ms) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let _ = writeln!(
            out,
            "| {} | {} ({}, {}) ×{:.2} | {:.2} / {:.2} ×{:.2} | {:.2} / {:.2} ×{:.2} | {:.0} ×{:.2} | {:.1} / {:.1} ×{:.2} | {:.3} ({:.2} %) | {} |",
            r.n,
            r.list_tokens,
            r.listed_tokens,
            r.listed,
            ratio(r.list_tokens as f64, base.list_tokens as f64),
            r.search_p50,
            r.search_p99,
            ratio(r.search_p50, base.search_p50),
            r.stdio_p50,
            r.stdio_p99,
            ratio(r.stdio_p50, base.stdio_p50),
            r.index_bytes_per_tool,
            ratio(r.index_bytes_per_tool, base.index_bytes_per_tool),
            r.forge_p50,
            r.forge_p50 - r.index_write_p50,
            ratio(r.forge_p50, base.forge_p50),
            r.index_write_p50,
            100.0 * ratio(r.index_write_p50, r.forge_p50),
            match (r.embed_per_tool, base.embed_per_tool) {
                (Some(e), Some(b)) => format!("{e:.2} ×{:.2}", ratio(e, b)),
                (Some(e), None) => format!("{e:.2}"),
                _ => "skipped: no model".to_string(),
            },
        );
    }
    print!("{out}");
    let target = std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .join("bench-discovery.md");
    let _ = std::fs::write(target, &out);
}
