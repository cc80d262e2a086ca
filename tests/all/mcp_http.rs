//! `temper mcp --http` on 127.0.0.1, driven over real sockets: the
//! Streamable HTTP protocol (sessions, JSON and SSE answers, the GET stream,
//! DELETE, idling out), bearer tokens and agent isolation (hostile: missing,
//! wrong and revoked tokens, another agent's tools, sessions and stats,
//! quotas, concurrency caps), the request limits (oversized bodies, slow
//! senders, a client that stops reading, 1,000 requests of which 10% time
//! out), and the official TypeScript and Python SDK clients over both
//! transports.
//!
//! No assertion depends on timing: every wait is for a message or an event
//! that must come (a closed connection, a notification); the long limits
//! only guard against a hung server.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;
use support::cache_dir;
use support::sse::{sse_messages, sse_receiver};
use temper::store::{AuditKind, Registry};

/// Only a safety net against a hung server; no assertion depends on it.
const HANG: Duration = Duration::from_secs(600);

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn seed(name: &str) -> Value {
    let path = root()
        .join("tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn renamed(mut request: Value, name: &str) -> Value {
    request["name"] = json!(name);
    request
}

fn spin_request() -> Value {
    json!({
        "name": "spin",
        "description": "Loops forever when asked to",
        "inputSchema": {"type": "object", "properties": {"spin": {"type": "boolean"}}, "required": ["spin"]},
        "outputSchema": {"type": "object", "properties": {"spun": {"type": "boolean"}}, "required": ["spun"]},
        "implementation": {"mode": "sandbox", "code": "function execute(input) { if (input.spin) { for (;;) {} } return { spun: false }; }", "allowlist": []},
        "testCases": [{"input": {"spin": false}, "expectedOutput": {"spun": false}}],
    })
}

fn sha256_hex(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tokens file entry for `token` (stored as its sha256).
pub(crate) fn token_entry(token: &str, agent: &str, extra: &str) -> String {
    format!(
        "[tokens.\"sha256:{}\"]\nagent = \"{agent}\"\n{extra}\n\n",
        sha256_hex(token)
    )
}

/// A `temper mcp --http 127.0.0.1:0` process.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub(crate) fn start(store: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(store, extra, &[])
    }

    /// [`Server::start`] with `env` added to the server's environment (the
    /// variables a tools file's `env:NAME` values read).
    pub(crate) fn start_with_env(store: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args([
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--judge",
                "rules",
                "--store",
            ])
            .arg(store)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn temper mcp --http");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                eprintln!("[server] {line}");
                if let Some(rest) = line.strip_prefix("temper mcp: listening on http://") {
                    let _ = tx.send(rest.trim_end_matches("/mcp").to_string());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(HANG)
            .expect("the server says where it listens")
            .parse()
            .unwrap();
        Self {
            child,
            addr,
            stderr: lines,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The URL of `path` on this server.
    pub(crate) fn url_at(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Its stderr so far.
    pub(crate) fn log(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub(crate) fn client(&self, token: Option<&str>) -> Http {
        Http {
            client: reqwest::Client::new(),
            url: self.url(),
            token: token.map(String::from),
            session: None,
            next_id: 0,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: status, headers, and the JSON-RPC messages of the body (one
/// for JSON, every event for SSE).
#[derive(Debug)]
pub(crate) struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    messages: Vec<Value>,
    body: String,
}

impl Answer {
    /// The response (the last message).
    pub(crate) fn response(&self) -> &Value {
        let last = self
            .messages
            .last()
            .unwrap_or_else(|| panic!("no message: {self:?}"));
        assert!(last.get("id").is_some(), "not a response: {self:?}");
        last
    }

    pub(crate) fn result(&self) -> &Value {
        assert_eq!(self.status, 200, "{self:?}");
        let r = self.response();
        assert!(r.get("error").is_none(), "{r}");
        &r["result"]
    }

    fn notes(&self) -> &[Value] {
        &self.messages[..self.messages.len().saturating_sub(1)]
    }

    fn is_sse(&self) -> bool {
        self.headers
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"))
    }
}

/// A raw Streamable HTTP client (reqwest), one session at a time.
pub(crate) struct Http {
    client: reqwest::Client,
    url: String,
    token: Option<String>,
    session: Option<String>,
    next_id: i64,
}

impl Http {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.client.request(method, &self.url);
        if let Some(t) = &self.token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        r
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Answer {
        let resp = r.send().await.expect("send");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await.unwrap();
        let is_sse = headers
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        let messages = if is_sse {
            sse_messages(&body)
        } else if headers
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap() == "application/json")
        {
            vec![serde_json::from_str(&body).unwrap()]
        } else {
            Vec::new()
        };
        Answer {
            status,
            headers,
            messages,
            body,
        }
    }

    /// POSTs `message` accepting `accept`.
    async fn post_as(&self, message: &Value, accept: &str) -> Answer {
        let r = self
            .request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(message.to_string());
        self.send(r).await
    }

    async fn post(&self, message: &Value) -> Answer {
        self.post_as(message, "application/json, text/event-stream")
            .await
    }

    fn message(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
    }

    async fn rpc(&mut self, method: &str, params: Value) -> Answer {
        let m = self.message(method, params);
        self.post(&m).await
    }

    pub(crate) async fn call(&mut self, name: &str, arguments: Value) -> Answer {
        self.rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// initialize + initialized; keeps the session id.
    pub(crate) async fn open(&mut self) -> Value {
        let a = self
            .rpc(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
            )
            .await;
        let result = a.result().clone();
        let sid = a
            .headers
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(sid.len(), 32, "{sid}");
        self.session = Some(sid);
        let n = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(n.status, 202, "{n:?}");
        result
    }

    /// The names `tools/list` gives this session.
    pub(crate) async fn tool_names(&mut self) -> Vec<String> {
        let a = self.rpc("tools/list", json!({})).await;
        a.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    async fn forge(&mut self, request: Value) -> Value {
        let a = self.call("forge_tool", request).await;
        let r = a.result().clone();
        assert_eq!(r["isError"], false, "{r}");
        r
    }

    /// Ends `other`'s session (DELETE), then opens one (and takes over
    /// `other`'s place: `other` uses the new session).
    async fn open_after_delete_of(&mut self, other: &mut Http) {
        let a = other.send(other.request(reqwest::Method::DELETE)).await;
        assert_eq!(a.status, 204);
        self.open().await;
        other.session = self.session.clone();
    }

    /// Opens the GET stream; its messages arrive on the returned channel.
    async fn open_stream(&self) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let resp = self
            .request(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        sse_receiver(resp)
    }
}

fn text_json(result: &Value) -> Value {
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

pub(crate) fn session_deletions(store: &Path) -> Vec<(String, String)> {
    let store = Registry::open(store).unwrap();
    let mut out: Vec<(String, String)> = store
        .audit_entries(0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == AuditKind::Deletion && e.payload["reason"] == "session ended")
        .map(|e| (e.agent.clone().unwrap_or_default(), e.subject))
        .collect();
    out.sort();
    out
}

/// Waits (polling, bounded by HANG) until `f` holds.
pub(crate) async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(start.elapsed() < HANG, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streamable_http_protocol() {
    let store = tempfile::tempdir().unwrap();
    let server = Server::start(store.path(), &[]);
    let mut c = server.client(None);

    // Requests before initialize, or with an unknown session.
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 400, "{a:?}");
    c.session = Some("0".repeat(32));
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 404, "{a:?}");
    c.session = None;

    let init = c.open().await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        c.tool_names().await,
        [
            "forge_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools"
        ]
    );
    let mut stream = c.open_stream().await;

    // A forge with a progress token: an SSE answer with the progress steps
    // (list_changed goes to the GET stream).
    let forge = c.message(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify"), "_meta": {"progressToken": 7}}),
    );
    let a = c.post(&forge).await;
    assert!(a.is_sse(), "{a:?}");
    let r = a.result();
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["tool"]["name"], "slugify");
    let steps: Vec<u64> = a
        .notes()
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/progress", "{n}");
            assert_eq!(n["params"]["progressToken"], 7);
            n["params"]["progress"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 5]);
    let note = tokio::time::timeout(HANG, stream.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");

    // JSON answers when the client accepts only JSON.
    let m = c.message(
        "tools/call",
        json!({"name": "slugify", "arguments": {"text": "Über HTTP"}}),
    );
    let a = c.post_as(&m, "application/json").await;
    assert!(!a.is_sse());
    assert_eq!(a.result()["structuredContent"], json!({"slug": "ber-http"}));

    // The defect: an error result carries no structuredContent.
    let a = c.call("slugify", json!({"words": 3})).await;
    let r = a.result();
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert_eq!(text_json(r)["stage"], "invoke");

    // Protocol errors.
    let bad = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.response()["error"]["code"], -32700);
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
    assert_eq!(a.status, 415);
    let a = c
        .send(
            c.request(reqwest::Method::GET)
                .header("accept", "application/json"),
        )
        .await;
    assert_eq!(a.status, 406);
    let a = c.send(c.request(reqwest::Method::PUT)).await;
    assert_eq!(a.status, 405);
    let a = c
        .send(c.client.get(format!("http://{}/other", server.addr)))
        .await;
    assert_eq!(a.status, 404);
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "1999-01-01")
                .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string()),
        )
        .await;
    assert_eq!(a.status, 400);
    let a = c.rpc("resources/list", json!({})).await;
    assert_eq!(a.response()["error"]["code"], -32601);

    // DNS rebinding: a foreign Origin or Host is refused; loopback origins pass.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    for (name, value, status) in [
        ("origin", "http://evil.example", 403),
        ("origin", "null", 403),
        ("host", "evil.example:80", 403),
        ("origin", "http://localhost:3000", 200),
        ("origin", "http://127.0.0.1", 200),
    ] {
        let a = c
            .send(
                c.request(reqwest::Method::POST)
                    .header("content-type", "application/json")
                    .header(name, value)
                    .body(ping.to_string()),
            )
            .await;
        assert_eq!(a.status, status, "{name}: {value}: {a:?}");
    }

    // DELETE ends the session and discards its tier.
    let a = c.send(c.request(reqwest::Method::DELETE)).await;
    assert_eq!(a.status, 204);
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 404);
    // The GET stream ends with it.
    assert!(
        tokio::time::timeout(HANG, stream.recv())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_end() {
    let store = tempfile::tempdir().unwrap();
    let server = Server::start(store.path(), &["--session-idle-secs", "3"]);
    let mut c = server.client(None);
    c.open().await;
    c.forge(seed("slugify")).await;
    // Nothing more: the session idles out and its tier is discarded.
    let path = store.path().to_path_buf();
    eventually("the idle session's tier is discarded", || {
        !session_deletions(&path).is_empty()
    })
    .await;
    assert_eq!(c.rpc("ping", json!({})).await.status, 404);
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[test]
fn refuses_to_start_unsafely() {
    let store = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--store"])
            .arg(store.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // A non-loopback address without tokens: refused before binding.
    let (ok, err) = run(&["--http", "0.0.0.0:0"]);
    assert!(!ok);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without --tokens"),
        "{err}"
    );
    // A tokens file that stores a plain token: refused, naming the entry.
    let bad = root().join("host/mcp/testdata/tokens/bad_plain_token.toml");
    let (ok, err) = run(&["--http", "127.0.0.1:0", "--tokens", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad key \"alice-token\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_decide_the_agent_and_agents_are_isolated() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    let all = [
        token_entry("alice-secret-1", "alice", ""),
        token_entry("bob-secret-2", "bob", ""),
        token_entry("quota-secret-3", "carol", "calls_per_minute = 3"),
        token_entry(
            "single-secret-4",
            "dave",
            "max_concurrent = 1\ntiers = [\"session\"]",
        ),
        token_entry("alice-session-5", "alice", "tiers = [\"session\"]"),
    ];
    std::fs::write(&tokens, all.concat()).unwrap();
    let config = dir.path().join("forge.json");
    std::fs::write(
        &config,
        r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
    )
    .unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--forge-config",
            config.to_str().unwrap(),
            "--timeout-ms",
            "3000",
            "--max-sessions",
            "1",
        ],
    );

    // No token, a wrong one, another scheme, the stored hash itself: 401,
    // all alike, with no detail.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let mut refusals = Vec::new();
    for auth in [
        None,
        Some("Bearer wrong".to_string()),
        Some("Basic YWxpY2U6eA==".to_string()),
        Some(format!("Bearer {}", sha256_hex("alice-secret-1"))),
        Some(format!("Bearer sha256:{}", sha256_hex("alice-secret-1"))),
        Some("Bearer ".to_string()),
    ] {
        let client = reqwest::Client::new();
        let mut r = client
            .post(server.url())
            .header("content-type", "application/json")
            .body(ping.to_string());
        if let Some(a) = &auth {
            r = r.header("authorization", a);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let www = resp.headers().get("www-authenticate").cloned();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 401, "{auth:?}");
        assert_eq!(www.unwrap(), "Bearer");
        refusals.push(body);
    }
    assert!(refusals.iter().all(|b| b.is_empty()), "{refusals:?}");

    // Alice: a session tool, then an agent-tier tool (promoted), and one
    // more session tool.
    let mut alice = server.client(Some("alice-secret-1"));
    alice.open().await;
    alice.forge(seed("slugify")).await;
    let r = alice.call("slugify", json!({"text": "A B"})).await;
    assert_eq!(r.result()["isError"], false);
    let p = alice.call("promote_tool", json!({"name": "slugify"})).await;
    let p = p.result();
    assert_eq!(p["isError"], false, "{p}");
    assert_eq!(p["structuredContent"]["tier"], "agent", "{p}");
    alice.forge(renamed(seed("slugify"), "alice_private")).await;
    assert_eq!(
        alice.tool_names().await,
        [
            "forge_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "alice_private",
            "slugify"
        ]
    );

    // Bob sees none of it and can reach none of it; every answer is the
    // one a tool that does not exist gets.
    let mut bob = server.client(Some("bob-secret-2"));
    bob.open().await;
    assert_eq!(
        bob.tool_names().await,
        [
            "forge_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools"
        ]
    );
    // A tool out of reach is answered as an unknown one: the same
    // protocol error (-32602), the same message but for the name.
    let nothing = bob.call("no_such_tool", json!({})).await;
    let nothing = &nothing.response()["error"];
    assert_eq!(nothing["code"], -32602, "{nothing}");
    for name in ["slugify", "alice_private"] {
        let r = bob.call(name, json!({"text": "x"})).await;
        let err = &r.response()["error"];
        assert_eq!(err["code"], -32602, "{err}");
        assert_eq!(
            err["message"].as_str().unwrap().replace(name, "NAME"),
            nothing["message"]
                .as_str()
                .unwrap()
                .replace("no_such_tool", "NAME"),
            "{err}"
        );
        let s = bob.call("tool_stats", json!({"name": name})).await;
        assert_eq!(s.result()["isError"], true, "{:?}", s.result());
        assert!(!s.body.contains("total_calls"), "{}", s.body);
        let p = bob.call("promote_tool", json!({"name": name})).await;
        assert_eq!(p.result()["isError"], true, "{:?}", p.result());
    }
    // Bob cannot smuggle another identity in the messages either.
    let r = bob
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "x"}, "_meta": {"agent_id": "alice"}, "agent_id": "alice"}),
        )
        .await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");

    // Alice's own token limited to the session tier: her agent-tier tool
    // is neither listed nor callable, and no pipeline reaches it.
    let mut limited = server.client(Some("alice-session-5"));
    limited.open().await;
    assert_eq!(
        limited.tool_names().await,
        ["forge_tool", "tool_stats", "run_code", "describe_tools"]
    );
    let r = limited.call("slugify", json!({"text": "x"})).await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let pipeline = json!({
        "name": "via_pipeline",
        "description": "Reaches slugify through a pipeline",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [{"name": "s", "tool": "slugify", "inputMapping": {"text": "$input.text"}}]},
        "testCases": [{"input": {"text": "A B"}, "expectedOutput": {"slug": "a-b"}}],
    });
    let r = limited.call("forge_tool", pipeline.clone()).await;
    let r = r.result();
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["stage"], "validate", "{r}");
    // The same pipeline with every tier allowed is forged (the refusal was
    // the tier's, not the pipeline's).
    let r = alice.call("forge_tool", pipeline).await;
    assert_eq!(r.result()["isError"], false, "{:?}", r.result());

    // Alice's session id with Bob's token: as if it did not exist.
    let alice_sid = alice.session.clone().unwrap();
    let bob_sid = bob.session.replace(alice_sid.clone());
    assert_eq!(bob.rpc("tools/list", json!({})).await.status, 404);
    assert_eq!(bob.call("slugify", json!({"text": "x"})).await.status, 404);
    assert_eq!(
        bob.send(
            bob.request(reqwest::Method::GET)
                .header("accept", "text/event-stream")
        )
        .await
        .status,
        404
    );
    assert_eq!(
        bob.send(bob.request(reqwest::Method::DELETE)).await.status,
        404
    );
    bob.session = bob_sid;
    // ...and without a token at all.
    let mut anon = server.client(None);
    anon.session = Some(alice_sid);
    assert_eq!(anon.rpc("tools/list", json!({})).await.status, 401);
    // Alice's session is untouched.
    assert_eq!(alice.tool_names().await.len(), 8);
    let s = alice
        .call("tool_stats", json!({"name": "alice_private"}))
        .await;
    assert_eq!(s.result()["isError"], false);

    // One session per token here: a second is refused until the first ends.
    let mut bob2 = server.client(Some("bob-secret-2"));
    let r = bob2
        .rpc("initialize", json!({"protocolVersion": "2025-06-18"}))
        .await;
    assert_eq!(r.status, 429, "{r:?}");
    assert!(
        r.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessions")
    );
    bob2.open_after_delete_of(&mut bob).await;

    // Bob forging a tool of the same name gets his own, not Alice's.
    bob.forge(renamed(seed("slugify"), "alice_private")).await;
    let r = bob.call("alice_private", json!({"text": "B O B"})).await;
    assert_eq!(r.result()["structuredContent"], json!({"slug": "b-o-b"}));
    let s = alice
        .call("tool_stats", json!({"name": "alice_private"}))
        .await;
    assert_eq!(s.result()["structuredContent"]["total_calls"], 0);

    // A token limited to the session tier: no promotion offered or allowed.
    let mut dave = server.client(Some("single-secret-4"));
    dave.open().await;
    assert_eq!(
        dave.tool_names().await,
        ["forge_tool", "tool_stats", "run_code", "describe_tools"]
    );
    dave.forge(spin_request()).await;
    let p = dave.call("promote_tool", json!({"name": "spin"})).await;
    assert_eq!(p.response()["error"]["code"], -32602, "{p:?}");

    // Its concurrency cap of 1: while a call is in flight (its first
    // progress event has arrived), a second request is refused with 429.
    let slow = dave.message(
        "tools/call",
        json!({"name": "spin", "arguments": {"spin": true}, "_meta": {"progressToken": "p"}}),
    );
    let mut resp = dave
        .request(reqwest::Method::POST)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(slow.to_string())
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "{first:?}"
    );
    let refused = dave.call("spin", json!({"spin": false})).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        refused.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight")
    );
    let mut rest = String::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    let done = sse_messages(&rest);
    assert_eq!(done.last().unwrap()["result"]["isError"], true, "{rest}");
    // Once it is done, calls go through again.
    let ok = dave.call("spin", json!({"spin": false})).await;
    assert_eq!(ok.result()["structuredContent"], json!({"spun": false}));

    // A quota of 3 calls a minute: the 4th is refused with Retry-After;
    // listing is not a call.
    let mut carol = server.client(Some("quota-secret-3"));
    carol.open().await;
    for _ in 0..3 {
        let r = carol.call("no_such_tool", json!({})).await;
        assert_eq!(r.status, 200);
    }
    let r = carol.call("no_such_tool", json!({})).await;
    assert_eq!(r.status, 429, "{r:?}");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        r.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quota")
    );
    assert_eq!(carol.tool_names().await.len(), 5);

    // Revocation: Alice's token leaves the file; her next request is 401,
    // Bob's still work.
    std::fs::write(
        &tokens,
        [&all[1], &all[2], &all[3]].map(|s| s.as_str()).concat(),
    )
    .unwrap();
    assert_eq!(alice.rpc("tools/list", json!({})).await.status, 401);
    let mut fresh = server.client(Some("alice-secret-1"));
    assert_eq!(
        fresh
            .rpc("initialize", json!({"protocolVersion": "2025-06-18"}))
            .await
            .status,
        401
    );
    assert_eq!(bob.tool_names().await.len(), 6);
    // A broken file fails closed.
    std::fs::write(&tokens, "this is not toml [").unwrap();
    assert_eq!(bob.rpc("tools/list", json!({})).await.status, 401);
    std::fs::write(&tokens, all[1].as_str()).unwrap();
    assert_eq!(bob.tool_names().await.len(), 6);

    // Alice's agent-tier tool is still hers: a new token for her sees it.
    let mut file = all[1].clone();
    file.push_str(&token_entry("alice-secret-new", "alice", ""));
    std::fs::write(&tokens, file).unwrap();
    let mut alice2 = server.client(Some("alice-secret-new"));
    alice2.open().await;
    assert_eq!(
        alice2.tool_names().await,
        [
            "forge_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "slugify"
        ]
    );
}

