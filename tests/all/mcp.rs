//! `temper mcp` driven through its stdio pipes, as an MCP client would:
//! handshake, listing, forging (with progress and `list_changed`), calling,
//! tool errors, protocol errors, and the session tier's end with the
//! connection. A second test runs the official MCP Python SDK client
//! (`tests/mcp_client.py`) against the same binary.
//!
//! No assertion depends on timing: messages are read in the order the
//! server wrote them, and every wait is for a message that must come.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use support::cache_dir;
use temper::store::{AuditKind, Registry};

/// Only a safety net against a hung server; no assertion depends on it.
const HANG: Duration = Duration::from_secs(600);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn seed(name: &str) -> Value {
    let path = root()
        .join("tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A `temper mcp` process and the messages it wrote, in order.
pub(crate) struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: mpsc::Receiver<Result<Value, String>>,
    next_id: i64,
}

impl Client {
    fn start(store: &Path) -> Self {
        Self::start_with(store, &[])
    }

    /// `temper mcp` on `store` with `extra` arguments.
    pub(crate) fn start_with(store: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--timeout-ms", "2000", "--store"])
            .arg(store)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn temper mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("read stdout");
                // stdout must carry protocol messages only.
                let parsed = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"));
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            messages,
            next_id: 0,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message the server wrote.
    fn recv(&mut self) -> Value {
        match self.messages.recv_timeout(HANG) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => panic!("the server wrote a line that is not JSON: {e}"),
            Err(e) => panic!("no message from the server: {e}"),
        }
    }

    /// The next message, which must come within `limit`.
    fn recv_within(&mut self, limit: Duration) -> Value {
        match self.messages.recv_timeout(limit) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => panic!("the server wrote a line that is not JSON: {e}"),
            Err(e) => panic!("no message from the server within {limit:?}: {e}"),
        }
    }

    /// Sends a request; returns its id.
    fn start_request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Reads until the response to `id`; returns it and the notifications
    /// that came before it. Any other response fails the test.
    fn response_to(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let m = self.recv();
            if m.get("id").is_none() {
                notes.push(m);
            } else {
                assert_eq!(&m["id"], id, "unexpected response: {m}");
                assert_eq!(m["jsonrpc"], "2.0");
                return (m, notes);
            }
        }
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.start_request(method, params);
        self.response_to(&id)
    }

    /// A request that must succeed, with no notifications before it.
    pub(crate) fn ok(&mut self, method: &str, params: Value) -> Value {
        let (m, notes) = self.request(method, params);
        assert!(notes.is_empty(), "unexpected notifications: {notes:?}");
        assert!(m.get("error").is_none(), "{method} failed: {m}");
        m["result"].clone()
    }

    pub(crate) fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.ok("tools/call", json!({"name": name, "arguments": arguments}))
    }

    fn tool_names(&mut self) -> Vec<String> {
        let list = self.ok("tools/list", json!({}));
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Closes stdin; returns the exit status and whatever was still written.
    pub(crate) fn close(mut self) -> (ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let rest = self.messages.iter().map(|m| m.unwrap()).collect();
        (status, rest)
    }
}

/// The JSON a tool result's text content carries.
pub(crate) fn text_json(result: &Value) -> Value {
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

fn error_code(m: &Value) -> i64 {
    m["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {m}"))
}

