//! Forge-time side effects (issue 44 item 8): a forge's tests never call
//! an upstream tool that is not marked `readOnlyHint: true`. Through
//! `temper mcp` over stdio, with an upstream (`tests/fixtures/hub/
//! side_effect_upstream.py`) that appends every call it receives to a
//! file: a forge wrapping its destructive `set_flag` makes no call and is
//! refused saying how to go on; with the answers recorded in the request
//! it passes, still with no call; with the operator's `allow_live_tests`
//! the calls arrive; the read-only `get_flag` is called live as before.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::mcp_stdio::{McpStdio, tool_output, tools_policy, write_file};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/side_effect_upstream.py")
}

/// `temper mcp` with the `nice` upstream (`extra` in its table); the calls
/// it receives go to the returned file.
fn start(dir: &Path, extra: &str) -> (McpStdio, PathBuf) {
    let calls = dir.join("calls.jsonl");
    let command = [
        "/usr/bin/python3".to_string(),
        script().display().to_string(),
        calls.display().to_string(),
    ];
    let tools = write_file(
        dir,
        "tools.toml",
        &format!(
            "[upstream.nice]\ncommand = {}\nprefix = \"nice.\"\ntools = [\"*\"]\n{extra}\n",
            serde_json::to_string(&command).unwrap()
        ),
    );
    let policy = tools_policy(dir, &["nice.*"]);
    let m = McpStdio::start(
        &[
            "--store",
            dir.join("store").to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &dir.join("stderr.txt"),
        &[],
        "no-secret-here",
    );
    (m, calls)
}

/// The calls the upstream received.
fn received(calls: &Path) -> Vec<Value> {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A compose tool over `tool`, its one test case `case` (with `input`).
fn wrapper(name: &str, tool: &str, case: Value) -> Value {
    json!({
        "name": name,
        "description": "Sets or reads a flag through the admin console.",
        "inputSchema": {"type": "object", "properties": {"flag": {"type": "string"}}, "required": ["flag"]},
        "implementation": {"mode": "compose", "steps": [
            {"name": "only", "tool": tool, "inputMapping": {"flag": "$input.flag"}}
        ]},
        "testCases": [case]
    })
}

#[test]
fn a_forge_never_calls_a_tool_that_may_act_on_its_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, calls) = start(dir.path(), "");

    // Refused at the test stage, with no call to the upstream, saying how
    // to supply the answer.
    let refused = refusal(&m.call(
        "forge_tool",
        wrapper(
            "flagger",
            "nice.set_flag",
            json!({"input": {"flag": "beta"}}),
        ),
    ));
    assert_eq!(refused["success"], json!(false), "{refused}");
    assert_eq!(refused["stage"], json!("test"), "{refused}");
    let error = refused["errors"][0].as_str().unwrap();
    assert!(
        error.contains(
            "not called while forging: \"nice.set_flag\" (upstream \"nice\") is not marked readOnlyHint: true, so calling it from a test would act on the upstream. Record its answer to this input in testCases[0].recordedCalls: [{\"tool\": \"nice.set_flag\", \"input\": {\"flag\":\"beta\"}, \"output\": …}] (or \"error\": \"…\"), or ask the operator to set allow_live_tests = true in [upstream.nice] of the tools file"
        ),
        "{error}"
    );
    assert_eq!(received(&calls), Vec::<Value>::new());

    // With the answer recorded in the request: forged, still no call.
    let recorded = tool_output(&m.call(
        "forge_tool",
        wrapper(
            "flagger",
            "nice.set_flag",
            json!({
                "input": {"flag": "beta"},
                "expectedOutput": {"state": "set"},
                "recordedCalls": [{"tool": "nice.set_flag", "input": {"flag": "beta"}, "output": {"flag": "beta", "state": "set"}}]
            }),
        ),
    ));
    assert_eq!(recorded["success"], json!(true), "{recorded}");
    assert_eq!(received(&calls), Vec::<Value>::new());

    // An agent's own call of the forged tool does reach the upstream.
    let out = tool_output(&m.call("flagger", json!({"flag": "gamma"})));
    assert_eq!(out, json!({"flag": "gamma", "state": "set"}));
    assert_eq!(
        received(&calls),
        [json!({"tool": "set_flag", "arguments": {"flag": "gamma"}})]
    );

    // A read-only tool is called live while testing, as before (the test
    // case runs twice: the repeat run is the determinism evidence).
    let reader = tool_output(&m.call(
        "forge_tool",
        wrapper(
            "reader",
            "nice.get_flag",
            json!({"input": {"flag": "beta"}}),
        ),
    ));
    assert_eq!(reader["success"], json!(true), "{reader}");
    let got: Vec<Value> = received(&calls)
        .into_iter()
        .filter(|c| c["tool"] == "get_flag")
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    m.close();
}

#[test]
fn the_operator_may_allow_live_tests() {
    let dir = tempfile::tempdir().unwrap();
    let (mut m, calls) = start(dir.path(), "allow_live_tests = true");
    let forged = tool_output(&m.call(
        "forge_tool",
        wrapper(
            "flagger",
            "nice.set_flag",
            json!({"input": {"flag": "beta"}}),
        ),
    ));
    assert_eq!(forged["success"], json!(true), "{forged}");
    assert_eq!(
        received(&calls),
        [
            json!({"tool": "set_flag", "arguments": {"flag": "beta"}}),
            json!({"tool": "set_flag", "arguments": {"flag": "beta"}})
        ]
    );
    m.close();
}

/// A refused tool call's structured content (an error result).
fn refusal(response: &Value) -> Value {
    let r = &response["result"];
    assert_eq!(r["isError"], json!(true), "not refused: {response}");
    r["structuredContent"].clone()
}
