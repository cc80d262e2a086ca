//! The tool hub over Streamable HTTP through the `temper` binary: a real
//! upstream written with the official MCP TypeScript SDK
//! (`tests/mcp-ts/upstream_server.mjs`, on 127.0.0.1, a free port) that
//! `temper mcp --tools FILE` lists and calls (Temper as a gateway) and the
//! forge uses as a compose step; its input and output schemas checked;
//! `prefix` naming; the host policy hiding what it does not allow; an
//! upstream that cannot be reached failing the start unless `optional`;
//! the header secret kept out of every answer, log and the store.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::cache_dir;
use crate::support::mcp_stdio::{McpStdio, tool_output, tools_policy, walk};

/// The Authorization header Temper sends (from `env:`): distinctive, so a
/// leak anywhere is found.
const SECRET: &str = "Bearer hubhttp-SECRET-e41b07";

/// `temper mcp` over stdio for these tests (see [`McpStdio::start`]).
fn start_mcp(args: &[&str], stderr: &Path) -> McpStdio {
    McpStdio::start(
        &[&["--timeout-ms", "10000"][..], args].concat(),
        stderr,
        &[("TEMPER_TEST_GH_AUTH", SECRET)],
        "hubhttp-SECRET-e41b07",
    )
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether node and the SDK are installed; when not, the test is skipped
/// with a notice (a failure under TEMPER_REQUIRE_MCP_TS=1).
fn has_ts_sdk() -> bool {
    let sdk = root().join("tests/mcp-ts/node_modules/@modelcontextprotocol/sdk/package.json");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && sdk.exists() {
        return true;
    }
    let why = "no node, or no tests/mcp-ts/node_modules (run scripts/mcp-npm.sh)";
    if std::env::var("TEMPER_REQUIRE_MCP_TS").as_deref() == Ok("1") {
        panic!("TEMPER_REQUIRE_MCP_TS=1 but {why}");
    }
    eprintln!("SKIPPED hub_http test: {why}");
    false
}

/// The TypeScript upstream on a free port, requiring `Authorization:
/// SECRET`; stopped when dropped.
struct TsUpstream {
    child: Child,
    port: u16,
}

impl TsUpstream {
    fn start() -> Self {
        let mut child = Command::new("node")
            .arg(root().join("tests/mcp-ts/upstream_server.mjs"))
            .args(["--port", "0"])
            .env("UPSTREAM_AUTH", SECRET)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("upstream_server.mjs said {line:?}"))
            .parse()
            .unwrap();
        Self { child, port }
    }
}

impl Drop for TsUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tools file with `[upstream.gh]` at `url`, its Authorization header
/// read from TEMPER_TEST_GH_AUTH.
fn tools_file(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let path = dir.join("tools.toml");
    std::fs::write(
        &path,
        format!(
            "[upstream.gh]\nurl = {url:?}\nheaders = {{ Authorization = \"env:TEMPER_TEST_GH_AUTH\" }}\nprefix = \"github.\"\ntimeout_ms = 5000\n{extra}\n"
        ),
    )
    .unwrap();
    path
}

fn contains_secret(bytes: &[u8]) -> bool {
    let needle = b"hubhttp-SECRET-e41b07";
    bytes.windows(needle.len()).any(|w| w == needle)
}