#[test]
fn mcp_over_stdio_pipes() {
    let store = tempfile::tempdir().unwrap();
    let mut c = Client::start(store.path());

    // Handshake: the client's version when supported, the newest otherwise.
    let init = c.ok(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
    );
    assert_eq!(init["protocolVersion"], "2025-06-18");
    // No tools file selects resources or prompts: only tools are offered.
    assert_eq!(
        init["capabilities"],
        json!({"tools": {"listChanged": true}}),
        "{init}"
    );
    assert_eq!(init["serverInfo"]["name"], "temper");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let again = c.ok("initialize", json!({"protocolVersion": "2099-01-01"}));
    assert_eq!(
        again["protocolVersion"],
        temper::mcp::SUPPORTED_PROTOCOL_VERSIONS[0]
    );

    // Only the meta-tools at first; forge_tool's input schema is the forge
    // request.
    let list = c.ok("tools/list", json!({}));
    let names: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "forge_tool",
            "delete_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools"
        ],
        "{list}"
    );
    let forge_tool = &list["tools"][0];
    assert_eq!(forge_tool["name"], "forge_tool");
    assert!(
        forge_tool["description"]
            .as_str()
            .unwrap()
            .contains("execute(input)")
    );
    assert_eq!(forge_tool["inputSchema"]["type"], "object");
    assert!(
        forge_tool["inputSchema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("testCases"))
    );

    // Forge the slugify seed, asking for progress.
    let (m, notes) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify"), "_meta": {"progressToken": "forge-1"}}),
    );
    let result = &m["result"];
    assert_eq!(result["isError"], false, "{m}");
    assert_eq!(result["structuredContent"]["success"], true);
    assert_eq!(result["structuredContent"]["tool"]["name"], "slugify");
    assert_eq!(result["structuredContent"]["verdict"]["approved"], true);
    assert_eq!(text_json(result), result["structuredContent"]);
    let methods: Vec<&str> = notes
        .iter()
        .map(|n| n["method"].as_str().unwrap())
        .collect();
    // One progress step per stage (validate, build, test, judge, register),
    // then done, then list_changed.
    let mut expected = vec!["notifications/progress"; 6];
    expected.push("notifications/tools/list_changed");
    assert_eq!(methods, expected, "{notes:?}");
    let steps: Vec<(u64, u64, String)> = notes[..6]
        .iter()
        .map(|n| {
            assert_eq!(n["params"]["progressToken"], "forge-1");
            (
                n["params"]["progress"].as_u64().unwrap(),
                n["params"]["total"].as_u64().unwrap(),
                n["params"]["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let stages = [
        "validate",
        "build",
        "test",
        "judge",
        "register",
        "registered",
    ];
    for (i, (progress, total, message)) in steps.iter().enumerate() {
        assert_eq!((*progress, *total), (i as u64, 5), "{steps:?}");
        assert!(message.ends_with(stages[i]), "{steps:?}");
    }

    // Now listed, with its schemas.
    let list = c.ok("tools/list", json!({}));
    let tools = list["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 8, "{list}");
    let slugify = tools
        .iter()
        .find(|t| t["name"] == "slugify")
        .expect("slugify listed");
    assert_eq!(slugify["description"], seed("slugify")["description"]);
    assert_eq!(slugify["inputSchema"], seed("slugify")["inputSchema"]);
    assert_eq!(slugify["outputSchema"], seed("slugify")["outputSchema"]);

    // Calls: output as text and structured content; failures are tool errors.
    let out = c.call("slugify", json!({"text": "Hello MCP World"}));
    assert_eq!(out["isError"], false, "{out}");
    assert_eq!(out["structuredContent"], json!({"slug": "hello-mcp-world"}));
    assert_eq!(text_json(&out), json!({"slug": "hello-mcp-world"}));

    // A failing call of a tool with an outputSchema: the error is text
    // only, never structuredContent that would not match the schema.
    let bad = c.call("slugify", json!({"words": 3}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(bad.get("structuredContent").is_none(), "{bad}");
    assert_eq!(text_json(&bad)["stage"], "invoke");
    assert!(
        text_json(&bad)["error"].as_str().unwrap().contains("input"),
        "{bad}"
    );

    // Stats of a visible tool; of an unknown one, a tool error.
    let stats = c.call("tool_stats", json!({"name": "slugify"}));
    assert_eq!(stats["isError"], false, "{stats}");
    assert_eq!(stats["structuredContent"]["total_calls"], 2, "{stats}");
    assert_eq!(stats["structuredContent"]["successes"], 1, "{stats}");
    let stats = c.call("tool_stats", json!({"name": "nope"}));
    assert_eq!(stats["isError"], true, "{stats}");

    // An unknown tool is a protocol error, as the MCP spec answers it.
    let (unknown, _) = c.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(error_code(&unknown), -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{unknown}"
    );

    // Protocol errors are answered, and the server keeps reading.
    c.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 99, \"method\": \n");
    let m = c.recv();
    assert_eq!((error_code(&m), &m["id"]), (-32700, &Value::Null), "{m}");

    // resources/list is served (the hub's upstream resources; none here),
    // an unknown method is not.
    let (m, _) = c.request("resources/list", json!({}));
    assert_eq!(m["result"]["resources"], json!([]), "{m}");
    let (m, _) = c.request("no/such/method", json!({}));
    assert_eq!(error_code(&m), -32601, "{m}");
    let (m, _) = c.request("tools/call", json!({"arguments": {}}));
    assert_eq!(error_code(&m), -32602, "{m}");
    c.send(&json!({"jsonrpc": "2.0", "id": "no-method"}));
    let m = c.recv();
    assert_eq!(
        (error_code(&m), &m["id"]),
        (-32600, &json!("no-method")),
        "{m}"
    );

    let mut huge = vec![b'x'; temper::mcp::jsonrpc::MAX_MESSAGE_BYTES + 1];
    huge.push(b'\n');
    c.send_raw(&huge);
    let m = c.recv();
    assert_eq!((error_code(&m), &m["id"]), (-32600, &Value::Null), "{m}");
    assert!(
        m["error"]["message"].as_str().unwrap().contains("limit"),
        "{m}"
    );

    c.send(&json!({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"}));
    let (pong, _) = c.response_to(&json!("ping-1"));
    assert_eq!(pong["result"], json!({}));

    // A forge whose test fails is refused at the test stage, with no
    // list_changed.
    let mut wrong = seed("slugify");
    wrong["name"] = json!("slugify_wrong");
    wrong["testCases"][0]["expectedOutput"] = json!({"slug": "Hello World"});
    let (m, notes) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": wrong}),
    );
    assert!(notes.is_empty(), "{notes:?}");
    let refused = &m["result"];
    assert_eq!(refused["isError"], true, "{m}");
    assert_eq!(refused["structuredContent"]["success"], false);
    assert_eq!(refused["structuredContent"]["stage"], "test");
    assert!(
        refused["structuredContent"]["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("test: ")
    );
    assert!(!c.tool_names().contains(&"slugify_wrong".to_string()));

    // A tool that runs into the time limit: the call is a tool error, and a
    // ping sent after it is answered first (requests run concurrently).
    let spin = json!({
        "name": "spin",
        "description": "Loops forever when asked to",
        "inputSchema": {"type": "object", "properties": {"spin": {"type": "boolean"}}, "required": ["spin"]},
        "outputSchema": {"type": "object", "properties": {"spun": {"type": "boolean"}}},
        "implementation": {"mode": "sandbox", "code": "function execute(input) { if (input.spin) { for (;;) {} } return { spun: false }; }", "allowlist": []},
        "testCases": [{"input": {"spin": false}, "expectedOutput": {"spun": false}}],
    });
    let (m, notes) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": spin}),
    );
    assert_eq!(m["result"]["isError"], false, "{m}");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let call = c.start_request(
        "tools/call",
        json!({"name": "spin", "arguments": {"spin": true}}),
    );
    let ping = c.start_request("ping", json!({}));
    let first = c.recv();
    assert_eq!(first["id"], ping, "the ping waited for the call: {first}");
    let (m, _) = c.response_to(&call);
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert!(
        text_json(&m["result"])["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{m}"
    );

    let names = c.tool_names();
    assert_eq!(
        names,
        [
            "forge_tool",
            "delete_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools",
            "slugify",
            "spin"
        ]
        .map(String::from)
    );

    // End of input: exit 0, nothing else written, the session tier discarded
    // (audited as deletions).
    let (status, rest) = c.close();
    assert!(status.success(), "{status}");
    assert!(rest.is_empty(), "{rest:?}");
    let store = Registry::open(store.path()).unwrap();
    let mut deleted: Vec<String> = store
        .audit_entries(0, 10_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == AuditKind::Deletion && e.payload["reason"] == "session ended")
        .map(|e| e.subject)
        .collect();
    deleted.sort();
    assert_eq!(deleted, ["slugify", "spin"]);
}

/// Three `temper mcp` processes on one store (two of agent `default`, one
/// of `other`), as separate clients of one machine run them: a change one
/// of them (or anyone else) makes to an agent tier reaches that agent's
/// connections as `list_changed`, a shared-tier change reaches all of
/// them, and the process that made a change announces it once.
#[test]
fn registry_changes_reach_the_other_processes_on_the_store() {
    let store = tempfile::tempdir().unwrap();
    let config = store.path().join("forge.json");
    std::fs::write(
        &config,
        r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let poll = ["--registry-poll-ms", "50", "--forge-config", config];
    let mut a = Client::start_with(store.path(), &poll);
    let mut b = Client::start_with(store.path(), &poll);
    let mut other = Client::start_with(store.path(), &[&poll[..], &["--agent", "other"]].concat());
    let list_changed =
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}});

    // A forges (its session tier: nobody else hears of it) and promotes to
    // its agent tier: one list_changed on A, before the answer.
    let (m, notes) = a.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify")}),
    );
    assert_eq!(m["result"]["isError"], false, "{m}");
    assert_eq!(notes, std::slice::from_ref(&list_changed));
    a.call("slugify", json!({"text": "A B"}));
    let (m, notes) = a.request(
        "tools/call",
        json!({"name": "promote_tool", "arguments": {"name": "slugify"}}),
    );
    assert_eq!(m["result"]["isError"], false, "{m}");
    assert_eq!(
        notes,
        std::slice::from_ref(&list_changed),
        "announced once, on the request"
    );

    // B (same agent) hears of it from its poll, and now lists it.
    // (50 ms polls; 30 s only bounds a failure.)
    let heard = Duration::from_secs(30);
    assert_eq!(b.recv_within(heard), list_changed);
    assert!(b.tool_names().contains(&"slugify".to_string()));
    // Many polls later: A's own poll did not announce it again, and the
    // other agent heard nothing (`ok` fails on any notification).
    std::thread::sleep(Duration::from_millis(500));
    a.ok("ping", json!({}));
    other.ok("ping", json!({}));
    assert!(!other.tool_names().contains(&"slugify".to_string()));

    // An operator promotes it to the shared tier (another process): all
    // three hear of it.
    let registry = Registry::open(store.path()).unwrap();
    registry
        .promote("slugify", "default", temper::store::Tier::Shared)
        .unwrap();
    for c in [&mut a, &mut b, &mut other] {
        assert_eq!(c.recv_within(heard), list_changed);
    }
    assert!(other.tool_names().contains(&"slugify".to_string()));

    // Deleted: all three hear of it, and nobody lists it.
    registry.delete("slugify", "default").unwrap();
    for c in [&mut a, &mut b, &mut other] {
        assert_eq!(c.recv_within(heard), list_changed);
        assert!(!c.tool_names().contains(&"slugify".to_string()));
    }
    for c in [a, b, other] {
        let (status, rest) = c.close();
        assert!(status.success(), "{status}");
        assert!(rest.is_empty(), "{rest:?}");
    }
}

/// The official MCP Python SDK client against `temper mcp`. Needs the venv
/// `scripts/mcp-venv.sh` makes; without it the test is skipped with a
/// notice, or fails when `TEMPER_REQUIRE_MCP_PY=1` (as in `scripts/test.sh`).
#[test]
fn official_python_sdk_client() {
    let python = root().join("target/mcp-venv/bin/python");
    let has_sdk = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp"])
            .status()
            .is_ok_and(|s| s.success());
    if !has_sdk {
        let why = format!(
            "no Python venv with the `mcp` package at {} (run scripts/mcp-venv.sh)",
            python.display()
        );
        if std::env::var("TEMPER_REQUIRE_MCP_PY").as_deref() == Ok("1") {
            panic!("TEMPER_REQUIRE_MCP_PY=1 but {why}");
        }
        eprintln!("SKIPPED official_python_sdk_client: {why}");
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let status = Command::new(&python)
        .arg(root().join("tests/mcp_client.py"))
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg(store.path())
        .arg(cache_dir())
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run tests/mcp_client.py");
    assert!(status.success(), "tests/mcp_client.py failed: {status}");
}

/// Code mode over stdio: `run_code`'s description declares the caller's
/// tools in TypeScript and follows a forge; a body calling a forged tool
/// twice is one round trip; failures are tool errors naming the kind; the
/// runs are counted; `describe_tools` gives declarations by name.
#[test]
fn run_code_over_stdio() {
    let store = tempfile::tempdir().unwrap();
    let mut c = Client::start(store.path());
    c.ok("initialize", json!({"protocolVersion": "2025-06-18"}));
    let run_code_description = |c: &mut Client| {
        let list = c.ok("tools/list", json!({}));
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "run_code")
            .expect("run_code listed")["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(run_code_description(&mut c).contains("You can call no tools right now"));
    let (forged, notes) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify")}),
    );
    assert_eq!(forged["result"]["isError"], false, "{forged}");
    assert!(
        notes
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed")
    );
    let description = run_code_description(&mut c);
    assert!(
        description.contains("/** Convert a string to a URL-friendly slug */\n  slugify(input: { text: string; }): Promise<{ slug?: string; }>;"),
        "{description}"
    );

    let r = c.call(
        "run_code",
        json!({"code": "const a = await tools.slugify({ text: 'Hello World' });\nconst b = await callTool('slugify', { text: a.slug + ' Again' });\nconsole.log('done');\nreturn [a.slug, b.slug];"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    let out = &r["structuredContent"];
    assert_eq!(
        out["result"],
        json!(["hello-world", "hello-world-again"]),
        "{r}"
    );
    assert_eq!(
        out["logs"].as_array().unwrap().last().unwrap()["message"],
        "done"
    );

    // Narrowed to nothing: the call is refused, typed.
    let r = c.call(
        "run_code",
        json!({"code": "return await tools.slugify({ text: 'x' });", "tools": []}),
    );
    assert_eq!(r["isError"], true);
    let e = text_json(&r);
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("tool \"slugify\" is not in the tools you passed to run_code (tools: []); add it to tools or omit tools to call any visible tool"),
        "{e}"
    );
    // Returns nothing: a bad output.
    let r = c.call("run_code", json!({"code": "const x = 1;"}));
    assert!(
        text_json(&r)["error"]
            .as_str()
            .unwrap()
            .contains("returned undefined"),
        "{r}"
    );
    // An unknown tool in `tools` is refused before anything runs.
    let r = c.call("run_code", json!({"code": "return 1;", "tools": ["nope"]}));
    assert!(
        text_json(&r)["error"]
            .as_str()
            .unwrap()
            .contains("run_code: tools: no tool named \"nope\""),
        "{r}"
    );

    // tool_stats answers run_code in the registered tools' shape.
    let stats = c.call("tool_stats", json!({"name": "run_code"}));
    let run_code = &stats["structuredContent"];
    assert_eq!(run_code["name"], "run_code", "{stats}");
    assert_eq!(run_code["total_calls"], 3, "{stats}");
    assert_eq!(run_code["successes"], 1, "{stats}");
    let tool = c.call("tool_stats", json!({"name": "slugify"}));
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(run_code), keys(&tool["structuredContent"]), "{tool}");
    assert_eq!(
        keys(run_code),
        [
            "avg_latency_ms",
            "name",
            "p95_latency_ms",
            "success_rate",
            "successes",
            "total_calls"
        ]
    );
    // describe_tools answers the names it knows and lists the others.
    let d = c.call("describe_tools", json!({"names": ["slugify", "nope"]}));
    assert_eq!(d["isError"], false, "{d}");
    assert!(
        d["structuredContent"]["declarations"]
            .as_str()
            .unwrap()
            .contains("slugify(input: { text: string; })"),
        "{d}"
    );
    assert_eq!(d["structuredContent"]["unknown"], json!(["nope"]), "{d}");
    assert_eq!(
        d["structuredContent"]["hint"],
        "no tool by these names is visible to you: run_code's description names the tools you can call",
        "{d}"
    );
    c.close();
}
