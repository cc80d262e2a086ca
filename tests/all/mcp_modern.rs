//! MCP 2026-07-28 next to the legacy revisions, over real sockets and
//! pipes: `server/discover`'s shape, the `Mcp-Method` / `Mcp-Name` /
//! `MCP-Protocol-Version` rules (missing, mismatched, sent twice), the
//! unsupported-version error, removed methods, one-request sessions and
//! client-chosen `dev.temper/session` sessions (namespaced by agent,
//! hostile ids refused, idled out), `subscriptions/listen` on HTTP and
//! stdio, legacy clients on the same server; and the official Python SDK
//! 2.3 (`mode="2026-07-28"` and `"auto"`) and TypeScript client 2.4
//! (`@modelcontextprotocol/client`, pinned and auto) over HTTP.
//!
//! No assertion depends on timing: every wait is for a message or an event
//! that must come; the long limits only guard against a hung server.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_http::{
    Server, eventually, has_ts_sdk, python, root, sdk_server, seed, session_deletions, token_entry,
};
use crate::support::cache_dir;
use crate::support::sse::{sse_messages, sse_receiver};

const HANG: Duration = Duration::from_secs(600);
const V: &str = "2026-07-28";
const SESSION: &str = "dev.temper/session";
const META_TOOLS: [&str; 7] = [
    "forge_tool",
    "delete_tool",
    "promote_tool",
    "tool_stats",
    "run_code",
    "describe_tools",
    "search_tools",
];

/// The `_meta` of a modern request, in `session` when given.
fn envelope(session: Option<&str>) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    if let Some(s) = session {
        m[SESSION] = json!(s);
    }
    m
}

/// An answer: status, headers, the JSON-RPC messages of the body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    messages: Vec<Value>,
}

impl Answer {
    fn last(&self) -> &Value {
        self.messages
            .last()
            .unwrap_or_else(|| panic!("no message: {self:?}"))
    }

    fn result(&self) -> &Value {
        assert_eq!(self.status, 200, "{self:?}");
        let r = self.last();
        assert!(r.get("error").is_none(), "{r}");
        &r["result"]
    }

    /// The error (code, message), checking the HTTP status.
    fn error(&self, status: u16) -> (i64, String) {
        assert_eq!(self.status, status, "{self:?}");
        let e = &self.last()["error"];
        (
            e["code"].as_i64().unwrap(),
            e["message"].as_str().unwrap().to_string(),
        )
    }
}

/// A raw modern client: every request a POST with the routing headers
/// (unless a test overrides them).
struct Modern {
    client: reqwest::Client,
    url: String,
    token: String,
    next_id: i64,
}

impl Modern {
    fn new(server: &Server, token: &str) -> Self {
        Self {
            client: reqwest::Client::new(),
            url: server.url(),
            token: token.into(),
            next_id: 0,
        }
    }

    fn message(&mut self, method: &str, mut params: Value, session: Option<&str>) -> Value {
        self.next_id += 1;
        if params.get("_meta").is_none() {
            params["_meta"] = envelope(session);
        }
        json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
    }

    /// The routing headers `message` calls for.
    fn headers(message: &Value) -> Vec<(&'static str, String)> {
        let mut h = vec![
            ("mcp-protocol-version", V.to_string()),
            (
                "mcp-method",
                message["method"].as_str().unwrap().to_string(),
            ),
        ];
        if let Some(name) = message["params"]["name"].as_str() {
            h.push(("mcp-name", name.to_string()));
        }
        h
    }

