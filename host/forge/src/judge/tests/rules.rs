//! Tests of the rules judge: what it approves, each rule it rejects on,
//! and every failed rule reported.

use std::sync::Arc;

use serde_json::json;

use crate::judge::*;

use super::{candidate, rules};

// ---------------------------------------------------------------- RulesJudge

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
