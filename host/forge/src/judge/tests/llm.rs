//! Tests of the LLM judge against a chat-completions server on 127.0.0.1:
//! the request it sends, the verdicts it accepts and rejects, timeouts,
//! HTTP errors, redirects and its config.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::net::TcpListener;

use crate::judge::llm::human_duration;
use crate::judge::*;

use super::{
    ANSWER_FENCED, COMPLETION_APPROVE, MODEL, Reply, assert_rejected_with, candidate, completion,
    config, review_with, serve, unique_env_name,
};

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
