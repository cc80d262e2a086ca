//! What an upstream sends during a call reaches the caller of that call
//! through the gateway (the hub chapter's "Logging, elicitation and
//! sampling"), tested with the official everything server and an upstream
//! written with the official Python SDK, and with the official Python SDK
//! client in its default mode.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::hub_reference::npm_servers;
use super::mcp_http::{Server, token_entry};
use super::support::cache_dir;
use super::support::mcp_stdio::{McpStdio, mcp_python, tools_policy, write_file};

const SECRET: &str = "sk-relay-SECRET-7171";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A tools file fronting the everything server (`ev.`, its elicitation
/// and sampling relayed) and the Python-SDK test upstream (`up.`, its
/// env holding [`SECRET`]), and a policy allowing them.
fn gateway_files(dir: &Path, python: &Path, node: &Path, npm: &Path) -> (PathBuf, PathBuf) {
    let everything = npm.join("server-everything/dist/index.js");
    let upstream = root().join("tests/fixtures/hub/upstream_server.py");
    let tools = format!(
        "[upstream.ev]\ncommand = {}\nprefix = \"ev.\"\ntools = [\"*\"]\nrelay = [\"elicitation\", \"sampling\"]\ntimeout_ms = 60000\n\n\
         [upstream.up]\ncommand = {}\nenv = {{ SEARCH_API_KEY = \"env:RELAY_TEST_KEY\" }}\nprefix = \"up.\"\ntools = [\"chatty\", \"ask\"]\nrelay = [\"elicitation\"]\n",
        serde_json::to_string(&[
            node.display().to_string(),
            everything.display().to_string(),
            "stdio".into()
        ])
        .unwrap(),
        serde_json::to_string(&[python.display().to_string(), upstream.display().to_string()])
            .unwrap(),
    );
    let tools = write_file(dir, "tools.toml", &tools);
    let policy = tools_policy(dir, &["*"]);
    (tools, policy)
}

/// `temper mcp` over stdio with `tools` and `policy`, its store and stderr
/// log in `dir`, initialized.
fn gateway_stdio(dir: &Path, tools: &Path, policy: &Path) -> McpStdio {
    McpStdio::start(
        &[
            "--store",
            dir.join("store").to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &dir.join("stderr.log"),
        &[],
        "no-secret-here",
    )
}

#[test]
fn the_official_python_client_answers_an_upstreams_requests_and_hears_its_logs() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let Some(python) = mcp_python() else { return };
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (tools, policy) = gateway_files(dir.path(), &python, &node, &npm);
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("relay-token", "relay", "")).unwrap();
    let server = Server::start_with_env(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &[("RELAY_TEST_KEY", SECRET)],
    );
    // The SDK's default mode (2026-07-28: input_required), then its legacy
    // mode (server-to-client requests on the call's event stream).
    for mode in ["default", "legacy"] {
        let out = std::process::Command::new(&python)
            .arg(root().join("tests/mcp_relay_client.py"))
            .arg(server.url())
            .arg("relay-token")
            .arg(SECRET)
            .arg(mode)
            .output()
            .expect("run tests/mcp_relay_client.py");
        assert!(
            out.status.success(),
            "tests/mcp_relay_client.py {mode} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains(&format!("relayed ({mode}): 2 requests")),
            "{said}"
        );
    }
    assert!(
        !server.log().contains(SECRET),
        "the upstream's secret in Temper's log"
    );
}