    fn post(&self, body: &Value, headers: &[(&'static str, String)]) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .post(&self.url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (k, v) in headers {
            r = r.header(*k, v);
        }
        r
    }

    async fn send(r: reqwest::RequestBuilder) -> Answer {
        let resp = r.send().await.expect("send");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        let ct = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let messages = if ct.starts_with("text/event-stream") {
            sse_messages(&body)
        } else if ct == "application/json" {
            vec![serde_json::from_str(&body).unwrap()]
        } else {
            Vec::new()
        };
        Answer {
            status,
            headers,
            messages,
        }
    }

    /// Sends `message` with exactly `headers`.
    async fn raw(&self, message: &Value, headers: &[(&'static str, String)]) -> Answer {
        Self::send(self.post(message, headers)).await
    }

    async fn rpc(&mut self, method: &str, params: Value, session: Option<&str>) -> Answer {
        let m = self.message(method, params, session);
        self.raw(&m, &Self::headers(&m)).await
    }

    async fn tool_names(&mut self, session: Option<&str>) -> Vec<String> {
        let a = self.rpc("tools/list", json!({}), session).await;
        names(a.result())
    }

    async fn forge(&mut self, request: Value, session: Option<&str>) -> Value {
        let a = self
            .rpc(
                "tools/call",
                json!({"name": "forge_tool", "arguments": request}),
                session,
            )
            .await;
        let r = a.result().clone();
        assert_eq!(r["isError"], false, "{r}");
        r
    }
}

fn names(list: &Value) -> Vec<String> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn with_extra(expected: &[&str], extra: &[&str]) -> Vec<String> {
    expected
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

fn two_agents(dir: &std::path::Path) -> std::path::PathBuf {
    let tokens = dir.join("tokens.toml");
    let text = token_entry("tok-a", "alice", "") + &token_entry("tok-b", "bob", "");
    std::fs::write(&tokens, text).unwrap();
    tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn discover_headers_versions_and_removed_methods() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = two_agents(dir.path());
    let server = Server::start(store.path(), &["--tokens", tokens.to_str().unwrap()]);
    let mut a = Modern::new(&server, "tok-a");

    // server/discover: the spec's shape, no session minted.
    let d = a.rpc("server/discover", json!({}), None).await;
    assert!(d.headers.get("mcp-session-id").is_none(), "{d:?}");
    let r = d.result();
    assert_eq!(r["resultType"], "complete");
    let versions: Vec<&str> = r["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        [V, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
    );
    // No hub resources or prompts here: not advertised.
    assert_eq!(
        r["capabilities"],
        json!({"tools": {"listChanged": true}}),
        "{r}"
    );
    assert_eq!(r["cacheScope"], "public");
    assert!(r["ttlMs"].as_u64().is_some(), "{r}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "temper"
    );
    assert!(r["instructions"].as_str().unwrap().contains("forge_tool"));

    // Mcp-Method missing, then mismatched: 400 HeaderMismatch naming the values.
    let m = a.message("server/discover", json!({}), None);
    let no_method = [("mcp-protocol-version", V.to_string())];
    let (code, msg) = a.raw(&m, &no_method).await.error(400);
    assert_eq!(code, -32020);
    assert!(
        msg.contains("Mcp-Method") && msg.contains("server/discover"),
        "{msg}"
    );
    let wrong = [
        ("mcp-protocol-version", V.to_string()),
        ("mcp-method", "tools/list".to_string()),
    ];
    let (code, msg) = a.raw(&m, &wrong).await.error(400);
    assert_eq!(code, -32020);
    assert!(
        msg.contains("\"tools/list\"") && msg.contains("\"server/discover\""),
        "{msg}"
    );
    // Sent twice (a balancer routing on the first, the server reading the last).
    let twice = [
        ("mcp-protocol-version", V.to_string()),
        ("mcp-method", "server/discover".to_string()),
        ("mcp-method", "tools/list".to_string()),
    ];
    let (code, msg) = a.raw(&m, &twice).await.error(400);
    assert_eq!(code, -32020);
    assert!(msg.contains("more than once"), "{msg}");

    // The version header missing, and disagreeing with the body.
    let only_method = [("mcp-method", "server/discover".to_string())];
    let (code, msg) = a.raw(&m, &only_method).await.error(400);
    assert_eq!(code, -32020);
    assert!(
        msg.contains("MCP-Protocol-Version") && msg.contains(V),
        "{msg}"
    );
    let legacy_header = [
        ("mcp-protocol-version", "2025-06-18".to_string()),
        ("mcp-method", "server/discover".to_string()),
    ];
    let (code, msg) = a.raw(&m, &legacy_header).await.error(400);
    assert_eq!(code, -32020);
    assert!(msg.contains("\"2025-06-18\"") && msg.contains(V), "{msg}");

    // Mcp-Name: required on tools/call, must match params.name.
    let call = a.message(
        "tools/call",
        json!({"name": "tool_stats", "arguments": {"name": "x"}}),
        None,
    );
    let mut h = Modern::headers(&call);
    h.retain(|(k, _)| *k != "mcp-name");
    let (code, msg) = a.raw(&call, &h).await.error(400);
    assert_eq!(code, -32020);
    assert!(
        msg.contains("Mcp-Name") && msg.contains("tool_stats"),
        "{msg}"
    );
    h.push(("mcp-name", "forge_tool".into()));
    let (code, msg) = a.raw(&call, &h).await.error(400);
    assert_eq!(code, -32020);
    assert!(
        msg.contains("\"forge_tool\"") && msg.contains("\"tool_stats\""),
        "{msg}"
    );
    // Base64 sentinel form of the right name is accepted.
    h.pop();
    h.push(("mcp-name", "=?base64?dG9vbF9zdGF0cw==?=".into()));
    let ok = a.raw(&call, &h).await;
    assert_eq!(ok.status, 200, "{ok:?}");

    // An unsupported version: the spec's error, listing what is supported.
    let mut future = a.message("server/discover", json!({}), None);
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let h = [
        ("mcp-protocol-version", "2099-01-01".to_string()),
        ("mcp-method", "server/discover".to_string()),
    ];
    let ans = a.raw(&future, &h).await;
    let (code, _) = ans.error(400);
    assert_eq!(code, -32022);
    // The error answers the request's id (conformance check
    // sep-2575-http-server-error-jsonrpc-id), not null.
    assert!(future["id"].is_number(), "{future}");
    assert_eq!(ans.last()["id"], future["id"], "{:?}", ans.last());
    let data = &ans.last()["error"]["data"];
    assert_eq!(data["requested"], "2099-01-01");
    assert_eq!(data["supported"][0], V);

    // A required envelope key missing: -32602.
    let mut bare = a.message("tools/list", json!({}), None);
    bare["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": V});
    let (code, msg) = a.raw(&bare, &Modern::headers(&bare)).await.error(400);
    assert_eq!(code, -32602);
    assert!(msg.contains("clientCapabilities"), "{msg}");

    // Removed in 2026-07-28: ping, logging/setLevel, initialize's handshake
    // methods as modern requests (-32601, 404).
    for method in ["ping", "logging/setLevel"] {
        let (code, _) = a
            .rpc(method, json!({"level": "info"}), None)
            .await
            .error(404);
        assert_eq!(code, -32601, "{method}");
    }
    // No GET stream, no DELETE in 2026-07-28.
    let get = reqwest::Client::new()
        .get(server.url())
        .header("authorization", "Bearer tok-a")
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", V)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);
    // An Mcp-Session-Id on a modern request is ignored.
    let m = a.message("tools/list", json!({}), None);
    let mut h = Modern::headers(&m);
    h.push(("mcp-session-id", "0123456789abcdef0123456789abcdef".into()));
    let listed = a.raw(&m, &h).await;
    assert_eq!(names(listed.result()), META_TOOLS);
    assert_eq!(listed.result()["resultType"], "complete");
    assert_eq!(listed.result()["ttlMs"], 0);
    assert_eq!(listed.result()["cacheScope"], "private");
    // Without a token: 401 as on legacy requests.
    let m = a.message("tools/list", json!({}), None);
    let anon = reqwest::Client::new()
        .post(server.url())
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/list")
        .body(m.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_default_named_and_namespaced_with_listen() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = two_agents(dir.path());
    let server = Server::start(store.path(), &["--tokens", tokens.to_str().unwrap()]);
    let mut a = Modern::new(&server, "tok-a");
    let mut b = Modern::new(&server, "tok-b");
    let slugify = seed("slugify");

    // No session named: the forge runs in alice's default session, which
    // its result names and which outlives the request: her next requests
    // list and call the tool. Bob's default session is another.
    let forged = a.forge(slugify.clone(), None).await;
    assert_eq!(forged["_meta"][SESSION], "default", "{forged}");
    assert_eq!(session_deletions(store.path()), []);
    assert_eq!(
        a.tool_names(None).await,
        with_extra(&META_TOOLS, &["slugify"])
    );
    let out = a
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "Default Session"}}),
            None,
        )
        .await;
    assert_eq!(
        out.result()["structuredContent"],
        json!({"slug": "default-session"})
    );
    assert_eq!(
        a.tool_names(Some("default")).await,
        with_extra(&META_TOOLS, &["slugify"]),
        "naming the default session reaches the same tier"
    );
    assert_eq!(b.tool_names(None).await, META_TOOLS);
    let (code, msg) = b
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "x"}}),
            None,
        )
        .await
        .error(400);
    assert_eq!(code, -32602);
    assert!(msg.contains("slugify"), "{msg}");

    // A subscription of session s1 before the forge.
    let listen = a.message(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        Some("s1"),
    );
    let resp = a
        .post(&listen, &Modern::headers(&listen))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(resp.headers()["x-accel-buffering"], "no");
    let mut notes = sse_receiver(resp);
    let ack = tokio::time::timeout(HANG, notes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen["id"]
    );
    // Both honored (prompts: the hub upstreams' `list_changed`).
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "promptsListChanged": true})
    );

    // A named session keeps its tools; the listener hears the forge.
    let forged = a.forge(slugify.clone(), Some("s1")).await;
    assert_eq!(forged["resultType"], "complete");
    let note = tokio::time::timeout(HANG, notes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        listen["id"]
    );
    assert_eq!(
        a.tool_names(Some("s1")).await,
        with_extra(&META_TOOLS, &["slugify"])
    );
    let out = a
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "Hello MCP World"}}),
            Some("s1"),
        )
        .await;
    assert_eq!(
        out.result()["structuredContent"],
        json!({"slug": "hello-mcp-world"})
    );
    // The id is namespaced by agent: bob's "s1" is another session.
    assert_eq!(b.tool_names(Some("s1")).await, META_TOOLS);
    let (code, _) = b
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "x"}}),
            Some("s1"),
        )
        .await
        .error(400);
    assert_eq!(code, -32602);

    // Hostile ids are refused before anything runs.
    let long = "x".repeat(129);
    for bad in [json!("a b"), json!(long), json!(""), json!({"id": 1})] {
        let mut m = a.message("tools/list", json!({}), Some("ok"));
        m["params"]["_meta"][SESSION] = bad.clone();
        let (code, msg) = a.raw(&m, &Modern::headers(&m)).await.error(400);
        assert_eq!(code, -32602, "{bad}");
        assert!(msg.contains(SESSION), "{msg}");
    }

    // A listen without accepting SSE is refused.
    let m = a.message("subscriptions/listen", json!({"notifications": {}}), None);
    let r = a
        .client
        .post(&a.url)
        .header("authorization", "Bearer tok-a")
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "subscriptions/listen")
        .body(m.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 406);

    // A legacy client on the same server: initialize, session, ping,
    // logging/setLevel, results without the 2026 fields.
    let http = reqwest::Client::new();
    let legacy = |body: Value, sid: Option<&str>| {
        let mut r = http
            .post(server.url())
            .header("authorization", "Bearer tok-a")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(s) = sid {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        r
    };
    let init = legacy(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}}),
        None,
    )
    .send()
    .await
    .unwrap();
    let sid = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let init: Value = init.json().await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(init["result"].get("resultType").is_none(), "{init}");
    for (id, method, params) in [
        (2, "ping", json!({})),
        (3, "logging/setLevel", json!({"level": "info"})),
    ] {
        let r: Value = legacy(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            Some(&sid),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        assert_eq!(r["result"], json!({}), "{method}: {r}");
    }
    let r: Value = legacy(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        Some(&sid),
    )
    .send()
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(names(&r["result"]), META_TOOLS);
    assert!(r["result"].get("ttlMs").is_none() && r["result"].get("resultType").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_and_default_sessions_idle_out() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = two_agents(dir.path());
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--session-idle-secs",
            "1",
        ],
    );
    let mut a = Modern::new(&server, "tok-a");
    a.forge(seed("slugify"), Some("short-lived")).await;
    // The default session (no session named) idles out the same way.
    let mut b = Modern::new(&server, "tok-b");
    let mut add = seed("slugify");
    add["name"] = json!("dflt_slugify");
    b.forge(add, None).await;
    let path = store.path().to_path_buf();
    eventually("the idle sessions' tiers are discarded", || {
        session_deletions(&path)
            == [
                ("alice".to_string(), "slugify".to_string()),
                ("bob".to_string(), "dflt_slugify".to_string()),
            ]
    })
    .await;
    // With their audit entries: each says it expired, and in which session.
    let mut expired: Vec<(String, String)> = temper::store::Registry::open(&path)
        .unwrap()
        .audit_entries(0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.payload["expired"] == true)
        .map(|e| {
            (
                e.subject,
                e.payload["session"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    expired.sort();
    assert_eq!(
        expired,
        [
            ("dflt_slugify".to_string(), "m:default".to_string()),
            ("slugify".to_string(), "m:short-lived".to_string()),
        ]
    );
    assert_eq!(a.tool_names(Some("short-lived")).await, META_TOOLS);
    assert_eq!(b.tool_names(None).await, META_TOOLS);
}

/// A `temper mcp` stdio child: lines in, JSON messages out.
struct Stdio2026 {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Stdio2026 {
    fn start(store: &std::path::Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--store"])
            .arg(store)
            .arg("--cache-dir")
            .arg(cache_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        Self {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        self.lines.recv_timeout(HANG).expect("a message")
    }

    /// Sends a request and collects messages up to its answer.
    fn request(&mut self, id: i64, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m["id"] == json!(id) {
                return (before, m);
            }
            before.push(m);
        }
    }
}

impl Drop for Stdio2026 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn stdio_speaks_both_eras() {
    let store = tempfile::tempdir().unwrap();
    let mut s = Stdio2026::start(store.path());
    let meta = envelope(None);
    let (_, d) = s.request(1, "server/discover", json!({"_meta": meta}));
    assert_eq!(d["result"]["supportedVersions"][0], V, "{d}");
    assert_eq!(d["result"]["resultType"], "complete");
    // Without the envelope, a modern-only method is malformed.
    let (_, bad) = s.request(2, "server/discover", json!({}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let (_, ping) = s.request(3, "ping", json!({"_meta": meta}));
    assert_eq!(ping["error"]["code"], -32601, "{ping}");

    // A subscription: acknowledged at once, then stamped list_changed
    // after a forge; no plain list_changed (the client never initialized).
    s.send(
        json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}}),
    );
    let ack = s.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let (notes, forged) = s.request(
        4,
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify"), "_meta": meta}),
    );
    assert_eq!(forged["result"]["isError"], false, "{forged}");
    assert_eq!(forged["result"]["resultType"], "complete");
    let changed: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/tools/list_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{notes:?}");
    assert_eq!(
        changed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let (_, listed) = s.request(5, "tools/list", json!({"_meta": meta}));
    assert_eq!(
        names(&listed["result"]),
        with_extra(&META_TOOLS, &["slugify"])
    );
    assert_eq!(listed["result"]["ttlMs"], 0);
    // Cancelled: the subscription hears nothing more.
    s.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sub-1"}}));

    // The same connection, legacy: initialize, ping; results without 2026 fields.
    let (_, init) = s.request(
        6,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let (_, pong) = s.request(7, "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    let mut renamed = seed("slugify");
    renamed["name"] = json!("slugify_two");
    let (notes, _) = s.request(
        8,
        "tools/call",
        json!({"name": "forge_tool", "arguments": renamed}),
    );
    let changed: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/tools/list_changed")
        .collect();
    // Plain (legacy), and none for the cancelled subscription.
    assert_eq!(changed.len(), 1, "{notes:?}");
    assert!(changed[0]["params"].get("_meta").is_none(), "{notes:?}");
    let (_, listed) = s.request(9, "tools/list", json!({}));
    assert!(listed["result"].get("resultType").is_none(), "{listed}");
}

// ---- the official SDK clients ---------------------------------------------

#[test]
fn official_python_sdk_client_2026() {
    let Some(python) = python() else { return };
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    // The pinned mode, and `Client(url)` with no mode (the SDK's default,
    // "auto", which probes `server/discover` and stays modern).
    for mode in [V, "default"] {
        let status = Command::new(&python)
            .arg(root().join("tests/mcp_client_2026.py"))
            .arg(server.url())
            .arg("sdk-token-1")
            .arg(root().join("tests/fixtures/seeds/slugify.json"))
            .arg(mode)
            .arg("sdk-token-2")
            .arg("other-token")
            .status()
            .expect("run tests/mcp_client_2026.py");
        assert!(
            status.success(),
            "tests/mcp_client_2026.py {mode} failed: {status}"
        );
    }
    // What each mode forged without naming a session lives on in the
    // agent's default session (until it idles out): nothing was discarded.
    assert_eq!(session_deletions(store.path()), []);
}

#[test]
fn official_typescript_client_2026() {
    if !has_ts_sdk() {
        return;
    }
    let client = root().join("tests/mcp-ts/node_modules/@modelcontextprotocol/client/package.json");
    if !client.exists() {
        assert!(
            std::env::var("TEMPER_REQUIRE_MCP_TS").as_deref() != Ok("1"),
            "TEMPER_REQUIRE_MCP_TS=1 but no @modelcontextprotocol/client (run scripts/mcp-npm.sh)"
        );
        eprintln!("SKIPPED official TypeScript client 2.4: run scripts/mcp-npm.sh");
        return;
    }
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    for mode in ["pin", "auto"] {
        let status = Command::new("node")
            .arg(root().join("tests/mcp-ts/client2026.mjs"))
            .arg(server.url())
            .arg("sdk-token-1")
            .arg(root().join("tests/fixtures/seeds/slugify.json"))
            .arg(mode)
            .arg("sdk-token-2")
            .arg("other-token")
            .status()
            .expect("run node");
        assert!(
            status.success(),
            "tests/mcp-ts/client2026.mjs {mode} failed: {status}"
        );
    }
}
