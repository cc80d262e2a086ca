//! A token that narrows the hub tools, over `temper mcp --http`: what it
//! hides is neither listed nor callable.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::hub_builtin::{FakeLlm, KEY, builtins_tools_file};
use crate::support::cache_dir;
use crate::support::http::TestServer;
use crate::support::mcp_stdio::{tool_output, tools_policy, write_file};

/// One JSON-RPC exchange with `temper mcp --http`: the response, from a
/// JSON body or the last SSE event, and the session id header.
async fn http_rpc(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    message: Value,
) -> (Option<Value>, Option<String>) {
    let mut r = client
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string());
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    let resp = r.send().await.unwrap();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let body = resp.text().await.unwrap();
    let value = if body.trim_start().starts_with('{') {
        serde_json::from_str(&body).ok()
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
    };
    (value, sid)
}

/// A token that narrows the hub tools hides a built-in from its caller:
/// not listed, not callable; another token sees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_narrowing_hides_a_built_in() {
    use sha2::Digest;
    let llm = FakeLlm::start().await;
    let server = TestServer::start().await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let tools = builtins_tools_file(dir.path(), &llm, port);
    let policy = tools_policy(dir.path(), &["generate_text", "http_request"]);
    let hash = |t: &str| -> String {
        sha2::Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let tokens = write_file(
        dir.path(),
        "tokens.toml",
        &format!(
            "[tokens.\"sha256:{}\"]\nagent = \"alice\"\ntools = [\"generate_text\"]\n\n[tokens.\"sha256:{}\"]\nagent = \"bob\"\n",
            hash("alice-token"),
            hash("bob-token")
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args([
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--judge",
            "rules",
            "--cache-dir",
        ])
        .arg(cache_dir())
        .arg("--store")
        .arg(dir.path().join("store"))
        .arg("--tools")
        .arg(&tools)
        .arg("--policy")
        .arg(&policy)
        .arg("--tokens")
        .arg(&tokens)
        .env("TEMPER_TEST_LLM_KEY", KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            assert!(!line.contains(KEY), "key in the log: {line}");
            if let Some(rest) = line.strip_prefix("temper mcp: listening on ") {
                let _ = tx.send(rest.trim().to_string());
            }
        }
    });
    let url = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(120)))
        .await
        .unwrap()
        .expect("the server says where it listens");
    let client = reqwest::Client::new();
    let mut seen = HashMap::new();
    for token in ["alice-token", "bob-token"] {
        let (init, sid) = http_rpc(
            &client,
            &url,
            token,
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .await;
        assert!(init.is_some_and(|i| i.get("result").is_some()));
        let sid = sid.expect("a session id");
        http_rpc(
            &client,
            &url,
            token,
            Some(&sid),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        let (list, _) = http_rpc(
            &client,
            &url,
            token,
            Some(&sid),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        )
        .await;
        let names: Vec<String> = list.unwrap()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        let (called, _) = http_rpc(
            &client,
            &url,
            token,
            Some(&sid),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "http_request", "arguments": {"method": "GET", "url": format!("http://127.0.0.1:{port}/json")}}}),
        )
        .await;
        seen.insert(token, (names, called.unwrap()));
    }
    let _ = child.kill();
    let _ = child.wait();

    let (names, called) = &seen["alice-token"];
    assert!(names.contains(&"generate_text".to_string()), "{names:?}");
    assert!(
        !names.contains(&"http_request".to_string()),
        "narrowed away: {names:?}"
    );
    assert_eq!(called["error"]["code"], json!(-32602), "{called}");
    let (names, called) = &seen["bob-token"];
    assert!(
        names.contains(&"generate_text".to_string()) && names.contains(&"http_request".to_string()),
        "{names:?}"
    );
    assert_eq!(
        tool_output(called)["body"],
        json!({"hello": "world"}),
        "{called}"
    );
    assert_eq!(server.requests().len(), 1, "only bob's call was sent");
}
