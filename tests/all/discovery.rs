//! Discovery (`search_tools`, the budgeted `tools/list`, reuse at forge
//! time) through `temper mcp` over stdio and the official SDK clients.
//!
//! One session holds 1,000 tools: the seeds forged for real (the judge,
//! the tests and all), the rest registered in the store from one forged
//! tool's artifact with their own names, descriptions and schemas (the
//! fast path: 1,000 full forges would take most of an hour on the CI's
//! two cores). Hostile: another agent's tools never show up in a search.

use crate::support::{self, mcp_stdio::McpStdio};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeContext};
use temper::request::ForgeRequest;
use temper::store::{ArtifactId, Registry, SessionRecord, Tier, ToolRecord};

/// The listing budget the tests run with (the default).
const BUDGET: usize = 4000;

/// The built-in tools of a full-access caller.
const BUILT_INS: [&str; 7] = [
    "forge_tool",
    "delete_tool",
    "promote_tool",
    "tool_stats",
    "run_code",
    "describe_tools",
    "search_tools",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn seed(name: &str) -> Value {
    let path = root()
        .join("tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The seeds forged for real (check_http_status needs `fetch`, which the
/// default policy does not grant: it is registered from its request).
const FORGED_SEEDS: [&str; 4] = ["add_numbers", "convert_temperature", "parse_csv", "slugify"];

/// Words of the filler tools: none of the paraphrases' key words.
const VERBS: [&str; 10] = [
    "render", "merge", "rotate", "index", "archive", "tally", "shuffle", "encode", "trim", "rank",
];
const NOUNS: [&str; 10] = [
    "widget", "ledger", "invoice", "sprite", "playlist", "recipe", "gadget", "roster", "voucher",
    "parcel",
];

/// A store in `dir` whose agent tier (of `agent`) holds `total` tools: the
/// seeds (forged for real in `session`, then registered with their
/// artifacts), check_http_status and fillers named `aux_NNNN_…`. The agent
/// tier, because `temper mcp` over stdio opens a session of its own per
/// connection: the caller sees `agent`'s tools, not the CLI's session's.
async fn populate(dir: &Path, agent: &str, session: &str, total: usize) {
    let store = Arc::new(Registry::open(dir).unwrap());
    let runtime = support::runtime_builder().build().unwrap();
    let forge = Forge::builder(runtime, store.clone())
        .judge(Arc::new(RulesJudge::standard()))
        .build();
    let ctx = ForgeContext::new(agent, session);
    for name in FORGED_SEEDS {
        let request = ForgeRequest::from_json(&seed(name).to_string()).unwrap();
        forge
            .forge(&request, &ctx)
            .await
            .unwrap_or_else(|e| panic!("forging {name}: {e}"));
    }
    let forged = store.session_tools(agent, session).unwrap();
    let register = |name: &str, artifact: &ArtifactId, manifest: Value| {
        store
            .register(ToolRecord {
                name: name.into(),
                agent_id: Some(agent.into()),
                session_id: None,
                tier: Tier::Agent,
                artifact: artifact.clone(),
                manifest,
                created_seq: 0,
            })
            .unwrap();
    };
    for tool in &forged {
        register(&tool.name, &tool.artifact, tool.manifest.clone());
    }
    let template = forged.iter().find(|t| t.name == "slugify").unwrap();
    let add = |name: &str, description: &str, input: Value| {
        let mut manifest = template.manifest.clone();
        manifest["name"] = json!(name);
        manifest["description"] = json!(description);
        manifest["inputSchema"] = input;
        register(name, &template.artifact, manifest);
    };
    let http = seed("check_http_status");
    add(
        "check_http_status",
        http["description"].as_str().unwrap(),
        http["inputSchema"].clone(),
    );
    for i in 0..total - FORGED_SEEDS.len() - 1 {
        let (verb, noun) = (VERBS[i % 10], NOUNS[(i / 10) % 10]);
        add(
            &format!("aux_{i:04}_{verb}_{noun}"),
            &format!("Filler tool {i}: {verb}s each {noun} of the batch and reports the count."),
            json!({"type": "object", "properties": {
                "batch": {"type": "array", "description": format!("the {noun}s")},
                "mode": {"type": "string", "enum": ["fast", "full"]}}}),
        );
    }
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The tokens (characters / 4) of the listed tools that are not built in.
fn working_set_tokens(list: &Value) -> usize {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !BUILT_INS.contains(&t["name"].as_str().unwrap()))
        .map(|t| t.to_string().chars().count().div_ceil(4))
        .sum()
}

fn found(response: &Value) -> Vec<String> {
    let tools = &response["result"]["structuredContent"]["tools"];
    assert!(tools.is_array(), "{response}");
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn search(m: &mut McpStdio, query: &str, limit: usize) -> (Value, Vec<Value>) {
    m.request_noting(
        "tools/call",
        json!({"name": "search_tools", "arguments": {"query": query, "limit": limit}}),
    )
}

/// The paraphrases of the seeds' purposes and the seed each must find.
const PARAPHRASES: [(&str, &str); 5] = [
    ("make a url friendly slug out of a title", "slugify"),
    (
        "read comma separated csv rows with a header line",
        "parse_csv",
    ),
    (
        "change degrees celsius into fahrenheit",
        "convert_temperature",
    ),
    ("sum of two numbers", "add_numbers"),
    (
        "is this url reachable what http status code",
        "check_http_status",
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_tools_list_within_the_budget_and_search_finds_the_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 1000).await;
    let log = dir.path().join("stderr.log");
    let store_arg = store.to_str().unwrap();
    let mut m = McpStdio::start(&["--store", store_arg], &log, &[], "no-secret-here");

    // tools/list: the built-ins, then at most the budget.
    let list = m.request("tools/list", json!({}))["result"].clone();
    let listed = names(&list);
    assert_eq!(listed[..BUILT_INS.len()], BUILT_INS, "{listed:?}");
    let tokens = working_set_tokens(&list);
    assert!(tokens <= BUDGET, "{tokens} tokens listed");
    assert!(
        listed.len() > BUILT_INS.len(),
        "some tools are listed: {listed:?}"
    );
    assert!(listed.len() < 100, "{} listed", listed.len());
    let whole = list.to_string().len() / 4;
    assert!(whole < BUDGET + 3000, "the whole list is {whole} tokens");
    let search_def = &list["tools"][BUILT_INS.len() - 1];
    let more = 1000 - (listed.len() - BUILT_INS.len());
    assert!(
        search_def["description"]
            .as_str()
            .unwrap()
            .contains(&format!("{more} more tools")),
        "{search_def}"
    );
    assert!(!listed.contains(&"slugify".to_string()), "{listed:?}");

    // Each paraphrase finds its seed among the first three.
    for (query, want) in PARAPHRASES {
        let (r, _) = search(&mut m, query, 3);
        let got = found(&r);
        assert!(got.contains(&want.to_string()), "{query:?} found {got:?}");
        let text: Value =
            serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text, r["result"]["structuredContent"],
            "the same JSON as text"
        );
        let first = &r["result"]["structuredContent"]["tools"][0];
        assert!(
            first["signature"].as_str().unwrap().contains("(input: "),
            "{first}"
        );
        assert!(first["description"].as_str().unwrap().chars().count() <= 200);
        assert_eq!(first["tier"], "agent");
    }

    // A tool found joins the listing, announced by list_changed; it is
    // callable (it was before too: tools/call takes any visible tool).
    let (_, notes) = search(&mut m, "url friendly slug", 1);
    let list = m.request("tools/list", json!({}))["result"].clone();
    assert!(names(&list).contains(&"slugify".to_string()));
    assert!(working_set_tokens(&list) <= BUDGET);
    // (The first paraphrase search already added it: this one may not
    // change the set; the first one's notification is checked below.)
    let _ = notes;
    let r = m.request(
        "tools/call",
        json!({"name": "slugify", "arguments": {"text": "Hello World"}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    // An unlisted tool is callable too.
    let list_names = names(&list);
    let unlisted = (0..995)
        .map(|i| format!("aux_{i:04}_{}_{}", VERBS[i % 10], NOUNS[(i / 10) % 10]))
        .find(|n| !list_names.contains(n))
        .unwrap();
    let r = m.request(
        "tools/call",
        json!({"name": "tool_stats", "arguments": {"name": unlisted}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_search_announces_list_changed_and_reveals_no_other_agents_tools() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 60).await;
    // Bob's session and agent tier: a tool whose words match the query.
    {
        let registry = Registry::open(&store).unwrap();
        let template = registry
            .session_tools("default", "default")
            .unwrap()
            .into_iter()
            .find(|t| t.name == "slugify")
            .unwrap();
        let mut manifest = template.manifest.clone();
        manifest["name"] = json!("bob_secret_slug");
        manifest["description"] = json!("Bob's url friendly slug of a title");
        registry
            .add_session_tool(
                &SessionRecord::new("bob", "default", "", 0),
                "bob_secret_slug",
                &template.artifact,
                &manifest,
                &json!({}),
                10,
            )
            .unwrap();
        manifest["name"] = json!("bob_agent_slug");
        registry
            .register(ToolRecord {
                name: "bob_agent_slug".into(),
                agent_id: Some("bob".into()),
                session_id: None,
                tier: Tier::Agent,
                artifact: template.artifact.clone(),
                manifest,
                created_seq: 0,
            })
            .unwrap();
    }
    let log = dir.path().join("stderr.log");
    let mut m = McpStdio::start(
        &["--store", store.to_str().unwrap()],
        &log,
        &[],
        "no-secret-here",
    );
    let (r, notes) = search(&mut m, "url friendly slug of a title bob secret agent", 10);
    let got = found(&r);
    assert!(got.contains(&"slugify".to_string()), "{got:?}");
    assert!(
        !got.iter().any(|n| n.starts_with("bob_")),
        "another agent's tools: {got:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{notes:?}"
    );
    // The same search again changes nothing: no second notification.
    let (_, notes) = search(&mut m, "url friendly slug of a title bob secret agent", 10);
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{notes:?}"
    );
    // Another agent's tool is not callable either.
    let r = m.request(
        "tools/call",
        json!({"name": "bob_secret_slug", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // Hostile arguments are refused with what to do.
    for bad in [
        json!({}),
        json!({"query": "x", "limit": 1000}),
        json!({"query": "x", "tier": "bob"}),
    ] {
        let r = m.request(
            "tools/call",
            json!({"name": "search_tools", "arguments": bad}),
        );
        assert_eq!(r["result"]["isError"], true, "{r}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_forge_reuses_and_a_near_duplicate_is_similar() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let log = dir.path().join("stderr.log");
    let mut m = McpStdio::start(
        &["--store", store.to_str().unwrap()],
        &log,
        &[],
        "no-secret-here",
    );
    let forge = |m: &mut McpStdio, request: &Value| {
        let r = m.request(
            "tools/call",
            json!({"name": "forge_tool", "arguments": request}),
        );
        r["result"]["structuredContent"].clone()
    };
    let slugify = seed("slugify");
    let first = forge(&mut m, &slugify);
    assert_eq!(first["success"], true, "{first}");
    assert!(first.get("reused").is_none(), "{first}");
    let entries = |dir: &Path| {
        Registry::open(dir)
            .unwrap()
            .audit_entries(0, 10_000)
            .unwrap()
            .len()
    };
    let before = entries(&store);
    // The same request again: the existing tool, nothing registered.
    let again = forge(&mut m, &slugify);
    assert_eq!(again["success"], true, "{again}");
    assert_eq!(again["reused"], true, "{again}");
    assert_eq!(again["tool"]["name"], "slugify");
    assert_eq!(again["tool"]["id"], first["tool"]["id"]);
    assert!(again["message"].as_str().unwrap().contains("slugify"));
    assert_eq!(
        entries(&store),
        before,
        "nothing audited, nothing registered"
    );
    // A near-duplicate (another name, the same purpose): forged, and
    // slugify is listed as similar.
    let mut near = slugify.clone();
    near["name"] = json!("make_slug");
    near["description"] = json!("Convert a string to a URL-friendly slug (lowercase, dashes)");
    let r = forge(&mut m, &near);
    let similar = r["similarTools"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(similar[0]["name"], "slugify", "{r}");
    assert!(similar[0]["score"].as_f64().unwrap() >= 0.5);
    assert!(similar.len() <= 3);
    // A refusal carries them too.
    let mut bad = near.clone();
    bad["name"] = json!("slug_maker");
    bad["implementation"]["code"] = json!("function execute( {");
    let r = forge(&mut m, &bad);
    assert_eq!(r["success"], false, "{r}");
    let similar: Vec<&str> = r["similarTools"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(similar.contains(&"slugify"), "{similar:?}");
}

/// The official Python SDK client (default mode) finds slugify with
/// `search_tools`, hears list_changed, sees it listed and calls it.
#[tokio::test(flavor = "multi_thread")]
async fn official_python_sdk_client_finds_and_calls() {
    let Some(python) = crate::mcp_http::python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 300).await;
    let status = std::process::Command::new(python)
        .arg(root().join("tests/mcp_discovery_client.py"))
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg(&store)
        .arg(support::cache_dir())
        .status()
        .unwrap();
    assert!(status.success(), "tests/mcp_discovery_client.py: {status}");
}

/// The official TypeScript SDK client does the same.
#[tokio::test(flavor = "multi_thread")]
async fn official_typescript_sdk_client_finds_and_calls() {
    if !crate::mcp_http::has_ts_sdk() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 300).await;
    let status = std::process::Command::new("node")
        .arg(root().join("tests/mcp-ts/discovery.mjs"))
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg(&store)
        .arg(support::cache_dir())
        .status()
        .unwrap();
    assert!(status.success(), "tests/mcp-ts/discovery.mjs: {status}");
}

/// The all-MiniLM-L6-v2 directory (`scripts/embedding-model.sh`), or
/// `$TEMPER_EMBEDDING_MODEL_DIR`; `None` when absent, unless
/// `TEMPER_REQUIRE_EMBEDDING_MODEL=1` makes that a failure.
fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TEMPER_EMBEDDING_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/models/all-minilm-l6-v2"));
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let msg = format!("all-MiniLM-L6-v2 not found in {}", dir.display());
    assert!(
        std::env::var("TEMPER_REQUIRE_EMBEDDING_MODEL").as_deref() != Ok("1"),
        "{msg}; TEMPER_REQUIRE_EMBEDDING_MODEL=1"
    );
    eprintln!("skipped: {msg} (run scripts/embedding-model.sh)");
    None
}

/// A need that shares no word with any tool of [`populate`]'s store.
const NO_SHARED_WORD: &str = "permalink for headline";

/// With `--embeddings local:DIR` (the real all-MiniLM-L6-v2), a need that
/// shares no word with any tool finds slugify: lexically it finds nothing.
#[tokio::test(flavor = "multi_thread")]
async fn with_the_local_model_a_need_sharing_no_word_finds_its_tool() {
    let Some(model) = model_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 60).await;
    let store_arg = store.to_str().unwrap();
    let log = dir.path().join("lexical.log");
    let mut lexical = McpStdio::start(&["--store", store_arg], &log, &[], "no-secret-here");
    let (r, _) = search(&mut lexical, NO_SHARED_WORD, 3);
    assert_eq!(found(&r), Vec::<String>::new(), "lexically: nothing");
    let spec = format!("local:{}", model.display());
    let log = dir.path().join("hybrid.log");
    let mut hybrid = McpStdio::start(
        &["--store", store_arg, "--embeddings", &spec],
        &log,
        &[],
        "no-secret-here",
    );
    let (r, _) = search(&mut hybrid, NO_SHARED_WORD, 3);
    let got = found(&r);
    assert!(got.contains(&"slugify".to_string()), "{got:?}");
    assert!(
        r["result"]["structuredContent"].get("warnings").is_none(),
        "{r}"
    );
}

/// With an embeddings endpoint that refuses connections, `search_tools`
/// answers with the lexical ranking and one warning saying so; the key is
/// nowhere in what the agent or the log reads.
#[tokio::test(flavor = "multi_thread")]
async fn with_the_embeddings_endpoint_down_search_answers_lexically_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    populate(&store, "default", "default", 60).await;
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spec = format!("openai:http://127.0.0.1:{port}/v1");
    let key = "sk-embeddings-secret-4711";
    let log = dir.path().join("stderr.log");
    let mut m = McpStdio::start(
        &[
            "--store",
            store.to_str().unwrap(),
            "--embeddings",
            &spec,
            "--embeddings-model",
            "text-embedding-3-small",
        ],
        &log,
        &[("TEMPER_EMBEDDINGS_API_KEY", key)],
        key,
    );
    let (r, _) = search(&mut m, "url friendly slug of a title", 3);
    assert_eq!(r["result"]["isError"], false, "{r}");
    let got = found(&r);
    assert_eq!(got.first().map(String::as_str), Some("slugify"), "{got:?}");
    let warnings = r["result"]["structuredContent"]["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(warnings.len(), 1, "{r}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.starts_with("semantic ranking unavailable (")
            && warning.contains(&format!("127.0.0.1:{port}"))
            && warning.ends_with(
                "these results are lexical only: search with words a tool's name or description would use"
            ),
        "{warning}"
    );
    m.close();
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains(key), "the key in the log");
    assert!(log.contains("semantic ranking skipped"), "{log}");
}

/// `--embeddings` that cannot be used stops the command with what to write.
#[test]
fn a_bad_embeddings_flag_is_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (
            vec!["--embeddings", "bert:/x"],
            "expected local:PATH (a model directory) or openai:URL",
        ),
        (
            vec!["--embeddings", "openai:http://127.0.0.1:9/v1"],
            "needs --embeddings-model",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_temper"))
            .arg("tools")
            .arg("--store")
            .arg(dir.path())
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