/// Reads from `s` until EOF or a reset; returns the bytes read.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(HANG)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("the server never closed the connection: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bodies_slow_clients_and_a_client_that_stops_reading() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("t0k3n", "erin", "")).unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--max-body-bytes",
            "65536",
            "--io-timeout-ms",
            "1000",
        ],
    );
    let mut c = server.client(Some("t0k3n"));
    c.open().await;
    let sid = c.session.clone().unwrap();
    let head = |extra: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0k3n\r\nMcp-Session-Id: {sid}\r\nContent-Type: application/json\r\nAccept: application/json\r\n{extra}"
        )
    };

    // An oversized body: declared, or streamed in chunks without a length.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(100_000)
    );
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .body(big.clone()),
        )
        .await;
    assert_eq!(a.status, 413, "{a:?}");
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(head("Transfer-Encoding: chunked\r\n\r\n").as_bytes())
        .unwrap();
    for chunk in big.as_bytes().chunks(8192) {
        if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || s.write_all(chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let answer = String::from_utf8_lossy(&read_to_close(&mut s)).to_string();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // Slowloris: headers that never end, and a body that never comes.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
        .unwrap();
    let got = read_to_close(&mut s);
    assert!(
        got.is_empty() || String::from_utf8_lossy(&got).starts_with("HTTP/1.1 408"),
        "{got:?}"
    );
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(head("Content-Length: 1000\r\n\r\n{\"jsonrpc\"").as_bytes())
        .unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut s)).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // An idle connection that never sends a request is closed too.
    let mut s = TcpStream::connect(server.addr).unwrap();
    assert!(read_to_close(&mut s).is_empty());

    // A client that sends requests and stops reading the answers: the
    // server's writes block, and the connection is closed rather than held.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let one = format!("{}Content-Length: {}\r\n\r\n{list}", head(""), list.len());
    let s = TcpStream::connect(server.addr).unwrap();
    let mut w = s.try_clone().unwrap();
    w.set_write_timeout(Some(HANG)).unwrap();
    // Far more than the socket buffers hold: the server must stop reading.
    const SENT: usize = 100_000;
    let writer = std::thread::spawn(move || {
        for _ in 0..SENT {
            w.write_all(one.as_bytes())?;
        }
        Ok::<(), std::io::Error>(())
    });
    // The server closes the connection: the writer's next write fails with
    // a broken pipe or a reset (not our own time limit), then this side
    // drains what was buffered to the end.
    let err = writer.join().unwrap().expect_err("every request was taken");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "{err}"
    );
    let mut s = s;
    let got = read_to_close(&mut s);
    let answered = String::from_utf8_lossy(&got)
        .matches("HTTP/1.1 200")
        .count();
    assert!(
        answered < SENT,
        "all {SENT} answered: the connection was never cut"
    );
    // The host is healthy.
    assert_eq!(c.rpc("ping", json!({})).await.result(), &json!({}));
    assert!(
        server
            .stderr
            .lock()
            .unwrap()
            .iter()
            .all(|l| !l.contains("panicked")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_requests_with_a_tenth_timing_out() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("load-token", "loader", "")).unwrap();
    let server = Server::start(
        store.path(),
        &["--tokens", tokens.to_str().unwrap(), "--timeout-ms", "300"],
    );
    let mut c = server.client(Some("load-token"));
    c.open().await;
    c.forge(seed("slugify")).await;
    c.forge(spin_request()).await;

    let c = Arc::new(c);
    let gate = Arc::new(tokio::sync::Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000u32 {
        let (c, gate) = (c.clone(), gate.clone());
        tasks.spawn(async move {
            let _p = gate.acquire().await.unwrap();
            let spin = i % 10 == 0;
            let m = if spin {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "spin", "arguments": {"spin": true}}})
            } else {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "slugify", "arguments": {"text": format!("Item {i}")}}})
            };
            let a = c.post(&m).await;
            (i, spin, a)
        });
    }
    let (mut ok, mut timed_out) = (0, 0);
    while let Some(joined) = tasks.join_next().await {
        let (i, spin, a) = joined.unwrap();
        let r = a.result();
        assert_eq!(a.response()["id"], i);
        if spin {
            assert_eq!(r["isError"], true, "{r}");
            assert!(
                text_json(r)["error"]
                    .as_str()
                    .unwrap()
                    .contains("timed out"),
                "{r}"
            );
            timed_out += 1;
        } else {
            assert_eq!(r["structuredContent"], json!({"slug": format!("item-{i}")}));
            ok += 1;
        }
    }
    assert_eq!((ok, timed_out), (900, 100));
    let c = Arc::try_unwrap(c).ok().unwrap();
    let mut c = c;
    assert_eq!(c.rpc("ping", json!({})).await.result(), &json!({}));
    let s = c.call("tool_stats", json!({"name": "spin"})).await;
    let s = &s.result()["structuredContent"];
    assert_eq!(
        (s["total_calls"].as_u64(), s["successes"].as_u64()),
        (Some(100), Some(0))
    );
    let s = c.call("tool_stats", json!({"name": "slugify"})).await;
    let s = &s.result()["structuredContent"];
    assert_eq!(
        (s["total_calls"].as_u64(), s["successes"].as_u64()),
        (Some(900), Some(900))
    );
}