/// `temper ARGS` with the secret in the environment: (success, stdout,
/// stderr).
fn temper(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(args)
        .arg("--cache-dir")
        .arg(cache_dir())
        .env("TEMPER_TEST_GH_AUTH", SECRET)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The message of a tool error (`temper mcp` answers `{"stage": ...,
/// "error": ...}` as the text).
fn error_text(response: &Value) -> String {
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    let text = response["result"]["content"][0]["text"].as_str().unwrap();
    match serde_json::from_str::<Value>(text) {
        Ok(v) if v["error"].is_string() => v["error"].as_str().unwrap().to_string(),
        _ => text.to_string(),
    }
}

#[test]
fn gateway_lists_calls_and_composes_a_typescript_http_upstream() {
    if !has_ts_sdk() {
        return;
    }
    let upstream = TsUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tools = tools_file(
        dir.path(),
        &format!("http://127.0.0.1:{}/mcp", upstream.port),
        // The fake issue tracker marks no tool read-only: the operator
        // allows the forge's tests to call it live.
        "tools = [\"search_issues\", \"echo_text\", \"liar\", \"fail\", \"revoked\"]\nallow_live_tests = true",
    );
    // github.fail is exposed by the tools file but not allowed.
    let policy = tools_policy(
        dir.path(),
        &[
            "github.search_issues",
            "github.echo_text",
            "github.liar",
            "github.revoked",
        ],
    );
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
    assert!(!contains_secret(list.to_string().as_bytes()));
    let listed = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    // Named with the prefix; the policy hides what it does not allow.
    for name in ["github.search_issues", "github.echo_text", "github.liar"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert!(!names.contains(&"github.fail"), "{names:?}");
    assert!(!names.contains(&"search_issues"), "{names:?}");
    let search = listed
        .iter()
        .find(|t| t["name"] == "github.search_issues")
        .unwrap();
    assert_eq!(search["description"], "Searches the (fake) issue tracker.");
    assert_eq!(search["inputSchema"]["required"], json!(["query"]));
    assert_eq!(
        search["outputSchema"]["required"],
        json!(["query", "total", "items"])
    );

    // Called through Temper (a gateway): structuredContent is the output.
    let out = tool_output(&m.call("github.search_issues", json!({"query": "wasm", "limit": 2})));
    assert_eq!(
        out,
        json!({"query": "wasm", "total": 2, "items": [{"id": 1, "title": "wasm #1"}, {"id": 2, "title": "wasm #2"}]})
    );
    // A plain-text answer passes through as plain text (no structuredContent).
    let echoed = m.call("github.echo_text", json!({"text": "hi"}));
    assert_eq!(
        echoed["result"]["content"],
        json!([{"type": "text", "text": "you said: hi"}]),
        "{echoed}"
    );
    assert!(
        echoed["result"].get("structuredContent").is_none(),
        "{echoed}"
    );
    // The input is checked against the upstream's input schema before it
    // is sent (limit is at most 10 there).
    let bad = error_text(&m.call("github.search_issues", json!({"query": "x", "limit": 50})));
    assert!(
        bad.contains(r#"github.search_issues: upstream "gh" tool "search_issues": input does not match inputSchema: /limit: 50 is greater than the maximum of 10"#),
        "{bad}"
    );
    // The output is checked against its output schema.
    let lie = error_text(&m.call("github.liar", json!({})));
    assert!(
        lie.contains("upstream \"gh\" tool \"liar\": output does not match outputSchema"),
        "{lie}"
    );
    // A 401 on a call that echoes the header: named, the secret cut out.
    let revoked = error_text(&m.call("github.revoked", json!({})));
    assert!(
        revoked
            .contains("upstream \"gh\" answered HTTP 401 Unauthorized: token revoked: [redacted]"),
        "{revoked}"
    );
    // Not allowed: not callable, answered as an unknown tool.
    let hidden = m.call("github.fail", json!({"reason": "x"}));
    assert_eq!(hidden["error"]["code"], json!(-32602), "{hidden}");

    // A compose step over the HTTP upstream's tool forges and runs.
    let forged = m.call(
        "forge_tool",
        json!({
            "name": "issue_titles",
            "description": "Searches issues through the hub.",
            "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
            "implementation": {"mode": "compose", "steps": [
                {"name": "search", "tool": "github.search_issues", "inputMapping": {"query": "$input.topic"}}
            ]},
            "testCases": [{"input": {"topic": "rust"}}]
        }),
    );
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    let out = tool_output(&m.call("issue_titles", json!({"topic": "mcp"})));
    assert_eq!(out["query"], "mcp");
    assert_eq!(out["items"][0]["title"], "mcp #1");
    // A step over the hidden tool is refused as not callable.
    let refused = m.call(
        "forge_tool",
        json!({
            "name": "hidden_step",
            "description": "Uses a tool the policy hides.",
            "inputSchema": {"type": "object"},
            "implementation": {"mode": "compose", "steps": [
                {"name": "only", "tool": "github.fail", "inputMapping": {"reason": "$input.r"}}
            ]},
            "testCases": [{"input": {"r": "x"}}]
        }),
    );
    let text = refused.to_string();
    assert!(
        text.contains("\\\"github.fail\\\" is not callable by agent"),
        "{text}"
    );
    m.close();

    let log = std::fs::read(&stderr).unwrap();
    assert!(!contains_secret(&log), "secret in the log");
    for entry in walk(&store) {
        assert!(
            !contains_secret(&std::fs::read(&entry).unwrap()),
            "secret in {}",
            entry.display()
        );
    }
}

#[test]
fn an_unreachable_http_upstream_fails_the_start_unless_optional() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let store = dir.path().join("s");
    let tools = tools_file(dir.path(), &url, "tools = [\"*\"]");
    let (ok, out, err) = temper(&[
        "tools",
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("upstream \"gh\": start: MCP handshake failed: is not reachable ("),
        "{err}"
    );
    assert!(!contains_secret(format!("{out}{err}").as_bytes()), "{err}");

    let tools = tools_file(dir.path(), &url, "tools = [\"*\"]\noptional = true");
    let (ok, out, err) = temper(&[
        "tools",
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("optional upstream did not start") && err.contains("upstream \"gh\""),
        "a warning naming it: {err}"
    );
    assert!(!out.contains("github."), "its tools are absent: {out}");
    assert!(!contains_secret(format!("{out}{err}").as_bytes()), "{err}");
}

#[test]
fn wrong_credentials_fail_the_start_without_showing_them() {
    if !has_ts_sdk() {
        return;
    }
    let upstream = TsUpstream::start();
    let dir = tempfile::tempdir().unwrap();
    let tools = tools_file(
        dir.path(),
        &format!("http://127.0.0.1:{}/mcp", upstream.port),
        "tools = [\"*\"]",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(["tools", "--store"])
        .arg(dir.path().join("s"))
        .arg("--tools")
        .arg(&tools)
        .arg("--cache-dir")
        .arg(cache_dir())
        .env(
            "TEMPER_TEST_GH_AUTH",
            "Bearer hubhttp-SECRET-e41b07-but-wrong",
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    // The server echoes the header it got; Temper cuts it out.
    assert!(
        err.contains("upstream \"gh\": start: MCP handshake failed: answered HTTP 401 Unauthorized: bad credentials: [redacted]"),
        "{err}"
    );
    assert!(
        !contains_secret(&out.stdout) && !contains_secret(&out.stderr),
        "{err}"
    );
}
