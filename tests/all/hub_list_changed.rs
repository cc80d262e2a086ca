//! Hub tools that an upstream adds or changes while Temper runs
//! (`notifications/tools/list_changed`), driven over `temper mcp` stdio
//! with the Python-SDK upstream fixture.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::hub_builtin::{blocking, root, start_mcp};
use crate::support::mcp_stdio::{mcp_python, tool_output, tools_policy, write_file};

/// `temper mcp` arguments for a host whose tools file starts the Python
/// upstream fixture (`tests/fixtures/hub/upstream_server.py`) as
/// `search`, exposing `tools`, which the policy allows; store and files
/// under `dir`.
fn python_upstream_args(python: &Path, dir: &Path, tools: &[&str]) -> Vec<String> {
    let script = root().join("tests/fixtures/hub/upstream_server.py");
    let command = [python.display().to_string(), script.display().to_string()];
    let tools_toml = write_file(
        dir,
        "tools.toml",
        &format!(
            "[upstream.search]\ncommand = {}\ntools = {}\nallow_live_tests = true\n",
            serde_json::to_string(&command).unwrap(),
            serde_json::to_string(tools).unwrap()
        ),
    );
    let policy = tools_policy(dir, tools);
    let store = dir.join("store");
    [
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools_toml.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A tool an upstream adds later (`list_changed`) becomes a forge tool:
/// listed, callable through `temper mcp`, and a compose step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_appears_later_is_listed_called_and_composed() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr.txt");
    let args = python_upstream_args(&python, dir.path(), &["add_late_tool", "late_tool"]);
    let (before, after, called, forged, composed) = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut m = start_mcp(&args, &stderr);
        let names = |list: Vec<Value>| -> Vec<String> {
            list.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        };
        let before = names(m.tools());
        let added = m.call("add_late_tool", json!({}));
        assert_ne!(added["result"]["isError"], json!(true), "{added}");
        // The upstream's notification is handled asynchronously: list
        // until it shows (at most ~10 s).
        let mut after = Vec::new();
        for _ in 0..100 {
            after = names(m.tools());
            if after.iter().any(|n| n == "late_tool") {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let called = m.call("late_tool", json!({"x": 41}));
        let forged = m.call(
            "forge_tool",
            json!({
                "name": "late_plus",
                "description": "Adds one through the late tool.",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                "implementation": {"mode": "compose", "steps": [
                    {"name": "inc", "tool": "late_tool", "inputMapping": {"x": "$input.n"}}
                ]},
                "testCases": [{"input": {"n": 1}}]
            }),
        );
        let composed = m.call("late_plus", json!({"n": 9}));
        m.close();
        (before, after, called, forged, composed)
    })
    .await;
    assert!(!before.iter().any(|n| n == "late_tool"), "{before:?}");
    assert!(after.iter().any(|n| n == "late_tool"), "{after:?}");
    let out = tool_output(&called);
    assert_eq!(out["result"], 42, "{called}");
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    assert_eq!(tool_output(&composed)["result"], 10, "{composed}");
}

/// An upstream that changes a tool's input schema (`list_changed`): calls
/// are checked against the schema it listed last, not the one the host
/// registered at the start (the hub checks the input, the forge does not
/// check it again against its older copy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_input_schema_is_the_one_checked() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr.txt");
    let args = python_upstream_args(&python, dir.path(), &["bounded", "widen"]);
    let (refused, small, widened, later) = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut m = start_mcp(&args, &stderr);
        let refused = m.call("bounded", json!({"x": 50}));
        let small = m.call("bounded", json!({"x": 5}));
        let widened = m.call("widen", json!({}));
        // The relisting follows the notification asynchronously: call
        // until the wider schema is the one checked (at most ~10 s).
        let mut later = Value::Null;
        for _ in 0..100 {
            later = m.call("bounded", json!({"x": 50}));
            if later["result"]["isError"] != json!(true) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        m.close();
        (refused, small, widened, later)
    })
    .await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("input does not match inputSchema: /x: 50 is greater than the maximum of 10"),
        "{refused}"
    );
    assert_eq!(tool_output(&small)["result"], 5, "{small}");
    assert_ne!(widened["result"]["isError"], json!(true), "{widened}");
    assert_eq!(tool_output(&later)["result"], 50, "{later}");
}
