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
//!
//! This module keeps the harness (the server process, its HTTP client, the
//! SDK lookups), which `mcp_modern`, `mcp_jwt`, `hub_tokens`, `observe` and
//! `scale_out` use too; the tests are in its submodules.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::Digest;
use support::cache_dir;
use support::sse::{sse_messages, sse_receiver};
use temper::store::{AuditKind, Registry};

mod limits;
mod notices;
mod protocol;
mod sdk;
mod tokens;

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
    // Two tokens of agent "sdk" (two clients of one agent) and one of
    // another agent.
    let entries = [
        token_entry("sdk-token-1", "sdk", ""),
        token_entry("sdk-token-2", "sdk", ""),
        token_entry("other-token", "other", ""),
    ];
    std::fs::write(&tokens, entries.concat()).unwrap();
    Server::start(store, &["--tokens", tokens.to_str().unwrap()])
}
