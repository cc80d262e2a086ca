//! A token that narrows the hub tools, over `temper mcp --http`: what it
//! hides is neither listed nor callable.

use std::collections::HashMap;

use serde_json::json;

use crate::hub_builtin::{FakeLlm, KEY, builtins_tools_file};
use crate::mcp_http::{Server, token_entry};
use crate::support::http::TestServer;
use crate::support::mcp_stdio::{tool_output, tools_policy, write_file};

/// A token that narrows the hub tools hides a built-in from its caller:
/// not listed, not callable; another token sees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_narrowing_hides_a_built_in() {
    let llm = FakeLlm::start().await;
    let server = TestServer::start().await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let tools = builtins_tools_file(dir.path(), &llm, port);
    let policy = tools_policy(dir.path(), &["generate_text", "http_request"]);
    let tokens = write_file(
        dir.path(),
        "tokens.toml",
        &format!(
            "{}{}",
            token_entry("alice-token", "alice", "tools = [\"generate_text\"]"),
            token_entry("bob-token", "bob", "")
        ),
    );
    let mcp = Server::start_with_env(
        &dir.path().join("store"),
        &[
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--tokens",
            tokens.to_str().unwrap(),
        ],
        &[("TEMPER_TEST_LLM_KEY", KEY)],
    );
    let mut seen = HashMap::new();
    for token in ["alice-token", "bob-token"] {
        let mut client = mcp.client(Some(token));
        client.open().await;
        let names = client.tool_names().await;
        let called = client
            .call(
                "http_request",
                json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/json")}),
            )
            .await;
        seen.insert(token, (names, called.response().clone()));
    }
    let log = mcp.log();
    assert!(!log.contains(KEY), "key in the log: {log}");
    drop(mcp);

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
