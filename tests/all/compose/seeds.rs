//! The two compose seeds end to end: research_and_summarize over
//! host-native stand-ins, and fetch_analyze_report fetching from a server on
//! 127.0.0.1.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use temper::RunError;
use temper::artifact::StepRef;
use temper::forge::{Forge, ForgeError, InvokeError, Stage};
use temper::store::Tier;

use super::{
    JsonServer, compose_seed, ctx, forge_on, forged, native, refused, run_failure, runtime,
};

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
