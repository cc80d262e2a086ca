//! Against a real upstream written with the official MCP TypeScript SDK
//! (`tests/mcp-ts/upstream_server.mjs`), over Streamable HTTP on
//! 127.0.0.1, with its fault tools for what a conforming SDK server would
//! not do (HTTP 500 and 401 on a call, a body that is not JSON, an output
//! that breaks its schema, the process dying mid-call).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::ToolsFile;
use crate::upstream::{Upstream, UpstreamError};

/// The header value Temper sends: distinctive, so any leak is found.
const SECRET: &str = "Bearer gh-SECRET-7f3a9c-never-print";
/// A wrong one, for the 401 tests (as secret as the right one).
const WRONG: &str = "Bearer gh-WRONG-51d2e8-never-print";

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
    eprintln!("SKIPPED: {why}");
    false
}

/// The TypeScript upstream, stopped when dropped.
struct TsServer {
    child: Child,
    port: u16,
}

impl TsServer {
    /// Starts it on `port` (0: a free one) with `args`, requiring
    /// `Authorization: SECRET`.
    fn start(port: u16, args: &[&str]) -> TsServer {
        let mut child = Command::new("node")
            .arg(root().join("tests/mcp-ts/upstream_server.mjs"))
            .args(["--port", &port.to_string()])
            .args(args)
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
        TsServer { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for TsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `[upstream.gh]` at `url`, sending `auth` as its Authorization header
/// (read from the environment), with `extra` TOML lines.
fn config(url: &str, auth: &str, extra: &str) -> crate::UpstreamConfig {
    let text = format!(
        "[upstream.gh]\nurl = {url:?}\nheaders = {{ Authorization = \"env:GH_AUTH\" }}\ntools = [\"*\"]\nprefix = \"github.\"\n{extra}\n"
    );
    let file = ToolsFile::parse(Path::new("tools.toml"), &text, |name| {
        (name == "GH_AUTH").then(|| auth.to_string())
    })
    .unwrap();
    file.upstreams["gh"].clone()
}

/// Asserts that nothing a person or a log could see of `err` holds a
/// header value.
fn no_secret(err: &UpstreamError) {
    let shown = format!("{err} {err:?}");
    for s in [SECRET, WRONG, "gh-SECRET-7f3a9c", "gh-WRONG-51d2e8"] {
        assert!(!shown.contains(s), "secret in {shown}");
    }
}

async fn started(server: &TsServer, extra: &str) -> Upstream {
    Upstream::start(config(&server.url(), SECRET, extra))
        .await
        .unwrap()
}

async fn lists_and_calls(args: &[&str]) {
    let server = TsServer::start(0, args);
    let up = started(&server, "").await;
    let names: Vec<String> = up.tools().into_iter().map(|t| t.name).collect();
    for name in [
        "github.search_issues",
        "github.echo_text",
        "github.slow",
        "github.fail",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    let search = up
        .tools()
        .into_iter()
        .find(|t| t.name == "github.search_issues")
        .unwrap();
    assert_eq!(search.remote_name, "search_issues");
    assert_eq!(search.upstream, "gh");
    assert_eq!(search.description, "Searches the (fake) issue tracker.");
    assert_eq!(search.input_schema["required"], json!(["query"]));
    let output_schema = search.output_schema.expect("outputSchema kept");
    assert_eq!(
        output_schema["required"],
        json!(["query", "total", "items"])
    );

    // structuredContent is the output.
    let out = up
        .call("github.search_issues", json!({"query": "wasm", "limit": 1}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({"query": "wasm", "total": 1, "items": [{"id": 1, "title": "wasm #1"}]})
    );
    // Text that is not JSON becomes {"text": ...}.
    let out = up
        .call("github.echo_text", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out, json!("you said: hi"));
    // isError: the upstream's text, naming the upstream and the tool.
    let err = up
        .call("github.fail", json!({"reason": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" tool \"fail\": failed on purpose: nope"
    );
    // The input is checked before anything is sent.
    let err = up
        .call("github.search_issues", json!({"query": "x", "limit": 50}))
        .await
        .unwrap_err();
    assert!(matches!(err, UpstreamError::Input { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "upstream \"gh\" tool \"search_issues\": input does not match inputSchema: /limit:"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_over_event_streams() {
    if has_ts_sdk() {
        lists_and_calls(&[]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_calls_over_json_responses() {
    if has_ts_sdk() {
        lists_and_calls(&["--json"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_at_start_is_a_start_error() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let err = Upstream::start(config(&url, SECRET, "timeout_ms = 3000"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("upstream \"gh\": start: MCP handshake failed: is not reachable ("),
        "{err}"
    );
    assert!(!err.to_string().contains(&url), "URL in {err}");
    no_secret(&err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_at_start_are_refused_without_echo() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let err = Upstream::start(config(&server.url(), WRONG, ""))
        .await
        .unwrap_err();
    // The server echoes what it got; Temper cuts it out.
    assert!(
        err.to_string().starts_with(
            "upstream \"gh\": start: MCP handshake failed: answered HTTP 401 Unauthorized: bad credentials: [redacted]"
        ),
        "{err}"
    );
    no_secret(&err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_on_a_call_name_the_upstream_and_keep_the_session() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let up = started(&server, "").await;
    let err = up.call("github.http_500", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" answered HTTP 500 Internal Server Error: internal failure in the upstream (calling \"http_500\")"
    );
    let err = up.call("github.revoked", json!({})).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" answered HTTP 401 Unauthorized: token revoked: [redacted] (calling \"revoked\")"
    );
    no_secret(&err);
    let err = up.call("github.malformed", json!({})).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("upstream \"gh\" sent malformed JSON-RPC ("),
        "{err}"
    );
    assert!(
        err.to_string().ends_with("(calling \"malformed\")"),
        "{err}"
    );
    // In an event stream, a malformed event ends the session (rmcp would
    // skip it and leave the call waiting); a new one is opened.
    let t = Instant::now();
    let err = up
        .call("github.malformed_event", json!({}))
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        err.to_string()
            .starts_with("upstream \"gh\" sent malformed JSON-RPC ("),
        "{err}"
    );
    assert!(
        err.to_string().ends_with("(calling \"malformed_event\")"),
        "{err}"
    );
    until_back(&up).await;
    let err = up.call("github.liar", json!({})).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Output { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "upstream \"gh\" tool \"liar\": output does not match outputSchema: /count:"
        ),
        "{err}"
    );
    // The last ones kept the session.
    let out = up
        .call("github.echo_text", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(out, json!("you said: still here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_call_ends_at_timeout_ms() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let up = started(&server, "timeout_ms = 1500").await;
    let t = Instant::now();
    let err = up
        .call("github.slow", json!({"ms": 20000}))
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" tool \"slow\": no answer within 1500 ms"
    );
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(6),
        "{took:?}"
    );
    let out = up.call("github.slow", json!({"ms": 1})).await.unwrap();
    assert_eq!(out, json!("slept 1 ms"));
}

/// Calls `echo_text` until it answers (after a reconnect), at most 20 s.
async fn until_back(up: &Upstream) {
    let t = Instant::now();
    loop {
        match up.call("github.echo_text", json!({"text": "back"})).await {
            Ok(out) => {
                assert_eq!(out, json!("you said: back"));
                return;
            }
            Err(e) if t.elapsed() < Duration::from_secs(20) => {
                assert!(e.to_string().starts_with("upstream \"gh\""), "{e}");
                no_secret(&e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not reconnected: {e}"),
        }
    }
}

/// An oversized result is refused before it is parsed. In a JSON body only
/// that answer is refused; in an event stream rmcp's worker ends the
/// session, and Temper opens a new one.
async fn oversized(args: &[&str]) {
    let server = TsServer::start(0, args);
    let up = started(&server, "max_result_bytes = 65536").await;
    let out = up.call("github.big", json!({"n": 60000})).await.unwrap();
    assert_eq!(out.as_str().unwrap().len(), 60000);
    let err = up
        .call("github.big", json!({"n": 200_000}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" sent a message over the 65536-byte cap (calling \"big\")"
    );
    until_back(&up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_result_is_an_error_in_an_event_stream() {
    if has_ts_sdk() {
        oversized(&[]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_result_is_an_error_in_a_json_body() {
    if has_ts_sdk() {
        oversized(&["--json"]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_gone_mid_session_then_back_is_reconnected() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let port = server.port;
    let up = started(&server, "timeout_ms = 3000").await;
    let err = up.call("github.crash", json!({})).await.unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("upstream \"gh\" "), "{text}");
    assert!(text.ends_with("(calling \"crash\")"), "{text}");
    drop(server);
    // While it is away, calls fail at once, naming it.
    let t = Instant::now();
    let err = up
        .call("github.echo_text", json!({"text": "anyone?"}))
        .await
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(err.to_string().starts_with("upstream \"gh\" "), "{err}");
    no_secret(&err);
    // Back on the same port: Temper opens a new session by itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _back = TsServer::start(port, &[]);
    until_back(&up).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_list_changed() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let up = started(&server, "").await;
    assert!(!up.tools().iter().any(|t| t.name == "github.late"));
    up.call("github.add_tool", json!({"name": "late"}))
        .await
        .unwrap();
    let t = Instant::now();
    while !up.tools().iter().any(|t| t.name == "github.late") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "list_changed not followed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = up.call("github.late", json!({"x": 21})).await.unwrap();
    assert_eq!(out, json!({"doubled": 42}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_values_never_show() {
    if !has_ts_sdk() {
        return;
    }
    let server = TsServer::start(0, &[]);
    let up = started(&server, "").await;
    let shown = format!("{up:?} {:?} {:?}", up.config(), up.tools());
    assert!(!shown.contains("gh-SECRET-7f3a9c"), "{shown}");
    // A tool error that echoes the header is cut too.
    let err = up
        .call("github.fail", json!({"reason": SECRET}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "upstream \"gh\" tool \"fail\": failed on purpose: [redacted]"
    );
    // And out of the result a gateway passes on.
    let out = up
        .call_output("github.fail", json!({"reason": SECRET}), None)
        .await
        .unwrap();
    assert_eq!(out.error.as_deref(), Some("failed on purpose: [redacted]"));
    let passed = serde_json::to_string(&out.result.unwrap()).unwrap();
    assert!(!passed.contains("gh-SECRET-7f3a9c"), "{passed}");
    assert!(passed.contains("failed on purpose: [redacted]"), "{passed}");
}
