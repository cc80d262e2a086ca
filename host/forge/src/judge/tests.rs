//! Tests of the judge stage. LLM tests run a real HTTP/1.1 server on
//! 127.0.0.1 inside the test that answers like a chat-completions endpoint;
//! nothing else is contacted.
//!
//! This module keeps the fixtures and the test server; the tests are in its
//! submodules.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

mod llm;
mod panel;
mod rules;
mod types;

const CANDIDATE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/candidate.json"
));
const COMPLETION_APPROVE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/completion_approve.json"
));
const ANSWER_FENCED: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/answer_fenced.txt"
));

const MODEL: &str = "judge-test-model";

fn candidate() -> ToolCandidate {
    serde_json::from_str(CANDIDATE).expect("candidate fixture parses")
}

// ---------------------------------------------------------------- server

/// One request the test server received.
#[derive(Debug, Clone)]
struct Recorded {
    /// Request line and headers, as sent.
    head: String,
    /// Request body.
    body: String,
}

impl Recorded {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }

    /// Value of header `name` (case-insensitive), if present.
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// What the test server answers.
struct Reply {
    status: u16,
    body: String,
    delay: Duration,
    extra_headers: String,
}

impl Reply {
    fn ok(body: impl Into<String>) -> Self {
        Self::status(200, body)
    }

    fn status(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
            delay: Duration::ZERO,
            extra_headers: String::new(),
        }
    }
}

/// A chat-completions response whose message content is `content`.
fn completion(content: &str) -> String {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }]
    })
    .to_string()
}

/// A running test server.
struct Server {
    /// `http://127.0.0.1:PORT/v1`
    base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// Starts a server on 127.0.0.1 that answers every request with
/// `respond(request)`. It lives as long as the test's runtime.
async fn serve<F>(respond: F) -> Server
where
    F: Fn(&Recorded) -> Reply + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let respond = Arc::new(respond);
    let recorded = Arc::clone(&requests);
    tokio::spawn(async move {
        // Bounded: a test makes a handful of requests, and the loop ends
        // with the test's runtime.
        while let Ok((stream, _)) = listener.accept().await {
            let respond = Arc::clone(&respond);
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let _ = handle(stream, &*respond, &recorded).await;
            });
        }
    });
    Server {
        base_url: format!("http://{addr}/v1"),
        requests,
    }
}

/// Reads one HTTP/1.1 request, records it, and writes the reply.
async fn handle(
    mut stream: TcpStream,
    respond: &(dyn Fn(&Recorded) -> Reply + Send + Sync),
    recorded: &Mutex<Vec<Recorded>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let request = Recorded {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    recorded.lock().unwrap().push(request.clone());
    let reply = respond(&request);
    tokio::time::sleep(reply.delay).await;
    let response = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}",
        reply.status,
        reply.body.len(),
        reply.extra_headers,
        reply.body
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// A unique environment variable name per call, never set unless a test
/// sets it.
fn unique_env_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "TEMPER_JUDGE_TEST_KEY_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A config for `base_url` that never uses a proxy and reads its key from a
/// fresh, unset variable.
fn config(base_url: &str) -> LlmJudgeConfig {
    LlmJudgeConfig {
        api_key_env: Some(unique_env_name()),
        system_proxy: false,
        ..LlmJudgeConfig::new(base_url, MODEL)
    }
}

async fn review_with(server: &Server) -> Verdict {
    let judge = LlmJudge::new(config(&server.base_url)).unwrap();
    judge.review(&candidate()).await
}

fn assert_rejected_with(verdict: &Verdict, prefix: &str) {
    assert!(!verdict.approved, "expected rejection: {verdict:?}");
    assert_eq!(verdict.confidence, 0.0);
    assert!(
        verdict
            .reasons
            .first()
            .is_some_and(|r| r.starts_with(prefix)),
        "expected a reason starting with {prefix:?}: {:?}",
        verdict.reasons
    );
}

fn pass_check(_source: &str) -> Result<(), String> {
    Ok(())
}

/// A stand-in for the host's static check: flags `eval(`.
fn eval_check(source: &str) -> Result<(), String> {
    if source.contains("eval(") {
        Err("blocked API `eval` at 2:3 (arbitrary code execution)".to_string())
    } else {
        Ok(())
    }
}

fn rules() -> RulesJudge {
    RulesJudge::new(eval_check)
}
