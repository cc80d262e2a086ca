use std::io::Write;

use serde_json::json;
use temper_forge::error::{ForgeError, InvokeError, PromoteError, Stage};
use temper_runtime::error::{JsLocation, RunError};
use temper_runtime::runtime::CallFailure;

use super::*;

fn seed(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/seeds/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).expect("seed")
}

fn run_failure(error: RunError) -> Failure {
    CallFailure {
        error,
        logs: Vec::new(),
    }
    .into()
}

#[test]
fn run_errors_map_to_their_kinds() {
    assert_eq!(
        run_failure(RunError::Timeout { limit_ms: 250 }).kind,
        ErrorKind::Timeout { limit_ms: 250 }
    );
    assert_eq!(
        run_failure(RunError::Memory {
            limit_bytes: 1 << 20,
            detail: "heap".into()
        })
        .kind,
        ErrorKind::Memory {
            limit_bytes: 1 << 20
        }
    );
    assert_eq!(
        run_failure(RunError::CapabilityDenied {
            capability: "fetch".into()
        })
        .kind,
        ErrorKind::Capability {
            capability: "fetch".into()
        }
    );
    assert_eq!(
        run_failure(RunError::Js {
            error: JsLocation {
                message: "Error: boom".into(),
                line: Some(3),
                column: Some(9),
                stack: None,
            }
        })
        .kind,
        ErrorKind::ToolFailed {
            message: "Error: boom".into(),
            line: Some(3),
            column: Some(9)
        }
    );
    assert_eq!(
        run_failure(RunError::BadInput {
            message: "x".into()
        })
        .kind,
        ErrorKind::InvalidInput {
            schema: None,
            at: None
        }
    );
    assert_eq!(
        run_failure(RunError::Internal {
            message: "x".into()
        })
        .kind,
        ErrorKind::Host
    );
}

#[test]
fn forge_and_promote_errors_name_their_stage() {
    let f = Failure::from(ForgeError::Deadline {
        limit_ms: 1,
        done: 0,
        total: 2,
    });
    assert_eq!(f.kind, ErrorKind::Refused { stage: "test" });
    let result = f.result.expect("a refused forge carries its result");
    assert!(!result.success);
    assert_eq!(result.stage, Some(Stage::Test));
    let f = Failure::from(PromoteError::NoApprover);
    assert_eq!(f.kind, ErrorKind::Refused { stage: "approve" });
    let f = Failure::from(InvokeError::NotFound {
        name: "nope".into(),
        agent: "a".into(),
        session: "s".into(),
    });
    assert_eq!(
        f.kind,
        ErrorKind::NotFound {
            name: "nope".into()
        }
    );
}

#[test]
fn judge_names() {
    assert!(matches!(
        JudgeChoice::from_name(None).unwrap(),
        JudgeChoice::None
    ));
    assert!(matches!(
        JudgeChoice::from_name(Some("rules")).unwrap(),
        JudgeChoice::Rules
    ));
    assert!(matches!(
        JudgeChoice::from_name(Some("llm")),
        Err(OpenError::Judge(_))
    ));
}

fn open(dir: &std::path::Path, judge: JudgeChoice, policy: Option<&std::path::Path>) -> Opened {
    let runtime = RuntimeOptions {
        policy: load_policy(policy).unwrap(),
        ..Default::default()
    }
    .builder()
    .build()
    .unwrap();
    Opened::open(
        &ForgeOptions {
            store: Some(dir.to_str().unwrap().into()),
            judge: Some(judge),
            agent: "agent-1".into(),
            session: "s1".into(),
            ..Default::default()
        },
        runtime,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opened_forges_calls_and_classifies() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = tempfile::NamedTempFile::new().unwrap();
    writeln!(policy, "[limits]\ntimeout_ms = 300").unwrap();
    // No judge: fail closed, at the judge stage.
    let closed = open(dir.path(), JudgeChoice::None, Some(policy.path()));
    let refused = closed.forge_json(&seed("slugify")).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Refused { stage: "judge" });
    drop(closed);

    let opened = open(dir.path(), JudgeChoice::Rules, Some(policy.path()));
    let forged = opened.forge_json(&seed("slugify")).await.unwrap();
    assert_eq!(forged.tool.name, "slugify");
    let out = opened
        .call("slugify", &json!({"text": "Hello World"}))
        .await
        .unwrap();
    assert_eq!(out.output(), &json!({"slug": "hello-world"}));

    let missing = opened.call("nope", &json!({})).await.unwrap_err();
    assert_eq!(
        missing.kind,
        ErrorKind::NotFound {
            name: "nope".into()
        }
    );

    let bad = opened
        .call("slugify", &json!({"text": 7}))
        .await
        .unwrap_err();
    assert_eq!(
        bad.kind,
        ErrorKind::InvalidInput {
            schema: Some("inputSchema"),
            at: Some("/text".into())
        }
    );

    let spin = opened
        .forge
        .run_code("while (true) {}", None, &opened.ctx)
        .await
        .unwrap_err();
    assert_eq!(
        Failure::from(spin).kind,
        ErrorKind::Timeout { limit_ms: 300 }
    );
    let fetch = opened
        .forge
        .run_code(
            "return await fetch('http://127.0.0.1:9/')",
            None,
            &opened.ctx,
        )
        .await
        .unwrap_err();
    assert_eq!(
        Failure::from(fetch).kind,
        ErrorKind::Capability {
            capability: "fetch".into()
        }
    );
    let threw = opened
        .forge
        .run_code("\nthrow new Error('boom')", None, &opened.ctx)
        .await
        .unwrap_err();
    match Failure::from(threw).kind {
        ErrorKind::ToolFailed { message, line, .. } => {
            assert!(message.contains("boom"), "{message}");
            assert_eq!(line, Some(2));
        }
        other => panic!("{other:?}"),
    }
    // After each failure the next call is served.
    let again = opened
        .call("slugify", &json!({"text": "A b"}))
        .await
        .unwrap();
    assert_eq!(again.output(), &json!({"slug": "a-b"}));
}
