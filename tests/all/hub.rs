//! The tool hub through the `temper` binary: a real upstream MCP server
//! written with the official Python SDK (`tests/fixtures/hub/
//! upstream_server.py`, over stdio) whose tools `temper mcp --tools FILE`
//! lists and calls (Temper as a gateway) and the forge uses as compose
//! steps; deny by default through the host policy's `[tools] allow`; name
//! clashes and start failures refused at start; secrets from `env:` kept
//! out of every answer, log and the store.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::cache_dir;
use crate::support::mcp_stdio::{
    McpStdio, mcp_python, tool_output, tools_policy, walk, write_file,
};

const SECRET: &str = "sk-hub-test-SECRET-7731";

/// `temper mcp` over stdio for these tests (see [`McpStdio::start`]).
fn start_mcp(args: &[&str], stderr: &Path) -> McpStdio {
    McpStdio::start(
        &[&["--timeout-ms", "10000"][..], args].concat(),
        stderr,
        &[("TEMPER_TEST_HUB_KEY", SECRET)],
        SECRET,
    )
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `[upstream.NAME]` running the SDK test server (`mode` as its argument).
fn upstream_table(python: &Path, name: &str, mode: Option<&str>, extra: &str) -> String {
    let script = root().join("tests/fixtures/hub/upstream_server.py");
    let mut command = vec![python.display().to_string(), script.display().to_string()];
    command.extend(mode.map(str::to_string));
    format!(
        "[upstream.{name}]\ncommand = {}\nenv = {{ SEARCH_API_KEY = \"env:TEMPER_TEST_HUB_KEY\" }}\n{extra}\n\n",
        serde_json::to_string(&command).unwrap()
    )
}

/// `temper ARGS` with the secret in the environment: (success, stdout,
/// stderr).
fn temper(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(args)
        .arg("--cache-dir")
        .arg(cache_dir())
        .env("TEMPER_TEST_HUB_KEY", SECRET)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn compose_request(name: &str, tool: &str, mapping: Value, test_input: Value) -> Value {
    json!({
        "name": name,
        "description": "Composes a hub tool.",
        "inputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [
            {"name": "only", "tool": tool, "inputMapping": mapping}
        ]},
        "testCases": [{"input": test_input}]
    })
}

#[test]
fn gateway_lists_calls_and_composes_allowed_hub_tools_only() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &upstream_table(
            &python,
            "search",
            None,
            // Its tools are not marked read-only: the operator lets the
            // forge's tests call them.
            "tools = [\"web_search\", \"plain_text\", \"env_probe\"]\nallow_live_tests = true",
        ),
    );
    // plain_text is exposed by the tools file but not allowed by the policy.
    let policy = tools_policy(dir.path(), &["web_search", "env_*"]);
    let stderr = dir.path().join("stderr.txt");
    let mut m = start_mcp(
        &[
            "--store",
            store.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &stderr,
    );

    let list = m.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"web_search") && names.contains(&"env_probe"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"plain_text"),
        "not allowed, so not listed: {names:?}"
    );
    let ws = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "web_search")
        .unwrap();
    assert_eq!(ws["description"], "Searches the (fake) web.");
    assert_eq!(ws["inputSchema"]["required"], json!(["query"]));
    assert!(ws["outputSchema"].is_object(), "{ws}");

    // Called through Temper (a gateway).
    let out = tool_output(&m.call("web_search", json!({"query": "wasm", "limit": 1})));
    assert_eq!(out["results"][0]["title"], "wasm #0");
    // The input is checked before it is sent.
    let bad = m.call("web_search", json!({"query": 1}));
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");
    assert!(
        bad.to_string().contains("does not match inputSchema"),
        "{bad}"
    );
    // Not allowed: not callable, answered as an unknown tool.
    let hidden = m.call("plain_text", json!({"word": "x"}));
    assert_eq!(hidden["error"]["code"], json!(-32602), "{hidden}");
    // Hostile: the upstream sees the secret but Temper never shows it.
    let probe = tool_output(&m.call("env_probe", json!({"name": "SEARCH_API_KEY"})));
    assert_eq!(probe["length"], json!(SECRET.len()));

    // A compose step over an allowed hub tool forges and runs.
    let forged = m.call(
        "forge_tool",
        json!(compose_request(
            "search_twice",
            "web_search",
            json!({"query": "$input.topic"}),
            json!({"topic": "rust"})
        )),
    );
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    let out = tool_output(&m.call("search_twice", json!({"topic": "mcp"})));
    assert_eq!(out["query"], "mcp");
    // One over a hub tool the policy does not allow is refused as not callable.
    let refused = m.call(
        "forge_tool",
        json!(compose_request(
            "hidden_step",
            "plain_text",
            json!({"word": "$input.w"}),
            json!({"w": "x"})
        )),
    );
    let text = refused.to_string();
    assert!(
        text.contains("\\\"plain_text\\\" is not callable by agent"),
        "{text}"
    );
    m.close();

    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(!log.contains(SECRET), "secret in the log");
    for entry in walk(&store) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "secret in {}",
            entry.display()
        );
    }
}

