//! Compose mode end to end: the two compose seeds forged with the rules
//! judge and run over host-native stand-ins (one doing real HTTP against a
//! server on 127.0.0.1); every `inputMapping` form through forge + invoke;
//! composing never widens capabilities (the adapter imports only its steps,
//! an ungranted step stays ungranted); failing, looping and slow steps;
//! nested compose tools; cycles across tiers; forge-time errors naming the
//! step and key; the same request giving the same tool id.

use crate::support;
use temper::compose::ComposeRuntime;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::artifact::StepRef;
use temper::compose::adapter::component_imports;
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{
    Forge, ForgeConfig, ForgeContext, ForgeError, Forged, InvokeError, NativeToolSpec,
    PromotionThreshold, Stage, ValidateError,
};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{ArtifactId, Registry, Tier};
use temper::{CallFailure, Limits, LoadError, RunError, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

// ---- helpers ---------------------------------------------------------------

fn runtime_with(policy: HostPolicy, limits: Limits) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .limits(limits)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(HostPolicy::deny_all(), Limits::default())
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

fn forge_on(runtime: Runtime, dir: &Path) -> Forge {
    Forge::builder(runtime, Arc::new(Registry::open(dir).expect("store")))
        .judge(rules())
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

/// A compose seed from `tests/fixtures/compose/`.
fn compose_seed(name: &str) -> ForgeRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/compose")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A compose request over `steps` with one test case per input.
fn compose(name: &str, steps: Value, cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("compose tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": steps},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

/// A sandbox request with one test case per input.
fn sandbox(name: &str, code: &str, allowlist: &[&str], cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("sandbox tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": code, "allowlist": allowlist},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

/// Registers a native tool taking and returning objects.
fn native<F, Fut>(forge: &Forge, name: &str, f: F)
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, String>> + Send + 'static,
{
    forge
        .register_native(
            NativeToolSpec {
                name: name.into(),
                description: format!("native {name} for the tests"),
                input_schema: json!({"type": "object"}),
                output_schema: json!({"type": "object"}),
            },
            f,
        )
        .unwrap();
}

/// A native `echo` returning its input; counts its calls.
fn echo(forge: &Forge) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    native(forge, "echo", move |input| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(input) }
    });
    calls
}

async fn forged(forge: &Forge, request: &ForgeRequest, ctx: &ForgeContext) -> Forged {
    forge
        .forge(request, ctx)
        .await
        .unwrap_or_else(|e| panic!("forging {}: {e}", request.name))
}

/// The failure of an invoke that must fail in the run.
async fn run_failure(forge: &Forge, name: &str, input: Value, ctx: &ForgeContext) -> CallFailure {
    match forge.invoke(name, &input, ctx).await {
        Err(InvokeError::Run { tool, failure }) => {
            assert_eq!(tool, name);
            failure
        }
        Err(other) => panic!("{name}: expected a run failure, got {other}"),
        Ok(out) => panic!("{name}: expected a run failure, got {}", out.output),
    }
}

async fn refused(forge: &Forge, request: &ForgeRequest, ctx: &ForgeContext) -> ForgeError {
    forge
        .forge(request, ctx)
        .await
        .err()
        .unwrap_or_else(|| panic!("{} was registered", request.name))
}

fn artifact_bytes(forge: &Forge, id: &str) -> Vec<u8> {
    forge
        .store()
        .get_artifact(&ArtifactId::from_hex(id).unwrap())
        .unwrap()
}

/// A plain HTTP/1.1 server on 127.0.0.1 answering every request with a
/// fixed JSON body; records each request line (`GET /path`).
struct JsonServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JsonServer {
    async fn start(body: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let line = head.lines().next().unwrap_or("");
                    let line = line.rsplit_once(' ').map_or(line, |(l, _)| l).to_string();
                    log.lock().unwrap().push(line);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { port, seen, task }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for JsonServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

use support::ApproveAll;

// ---- 1. research_and_summarize ----------------------------------------------

/// The `web_search` stand-in: two numbered results with their URLs.
async fn web_search(input: Value) -> Result<Value, String> {
    let q = input["q"].as_str().ok_or("q must be a string")?;
    Ok(json!({
        "output": format!("1. {q}: LangGraph https://a.test/1\n2. {q}: CrewAI https://b.test/2"),
        "sources": ["https://a.test/1", "https://b.test/2"],
    }))
}

/// The `generate_text` stand-in for the research seed: a deterministic
/// "summary" of the prompt (its line count, lines joined with ` / `) and
/// the URLs found in it, as the seed's outputSchema asks.
fn summarize(prompt: &str) -> Value {
    json!({
        "summary": format!("SUMMARY[{}]: {}", prompt.lines().count(), prompt.replace('\n', " / ")),
        "sources": prompt
            .split_whitespace()
            .filter(|w| w.starts_with("https://"))
            .collect::<Vec<_>>(),
    })
}

/// Registers `web_search` and `generate_text` (recording prompts); when
/// `broken` is set, generate_text returns a number as `summary`.
fn research_natives(forge: &Forge, broken: Arc<AtomicBool>) -> Arc<Mutex<Vec<Value>>> {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    native(forge, "web_search", move |input| {
        log.lock()
            .unwrap()
            .push(json!({"web_search": input.clone()}));
        web_search(input)
    });
    let log = seen.clone();
    native(forge, "generate_text", move |input| {
        log.lock()
            .unwrap()
            .push(json!({"generate_text": input.clone()}));
        let broken = broken.load(Ordering::SeqCst);
        async move {
            let prompt = input["prompt"].as_str().ok_or("prompt must be a string")?;
            if broken {
                Ok(json!({"summary": 42, "sources": []}))
            } else {
                Ok(summarize(prompt))
            }
        }
    });
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_and_summarize_seed_runs_over_native_stand_ins() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let broken = Arc::new(AtomicBool::new(false));
    let seen = research_natives(&forge, broken.clone());

    let request = compose_seed("research_and_summarize");
    let f = forged(&forge, &request, &ctx()).await;
    assert_eq!(f.tool.name, "research_and_summarize");
    assert_eq!(f.tool.mode, "compose");
    assert_eq!(f.tool.tier, Tier::Session);
    assert!(f.tool.allowlist.is_empty());
    assert_eq!(f.verdict.judge, "rules");
    assert!(f.verdict.approved);
    assert_eq!(
        f.tool.steps,
        vec![
            StepRef {
                name: "search".into(),
                tool: "web_search".into(),
                blake3: None,
                input_mapping: json!({"q": "$input.topic"}),
            },
            StepRef {
                name: "summarize".into(),
                tool: "generate_text".into(),
                blake3: None,
                input_mapping: json!({"prompt": "Summarize these search results about \"$input.topic\":\n$prev.output"}),
            },
        ]
    );
    // TEST ran the seed's case twice: four native calls.
    assert_eq!(seen.lock().unwrap().len(), 4);
    seen.lock().unwrap().clear();

    let out = forge
        .invoke(
            "research_and_summarize",
            &json!({"topic": "wasm hosts"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.output,
        json!({
            "summary": "SUMMARY[3]: Summarize these search results about \"wasm hosts\": / 1. wasm hosts: LangGraph https://a.test/1 / 2. wasm hosts: CrewAI https://b.test/2",
            "sources": ["https://a.test/1", "https://b.test/2"],
        })
    );
    assert_eq!(out.tier, Tier::Session);
    assert_eq!(out.tool_id, f.tool.id);
    // What each step received, exactly.
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            json!({"web_search": {"q": "wasm hosts"}}),
            json!({"generate_text": {"prompt": "Summarize these search results about \"wasm hosts\":\n1. wasm hosts: LangGraph https://a.test/1\n2. wasm hosts: CrewAI https://b.test/2"}}),
        ]
    );

    // The compose tool's own inputSchema is checked before any step runs.
    seen.lock().unwrap().clear();
    let err = forge
        .invoke("research_and_summarize", &json!({"subject": "x"}), &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, InvokeError::Input { tool, message } if tool == "research_and_summarize" && message.contains("topic")),
        "{err}"
    );
    assert!(seen.lock().unwrap().is_empty());

    // The last step's output is the compose output, checked against the
    // compose tool's outputSchema: a wrong type is refused at invoke...
    broken.store(true, Ordering::SeqCst);
    let err = forge
        .invoke("research_and_summarize", &json!({"topic": "wasm"}), &ctx())
        .await
        .unwrap_err();
    let InvokeError::Output { tool, mismatch } = &err else {
        panic!("expected an output mismatch, got {err}");
    };
    assert_eq!(tool, "research_and_summarize");
    assert_eq!(mismatch.violations.len(), 1, "{mismatch}");
    assert!(
        mismatch.violations[0].contains("/summary") && mismatch.violations[0].contains("42"),
        "{mismatch}"
    );
    let stats = forge.tool_stats("research_and_summarize", &ctx()).unwrap();
    assert_eq!((stats.successes, stats.total_calls), (1, 3));

    // ...and at forge time (TEST) in a fresh store.
    let dir2 = tempfile::tempdir().unwrap();
    let forge2 = forge_on(runtime(), dir2.path());
    research_natives(&forge2, Arc::new(AtomicBool::new(true)));
    let err = refused(&forge2, &request, &ctx()).await;
    assert_eq!(err.stage(), Stage::Test, "{err}");
    let ForgeError::Test {
        failed,
        total,
        first,
        ..
    } = &err
    else {
        unreachable!()
    };
    assert_eq!((*failed, *total), (1, 1));
    assert!(
        first.starts_with("case #0: ") && first.contains("summary"),
        "{first}"
    );
    assert!(forge2.session_tools(&ctx()).unwrap().is_empty());
}

// ---- 2. fetch_analyze_report --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_analyze_report_seed_fetches_from_a_local_server() {
    let server = JsonServer::start(r#"{"visits": [3, 5, 8], "unit": "per day"}"#).await;
    let endpoint = format!("http://127.0.0.1:{}/metrics", server.port);
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    native(&forge, "http_request", move |input| {
        let client = client.clone();
        async move {
            let url = input["url"].as_str().ok_or("url must be a string")?;
            let method = input["method"].as_str().unwrap_or("GET");
            if method != "GET" {
                return Err(format!("unsupported method {method}"));
            }
            let res = client.get(url).send().await.map_err(|e| e.to_string())?;
            let status = res.status().as_u16();
            let text = res.text().await.map_err(|e| e.to_string())?;
            let body: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            Ok(json!({"status": status, "body": body}))
        }
    });
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = prompts.clone();
    native(&forge, "generate_text", move |input| {
        let prompt = input["prompt"].as_str().unwrap_or("").to_string();
        log.lock().unwrap().push(prompt.clone());
        async move { Ok(json!({"output": format!("<<{prompt}>>")})) }
    });

    let mut request = compose_seed("fetch_analyze_report");
    request.test_cases[0].input["endpoint"] = json!(endpoint);
    // The seed has no outputSchema: a compose tool then takes its last
    // step's (generate_text's here).
    assert!(request.output_schema.is_null());
    let f = forged(&forge, &request, &ctx()).await;
    assert_eq!(f.tool.output_schema, json!({"type": "object"}));
    assert_eq!(
        f.tool
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.tool.as_str(), s.blake3.is_none()))
            .collect::<Vec<_>>(),
        [
            ("fetch", "http_request", true),
            ("analyze", "generate_text", true),
            ("format", "generate_text", true)
        ]
    );
    // The test case ran twice at forge time, each time a real GET.
    assert_eq!(server.seen(), ["GET /metrics", "GET /metrics"]);
    prompts.lock().unwrap().clear();

    let out = forge
        .invoke(
            "fetch_analyze_report",
            &json!({"endpoint": endpoint, "timeRange": "Q3"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(server.seen().len(), 3, "the invoke reached the server");
    // `$steps.fetch.body` (an object) is interpolated as compact JSON.
    assert_eq!(
        *prompts.lock().unwrap(),
        [
            "Analyze trends in this data for Q3:\n{\"visits\":[3,5,8],\"unit\":\"per day\"}",
            "Format this analysis as a markdown report:\n<<Analyze trends in this data for Q3:\n{\"visits\":[3,5,8],\"unit\":\"per day\"}>>",
        ]
    );
    assert_eq!(
        out.output,
        json!({"output": "<<Format this analysis as a markdown report:\n<<Analyze trends in this data for Q3:\n{\"visits\":[3,5,8],\"unit\":\"per day\"}>>>>"})
    );

    // Without the optional timeRange, the mapping says so (no "null").
    let failure = run_failure(
        &forge,
        "fetch_analyze_report",
        json!({"endpoint": endpoint}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[1] (\"analyze\") inputMapping.prompt: `$input.timeRange`: $input has no field \"timeRange\" (fields: \"endpoint\")".into()
        }
    );
    assert_eq!(server.seen().len(), 4, "step 0 ran, step 1 never did");
}

// ---- 3. mapping semantics ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mapping_form_through_forge_and_invoke() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let calls = echo(&forge);
    let request = compose_seed("mapping_forms");
    forged(&forge, &request, &ctx()).await;
    calls.store(0, Ordering::SeqCst);

    let input = json!({
        "a": {"b": "deep text"},
        "n": 3,
        "obj": {"k": [1, "x"]},
        "arr": [10, 20, 30],
        "flag": true,
        "first name": "Ada",
    });
    let out = forge.invoke("mapping_forms", &input, &ctx()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let first = json!({
        "whole": input,
        "ab": "deep text",
        "n": 3,
        "obj": {"k": [1, "x"]},
        "arr": [10, 20, 30],
        "flag": true,
        "second": 20,
        "braced": "deep text",
        "spaced": "Ada",
        "text": "n=3; obj={\"k\":[1,\"x\"]}; arr=[10,20,30]; flag=true; ab=deep text.",
        "adjacent": "3-true",
        "literal": "costs $5, not $input.n",
        "plain": "no references here",
        "nested": {"list": [3, {"deep": [1, "x"]}, "x3", 7, null, false], "empty": {}},
        "num": 2.5,
        "nothing": null,
        "yes": true,
    });
    let second = json!({
        "prev_n": 3,
        "prev_nested": {"list": [3, {"deep": [1, "x"]}, "x3", 7, null, false], "empty": {}},
        "from_first": "x",
        "deep_index": 1,
        "braced_steps": "deep text!",
        "prev_text": "prev flag=true, k=[1,\"x\"]",
    });
    assert_eq!(out.output, json!({"first": first, "second": second}));
    // Whole-string references kept their JSON types.
    assert!(out.output["first"]["n"].is_u64());
    assert!(out.output["first"]["flag"].is_boolean());
    assert!(out.output["first"]["obj"].is_object());
    assert!(out.output["first"]["arr"].is_array());
    assert!(out.output["first"]["num"].is_f64());

    // Missing fields and out-of-range indexes at run time: a clear error
    // naming step and key; the steps after it never run.
    let steps = json!([
        {"name": "first", "tool": "echo", "inputMapping": {"x": "$input.x", "pick": "$input.items.1"}},
        {"name": "second", "tool": "echo", "inputMapping": {"deep": {"y": ["$prev.x.deep"]}}},
        {"name": "third", "tool": "echo", "inputMapping": {}},
    ]);
    let request = compose(
        "mapping_errors",
        steps,
        &[json!({"x": {"deep": 1}, "items": [0, 1]})],
    );
    forged(&forge, &request, &ctx()).await;
    calls.store(0, Ordering::SeqCst);
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": {"other": 1}, "items": [0, 1]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[1] (\"second\") inputMapping.deep.y[0]: `$prev.x.deep`: $prev.x has no field \"deep\" (fields: \"other\")".into()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only steps[0] ran");
    calls.store(0, Ordering::SeqCst);
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": {"deep": 1}, "items": [0]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[0] (\"first\") inputMapping.pick: `$input.items.1`: index 1 is out of range: $input.items has 1 element(s)".into()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no step ran");
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": "flat", "items": [0, 1]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[1] (\"second\") inputMapping.deep.y[0]: `$prev.x.deep`: cannot read \"deep\" of $prev.x, which is string".into()
        }
    );
}

// ---- 4. non-widening -----------------------------------------------------------

const FETCHER: &str = "async function execute(input) {\n  const r = await fetch(input.url);\n  return { status: r.status, body: await r.json() };\n}";
const SNEAKY: &str = "async function execute(input) {\n  if (input.go) {\n    const r = await fetch(input.url);\n    return { status: r.status };\n  }\n  return { skipped: true };\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composing_never_widens_capabilities() {
    let server = JsonServer::start(r#"{"ok": true}"#).await;
    let port = server.port;
    let base = format!("http://127.0.0.1:{port}");
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("127.0.0.1:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;

    // The rules judge refuses a tool whose code uses fetch without listing it.
    let dir = tempfile::tempdir().unwrap();
    let strict = forge_on(runtime_with(policy.clone(), Limits::default()), dir.path());
    let sneaky = sandbox(
        "sneaky",
        SNEAKY,
        &[],
        &[json!({"go": false, "url": format!("{base}/sneaky")})],
    );
    let err = refused(&strict, &sneaky, &ctx()).await;
    assert_eq!(err.stage(), Stage::Judge, "{err}");
    assert!(
        err.to_string()
            .contains("code appears to use `fetch`, which the allowlist does not grant"),
        "{err}"
    );

    // A lenient judge lets it through: the runtime still never grants it.
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(
        runtime_with(policy, Limits::default()),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(Arc::new(ApproveAll))
    .build();
    let fetcher = forged(
        &forge,
        &sandbox(
            "fetcher",
            FETCHER,
            &["fetch"],
            &[json!({"url": format!("{base}/granted")})],
        ),
        &ctx(),
    )
    .await;
    let sneaky = forged(&forge, &sneaky, &ctx()).await;
    assert_eq!(fetcher.tool.allowlist, ["fetch"]);
    assert!(sneaky.tool.allowlist.is_empty());
    let steps = json!([
        {"name": "granted", "tool": "fetcher", "inputMapping": {"url": "$input.granted"}},
        {"name": "sneak", "tool": "sneaky", "inputMapping": {"go": "$input.go", "url": "$input.sneaky"}},
    ]);
    let case = json!({"go": false, "granted": format!("{base}/granted"), "sneaky": format!("{base}/sneaky")});
    let both = forged(&forge, &compose("both", steps, &[case]), &ctx()).await;
    assert_eq!(
        both.tool
            .steps
            .iter()
            .map(|s| s.blake3.as_deref().unwrap())
            .collect::<Vec<_>>(),
        [fetcher.tool.id.as_str(), sneaky.tool.id.as_str()]
    );
    // fetcher's tests (2 runs) and both's tests (2 runs) fetched /granted.
    assert_eq!(server.seen(), vec!["GET /granted"; 4]);

    // The granted step fetches; the ungranted one is denied, and named.
    let failure = run_failure(
        &forge,
        "both",
        json!({"go": true, "granted": format!("{base}/granted"), "sneaky": format!("{base}/sneaky")}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 1,
            step: "sneak".into(),
            tool: "sneaky".into(),
            message: "invoke sneaky: run: capability not granted: fetch".into(),
        }
    );
    assert_eq!(server.seen(), vec!["GET /granted"; 5]);
    // Directly, the same.
    let failure = run_failure(
        &forge,
        "sneaky",
        json!({"go": true, "url": format!("{base}/sneaky")}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::CapabilityDenied {
            capability: "fetch".into()
        }
    );
    assert!(!server.seen().iter().any(|r| r.contains("/sneaky")));
    let out = forge
        .invoke(
            "both",
            &json!({"go": false, "granted": format!("{base}/granted"), "sneaky": "-"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out.output, json!({"skipped": true}));

    // The compose artifact imports its steps and the type-only interface,
    // nothing else; its manifest asks for no capability.
    let bytes = artifact_bytes(&forge, &both.tool.id);
    let imports = component_imports(&bytes).unwrap();
    assert_eq!(
        imports,
        vec![
            ("temper:tool/types@0.1.0".to_string(), vec![]),
            ("granted".to_string(), vec!["call".to_string()]),
            ("sneak".to_string(), vec!["call".to_string()]),
        ]
    );
    let manifest = temper::artifact::read_manifest(&bytes).unwrap();
    assert_eq!(manifest.mode, "compose");
    assert!(manifest.capabilities.is_empty());
    assert!(both.tool.allowlist.is_empty());

    // load_compose refuses components importing anything but their steps.
    let rt = forge.runtime();
    let sandbox_bytes = artifact_bytes(&forge, &fetcher.tool.id);
    let sandbox_imports: Vec<String> = component_imports(&sandbox_bytes)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(
        sandbox_imports.contains(&"temper:tool/fetch@0.1.0".to_string()),
        "{sandbox_imports:?}"
    );
    let err = rt
        .load_compose(Arc::new(sandbox_bytes), vec!["granted".into()])
        .await
        .err()
        .expect("a sandbox artifact is not an adapter");
    let LoadError::ImportNotAllowed(name) = &err else {
        panic!("expected ImportNotAllowed, got {err}");
    };
    assert!(sandbox_imports.contains(name), "{name}");
    let fetch_only =
        wat::parse_str(r#"(component (import "temper:tool/fetch@0.1.0" (instance)))"#).unwrap();
    let err = rt
        .load_compose(Arc::new(fetch_only), vec!["granted".into()])
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&err, LoadError::ImportNotAllowed(n) if n == "temper:tool/fetch@0.1.0"),
        "{err}"
    );
    let wide_step = wat::parse_str(
        r#"(component (import "granted" (instance (export "call" (func)) (export "fetch" (func)))))"#,
    )
    .unwrap();
    let err = rt
        .load_compose(Arc::new(wide_step), vec!["granted".into()])
        .await
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "load: import `granted (exports [\"call\", \"fetch\"], not just `call`)` is outside the `tool` world; refusing to instantiate"
    );
}

// ---- 5. failing, looping and slow steps ------------------------------------------

const THROWER: &str = "function execute(input) {\n  if (input.boom) {\n    throw new Error('kaboom: ' + input.boom);\n  }\n  return { ok: true };\n}";
const SPINNER: &str = "function execute(input) {\n  if (input.spin) {\n    while (true) {}\n  }\n  return { ok: true };\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_looping_and_slow_steps() {
    let limit = Duration::from_millis(1000);
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(
        runtime_with(
            HostPolicy::deny_all(),
            Limits::default().with_timeout(limit),
        ),
        dir.path(),
    );
    echo(&forge);
    native(&forge, "slow", |input| async move {
        if input["sleep"] == json!(true) {
            tokio::time::sleep(Duration::from_secs(30)).await;
        } else if let Some(ms) = input["ms"].as_u64() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(json!({"slept": false}))
    });
    forged(
        &forge,
        &sandbox("thrower", THROWER, &[], &[json!({})]),
        &ctx(),
    )
    .await;
    forged(
        &forge,
        &sandbox("spinner", SPINNER, &[], &[json!({})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "before", "tool": "echo", "inputMapping": {"boom": "$input.boom"}},
        {"name": "explode", "tool": "thrower", "inputMapping": {"boom": "$prev.boom"}},
        {"name": "after", "tool": "echo", "inputMapping": {"after": "$prev.ok"}},
    ]);
    forged(
        &forge,
        &compose("throws", steps, &[json!({"boom": ""})]),
        &ctx(),
    )
    .await;
    // Each looping/sleeping step comes after a 50 ms pause, so the step's
    // own budget (the runtime timeout, started when the step starts) ends
    // well after the run's: the run's timeout is what fires.
    let steps = json!([
        {"name": "pause", "tool": "slow", "inputMapping": {"ms": 50}},
        {"name": "spin", "tool": "spinner", "inputMapping": {"spin": "$input.spin"}},
    ]);
    forged(
        &forge,
        &compose("spins", steps, &[json!({"spin": false})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "pause", "tool": "slow", "inputMapping": {"ms": 50}},
        {"name": "nap", "tool": "slow", "inputMapping": {"sleep": "$input.sleep"}},
        {"name": "after", "tool": "echo", "inputMapping": {"x": "$prev.slept"}},
    ]);
    forged(
        &forge,
        &compose("sleeps", steps, &[json!({"sleep": false})]),
        &ctx(),
    )
    .await;

    // A throwing JS step: the step is named, with the JS message.
    let failure = run_failure(&forge, "throws", json!({"boom": "now"}), &ctx()).await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 1,
            step: "explode".into(),
            tool: "thrower".into(),
            message:
                "invoke thrower: run: the tool threw: Error: kaboom: now (at line 3, column 34)"
                    .into(),
        }
    );
    let out = forge
        .invoke("throws", &json!({"boom": ""}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"after": true}));

    // A step looping forever: the run's timeout.
    let started = Instant::now();
    let failure = run_failure(&forge, "spins", json!({"spin": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let out = forge
        .invoke("spins", &json!({"spin": false}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"ok": true}));
    // The looping tool on its own: its own timeout.
    let failure = run_failure(&forge, "spinner", json!({"spin": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });

    // A native step sleeping past the timeout.
    let started = Instant::now();
    let failure = run_failure(&forge, "sleeps", json!({"sleep": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let out = forge
        .invoke("sleeps", &json!({"sleep": false}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"x": false}));

    let stats = forge.tool_stats("spins", &ctx()).unwrap();
    assert_eq!((stats.successes, stats.total_calls), (1, 2));
}

// ---- 6. nested compose ------------------------------------------------------------

const TRIPLE: &str = "function execute(i) {\n  if (typeof i.n !== 'number') throw new TypeError('n must be a number');\n  console.log('triple ' + i.n);\n  return { n: i.n * 3 };\n}";
const INC: &str = "function execute(i) {\n  return { n: i.n + 1, label: 'n=' + (i.n + 1) };\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compose_tool_can_be_a_step_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    forged(
        &forge,
        &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    forged(
        &forge,
        &sandbox("inc", INC, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "i", "tool": "inc", "inputMapping": {"n": "$prev.n"}},
    ]);
    let inner = forged(
        &forge,
        &compose("triple_then_inc", steps, &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "first", "tool": "triple_then_inc", "inputMapping": {"n": "$input.x"}},
        {"name": "again", "tool": "triple_then_inc", "inputMapping": {"n": "$prev.n"}},
        {"name": "report", "tool": "echo",
         "inputMapping": {"text": "x=$input.x -> ${steps.first.n} -> $prev.label", "n": "$prev.n"}},
    ]);
    let outer = forged(
        &forge,
        &compose("nested", steps, &[json!({"x": 1})]),
        &ctx(),
    )
    .await;
    assert_eq!(
        outer.tool.steps[0].blake3.as_deref(),
        Some(inner.tool.id.as_str())
    );
    assert_eq!(
        outer.tool.steps[1].blake3.as_deref(),
        Some(inner.tool.id.as_str())
    );
    assert_eq!(outer.tool.steps[2].blake3, None);

    let out = forge
        .invoke("nested", &json!({"x": 2}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"text": "x=2 -> 7 -> n=22", "n": 22}));
    let logs: Vec<(&str, &str)> = out
        .logs
        .iter()
        .map(|l| (l.level, l.message.as_str()))
        .collect();
    assert_eq!(
        logs,
        [
            ("info", "[first] [t] triple 2"),
            ("info", "[again] [t] triple 7")
        ]
    );
    // An inner failure surfaces through both levels, each naming its step.
    let failure = run_failure(&forge, "nested", json!({"x": "two"}), &ctx()).await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 0,
            step: "first".into(),
            tool: "triple_then_inc".into(),
            message: "invoke triple_then_inc: run: step 0 (\"t\", tool triple) failed: invoke triple: run: the tool threw: TypeError: n must be a number (at line 2, column 42)".into(),
        }
    );
}

