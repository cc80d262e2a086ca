//! The hub's built-in tools, `http_request` and `generate_text`, and the
//! seed's two compose examples run end to end over MCP.
//!
//! - `http_request` through the hub library against a real HTTP server on
//!   127.0.0.1: the fetch capability's policy code decides (domains,
//!   private addresses, redirect hops, size caps), hostile inputs refused
//!   before anything reaches the server.
//! - `generate_text` against an OpenAI-compatible fake started here (its
//!   completions derive from the prompt, so outputs can be checked): the
//!   key is sent, never shown; errors name the tool and the status.
//! - `temper mcp` as a child process, driven over stdio: the built-ins are
//!   listed and callable, compose steps (a slow `generate_text` step is not
//!   cut off by a short runtime timeout), the seed fixtures forged verbatim
//!   (`web_search` from a Python-SDK upstream, `http_request` over TLS to a
//!   local server answering for `api.example.com`) and run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use temper::hub::{Hub, HubError, ToolsFile};

use crate::support::http::{TestServer, TlsTestServer};
use crate::support::mcp_stdio::{
    McpStdio, mcp_python, tool_output, tools_policy, walk, write_file,
};

/// The `generate_text` API key; it must never be shown.
pub(crate) const KEY: &str = "sk-llm-test-KEY-5521-do-not-print";