#[test]
fn a_name_clash_between_upstreams_is_refused_at_start_naming_both() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{}{}",
        upstream_table(&python, "alpha", None, "tools = [\"web_search\"]"),
        upstream_table(&python, "beta", None, "tools = [\"web_search\"]"),
    );
    let tools = write_file(dir.path(), "tools.toml", &text);
    let policy = tools_policy(dir.path(), &["*"]);
    let (ok, _, err) = temper(&[
        "tools",
        "--store",
        dir.path().join("s").to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains(
            "\"web_search\" is exposed twice: by upstream \"alpha\" and by upstream \"beta\""
        ),
        "{err}"
    );
    // With a prefix, both are fine.
    let text = format!(
        "{}{}",
        upstream_table(&python, "alpha", None, "tools = [\"web_search\"]"),
        upstream_table(
            &python,
            "beta",
            None,
            "tools = [\"web_search\"]\nprefix = \"beta.\""
        ),
    );
    let tools = write_file(dir.path(), "tools.toml", &text);
    let (ok, out, err) = temper(&[
        "tools",
        "--store",
        dir.path().join("s").to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("web_search") && out.contains("beta.web_search"),
        "{out}"
    );
}

#[test]
fn an_upstream_that_does_not_start_fails_the_start_unless_optional() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &upstream_table(&python, "search", Some("fail-start"), "tools = [\"*\"]"),
    );
    let args = |tools: &Path| {
        vec![
            "tools".to_string(),
            "--store".into(),
            dir.path().join("s").display().to_string(),
            "--tools".into(),
            tools.display().to_string(),
        ]
    };
    let a = args(&tools);
    let (ok, _, err) = temper(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!ok);
    assert!(
        err.contains("upstream \"search\": start: exited (status 3)"),
        "{err}"
    );
    assert!(
        err.contains("starting search upstream"),
        "stderr tail: {err}"
    );
    assert!(
        err.contains("bad key [redacted]") && !err.contains(SECRET),
        "{err}"
    );

    let tools = write_file(
        dir.path(),
        "optional.toml",
        &upstream_table(
            &python,
            "search",
            Some("fail-start"),
            "tools = [\"*\"]\noptional = true",
        ),
    );
    let a = args(&tools);
    let (ok, _, err) = temper(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{err}");
    assert!(!err.contains(SECRET), "{err}");
}

/// The seed's `fetch_analyze_report` on a host without `http_request`:
/// the unknown step tool is named, not a missing `outputSchema`.
#[test]
fn an_unknown_step_tool_is_named_first() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = root().join("tests/fixtures/compose/fetch_analyze_report.json");
    let (ok, _, err) = temper(&[
        "forge",
        fixture.to_str().unwrap(),
        "--judge",
        "rules",
        "--store",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("steps[0] (\"fetch\")") && err.contains("\"http_request\" is not callable"),
        "{err}"
    );
    assert!(!err.contains("outputSchema"), "{err}");
}