// ---- 7. cycles across tiers -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_a_promoted_tool_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 2,
            confidence: 0.8,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime(), Arc::new(Registry::open(dir.path()).unwrap()))
        .judge(rules())
        .config(config)
        .build();
    let s1 = ForgeContext::new("agent-a", "s1");
    let s2 = ForgeContext::new("agent-a", "s2");
    let t1 = forged(&forge, &sandbox("t1", INC, &[], &[json!({"n": 1})]), &s1).await;
    let steps = json!([{"name": "call_t1", "tool": "t1", "inputMapping": {"n": "$input.n"}}]);
    let c2 = forged(&forge, &compose("c2", steps, &[json!({"n": 1})]), &s1).await;
    assert_eq!(
        c2.tool.steps[0].blake3.as_deref(),
        Some(t1.tool.id.as_str())
    );
    for n in 0..2 {
        let out = forge.invoke("c2", &json!({"n": n}), &s1).await.unwrap();
        assert_eq!(out.output["n"], json!(n + 1));
    }
    let promoted = forge.promote("c2", &s1, None).await.unwrap();
    assert_eq!(promoted.tier, Tier::Agent);
    assert_eq!(promoted.mode, "compose");
    assert_eq!(forge.cleanup_session(&s1).unwrap(), 1, "t1 was discarded");

    // In a new session, `t1` is free as a name, but a compose `t1` calling
    // c2 would call itself.
    let steps = json!([{"name": "call_c2", "tool": "c2", "inputMapping": {"n": "$input.n"}}]);
    let err = refused(&forge, &compose("t1", steps, &[json!({"n": 1})]), &s2).await;
    assert_eq!(err.stage(), Stage::Validate);
    assert!(
        matches!(err, ForgeError::Validate(ValidateError::Cycle(_))),
        "{err}"
    );
    assert!(
        err.to_string().contains("compose cycle: t1 -> c2 -> t1"),
        "{err}"
    );
    // c2 still runs: its step is pinned by blake3, not by t1's session.
    let out = forge.invoke("c2", &json!({"n": 41}), &s2).await.unwrap();
    assert_eq!(out.output, json!({"n": 42, "label": "n=42"}));
    assert_eq!(out.tier, Tier::Agent);
    assert!(matches!(
        forge.invoke("t1", &json!({"n": 1}), &s2).await,
        Err(InvokeError::NotFound { .. })
    ));
    // The same on a restarted host (nothing cached in memory).
    drop(forge);
    let restarted = forge_on(runtime(), dir.path());
    let out = restarted.invoke("c2", &json!({"n": 1}), &s2).await.unwrap();
    assert_eq!(out.output, json!({"n": 2, "label": "n=2"}));
}