/// `temper mcp` over stdio for these tests (see [`McpStdio::start`]).
pub(crate) fn start_mcp(args: &[&str], stderr: &Path) -> McpStdio {
    McpStdio::start(
        &[args].concat(),
        stderr,
        &[("TEMPER_TEST_LLM_KEY", KEY)],
        KEY,
    )
}

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A tools file from `text`; `env:TEMPER_TEST_LLM_KEY` is [`KEY`].
fn tools_file(text: &str) -> ToolsFile {
    ToolsFile::parse(Path::new("tools.toml"), text, |name| {
        (name == "TEMPER_TEST_LLM_KEY").then(|| KEY.to_string())
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn start_hub(text: &str) -> Hub {
    Hub::start(&tools_file(text))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn call_err(hub: &Hub, tool: &str, input: Value) -> String {
    match hub.call(tool, input.clone()).await {
        Ok(out) => panic!("{tool} {input}: expected an error, got {out}"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------
// The OpenAI-compatible fake.

/// One request the fake received.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

/// A chat-completions endpoint on 127.0.0.1. Its answer derives from the
/// request: `gen(PROMPT)`, or `gen[SYSTEM](PROMPT)` with a system message.
/// A prompt containing `FAIL_401` is answered 401 with the request's
/// `Authorization` header echoed in the body (a hostile endpoint), one
/// containing `FAIL_500` with 500. Every answer waits `delay_ms`.
pub(crate) struct FakeLlm {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    delay_ms: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the fake answers for `prompt` (and `system`).
fn completion(system: Option<&str>, prompt: &str) -> String {
    match system {
        Some(s) => format!("gen[{s}]({prompt})"),
        None => format!("gen({prompt})"),
    }
}

impl FakeLlm {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (seen2, delay2) = (seen.clone(), delay_ms.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (seen, delay) = (seen2.clone(), delay2.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let head_end = loop {
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p;
                        }
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                    let length = head
                        .to_ascii_lowercase()
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:").map(str::to_string))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    let mut body = buf[head_end + 4..].to_vec();
                    while body.len() < length {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => body.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    seen.lock().unwrap().push(Seen {
                        head: head.clone(),
                        body: body.clone(),
                    });
                    let messages = body["messages"].as_array().cloned().unwrap_or_default();
                    let text = |role: &str| {
                        messages
                            .iter()
                            .find(|m| m["role"] == role)
                            .and_then(|m| m["content"].as_str())
                            .map(str::to_string)
                    };
                    let prompt = text("user").unwrap_or_default();
                    let (status, reply) = if prompt.contains("FAIL_401") {
                        let auth = head
                            .lines()
                            .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                            .unwrap_or("")
                            .to_string();
                        (401, json!({"error": format!("bad credentials: {auth}")}))
                    } else if prompt.contains("FAIL_500") {
                        (500, json!({"error": "model crashed"}))
                    } else {
                        let content = completion(text("system").as_deref(), &prompt);
                        (
                            200,
                            json!({"id": "c", "object": "chat.completion", "choices": [
                                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                            ]}),
                        )
                    };
                    tokio::time::sleep(Duration::from_millis(delay.load(Ordering::SeqCst))).await;
                    let reply = reply.to_string();
                    let response = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        FakeLlm {
            base: format!("http://127.0.0.1:{port}/v1"),
            seen,
            delay_ms,
            task,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn table(&self, extra: &str) -> String {
        format!(
            "[builtin.generate_text]\nurl = \"{}\"\nmodel = \"test-model\"\napi_key = \"env:TEMPER_TEST_LLM_KEY\"\n{extra}\n",
            self.base
        )
    }
}

// ---------------------------------------------------------------------
// http_request through the hub library.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_request_answers_status_headers_and_a_parsed_body() {
    let server = TestServer::start().await;
    let port = server.port();
    let hub = start_hub(&format!(
        "[builtin.http_request]\ndomains = [\"127.0.0.1:{port}\"]\n"
    ))
    .await;
    let tools = hub.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "http_request");
    assert_eq!(tools[0].source, "built-in");
    assert_eq!(tools[0].input_schema["required"], json!(["method", "url"]));
    assert!(tools[0].output_schema.is_some());

    let out = hub
        .call(
            "http_request",
            json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/json")}),
        )
        .await
        .unwrap();
    assert_eq!(out["status"], 200);
    assert_eq!(out["headers"]["content-type"], "application/json");
    assert_eq!(out["body"], json!({"hello": "world"}), "JSON is parsed");

    // A JSON body goes out as JSON; headers are sent.
    let out = hub
        .call(
            "http_request",
            json!({"method": "POST", "url": format!("http://127.0.0.1:{port}/echo"),
                   "headers": {"x-trace": "t1"}, "body": {"a": 1}}),
        )
        .await
        .unwrap();
    assert_eq!(out["body"]["method"], "POST");
    assert_eq!(out["body"]["body"], r#"{"a":1}"#);
    assert_eq!(out["body"]["headers"]["content-type"], "application/json");
    assert_eq!(out["body"]["headers"]["x-trace"], "t1");

    // Not JSON: the text.
    let out = hub
        .call(
            "http_request",
            json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/nope")}),
        )
        .await
        .unwrap();
    assert_eq!(out["status"], 404);
    assert_eq!(out["body"], "not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_request_refuses_what_the_fetch_policy_refuses() {
    let server = TestServer::start().await;
    let port = server.port();
    // evil.test and api.example.test "resolve" to 127.0.0.1.
    let resolve = format!(
        "resolve = {{ \"api.example.test\" = [\"127.0.0.1:{port}\"], \"evil.test\" = [\"127.0.0.1:{port}\"] }}"
    );
    let strict = start_hub(&format!(
        "[builtin.http_request]\ndomains = [\"127.0.0.1:{port}\", \"api.example.test:{port}\"]\n{resolve}\n"
    ))
    .await;

    // A domain not in `domains`.
    let err = call_err(
        &strict,
        "http_request",
        json!({"method": "GET", "url": format!("http://evil.test:{port}/json")}),
    )
    .await;
    assert!(
        err.starts_with("http_request: host not allowed: evil.test"),
        "{err}"
    );
    // A listed name resolving to a private address, private not allowed
    // (and no rule naming the address: a rule naming an IP allows it).
    let named = start_hub(&format!(
        "[builtin.http_request]\ndomains = [\"api.example.test:{port}\"]\n{resolve}\n"
    ))
    .await;
    let err = call_err(
        &named,
        "http_request",
        json!({"method": "GET", "url": format!("http://api.example.test:{port}/json")}),
    )
    .await;
    assert!(
        err.contains(
            "http_request: private address not allowed: api.example.test resolved to 127.0.0.1"
        ),
        "{err}"
    );
    // Cloud metadata, by IP literal: no rule names it.
    let err = call_err(
        &strict,
        "http_request",
        json!({"method": "GET", "url": "http://169.254.169.254/latest/meta-data/"}),
    )
    .await;
    assert!(
        err.contains("http_request: IP address not allowed: 169.254.169.254"),
        "{err}"
    );
    // A redirect hop to a host not in `domains` is refused, not followed.
    let err = call_err(
        &strict,
        "http_request",
        json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/redirect-evil")}),
    )
    .await;
    assert!(
        err.contains("http_request: redirect to evil.test refused: host not allowed"),
        "{err}"
    );
    // The input is checked before anything is sent.
    let err = call_err(&strict, "http_request", json!({"method": "GET"})).await;
    assert!(
        err.starts_with("http_request: input does not match inputSchema") && err.contains("url"),
        "{err}"
    );
    let err = call_err(
        &strict,
        "http_request",
        json!({"method": "TRACE", "url": format!("http://127.0.0.1:{port}/json")}),
    )
    .await;
    assert!(err.contains("input does not match inputSchema"), "{err}");
    let seen: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        seen,
        ["/redirect-evil"],
        "only the first hop of the redirect reached the server"
    );

    // With private addresses allowed, the name reaches the server; a
    // redirect from it to an IP literal no rule names is still refused.
    let open = start_hub(&format!(
        "[builtin.http_request]\ndomains = [\"api.example.test:{port}\"]\nallow_private = true\n{resolve}\n"
    ))
    .await;
    let out = open
        .call(
            "http_request",
            json!({"method": "GET", "url": format!("http://api.example.test:{port}/json")}),
        )
        .await
        .unwrap();
    assert_eq!(out["body"]["hello"], "world");
    let err = call_err(
        &open,
        "http_request",
        json!({"method": "GET", "url": format!("http://api.example.test:{port}/redirect-ip")}),
    )
    .await;
    assert!(
        err.contains(
            "http_request: redirect to 127.0.0.1 refused: IP address not allowed: 127.0.0.1"
        ),
        "{err}"
    );

    // The response cap (default 4 MiB; /big is 9 MiB), and a smaller one.
    let err = call_err(
        &open,
        "http_request",
        json!({"method": "GET", "url": format!("http://api.example.test:{port}/big")}),
    )
    .await;
    assert_eq!(err, "http_request: response body over 4 MiB");
    let tiny = start_hub(&format!(
        "[builtin.http_request]\ndomains = [\"127.0.0.1:{port}\"]\nmax_response_bytes = 8\n"
    ))
    .await;
    let err = call_err(
        &tiny,
        "http_request",
        json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/json")}),
    )
    .await;
    assert_eq!(err, "http_request: response body over 8 bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_ins_are_off_until_configured() {
    let hub = start_hub("").await;
    assert!(hub.tools().is_empty());
    for name in ["http_request", "generate_text"] {
        let err = hub.call(name, json!({})).await.unwrap_err();
        assert_eq!(err, HubError::Unknown(name.into()));
    }
}

// ---------------------------------------------------------------------
// generate_text through the hub library.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_text_completes_sends_the_key_and_never_shows_it() {
    let llm = FakeLlm::start().await;
    let hub = start_hub(&llm.table("max_tokens = 64")).await;
    let tools = hub.tools();
    assert_eq!(tools[0].name, "generate_text");
    assert_eq!(
        tools[0].timeout,
        Duration::from_secs(120),
        "an LLM's default limit"
    );
    let listed = format!("{tools:?} {hub:?}");
    assert!(!listed.contains(KEY), "{listed}");

    let out = hub
        .call(
            "generate_text",
            json!({"prompt": "hello", "system": "be brief"}),
        )
        .await
        .unwrap();
    assert_eq!(out, json!({"output": "gen[be brief](hello)"}));
    let seen = llm.seen();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0]
            .head
            .contains(&format!("authorization: Bearer {KEY}"))
            || seen[0]
                .head
                .contains(&format!("Authorization: Bearer {KEY}")),
        "the key is sent: {}",
        seen[0].head
    );
    assert!(seen[0].head.starts_with("POST /v1/chat/completions "));
    assert_eq!(seen[0].body["model"], "test-model");
    assert_eq!(seen[0].body["max_tokens"], 64, "the table's default");
    assert_eq!(seen[0].body["messages"][0]["role"], "system");

    // max_tokens above the table's is refused before anything is sent.
    let err = call_err(
        &hub,
        "generate_text",
        json!({"prompt": "x", "max_tokens": 65}),
    )
    .await;
    assert!(
        err.starts_with("generate_text: input does not match inputSchema"),
        "{err}"
    );
    assert_eq!(llm.seen().len(), 1);

    // Errors name the tool and the status; an endpoint echoing the key
    // does not get it shown.
    let err = call_err(&hub, "generate_text", json!({"prompt": "FAIL_500"})).await;
    assert!(
        err.starts_with(&format!(
            "generate_text: HTTP 500 from {}/chat/completions",
            llm.base
        )),
        "{err}"
    );
    assert!(err.contains("model crashed"), "{err}");
    let err = call_err(&hub, "generate_text", json!({"prompt": "FAIL_401"})).await;
    assert!(err.starts_with("generate_text: HTTP 401"), "{err}");
    assert!(
        !err.contains(KEY) && err.contains("Bearer [redacted]"),
        "{err}"
    );

    // The table's timeout bounds a call.
    let short = start_hub(&llm.table("timeout_ms = 300")).await;
    llm.delay_ms.store(2000, Ordering::SeqCst);
    let err = call_err(&short, "generate_text", json!({"prompt": "slow"})).await;
    assert_eq!(err, "generate_text: no answer within 300 ms");
    // Nothing listens: the endpoint is named.
    let gone = start_hub(
        "[builtin.generate_text]\nurl = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key = \"env:TEMPER_TEST_LLM_KEY\"\n",
    )
    .await;
    let err = call_err(&gone, "generate_text", json!({"prompt": "x"})).await;
    assert!(
        err.starts_with("generate_text: cannot connect to http://127.0.0.1:9/v1/chat/completions"),
        "{err}"
    );
    assert!(!err.contains(KEY));
}

// ---------------------------------------------------------------------
// `temper mcp` as a child process.

fn assert_no_key_in(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(!text.contains(KEY), "key in {}", path.display());
}

/// Runs `f` on the blocking pool (the MCP driver blocks; the fake servers
/// run on the test's runtime meanwhile).
/// A tools file in `dir` with both built-ins: `generate_text` on `llm`,
/// `http_request` allowed to reach 127.0.0.1:`port` only.
pub(crate) fn builtins_tools_file(dir: &Path, llm: &FakeLlm, port: u16) -> PathBuf {
    write_file(
        dir,
        "tools.toml",
        &format!(
            "{}\n[builtin.http_request]\ndomains = [\"127.0.0.1:{port}\"]\n",
            llm.table("")
        ),
    )
}

pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_ins_over_mcp_are_listed_called_composed_and_governed_by_the_policy() {
    let llm = FakeLlm::start().await;
    let server = TestServer::start().await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let tools = builtins_tools_file(dir.path(), &llm, port);
    // Only generate_text is allowed: http_request is configured but hidden.
    let policy = tools_policy(dir.path(), &["generate_text"]);
    let stderr = dir.path().join("stderr.txt");
    let store = dir.path().join("store");
    // A runtime timeout of 1 s and an LLM that takes 1.5 s per answer.
    llm.delay_ms.store(1500, Ordering::SeqCst);
    let args: Vec<String> = [
        "--timeout-ms",
        "1000",
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stderr2 = stderr.clone();
    let (listed, direct, hidden, forged, composed) = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut m = start_mcp(&args, &stderr2);
        let listed = m.tools();
        let direct = m.call("generate_text", json!({"prompt": "hi"}));
        let hidden = m.call(
            "http_request",
            json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/json")}),
        );
        let forged = m.call(
            "forge_tool",
            json!({
                "name": "shout",
                "description": "Asks the model to shout a word.",
                "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
                "implementation": {"mode": "compose", "steps": [
                    {"name": "ask", "tool": "generate_text",
                     "inputMapping": {"prompt": "Shout $input.word", "system": "loud"}}
                ]},
                "testCases": [{"input": {"word": "a"}}]
            }),
        );
        let composed = m.call("shout", json!({"word": "hey"}));
        m.close();
        (listed, direct, hidden, forged, composed)
    })
    .await;

    let names: Vec<&str> = listed.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"generate_text"), "{names:?}");
    assert!(
        !names.contains(&"http_request"),
        "not allowed by the policy, so not listed: {names:?}"
    );
    let gt = listed
        .iter()
        .find(|t| t["name"] == "generate_text")
        .unwrap();
    assert_eq!(gt["inputSchema"]["required"], json!(["prompt"]));
    assert_eq!(gt["outputSchema"]["required"], json!(["output"]));
    assert!(!serde_json::to_string(&listed).unwrap().contains(KEY));

    // Called directly, slower than the runtime's 1 s timeout: its own
    // limit applies.
    assert_eq!(tool_output(&direct), json!({"output": "gen(hi)"}));
    // Not allowed: not callable (an unknown tool), nothing sent.
    assert_eq!(hidden["error"]["code"], json!(-32602), "{hidden}");
    assert!(server.requests().is_empty());
    // A compose step over it forges (its test case ran: 2 × 1.5 s) and
    // runs, although each step takes longer than the runtime's timeout.
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    assert_eq!(
        tool_output(&composed),
        json!({"output": "gen[loud](Shout hey)"})
    );
    assert_eq!(llm.seen().len(), 4, "direct, two test runs, the call");
    assert_no_key_in(&stderr);
}

fn seed_upstream(python: &Path, tools: &str) -> String {
    let script = root().join("tests/fixtures/hub/seed_search_server.py");
    let command = [python.display().to_string(), script.display().to_string()];
    format!(
        // A search is read-only; the upstream does not say so, the tools
        // file does (a forge's tests call only read-only tools live).
        "[upstream.search]\ncommand = {}\ntools = {tools}\n\n[upstream.search.annotations.web_search]\nreadOnlyHint = true\n\n",
        serde_json::to_string(&command).unwrap()
    )
}

fn seed(name: &str) -> Value {
    let path = root().join(format!("tests/fixtures/compose/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_compose_examples_forge_verbatim_and_run_over_mcp() {
    let Some(python) = mcp_python() else { return };
    let llm = FakeLlm::start().await;
    // `https://api.example.com/metrics` (the seed's test case) is answered
    // by a TLS server on 127.0.0.1 with a certificate for that name.
    let tls = TlsTestServer::start("api.example.com").await;
    let plain = TestServer::start().await;
    let (tls_port, plain_port) = (tls.port(), plain.port());
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "root.pem", &tls.root_pem());
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "{}{}\n[builtin.http_request]\ndomains = [\"https://api.example.com\", \"127.0.0.1:{plain_port}\"]\nallow_private = true\nresolve = {{ \"api.example.com\" = [\"127.0.0.1:{tls_port}\"] }}\nca_file = \"root.pem\"\n",
            seed_upstream(&python, "[\"web_search\"]"),
            llm.table(""),
        ),
    );
    let policy = tools_policy(dir.path(), &["web_search", "http_request", "generate_text"]);
    let stderr = dir.path().join("stderr.txt");
    let store = dir.path().join("store");
    let args: Vec<String> = [
        "--store",
        store.to_str().unwrap(),
        "--tools",
        tools.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let stderr2 = stderr.clone();
    let research = seed("research_and_summarize");
    let report = seed("fetch_analyze_report");
    let answers: HashMap<&str, Value> = blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut m = start_mcp(&args, &stderr2);
        let mut a = HashMap::new();
        a.insert("forge_research", m.call("forge_tool", research));
        a.insert("forge_report", m.call("forge_tool", report));
        a.insert(
            "research",
            m.call("research_and_summarize", json!({"topic": "wasm runtimes"})),
        );
        a.insert(
            "report_tls",
            m.call(
                "fetch_analyze_report",
                json!({"endpoint": "https://api.example.com/metrics", "timeRange": "last 7 days"}),
            ),
        );
        a.insert(
            "report_plain",
            m.call(
                "fetch_analyze_report",
                json!({"endpoint": format!("http://127.0.0.1:{plain_port}/json"), "timeRange": "Q3"}),
            ),
        );
        a.insert("list", json!(m.tools()));
        m.close();
        a
    })
    .await;

    let forged = &answers["forge_research"];
    assert_eq!(tool_output(forged)["success"], json!(true), "{forged}");
    let forged = &answers["forge_report"];
    assert_eq!(tool_output(forged)["success"], json!(true), "{forged}");

    // research_and_summarize: web_search (Python SDK upstream) → generate_text.
    let search_text = "1. wasm runtimes: finding 1 (https://example.com/wasm-runtimes/0)\n2. wasm runtimes: finding 2 (https://example.com/wasm-runtimes/1)";
    let expected = completion(
        None,
        &format!("Summarize these search results about \"wasm runtimes\":\n{search_text}"),
    );
    assert_eq!(
        tool_output(&answers["research"]),
        json!({ "output": expected })
    );

    // fetch_analyze_report: http_request (TLS, api.example.com) →
    // generate_text → generate_text.
    let out = tool_output(&answers["report_tls"]);
    let text = out["output"].as_str().unwrap();
    assert!(
        text.starts_with(
            "gen(Format this analysis as a markdown report:\ngen(Analyze trends in this data for last 7 days:\n{"
        ) && text.ends_with("}))"),
        "{text}"
    );
    assert!(
        text.contains("\"requests\":[120,135,180]") && text.contains("\"errors\":[3,2,1]"),
        "the fetched body reached the prompt: {text}"
    );
    let out = tool_output(&answers["report_plain"]);
    assert_eq!(
        out["output"],
        "gen(Format this analysis as a markdown report:\ngen(Analyze trends in this data for Q3:\n{\"hello\":\"world\"}))"
    );

    // fetch_analyze_report has no outputSchema: it took its last step's
    // (generate_text's).
    let list = answers["list"].as_array().unwrap();
    let listed = list
        .iter()
        .find(|t| t["name"] == "fetch_analyze_report")
        .expect("listed");
    assert_eq!(
        listed["outputSchema"],
        json!({"type": "object", "properties": {"output": {"type": "string"}}, "required": ["output"]}),
        "{listed}"
    );
    for name in ["web_search", "http_request", "generate_text"] {
        assert!(list.iter().any(|t| t["name"] == name), "{name} listed");
    }
    // The seed's own test case went to api.example.com (twice: the repeat
    // run), and two calls reached the plain server's /json once.
    assert_eq!(plain.requests().len(), 1);
    assert!(!serde_json::to_string(&answers).unwrap().contains(KEY));
    assert_no_key_in(&stderr);
    for entry in walk(&store) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes()),
            "key in {}",
            entry.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_tool_named_like_a_built_in_is_a_clash_naming_both() {
    let Some(python) = mcp_python() else { return };
    let llm = FakeLlm::start().await;
    let text = format!(
        "{}{}",
        seed_upstream(&python, "[\"generate_text\"]"),
        llm.table("")
    );
    let err = Hub::start(&tools_file(&text))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hub tool \"generate_text\" is exposed twice")
            && err.contains("upstream \"search\"")
            && err.contains("built-in"),
        "{err}"
    );
    // A prefix resolves it.
    let text = format!(
        "{}\n\n{}",
        seed_upstream(&python, "[\"generate_text\"]")
            .replacen(
                "[upstream.search]\n",
                "[upstream.search]\nprefix = \"search.\"\n",
                1
            )
            .trim_end(),
        llm.table("")
    );
    let hub = Hub::start(&tools_file(&text)).await.unwrap();
    let names: Vec<String> = hub.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["generate_text", "search.generate_text"]);
}