// ---- the official SDK clients ---------------------------------------------

fn required(var: &str, why: &str, test: &str) -> bool {
    crate::support::skip_unless_required(var, why, test)
}

pub(crate) fn has_ts_sdk() -> bool {
    let sdk = root().join("tests/mcp-ts/node_modules/@modelcontextprotocol/sdk/package.json");
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && sdk.exists() {
        return true;
    }
    required(
        "TEMPER_REQUIRE_MCP_TS",
        "no node, or no tests/mcp-ts/node_modules (run scripts/mcp-npm.sh)",
        "official TypeScript SDK client",
    )
}

pub(crate) fn python() -> Option<PathBuf> {
    let python = root().join("target/mcp-venv/bin/python");
    let ok = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp"])
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    required(
        "TEMPER_REQUIRE_MCP_PY",
        "no Python venv with the `mcp` package at target/mcp-venv (run scripts/mcp-venv.sh)",
        "official Python SDK client",
    );
    None
}

/// A server with one token for the SDK clients; returns it and the token.
pub(crate) fn sdk_server(store: &Path, dir: &Path) -> Server {
    let tokens = dir.join("tokens.toml");
    std::fs::write(&tokens, token_entry("sdk-token-1", "sdk", "")).unwrap();
    Server::start(store, &["--tokens", tokens.to_str().unwrap()])
}