// ---- 8. forge-time validation ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_time_errors_name_the_step_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    let other = ForgeContext::new("agent-b", "session-b");
    forged(
        &forge,
        &sandbox("private_inc", INC, &[], &[json!({"n": 1})]),
        &other,
    )
    .await;

    let cases = [
        (
            json!([
                {"name": "a", "tool": "echo", "inputMapping": {"x": {"y": ["$steps.later.v"]}}},
                {"name": "later", "tool": "echo", "inputMapping": {}},
            ]),
            "validate: compose: steps[0] (\"a\") inputMapping.x.y[0]: `$steps.later.v`: step \"later\" runs later (steps[1]); $steps.NAME must name an earlier step",
        ),
        (
            json!([{"name": "only", "tool": "echo", "inputMapping": {"q": "$prev.output"}}]),
            "validate: compose: steps[0] (\"only\") inputMapping.q: `$prev.output`: the first step has no previous step (use $input)",
        ),
        (
            json!([
                {"name": "a", "tool": "echo", "inputMapping": {}},
                {"name": "b", "tool": "no_such_tool", "inputMapping": {}},
            ]),
            "validate: compose: steps[1] (\"b\"): tool \"no_such_tool\" is not callable by agent \"agent-1\" in session \"session-1\" (not in its session, its agent tier, the shared tier, nor a host-native tool)",
        ),
        (
            json!([{"name": "borrow", "tool": "private_inc", "inputMapping": {"n": 1}}]),
            "validate: compose: steps[0] (\"borrow\"): tool \"private_inc\" is not callable by agent \"agent-1\" in session \"session-1\" (not in its session, its agent tier, the shared tier, nor a host-native tool)",
        ),
        (
            json!([{"name": "price", "tool": "echo", "inputMapping": {"note": "costs $5"}}]),
            "validate: compose: steps[0] (\"price\") inputMapping.note: a lone `$` must start a reference ($input, $prev, $steps.NAME or ${...}); write `$$` for a literal `$` (at character 6 of \"costs $5\")",
        ),
    ];
    for (i, (steps, expected)) in cases.into_iter().enumerate() {
        let name = format!("bad_{i}");
        let err = refused(&forge, &compose(&name, steps, &[json!({})]), &ctx()).await;
        assert_eq!(err.stage(), Stage::Validate, "{err}");
        assert!(
            matches!(
                err,
                ForgeError::Validate(ValidateError::Compose(_) | ValidateError::Step { .. })
            ),
            "{err:?}"
        );
        assert_eq!(err.to_string(), expected);
    }
    assert!(forge.session_tools(&ctx()).unwrap().is_empty());
    // The escaped form is accepted.
    let steps = json!([{"name": "price", "tool": "echo", "inputMapping": {"note": "costs $$5"}}]);
    forged(&forge, &compose("priced", steps, &[json!({})]), &ctx()).await;
    let out = forge.invoke("priced", &json!({}), &ctx()).await.unwrap();
    assert_eq!(out.output, json!({"note": "costs $5"}));
}

