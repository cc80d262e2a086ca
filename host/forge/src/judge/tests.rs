//! Tests of the judge stage. LLM tests run a real HTTP/1.1 server on
//! 127.0.0.1 inside the test that answers like a chat-completions endpoint;
//! nothing else is contacted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::llm::{find_json_object, human_duration};
use super::*;

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

// ---------------------------------------------------------------- LLM judge

#[tokio::test]
async fn llm_approves_and_sends_the_expected_request() {
    let server = serve(|_| Reply::ok(COMPLETION_APPROVE)).await;
    let verdict = review_with(&server).await;

    assert!(verdict.approved, "{verdict:?}");
    assert_eq!(verdict.safety, 0.95);
    assert_eq!(verdict.correctness, 0.9);
    assert_eq!(verdict.determinism, 1.0);
    assert_eq!(verdict.confidence, 0.88);
    assert_eq!(verdict.reasons.len(), 2);
    assert_eq!(verdict.judge, format!("llm:{MODEL}"));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert!(
        req.head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{}",
        req.head
    );
    assert_eq!(
        req.header("content-type").as_deref(),
        Some("application/json")
    );
    assert!(req.body.contains(MODEL));
    assert!(req.body.contains("convert_temperature"));
    let body = req.json();
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["temperature"].as_f64(), Some(0.0));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][0]["content"], SYSTEM_PROMPT);
    assert_eq!(body["messages"][1]["role"], "user");
    let sent: ToolCandidate =
        serde_json::from_str(body["messages"][1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(sent, candidate());
    assert_eq!(req.header("authorization"), None, "no key, no header");
}

#[tokio::test]
async fn llm_sends_bearer_key_only_when_env_var_is_set() {
    let server = serve(|_| Reply::ok(COMPLETION_APPROVE)).await;
    let var = unique_env_name();
    let cfg = LlmJudgeConfig {
        api_key_env: Some(var.clone()),
        ..config(&server.base_url)
    };
    let judge = LlmJudge::new(cfg).unwrap();

    assert!(judge.review(&candidate()).await.approved);
    // SAFETY: the name is unique to this test, so no other code reads or
    // writes this variable, and std serializes its own environment access.
    unsafe { std::env::set_var(&var, "sk-test-123") };
    assert!(judge.review(&candidate()).await.approved);
    // SAFETY: as above.
    unsafe { std::env::set_var(&var, "") };
    assert!(judge.review(&candidate()).await.approved);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(
        requests[1].header("authorization").as_deref(),
        Some("Bearer sk-test-123")
    );
    assert_eq!(requests[2].header("authorization"), None, "empty key");
}

#[tokio::test]
async fn llm_without_key_env_sends_no_header_and_json_mode_off_omits_response_format() {
    let server = serve(|_| Reply::ok(COMPLETION_APPROVE)).await;
    let cfg = LlmJudgeConfig {
        api_key_env: None,
        json_mode: false,
        ..config(&server.base_url)
    };
    let verdict = LlmJudge::new(cfg).unwrap().review(&candidate()).await;
    assert!(verdict.approved);
    let req = &server.requests()[0];
    assert_eq!(req.header("authorization"), None);
    assert!(req.json().get("response_format").is_none());
}

#[tokio::test]
async fn llm_rejection_passes_reasons_through() {
    let content = json!({
        "approved": false,
        "safety": 0.2,
        "correctness": 0.9,
        "determinism": 1.0,
        "confidence": 0.95,
        "reasons": ["sends input to an unrelated host"]
    })
    .to_string();
    let server = serve(move |_| Reply::ok(completion(&content))).await;
    let verdict = review_with(&server).await;
    assert!(!verdict.approved);
    assert_eq!(verdict.safety, 0.2);
    assert_eq!(verdict.confidence, 0.95);
    assert_eq!(verdict.reasons, ["sends input to an unrelated host"]);
}

#[tokio::test]
async fn llm_rejection_without_reasons_gets_one() {
    let content = r#"{"approved": false, "safety": 0, "correctness": 0, "determinism": 0, "confidence": 1, "reasons": []}"#;
    let server = serve(move |_| Reply::ok(completion(content))).await;
    let verdict = review_with(&server).await;
    assert!(!verdict.approved);
    assert_eq!(verdict.reasons, ["judge: rejected without giving a reason"]);
}

#[tokio::test]
async fn llm_malformed_json_is_rejected() {
    let server = serve(|_| Reply::ok(completion("approved: yes {safety: high"))).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(&verdict, "judge: malformed verdict: no JSON object");
}

#[tokio::test]
async fn llm_missing_field_is_rejected() {
    let content =
        r#"{"approved": true, "safety": 1, "correctness": 1, "determinism": 1, "reasons": ["ok"]}"#;
    let server = serve(move |_| Reply::ok(completion(content))).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(
        &verdict,
        "judge: malformed verdict: missing field `confidence`",
    );
}

#[tokio::test]
async fn llm_wrong_field_type_is_rejected() {
    let content = r#"{"approved": "true", "safety": 1, "correctness": 1, "determinism": 1, "confidence": 1, "reasons": []}"#;
    let server = serve(move |_| Reply::ok(completion(content))).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(&verdict, "judge: malformed verdict: invalid type");
}

#[tokio::test]
async fn llm_fenced_json_with_prose_is_accepted() {
    let server = serve(|_| Reply::ok(completion(ANSWER_FENCED))).await;
    let verdict = review_with(&server).await;
    assert!(verdict.approved, "{verdict:?}");
    assert_eq!(verdict.safety, 0.9);
    assert_eq!(verdict.correctness, 0.85);
    assert_eq!(verdict.determinism, 1.0);
    assert_eq!(verdict.confidence, 0.8);
    assert_eq!(
        verdict.reasons,
        [r#"no blocked APIs; braces in strings like "}{" are fine"#]
    );
}

#[tokio::test]
async fn llm_out_of_range_scores_are_rejected() {
    let content = r#"{"approved": true, "safety": 1.5, "correctness": 1, "determinism": 1, "confidence": 0.9, "reasons": ["great"]}"#;
    let server = serve(move |_| Reply::ok(completion(content))).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(
        &verdict,
        "judge: malformed verdict: `safety` is 1.5, outside 0..=1",
    );

    let content = r#"{"approved": true, "safety": 1, "correctness": 1, "determinism": 1, "confidence": -0.1, "reasons": []}"#;
    let server = serve(move |_| Reply::ok(completion(content))).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(
        &verdict,
        "judge: malformed verdict: `confidence` is -0.1, outside 0..=1",
    );
}

#[tokio::test]
async fn llm_non_completion_body_is_rejected() {
    let server = serve(|_| Reply::ok(r#"{"object": "list", "data": []}"#)).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(
        &verdict,
        "judge: malformed verdict: response has no choices[0].message.content",
    );

    let server = serve(|_| Reply::ok("<html>gateway</html>")).await;
    let verdict = review_with(&server).await;
    assert_rejected_with(&verdict, "judge: malformed verdict: response is not JSON");
}

#[tokio::test]
async fn llm_slow_endpoint_times_out() {
    let server = serve(|_| Reply {
        delay: Duration::from_secs(5),
        ..Reply::ok(COMPLETION_APPROVE)
    })
    .await;
    let cfg = LlmJudgeConfig {
        timeout: Duration::from_millis(300),
        ..config(&server.base_url)
    };
    let judge = LlmJudge::new(cfg).unwrap();
    let started = Instant::now();
    let verdict = judge.review(&candidate()).await;
    let elapsed = started.elapsed();
    assert!(!verdict.approved);
    assert_eq!(verdict.reasons, ["judge: no answer within 300 ms"]);
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(server.requests().len(), 1, "the request did arrive");
}

#[test]
fn default_timeout_message_reads_30_s() {
    assert_eq!(
        ReviewError::Timeout(DEFAULT_TIMEOUT).to_string(),
        "judge: no answer within 30 s"
    );
    assert_eq!(human_duration(Duration::from_millis(1500)), "1500 ms");
}

#[tokio::test]
async fn llm_http_500_is_rejected() {
    let server = serve(|_| Reply::status(500, r#"{"error": "model crashed"}"#)).await;
    let verdict = review_with(&server).await;
    assert!(!verdict.approved);
    assert_eq!(
        verdict.reasons[0],
        format!("judge: HTTP 500 from {}", server.endpoint())
    );
    assert!(server.endpoint().starts_with("http://127.0.0.1:"));
    assert_eq!(
        verdict.reasons[1],
        r#"judge: response body: {"error": "model crashed"}"#
    );
}

#[tokio::test]
async fn llm_redirect_is_not_followed() {
    let server = serve(|_| Reply {
        extra_headers: "Location: http://127.0.0.1:9/elsewhere\r\n".to_string(),
        ..Reply::status(307, "")
    })
    .await;
    let verdict = review_with(&server).await;
    assert_eq!(
        verdict.reasons,
        [format!("judge: HTTP 307 from {}", server.endpoint())]
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn llm_connection_refused_is_rejected() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let base_url = format!("http://{addr}/v1");
    let judge = LlmJudge::new(config(&base_url)).unwrap();
    let verdict = judge.review(&candidate()).await;
    assert_rejected_with(
        &verdict,
        &format!("judge: cannot connect to http://{addr}/v1/chat/completions: "),
    );
    assert_eq!(verdict.reasons.len(), 1);
}

#[test]
fn llm_config_is_validated() {
    let bad_url = LlmJudge::new(LlmJudgeConfig::new("127.0.0.1:8080", MODEL));
    assert!(matches!(bad_url, Err(JudgeError::InvalidBaseUrl(_))));
    let no_model = LlmJudge::new(LlmJudgeConfig::new("http://127.0.0.1:1/v1", " "));
    assert!(matches!(no_model, Err(JudgeError::NoModel)));
    let zero = LlmJudge::new(LlmJudgeConfig {
        timeout: Duration::ZERO,
        ..LlmJudgeConfig::new("http://127.0.0.1:1/v1", MODEL)
    });
    assert!(matches!(zero, Err(JudgeError::ZeroTimeout)));

    let judge = LlmJudge::new(config("http://127.0.0.1:1/v1/")).unwrap();
    assert_eq!(judge.endpoint(), "http://127.0.0.1:1/v1/chat/completions");
    let defaults = LlmJudgeConfig::new("http://x", MODEL);
    assert_eq!(defaults.timeout, Duration::from_secs(30));
    assert_eq!(defaults.api_key_env.as_deref(), Some(DEFAULT_API_KEY_ENV));
}

// ---------------------------------------------------------------- panel

#[tokio::test]
async fn panel_rejects_when_one_reviewer_rejects() {
    // The server plays both reviewers, telling them apart by system prompt:
    // the safety reviewer rejects, the correctness reviewer approves.
    let server = serve(|req| {
        let system = req.json()["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if system.contains(SAFETY_REVIEWER_FOCUS) {
            Reply::ok(completion(
                r#"{"approved": false, "safety": 0.3, "correctness": 1, "determinism": 1, "confidence": 0.9, "reasons": ["unbounded loop"]}"#,
            ))
        } else if system.contains(CORRECTNESS_REVIEWER_FOCUS) {
            Reply::ok(COMPLETION_APPROVE)
        } else {
            Reply::status(400, "no focus")
        }
    })
    .await;
    let safety = LlmJudge::new(config(&server.base_url))
        .unwrap()
        .with_focus(ReviewFocus::Safety);
    let correctness = LlmJudge::new(config(&server.base_url))
        .unwrap()
        .with_focus(ReviewFocus::Correctness);

    let result = panel(&safety, &correctness, &candidate()).await;
    assert!(!result.approved);
    assert!(!result.safety.approved);
    assert!(result.correctness.approved);
    assert_eq!(result.safety.judge, format!("llm:{MODEL}/safety"));
    assert_eq!(result.correctness.judge, format!("llm:{MODEL}/correctness"));
    assert_eq!(result.safety.reasons, ["unbounded loop"]);
    assert_eq!(result.confidence(), 0.88);
    assert_eq!(result.reasons()[0], "safety: unbounded loop");
    assert_eq!(server.requests().len(), 2, "two independent reviews");
}

#[tokio::test]
async fn panel_approves_only_when_both_approve() {
    let server = serve(|_| Reply::ok(COMPLETION_APPROVE)).await;
    let judge: Arc<dyn Judge> = Arc::new(LlmJudge::new(config(&server.base_url)).unwrap());
    let both = panel(&*judge, &*judge, &candidate()).await;
    assert!(both.approved);
    assert_eq!(server.requests().len(), 2);

    let rules = RulesJudge::new(pass_check);
    let one_closed = panel(&rules, &NoJudge, &candidate()).await;
    assert!(!one_closed.approved);
    assert!(one_closed.safety.approved);
    assert_eq!(one_closed.correctness.reasons, [NO_JUDGE_REASON]);
}

// ---------------------------------------------------------------- NoJudge

#[tokio::test]
async fn no_judge_rejects_everything() {
    let judge: Arc<dyn Judge> = Arc::new(NoJudge);
    let verdict = judge.review(&candidate()).await;
    assert!(!verdict.approved);
    assert_eq!(verdict.reasons, [NO_JUDGE_REASON]);
    assert_eq!(
        NO_JUDGE_REASON,
        "no judge configured: forge requests are rejected (fail closed)"
    );
    assert_eq!(verdict.judge, "none");
    assert_eq!(
        (
            verdict.safety,
            verdict.correctness,
            verdict.determinism,
            verdict.confidence
        ),
        (0.0, 0.0, 0.0, 0.0)
    );
}

// ---------------------------------------------------------------- RulesJudge

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

/// Reviews `c` with the rules and asserts it is rejected with exactly `reasons`.
async fn assert_rules_reject(c: ToolCandidate, reasons: &[&str]) -> Verdict {
    let judge: Arc<dyn Judge> = Arc::new(rules());
    let verdict = judge.review(&c).await;
    assert!(!verdict.approved, "{verdict:?}");
    assert_eq!(verdict.reasons, reasons);
    assert_eq!(verdict.confidence, 0.0);
    assert_eq!(verdict.judge, "rules");
    verdict
}

#[tokio::test]
async fn rules_approve_a_good_candidate() {
    let verdict = rules().review(&candidate()).await;
    assert!(verdict.approved, "{verdict:?}");
    assert_eq!(verdict.confidence, 0.9);
    assert_eq!(
        (verdict.safety, verdict.correctness, verdict.determinism),
        (1.0, 1.0, 1.0)
    );
    assert_eq!(verdict.reasons[0], "all 3 tests passed");
}

#[tokio::test]
async fn rules_approve_with_fewer_tests_at_lower_confidence() {
    let mut c = candidate();
    c.test_results.truncate(1);
    c.repeat_run.as_mut().unwrap().truncate(1);
    c.allowlist = vec!["crypto".into()];
    c.used_apis = vec!["crypto".into()];
    let verdict = rules().review(&c).await;
    assert!(verdict.approved, "{verdict:?}");
    assert_eq!(verdict.confidence, 0.85);
}

#[tokio::test]
async fn rules_reject_no_tests() {
    let mut c = candidate();
    c.test_results.clear();
    c.repeat_run = Some(vec![]);
    let v = assert_rules_reject(c, &["no test cases: at least one is required"]).await;
    assert_eq!(v.correctness, 0.0);
}

#[tokio::test]
async fn rules_reject_a_failing_test() {
    let mut c = candidate();
    for run in [&mut c.test_results, c.repeat_run.as_mut().unwrap()] {
        run[1].passed = false;
        run[1].output = None;
        run[1].failure = Some("expected {\"result\":0}, got {\"result\":1}".into());
    }
    let v = assert_rules_reject(
        c,
        &["test #1 failed: expected {\"result\":0}, got {\"result\":1}"],
    )
    .await;
    assert!((v.correctness - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(v.safety, 1.0);
}

#[tokio::test]
async fn rules_reject_an_allowlist_wider_than_used() {
    let mut c = candidate();
    c.allowlist = vec!["fetch".into(), "crypto".into()];
    c.used_apis = vec!["crypto".into()];
    let v = assert_rules_reject(
        c,
        &["allowlist grants `fetch` but the code does not appear to use it"],
    )
    .await;
    assert_eq!(v.safety, 0.0);
    assert_eq!(v.correctness, 1.0);
}

#[tokio::test]
async fn rules_reject_use_of_an_ungranted_api() {
    let mut c = candidate();
    c.used_apis = vec!["fetch".into()];
    assert_rules_reject(
        c,
        &["code appears to use `fetch`, which the allowlist does not grant"],
    )
    .await;
}

#[tokio::test]
async fn rules_reject_a_blocked_api() {
    let mut c = candidate();
    c.source = Some("function execute(input) {\n  return eval(input.expr);\n}".into());
    assert_rules_reject(
        c,
        &["blocked API in source: blocked API `eval` at 2:3 (arbitrary code execution)"],
    )
    .await;
}

#[tokio::test]
async fn rules_reject_a_non_deterministic_repeat() {
    let mut c = candidate();
    c.repeat_run.as_mut().unwrap()[2].output = Some(json!({"result": 273.16}));
    let v = assert_rules_reject(
        c,
        &[
            "test #2 is not deterministic: first run gave {\"result\":273.15}, repeat run gave {\"result\":273.16}",
        ],
    )
    .await;
    assert!((v.determinism - 2.0 / 3.0).abs() < 1e-9);
}

#[tokio::test]
async fn rules_compare_outputs_as_json_not_text() {
    let mut c = candidate();
    c.test_results[0].output = Some(json!({"a": 1, "b": [1, 2]}));
    c.repeat_run.as_mut().unwrap()[0].output = Some(json!({"b": [1, 2], "a": 1}));
    // Repeat results may come back in another order: matched by index.
    c.repeat_run.as_mut().unwrap().reverse();
    assert!(rules().review(&c).await.approved);
}

#[tokio::test]
async fn rules_reject_a_missing_repeat_run() {
    let mut c = candidate();
    c.repeat_run = None;
    let v = assert_rules_reject(c, &["no repeat run: determinism is unverified"]).await;
    assert_eq!(v.determinism, 0.0);
}

#[tokio::test]
async fn rules_reject_an_incomplete_repeat_run() {
    let mut c = candidate();
    let repeat = c.repeat_run.as_mut().unwrap();
    repeat.remove(0);
    repeat[0].index = 7;
    assert_rules_reject(
        c,
        &[
            "repeat run has no result for test #0",
            "repeat run has no result for test #1",
            "repeat run has a result for unknown test #7",
        ],
    )
    .await;
}

#[tokio::test]
async fn rules_reject_a_candidate_without_code() {
    let mut c = candidate();
    c.source = None;
    assert_rules_reject(c, &["candidate has neither source code nor a composition"]).await;
}

#[tokio::test]
async fn rules_accept_a_composition_without_running_the_static_check() {
    fn panicking_check(_: &str) -> Result<(), String> {
        panic!("the static check must not run without source")
    }
    let mut c = candidate();
    c.source = None;
    c.composition = Some(json!({"steps": [{"name": "s", "tool": "web_search"}]}));
    assert!(RulesJudge::new(panicking_check).review(&c).await.approved);
}

#[tokio::test]
async fn rules_report_every_failed_rule() {
    let mut c = candidate();
    c.test_results[0].passed = false;
    c.allowlist = vec!["fetch".into()];
    c.source = Some("eval(x)".into());
    c.repeat_run = None;
    let verdict = rules().review(&c).await;
    assert!(!verdict.approved);
    assert_eq!(verdict.reasons.len(), 4, "{:?}", verdict.reasons);
}

// ---------------------------------------------------------------- types

#[test]
fn candidate_and_verdict_use_camel_case() {
    let value = serde_json::to_value(candidate()).unwrap();
    for key in [
        "inputSchema",
        "outputSchema",
        "testResults",
        "usedApis",
        "repeatRun",
    ] {
        assert!(value.get(key).is_some(), "missing {key}");
    }
    assert!(value.get("composition").is_none(), "None is omitted");

    let minimal: ToolCandidate =
        serde_json::from_str(r#"{"name": "t", "description": "d", "inputSchema": {}}"#).unwrap();
    assert!(minimal.test_results.is_empty() && minimal.repeat_run.is_none());

    let verdict = Verdict::reject("none", vec!["x".into()]);
    let v = serde_json::to_value(&verdict).unwrap();
    assert_eq!(v["approved"], false);
    assert_eq!(v["judge"], "none");
    let back: Verdict = serde_json::from_value(v).unwrap();
    assert_eq!(back, verdict);
}

#[test]
fn verdict_scores_are_clamped() {
    let v = Verdict::new(
        true,
        Scores {
            safety: 1.7,
            correctness: -0.2,
            determinism: f64::NAN,
            confidence: 0.5,
        },
        vec![],
        "t",
    );
    assert_eq!(
        (v.safety, v.correctness, v.determinism, v.confidence),
        (1.0, 0.0, 0.0, 0.5)
    );
}

#[test]
fn focus_prompts_differ_and_share_the_criteria() {
    let creation = ReviewFocus::Creation.system_prompt();
    let safety = ReviewFocus::Safety.system_prompt();
    let correctness = ReviewFocus::Correctness.system_prompt();
    assert_eq!(creation, SYSTEM_PROMPT);
    assert!(safety.starts_with(SYSTEM_PROMPT) && safety.ends_with(SAFETY_REVIEWER_FOCUS));
    assert!(
        correctness.starts_with(SYSTEM_PROMPT) && correctness.ends_with(CORRECTNESS_REVIEWER_FOCUS)
    );
    assert!(SYSTEM_PROMPT.contains("\"approved\""));
    assert!(SYSTEM_PROMPT.contains("JSON"));
}

#[test]
fn verdict_object_is_found_in_prose() {
    let text = r#"Note {this} and {"example": 1}. Verdict: {"approved": false, "reasons": ["a } b"]} done"#;
    let found = find_json_object(text).unwrap();
    assert_eq!(found["approved"], false);
    assert_eq!(found["reasons"][0], "a } b");
    assert_eq!(find_json_object(r#"x {"k": 1} y"#).unwrap()["k"], 1);
    assert!(find_json_object("{ unbalanced").is_none());
    assert!(find_json_object("no braces").is_none());
}
