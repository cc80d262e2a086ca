//! The judges through the pipeline: no judge refuses everything, and the
//! LLM judge's verdicts from a real endpoint on 127.0.0.1.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::chat::{self, Reply};
use temper::forge::judge::{Judge, LlmJudge, LlmJudgeConfig, NO_JUDGE_REASON, ReviewFocus};
use temper::forge::{Forge, ForgeError, Stage};

use super::{audit, ctx, refused, renamed, runtime, seed, store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_judge_rejects_everything() {
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime(), store(dir.path())).build();
    for name in ["slugify", "add_numbers"] {
        let err = refused(&forge, &seed(name), Stage::Judge).await;
        let ForgeError::Judge { verdict, results } = &err else {
            unreachable!()
        };
        assert!(!verdict.approved);
        assert_eq!(verdict.reasons, [NO_JUDGE_REASON]);
        assert!(results.iter().all(|r| r.passed), "the tests ran and passed");
    }
    assert!(forge.session_tools(&ctx()).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llm_judge_verdicts_through_the_pipeline() {
    let verdict = |approved: bool, reason: &str| {
        json!({"approved": approved, "safety": 0.95, "correctness": 0.9, "determinism": 1.0,
               "confidence": 0.9, "reasons": [reason]})
        .to_string()
    };
    let (approve, reject) = (
        verdict(true, "looks right"),
        verdict(false, "adds the wrong way"),
    );
    // The tool's name in the candidate picks the answer.
    let base = chat::serve(move |body| {
        if body.contains("llm_approve") {
            Reply::content(&approve)
        } else if body.contains("llm_reject") {
            Reply::content(&reject)
        } else if body.contains("llm_malformed") {
            Reply::content("I think it is fine, approved!")
        } else if body.contains("llm_slow") {
            Reply {
                delay: Duration::from_secs(10),
                ..Reply::content(&approve)
            }
        } else {
            Reply {
                status: 500,
                body: "{\"error\": \"overloaded\"}".into(),
                delay: Duration::ZERO,
            }
        }
    })
    .await;
    let mut cfg = LlmJudgeConfig::new(base, "judge-model");
    cfg.timeout = Duration::from_millis(1500);
    cfg.system_proxy = false;
    let judge: Arc<dyn Judge> = Arc::new(
        LlmJudge::new(cfg)
            .unwrap()
            .with_focus(ReviewFocus::Creation),
    );
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime(), store(dir.path()))
        .judge(judge)
        .build();

    let f = forge
        .forge(&renamed(seed("add_numbers"), "llm_approve"), &ctx())
        .await
        .unwrap();
    assert_eq!(f.verdict.judge, "llm:judge-model");
    assert_eq!(f.verdict.reasons, ["looks right"]);
    assert_eq!(f.verdict.confidence, 0.9);

    for (name, expect) in [
        ("llm_reject", "adds the wrong way"),
        ("llm_malformed", "no JSON"),
        ("llm_slow", "no answer within 1500 ms"),
        ("llm_http_500", "500"),
    ] {
        let err = refused(&forge, &renamed(seed("add_numbers"), name), Stage::Judge).await;
        let ForgeError::Judge { verdict, .. } = &err else {
            unreachable!()
        };
        assert!(!verdict.approved);
        let reasons = verdict.reasons.join(" | ");
        assert!(reasons.contains(expect), "{name}: {reasons}");
        // The judge's reasons are in the audit entry.
        let last = audit(forge.store()).pop().unwrap();
        assert!(
            last.payload["verdict"]["reasons"]
                .to_string()
                .contains(expect),
            "{}",
            last.payload
        );
    }
    let names: Vec<String> = forge
        .session_tools(&ctx())
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["llm_approve"]);
}