// ---- 9. determinism ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_compose_request_gives_the_same_tool_id() {
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "e", "tool": "echo", "inputMapping": {"n": "$prev.n", "note": "from ${input.n}"}},
    ]);
    let request = compose("tripled", steps, &[json!({"n": 2})]);
    let mut ids = Vec::new();
    let mut artifacts = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let forge = forge_on(runtime(), dir.path());
        echo(&forge);
        let triple = forged(
            &forge,
            &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
            &ctx(),
        )
        .await;
        let f = forged(&forge, &request, &ctx()).await;
        assert_eq!(
            f.tool.steps[0].blake3.as_deref(),
            Some(triple.tool.id.as_str())
        );
        let out = forge
            .invoke("tripled", &json!({"n": 5}), &ctx())
            .await
            .unwrap();
        assert_eq!(out.output, json!({"n": 15, "note": "from 5"}));
        artifacts.push(artifact_bytes(&forge, &f.tool.id));
        ids.push((triple.tool.id, f.tool.id));
    }
    assert_eq!(ids[0], ids[1]);
    assert_eq!(artifacts[0], artifacts[1]);
    assert_eq!(
        blake3::hash(&artifacts[0]).to_hex().as_str(),
        ids[0].1.as_str()
    );

    // Another mapping, another tool.
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    forged(
        &forge,
        &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "e", "tool": "echo", "inputMapping": {"n": "$prev.n", "note": "from $input.n"}},
    ]);
    let f = forged(
        &forge,
        &compose("tripled", steps, &[json!({"n": 2})]),
        &ctx(),
    )
    .await;
    assert_ne!(f.tool.id, ids[0].1);
}

