//! Against a real upstream written with the official MCP Python SDK
//! (`tests/fixtures/hub/upstream_server.py`), over stdio.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::config::ToolsFile;

const SECRET: &str = "sk-upstream-SECRET-4242";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The SDK venv's python, or None (test skipped with a notice) unless
/// TEMPER_REQUIRE_MCP_PY=1.
fn python() -> Option<PathBuf> {
    let python = root().join("target/mcp-venv/bin/python");
    let ok = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver"])
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "no Python venv with the `mcp` package at {} (run scripts/mcp-venv.sh)",
        python.display()
    );
    if std::env::var("TEMPER_REQUIRE_MCP_PY").as_deref() == Ok("1") {
        panic!("TEMPER_REQUIRE_MCP_PY=1 but {why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// An `[upstream.search]` running the test server with `extra` TOML lines.
fn config(python: &Path, mode: Option<&str>, extra: &str) -> UpstreamConfig {
    let script = root().join("tests/fixtures/hub/upstream_server.py");
    let mut command = vec![python.display().to_string(), script.display().to_string()];
    command.extend(mode.map(str::to_string));
    let text = format!(
        "[upstream.search]\ncommand = {}\nenv = {{ SEARCH_API_KEY = \"env:TEST_SEARCH_KEY\" }}\n{extra}\n",
        serde_json::to_string(&command).unwrap()
    );
    let file = ToolsFile::parse(Path::new("tools.toml"), &text, |name| {
        (name == "TEST_SEARCH_KEY").then(|| SECRET.to_string())
    })
    .unwrap();
    file.upstreams["search"].clone()
}

async fn start(extra: &str) -> Option<Upstream> {
    let python = python()?;
    Some(Upstream::start(config(&python, None, extra)).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_selected_tools_and_calls_them() {
    let Some(up) = start(
        "tools = [\"web_search\", \"plain_text\", \"env_probe\", \"bad_schema\"]\nprefix = \"s.\"",
    )
    .await
    else {
        return;
    };
    let mut names: Vec<String> = up.tools().into_iter().map(|t| t.name).collect();
    names.sort();
    // bad_schema's input schema does not compile: skipped.
    assert_eq!(names, ["s.env_probe", "s.plain_text", "s.web_search"]);
    let ws = up
        .tools()
        .into_iter()
        .find(|t| t.name == "s.web_search")
        .unwrap();
    // Calls to a stdio upstream take the direct path (direct.rs).
    let conn = crate::lock(&up.shared.conn).clone().unwrap();
    assert!(conn.direct.as_ref().is_some_and(|d| d.enabled()));
    assert_eq!(ws.remote_name, "web_search");
    assert_eq!(ws.upstream, "search");
    assert_eq!(ws.description, "Searches the (fake) web.");
    assert_eq!(ws.input_schema["required"], json!(["query"]));
    assert!(ws.output_schema.is_some(), "outputSchema kept");

    // structuredContent is the output.
    let out = up
        .call("s.web_search", json!({"query": "wasm", "limit": 1}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"query": "wasm", "results": [{"title": "wasm #0", "url": "https://example.com/0"}]})
    );
    // Text that is not JSON is the value as a string.
    let out = up
        .call("s.plain_text", json!({"word": "hub"}))
        .await
        .unwrap();
    assert_eq!(out, json!("hello hub"));
    // A gateway gets the upstream's result as it came.
    let out = up
        .call_output("s.plain_text", json!({"word": "hub"}), None)
        .await
        .unwrap();
    let result = serde_json::to_value(out.result.unwrap()).unwrap();
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "hello hub"}])
    );
    assert!(result.get("structuredContent").is_none(), "{result}");
    // The listing keeps the upstream's own members, with the exposed name.
    assert_eq!(ws.definition["name"], json!("s.web_search"));
    assert_eq!(ws.definition["inputSchema"], ws.input_schema);
    assert!(ws.definition.contains_key("outputSchema"));
    // Text that is JSON is parsed; the child's environment is cleared
    // except for the configured env.
    let out = up
        .call("s.env_probe", json!({"name": "SEARCH_API_KEY"}))
        .await
        .unwrap();
    assert_eq!(out["set"], json!(true));
    assert_eq!(out["length"], json!(SECRET.len()));
    let keys: Vec<String> = serde_json::from_value(out["keys"].clone()).unwrap();
    for inherited in ["HOME", "PATH", "USER", "CARGO", "RUST_LOG"] {
        assert!(
            !keys.iter().any(|k| k == inherited),
            "{inherited} inherited: {keys:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unselected_tools_are_absent() {
    let Some(up) = start("tools = [\"web_search\"]").await else {
        return;
    };
    assert_eq!(up.tools().len(), 1);
    let err = up.call("crash", json!({"status": 1})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"search\" no longer has tool \"crash\""
    );
    // Nothing was sent: the upstream still answers.
    up.call("web_search", json!({"query": "x"})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_selection_exposes_nothing() {
    let Some(up) = start("").await else { return };
    assert!(up.tools().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_and_output_are_checked() {
    let Some(up) = start("tools = [\"*\"]").await else {
        return;
    };
    let err = up
        .call("web_search", json!({"query": 5}))
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Input { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "upstream \"search\" tool \"web_search\": input does not match inputSchema: /query"
        ),
        "{msg}"
    );
    let err = up.call("liar", json!({})).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Output { .. }), "{err:?}");
    assert!(
        err.to_string().contains("does not match outputSchema"),
        "{err}"
    );
    // isError: for a gateway, the upstream's result as it came.
    let out = up
        .call_output("fail", json!({"reason": "r1"}), None)
        .await
        .unwrap();
    assert!(
        out.error
            .as_deref()
            .unwrap()
            .contains("failed on purpose: r1")
    );
    let result = serde_json::to_value(out.result.unwrap()).unwrap();
    assert_eq!(result["isError"], json!(true));
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("failed on purpose: r1"),
        "{result}"
    );
    // isError: the upstream's message, naming upstream and tool.
    let err = up.call("fail", json!({"reason": "r1"})).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Call { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("upstream \"search\" tool \"fail\": "),
        "{msg}"
    );
    assert!(msg.contains("failed on purpose: r1"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_call_ends_at_timeout() {
    let Some(up) = start("tools = [\"sleep\", \"web_search\"]\ntimeout_ms = 3000").await else {
        return;
    };
    let t = Instant::now();
    let err = up.call("sleep", json!({"seconds": 20})).await.unwrap_err();
    let took = t.elapsed();
    assert_eq!(
        err.to_string(),
        "upstream \"search\" tool \"sleep\": no answer within 3000 ms"
    );
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

/// Polls until `call` succeeds (the upstream was restarted), at most 15 s.
async fn until_back(up: &Upstream) -> Duration {
    let t = Instant::now();
    loop {
        match up.call("web_search", json!({"query": "back"})).await {
            Ok(_) => return t.elapsed(),
            Err(e) if t.elapsed() < Duration::from_secs(15) => {
                assert!(e.to_string().starts_with("upstream \"search\""), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not restarted: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_exit_fails_the_call_and_restarts() {
    let Some(up) = start("tools = [\"*\"]").await else {
        return;
    };
    let err = up.call("crash", json!({"status": 1})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"search\" exited (status 1) (calling \"crash\")"
    );
    until_back(&up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_rpc_is_an_error() {
    let script = root().join("tests/fixtures/hub/raw_upstream.py");
    let text = format!(
        "[upstream.raw]\ncommand = [\"/usr/bin/python3\", {:?}]\ntools = [\"*\"]\ntimeout_ms = 20000\n",
        script.display().to_string()
    );
    let cfg = ToolsFile::parse(Path::new("t.toml"), &text, |_| None)
        .unwrap()
        .upstreams["raw"]
        .clone();
    let up = Upstream::start(cfg).await.unwrap();
    let t = Instant::now();
    let err = up.call("garbage", json!({})).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, UpstreamError::Gone { .. }), "{err:?}");
    assert!(
        msg.starts_with("upstream \"raw\" sent malformed JSON-RPC"),
        "{msg}"
    );
    assert!(msg.ends_with("(calling \"garbage\")"), "{msg}");
    assert!(
        !msg.contains("this is not json-rpc"),
        "the line is not quoted: {msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "not at the timeout");
    // Restarted: the tool is listed again.
    let t = Instant::now();
    while crate::lock(&up.shared.conn).is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "not restarted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(up.tools().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_result_is_an_error() {
    let Some(up) = start("tools = [\"*\"]\nmax_result_bytes = 100000").await else {
        return;
    };
    // Under the cap: fine.
    let out = up.call("big", json!({"n": 1000})).await.unwrap();
    assert_eq!(out.as_str().unwrap().len(), 1000);
    let err = up.call("big", json!({"n": 200000})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"search\" sent a message over the 100000-byte cap (calling \"big\")"
    );
    until_back(&up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_failure_shows_stderr_tail_without_secrets() {
    let Some(python) = python() else { return };
    let err = Upstream::start(config(&python, Some("fail-start"), "tools = [\"*\"]"))
        .await
        .unwrap_err();
    let msg = err.to_string();
    let debug = format!("{err:?}");
    assert!(
        msg.starts_with("upstream \"search\": start: exited (status 3)"),
        "{msg}"
    );
    assert!(
        msg.contains("starting search upstream"),
        "stderr tail: {msg}"
    );
    assert!(msg.contains("bad key [redacted]"), "{msg}");
    assert!(
        !msg.contains(SECRET) && !debug.contains(SECRET),
        "secret leaked: {debug}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_start_is_bounded_by_start_timeout_not_timeout() {
    let Some(python) = python() else { return };
    // Slower to start (4 s) than a call may take (2 s), within the start's
    // limit (30 s): served.
    let cfg = config(
        &python,
        Some("slow-start=4"),
        "tools = [\"web_search\"]\ntimeout_ms = 2000\nstart_timeout_ms = 30000",
    );
    assert_eq!(cfg.start_timeout, Duration::from_secs(30));
    let t = Instant::now();
    let up = Upstream::start(cfg).await.unwrap();
    assert!(t.elapsed() >= Duration::from_secs(4), "{:?}", t.elapsed());
    let out = up
        .call("web_search", json!({"query": "slow"}))
        .await
        .unwrap();
    assert_eq!(out["query"], json!("slow"));
    drop(up);
    // Past its start limit: a start error naming the upstream and the key.
    let t = Instant::now();
    let err = Upstream::start(config(
        &python,
        Some("slow-start=30"),
        "tools = [\"*\"]\ntimeout_ms = 60000\nstart_timeout_ms = 1500",
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, UpstreamError::Start { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "upstream \"search\": start: no MCP handshake within 1500 ms (start_timeout_ms)"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn start_timeout_defaults_to_a_minute() {
    let file = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.a]\ncommand = [\"x\"]\ntimeout_ms = 1000\n",
        |_| None,
    )
    .unwrap();
    assert_eq!(file.upstreams["a"].start_timeout, Duration::from_secs(60));
    assert_eq!(file.upstreams["a"].timeout, Duration::from_secs(1));
    for (bad, why) in [
        ("0", "must be at least 1"),
        ("600001", "must be at most 600000"),
    ] {
        let err = ToolsFile::parse(
            Path::new("t.toml"),
            &format!("[upstream.a]\ncommand = [\"x\"]\nstart_timeout_ms = {bad}\n"),
            |_| None,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("tools file t.toml: [upstream.a] `start_timeout_ms`: {why}")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_program_is_a_start_error() {
    let cfg = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.nope]\ncommand = [\"/nonexistent/temper-upstream\"]\n",
        |_| None,
    )
    .unwrap()
    .upstreams["nope"]
        .clone();
    let err = Upstream::start(cfg).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("upstream \"nope\": start: cannot run \"/nonexistent/temper-upstream\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_list_changed() {
    let Some(up) = start("tools = [\"*\"]").await else {
        return;
    };
    assert!(!up.tools().iter().any(|t| t.name == "late_tool"));
    up.call("add_late_tool", json!({})).await.unwrap();
    let t = Instant::now();
    while !up.tools().iter().any(|t| t.name == "late_tool") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "list_changed not followed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = up.call("late_tool", json!({"x": 41})).await.unwrap();
    assert_eq!(out, json!({"result": 42}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_elicitation_and_sampling_are_refused_naming_it() {
    let Some(up) = start("tools = [\"ask\", \"sample\", \"web_search\"]").await else {
        return;
    };
    for (tool, method) in [
        ("ask", "elicitation/create"),
        ("sample", "sampling/createMessage"),
    ] {
        let out = up.call(tool, json!({})).await.unwrap();
        let text = out.as_str().unwrap_or_default();
        assert!(text.starts_with("refused: "), "{tool}: {out}");
        assert!(
            text.contains(&format!(
                "upstream \"search\" asked for {method}: Temper does not relay it"
            )),
            "{tool}: {out}"
        );
    }
    // The connection is still up.
    up.call("web_search", json!({"query": "after"}))
        .await
        .unwrap();
}

/// Calls `tool` of `up` with a relay, answering each request the upstream
/// makes with `answer(method, params)`; the call's text and the log notes.
async fn relayed_call(
    up: &Upstream,
    tool: &str,
    answer: impl Fn(&str, &Value) -> Option<Value>,
) -> (String, Vec<Value>) {
    let (relay, mut rx) = Relay::new(false);
    let call = up.call_output(tool, json!({}), Some(relay));
    let mut call = std::pin::pin!(call);
    let mut logs = Vec::new();
    let out = loop {
        tokio::select! {
            Some(note) = rx.recv() => match note {
                CallNote::Log(params) => logs.push(params),
                CallNote::Ask(ask) => {
                    let reply = answer(ask.method, &ask.params)
                        .ok_or_else(|| AskRefused::new("search", ask.method, "declined by the test"));
                    let _ = ask.reply.send(reply);
                }
                CallNote::Progress(_) => {}
            },
            out = &mut call => break out.unwrap(),
        }
    };
    while let Ok(CallNote::Log(params)) = rx.try_recv() {
        logs.push(params);
    }
    (out.value.as_str().unwrap_or_default().to_string(), logs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_of_a_call_reach_its_relay_without_secrets() {
    let Some(up) = start("tools = [\"chatty\"]").await else {
        return;
    };
    let (text, logs) = relayed_call(&up, "chatty", |_, _| None).await;
    assert_eq!(text, "chatty: done");
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert_eq!(logs[0]["level"], "info");
    assert_eq!(logs[0]["data"], "chatty: starting");
    assert_eq!(logs[1]["level"], "warning");
    // The upstream's secret (from its `env`) is cut out.
    assert_eq!(logs[1]["data"], "chatty: using key [redacted]");
    assert!(!format!("{logs:?}").contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_requests_go_to_the_caller_when_the_tools_file_relays_them() {
    let Some(up) =
        start("tools = [\"ask\", \"sample\"]\nrelay = [\"elicitation\", \"sampling\"]").await
    else {
        return;
    };
    let answer = |method: &str, params: &Value| match method {
        "elicitation/create" => {
            assert_eq!(params["message"], "Which one?", "{params}");
            Some(json!({"action": "accept", "content": {"pick": "b"}}))
        }
        "sampling/createMessage" => Some(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "hello"},
            "model": "test-model"
        })),
        other => panic!("asked {other}"),
    };
    assert_eq!(
        relayed_call(&up, "ask", answer).await.0,
        "answered: accept b"
    );
    assert_eq!(
        relayed_call(&up, "sample", answer).await.0,
        "sampled: hello"
    );
    // The caller declines: the upstream hears a refusal naming itself.
    let (text, _) = relayed_call(&up, "ask", |_, _| None).await;
    assert!(
        text.starts_with("refused: ") && text.contains("declined by the test"),
        "{text}"
    );
    // A call without a relay (a caller that cannot answer): refused, the
    // reason said.
    let out = up.call("ask", json!({})).await.unwrap();
    let text = out.as_str().unwrap_or_default();
    assert!(
        text.contains("asked for elicitation/create: Temper relays it only during a call"),
        "{text}"
    );
}