#[test]
fn official_typescript_sdk_client_stdio() {
    if !has_ts_sdk() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let status = Command::new("node")
        .arg(root().join("tests/mcp-ts/client.mjs"))
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg(store.path())
        .arg(cache_dir())
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "tests/mcp-ts/client.mjs stdio failed: {status}"
    );
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[test]
fn official_typescript_sdk_client_http() {
    if !has_ts_sdk() {
        return;
    }
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    let status = Command::new("node")
        .arg(root().join("tests/mcp-ts/client.mjs"))
        .arg("http")
        .arg(server.url())
        .arg("sdk-token-1")
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "tests/mcp-ts/client.mjs http failed: {status}"
    );
    // The client ended its session (DELETE): the tier is gone.
    assert_eq!(
        session_deletions(store.path()),
        [("sdk".to_string(), "slugify".to_string())]
    );
}

#[test]
fn official_python_sdk_client_http() {
    let Some(python) = python() else { return };
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    let status = Command::new(python)
        .arg(root().join("tests/mcp_client.py"))
        .arg("http")
        .arg(server.url())
        .arg("sdk-token-1")
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run tests/mcp_client.py");
    assert!(
        status.success(),
        "tests/mcp_client.py http failed: {status}"
    );
    let path = store.path().to_path_buf();
    let deleted = session_deletions(&path);
    assert_eq!(deleted, [("sdk".to_string(), "slugify".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shared_tier_and_promotion_notices() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        [
            token_entry("alice-t", "alice", ""),
            token_entry("bob-t", "bob", "tiers = [\"session\", \"agent\"]"),
            token_entry("carol-t", "carol", ""),
        ]
        .concat(),
    )
    .unwrap();
    let config = dir.path().join("forge.json");
    std::fs::write(
        &config,
        r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
    )
    .unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--forge-config",
            config.to_str().unwrap(),
        ],
    );

    // Two sessions of Alice: a promotion in one is announced in the other
    // (the tool is now in the agent tier both see).
    let mut a1 = server.client(Some("alice-t"));
    let mut a2 = server.client(Some("alice-t"));
    a1.open().await;
    a2.open().await;
    let mut a2_stream = a2.open_stream().await;
    a1.forge(seed("slugify")).await;
    assert_eq!(
        a2.tool_names().await.len(),
        5,
        "a session tool is not shared"
    );
    let r = a1.call("slugify", json!({"text": "x y"})).await;
    assert_eq!(r.result()["isError"], false);
    let p = a1.call("promote_tool", json!({"name": "slugify"})).await;
    assert_eq!(p.result()["isError"], false, "{:?}", p.result());
    let note = tokio::time::timeout(HANG, a2_stream.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert!(a2.tool_names().await.contains(&"slugify".to_string()));

    // A person approves it for every agent (the shared tier).
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args([
            "approve", "slugify", "--by", "reviewer", "--agent", "alice", "--store",
        ])
        .arg(store.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The approval ran in another process: the server's poll of the audit
    // trail (every second by default) announces it to Alice's session.
    let note = tokio::time::timeout(Duration::from_secs(30), a2_stream.recv())
        .await
        .expect("list_changed after an approval made by another process")
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");

    // Carol may use the shared tier: she sees and calls it.
    let mut carol = server.client(Some("carol-t"));
    carol.open().await;
    assert!(carol.tool_names().await.contains(&"slugify".to_string()));
    let r = carol.call("slugify", json!({"text": "Shared Tool"})).await;
    assert_eq!(
        r.result()["structuredContent"],
        json!({"slug": "shared-tool"})
    );
    // Bob's token excludes the shared tier: not listed, not callable, not
    // reachable through a pipeline, no stats.
    let mut bob = server.client(Some("bob-t"));
    bob.open().await;
    assert_eq!(
        bob.tool_names().await,
        [
            "forge_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools"
        ]
    );
    let r = bob.call("slugify", json!({"text": "x"})).await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let s = bob.call("tool_stats", json!({"name": "slugify"})).await;
    assert_eq!(s.result()["isError"], true);
    let pipeline = json!({
        "name": "via_shared",
        "description": "Reaches slugify through a pipeline",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [{"name": "s", "tool": "slugify", "inputMapping": {"text": "$input.text"}}]},
        "testCases": [{"input": {"text": "A B"}, "expectedOutput": {"slug": "a-b"}}],
    });
    let r = bob.call("forge_tool", pipeline).await;
    assert_eq!(r.result()["isError"], true);
    assert_eq!(r.result()["structuredContent"]["stage"], "validate");
}

/// A token's `tools` narrows the hub tools the host policy allows: a hub
/// tool its token does not list is invisible to that agent (not listed,
/// not callable, refused as a compose step), and visible to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_tools_follow_the_tokens_tools_list() {
    let python = root().join("target/mcp-venv/bin/python");
    if !python.exists() {
        assert_ne!(
            std::env::var("TEMPER_REQUIRE_MCP_PY").as_deref(),
            Ok("1"),
            "TEMPER_REQUIRE_MCP_PY=1 but no {}",
            python.display()
        );
        eprintln!("SKIPPED hub_tools_follow_the_tokens_tools_list: no SDK venv");
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    let all = [
        token_entry("hub-alice-1", "alice", ""),
        token_entry("hub-bob-2", "bob", "tools = [\"github.*\"]"),
    ];
    std::fs::write(&tokens, all.concat()).unwrap();
    let script = root().join("tests/fixtures/hub/upstream_server.py");
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[upstream.search]\ncommand = [{:?}, {:?}]\ntools = [\"web_search\"]\n",
            python.display().to_string(),
            script.display().to_string()
        ),
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tools]\nallow = [\"web_search\"]\n").unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    let mut alice = server.client(Some("hub-alice-1"));
    alice.open().await;
    assert!(alice.tool_names().await.contains(&"web_search".to_string()));
    let a = alice
        .call("web_search", json!({"query": "q", "limit": 1}))
        .await;
    assert_eq!(
        a.result()["structuredContent"]["results"][0]["title"],
        "q #0"
    );

    let mut bob = server.client(Some("hub-bob-2"));
    bob.open().await;
    assert!(!bob.tool_names().await.contains(&"web_search".to_string()));
    let a = bob.call("web_search", json!({"query": "q"})).await;
    assert_eq!(a.response()["error"]["code"], json!(-32602), "{a:?}");
    let request = json!({
        "name": "bob_search",
        "description": "Searches.",
        "inputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [
            {"name": "s", "tool": "web_search", "inputMapping": {"query": "$input.q"}}
        ]},
        "testCases": [{"input": {"q": "x"}}]
    });
    let a = bob.call("forge_tool", request).await;
    let text = a.body.clone();
    assert!(
        text.contains("web_search") && text.contains("is not callable by agent"),
        "{text}"
    );
}
