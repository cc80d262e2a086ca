//! Tests of the review panel (both reviewers must approve) and NoJudge.

use std::sync::Arc;

use crate::judge::*;

use super::{COMPLETION_APPROVE, MODEL, Reply, candidate, completion, config, pass_check, serve};

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
        "no judge configured: forge requests are rejected (fail closed); only the host's \
         operator can enable forging by naming a judge (`--judge rules` or `--judge llm` on \
         the command line, `judge` in the Python and Node packages)"
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