#[test]
fn a_legacy_stdio_client_answers_an_upstreams_requests_and_one_without_the_capability_is_not_asked()
{
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (tools, policy) = gateway_files(dir.path(), &python, &node, &npm);
    let store = dir.path().join("store");
    let args = [
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    // The official SDK client, legacy mode, over stdio: the upstreams'
    // requests come to its callbacks as server-to-client requests.
    let mut command_args = vec![
        "mcp".to_string(),
        "--judge".into(),
        "rules".into(),
        "--cache-dir".into(),
        cache_dir().display().to_string(),
    ];
    command_args.extend(args.iter().map(|a| a.to_string()));
    let spec = json!({
        "command": env!("CARGO_BIN_EXE_temper"),
        "args": command_args,
        "env": {"RELAY_TEST_KEY": SECRET, "PATH": std::env::var("PATH").unwrap_or_default()},
    });
    let spec = write_file(dir.path(), "spec.json", &spec.to_string());
    let out = std::process::Command::new(&python)
        .arg(root().join("tests/mcp_relay_client.py"))
        .arg("--stdio")
        .arg(&spec)
        .arg(SECRET)
        .output()
        .expect("run tests/mcp_relay_client.py --stdio");
    assert!(
        out.status.success(),
        "tests/mcp_relay_client.py --stdio failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("legacy relayed: 2 requests"), "{said}");

    // A legacy client that declared no capability hears the log messages
    // of its call, and is not asked: the upstream hears why.
    let mut mcp = McpStdio::start(
        &args,
        &dir.path().join("stderr.log"),
        &[("RELAY_TEST_KEY", SECRET)],
        SECRET,
    );
    let (answer, before) =
        mcp.request_noting("tools/call", json!({"name": "up.chatty", "arguments": {}}));
    assert_eq!(
        answer["result"]["content"][0]["text"], "chatty: done",
        "{answer}"
    );
    let logs: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 2, "{before:?}");
    assert_eq!(logs[0]["params"]["data"], "chatty: starting");
    assert_eq!(logs[1]["params"]["level"], "warning");
    assert_eq!(logs[1]["params"]["data"], "chatty: using key [redacted]");
    let (answer, before) =
        mcp.request_noting("tools/call", json!({"name": "up.ask", "arguments": {}}));
    // No request was sent to this client.
    assert!(
        before
            .iter()
            .all(|m| m.get("method") != Some(&json!("elicitation/create"))),
        "{before:?}"
    );
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("refused: ")
            && text.contains("upstream \"up\" asked for elicitation/create")
            && text.contains("did not declare that capability"),
        "{answer}"
    );
    mcp.close();
}

/// The everything server over Streamable HTTP on a free port, stopped on drop.
struct EverythingHttp {
    child: std::process::Child,
    port: u16,
}