// ---- 10. limits and refusals of the compose API ---------------------------

/// Compose tools nested past `MAX_COMPOSE_DEPTH` are refused when the test
/// stage runs them (cycles are impossible by hash; the depth still bounds
/// a long honest chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_past_the_depth_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    let max = temper::forge::MAX_COMPOSE_DEPTH;
    let mut below = "echo".to_string();
    for level in 0..max {
        let name = format!("level{level}");
        let steps = json!([{"name": "s", "tool": below, "inputMapping": {"n": level}}]);
        forged(&forge, &compose(&name, steps, &[json!({})]), &ctx()).await;
        below = name;
    }
    // `max` compose tools deep runs (echo sees the innermost mapping,
    // level0's); one more does not.
    let out = forge.invoke(&below, &json!({}), &ctx()).await.unwrap();
    assert_eq!(out.output, json!({"n": 0}));
    let steps = json!([{"name": "s", "tool": below, "inputMapping": {"n": 99}}]);
    let err = refused(&forge, &compose("too_deep", steps, &[json!({})]), &ctx()).await;
    assert_eq!(err.stage(), Stage::Test, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("compose tools nest more than {max} levels deep")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_registration_and_compose_import_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let spec = |name: &str, output: Value| NativeToolSpec {
        name: name.into(),
        description: "d".into(),
        input_schema: json!({"type": "object"}),
        output_schema: output,
    };
    let ok = |_: Value| async { Ok(json!({})) };
    forge
        .register_native(spec("echo", json!({"type": "object"})), ok)
        .unwrap();
    for (name, schema, why) in [
        (
            "echo",
            json!({"type": "object"}),
            "is already a host-native tool",
        ),
        ("../x", json!({"type": "object"}), "path characters"),
        ("Echo2", json!({"type": "object"}), "snake_case"),
        ("fine", json!({"type": 12}), "outputSchema"),
    ] {
        let err = forge.register_native(spec(name, schema), ok).unwrap_err();
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
    assert_eq!(
        forge
            .native_tools()
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        ["echo"]
    );

    // A compose artifact names steps pinned in this store: importing it
    // elsewhere is refused with the way out, and nothing lands.
    let steps = json!([{"name": "s", "tool": "echo", "inputMapping": {"a": 1}}]);
    let f = forged(&forge, &compose("piped", steps, &[json!({})]), &ctx()).await;
    let bytes = artifact_bytes(&forge, &f.tool.id);
    let dir2 = tempfile::tempdir().unwrap();
    let other = forge_on(runtime(), dir2.path());
    let err = other
        .import(bytes, &ForgeContext::new("b", "s"), Tier::Agent)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("export it with --bundle"), "{err}");
    assert!(
        other
            .visible_tools(&ForgeContext::new("b", "s"))
            .unwrap()
            .is_empty()
    );
}