impl EverythingHttp {
    fn start(node: &Path, npm: &Path) -> Self {
        use std::io::BufRead;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(node)
            .arg(npm.join("server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("node server-everything streamableHttp");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        loop {
            let line = lines
                .next()
                .expect("the everything server says it listens")
                .unwrap();
            if line.contains("listening on port") {
                break;
            }
        }
        // Its later stderr is drained (a full pipe would stop it).
        std::thread::spawn(move || for _ in lines {});
        Self { child, port }
    }
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn resources_and_prompts_of_a_streamable_http_upstream_are_served_as_over_stdio() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let http = EverythingHttp::start(&node, &npm);
    let dir = tempfile::tempdir().unwrap();
    let index = npm.join("server-everything/dist/index.js");
    // The same server twice: over stdio (`s.`) and over HTTP (`h.`).
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.s]\ncommand = [{:?}, {:?}]\nprefix = \"s.\"\nresources = [\"*\"]\nprompts = [\"*\"]\n\n\
             [upstream.h]\nurl = \"http://127.0.0.1:{}/mcp\"\nprefix = \"h.\"\ntools = [\"trigger-long-running-operation\"]\nresources = [\"*\"]\nprompts = [\"*\"]\n",
            node.display().to_string(),
            index.display().to_string(),
            http.port
        ),
    );
    let policy = write_file(
        dir.path(),
        "policy.toml",
        "[tools]\nallow = [\"h.*\"]\n[resources]\nallow = [\"*\"]\n[prompts]\nallow = [\"*\"]\n",
    );
    let mut m = gateway_stdio(dir.path(), &tools, &policy);
    // Each answer with its prefix taken off, for the comparison.
    let unprefixed = |v: &Value, prefix: &str| -> Value {
        serde_json::from_str(&v.to_string().replace(&format!("\"{prefix}"), "\"")).unwrap()
    };
    let listed = m.request("resources/list", json!({}));
    let uris = |prefix: &str| -> Vec<String> {
        let mut u: Vec<String> = listed["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["uri"].as_str())
            .filter_map(|u| u.strip_prefix(prefix).map(str::to_string))
            .collect();
        u.sort();
        u
    };
    assert!(!uris("s.").is_empty(), "{listed}");
    assert_eq!(uris("s."), uris("h."), "{listed}");
    let templates = m.request("resources/templates/list", json!({}));
    let count = |prefix: &str| {
        templates["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["uriTemplate"].as_str().unwrap_or("").starts_with(prefix))
            .count()
    };
    assert_eq!((count("s."), count("h.")), (2, 2), "{templates}");
    for uri in [
        "demo://resource/static/document/architecture.md",
        "demo://resource/dynamic/text/3",
        "demo://resource/dynamic/blob/4",
    ] {
        let s = m.request("resources/read", json!({"uri": format!("s.{uri}")}));
        let h = m.request("resources/read", json!({"uri": format!("h.{uri}")}));
        assert!(s["result"]["contents"].is_array(), "{s}");
        // Dynamic resources say when they were made: their text or blob
        // is compared as "a string" only.
        let mut s = unprefixed(&s["result"], "s.");
        let mut h = unprefixed(&h["result"], "h.");
        if uri.contains("/dynamic/") {
            for v in [&mut s, &mut h] {
                for key in ["/contents/0/text", "/contents/0/blob"] {
                    if let Some(x) = v.pointer_mut(key) {
                        assert!(x.is_string(), "{uri}: {x}");
                        *x = json!("<dynamic>");
                    }
                }
            }
        }
        assert_eq!(s, h, "{uri}");
    }
    // Progress of a call over HTTP is relayed under the caller's token.
    let (answer, before) = m.request_noting(
        "tools/call",
        json!({"name": "h.trigger-long-running-operation", "arguments": {"duration": 0.3, "steps": 3}, "_meta": {"progressToken": "mine"}}),
    );
    assert!(answer["result"]["content"].is_array(), "{answer}");
    let relayed: Vec<&Value> = before
        .iter()
        // rmcp writes the upstream's numbers back as floats (3.0).
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["total"].as_f64() == Some(3.0)
        })
        .collect();
    assert_eq!(relayed.len(), 3, "{before:?}");
    assert!(
        relayed
            .iter()
            .all(|n| n["params"]["progressToken"] == json!("mine")),
        "{relayed:?}"
    );
    for (name, args) in [
        ("simple-prompt", json!({})),
        ("args-prompt", json!({"city": "Lyon", "state": "Rhone"})),
    ] {
        let s = m.request(
            "prompts/get",
            json!({"name": format!("s.{name}"), "arguments": args}),
        );
        let h = m.request(
            "prompts/get",
            json!({"name": format!("h.{name}"), "arguments": args}),
        );
        assert!(s["result"]["messages"].is_array(), "{s}");
        assert_eq!(s["result"], h["result"], "{name}");
    }
    m.close();
}

#[test]
fn an_upstreams_list_changes_reach_the_caller_for_the_lists_the_tools_file_selects() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let upstream = root().join("tests/fixtures/hub/upstream_server.py");
    // Its resources selected, its prompts not.
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.up]\ncommand = {}\nprefix = \"up.\"\ntools = [\"change_lists\"]\nresources = [\"*\"]\n",
            serde_json::to_string(&[python.display().to_string(), upstream.display().to_string()])
                .unwrap()
        ),
    );
    let policy = tools_policy(dir.path(), &["*"]);
    let mut mcp = gateway_stdio(dir.path(), &tools, &policy);
    let (answer, mut seen) = mcp.request_noting(
        "tools/call",
        json!({"name": "up.change_lists", "arguments": {}}),
    );
    assert_eq!(
        answer["result"]["content"][0]["text"], "changed",
        "{answer}"
    );
    let has = |seen: &[Value], method: &str| seen.iter().any(|m| m["method"] == method);
    // The notes may follow the answer: requests until they come.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !has(&seen, "notifications/resources/list_changed") {
        assert!(
            std::time::Instant::now() < deadline,
            "no resources/list_changed: {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        seen.extend(mcp.request_noting("tools/list", json!({})).1);
    }
    // The prompts the tools file does not select: their change is not
    // announced (the upstream sent it right after the other).
    std::thread::sleep(std::time::Duration::from_millis(300));
    seen.extend(mcp.request_noting("tools/list", json!({})).1);
    assert!(
        !has(&seen, "notifications/prompts/list_changed"),
        "{seen:?}"
    );
    mcp.close();
}
