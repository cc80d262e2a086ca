//! Promotion and approval rules (uses, confidence, both reviewers, then
//! approval shares), session snapshots, and reuse validation.

use std::sync::Arc;

use serde_json::json;
use temper::forge::judge::Judge;
use temper::forge::{Forge, ForgeConfig, ForgeContext, InvokeError, PromoteError};
use temper::request::Implementation;
use temper::store::{AuditKind, Tier};

use super::{audit, ctx, fixed, rules, runtime, seed, store, with_code};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_needs_uses_confidence_and_both_reviewers_then_approval_shares() {
    let dir = tempfile::tempdir().unwrap();
    let st = store(dir.path());
    let build = |safety: Arc<dyn Judge>, correctness: Arc<dyn Judge>| {
        Forge::builder(runtime(), st.clone())
            .judge(rules())
            .panel(safety, correctness)
    };
    let forge = build(
        fixed(true, 0.95, "safe"),
        fixed(false, 0.9, "tests too thin"),
    )
    .build();
    let c = ctx();
    forge.forge(&seed("add_numbers"), &c).await.unwrap();

    let err = forge.promote("add_numbers", &c, None).await.unwrap_err();
    assert!(
        matches!(
            err,
            PromoteError::NotEnoughUses {
                have: 0,
                need: 5,
                ..
            }
        ),
        "{err}"
    );
    for i in 0..4 {
        forge
            .invoke("add_numbers", &json!({"a": i, "b": 1}), &c)
            .await
            .unwrap();
    }
    // A failed call does not count as a use.
    let err = forge
        .invoke("add_numbers", &json!({"a": "x"}), &c)
        .await
        .unwrap_err();
    assert!(matches!(err, InvokeError::Input { .. }), "{err}");
    let err = forge.promote("add_numbers", &c, None).await.unwrap_err();
    assert!(
        matches!(err, PromoteError::NotEnoughUses { have: 4, .. }),
        "{err}"
    );
    forge
        .invoke("add_numbers", &json!({"a": 1, "b": 1}), &c)
        .await
        .unwrap();
    let stats = forge.tool_stats("add_numbers", &c).unwrap();
    assert_eq!((stats.total_calls, stats.successes), (6, 5));

    // One reviewer rejects: no promotion, the decision is audited, and the
    // hook that would run right before a registration never runs.
    let hooked = std::sync::atomic::AtomicBool::new(false);
    let err = forge
        .promote_with("add_numbers", &c, None, async {
            hooked.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .await
        .unwrap_err();
    assert!(!hooked.load(std::sync::atomic::Ordering::SeqCst));
    let PromoteError::PanelRejected { panel, .. } = &err else {
        panic!("{err}")
    };
    assert!(panel.safety.approved && !panel.correctness.approved);
    assert!(
        err.to_string().contains("correctness: tests too thin"),
        "{err}"
    );
    assert_eq!(forge.session_tools(&c).unwrap().len(), 1);
    assert!(forge.agent_tools("agent-1").unwrap().is_empty());
    let last = audit(&st).pop().unwrap();
    assert_eq!(
        (last.kind, last.payload["approved"].clone()),
        (AuditKind::Promotion, json!(false))
    );

    // Both approve: the tool moves to the agent tier.
    let forge2 = build(fixed(true, 0.95, "safe"), fixed(true, 0.9, "correct")).build();
    // Saved as JSON (as the CLI does) and restored, the source is gone: it
    // must be handed back.
    let saved = serde_json::to_string(&forge.snapshot_session(&c).unwrap()).unwrap();
    forge2
        .restore_session(serde_json::from_str(&saved).unwrap())
        .unwrap();
    let err = forge2.promote("add_numbers", &c, None).await.unwrap_err();
    assert!(matches!(err, PromoteError::Source(_)), "{err}");
    let err = forge2
        .promote(
            "add_numbers",
            &c,
            Some("function execute(input) { return { sum: 0 }; }"),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("hashes to"), "{err}");
    let Implementation::Sandbox { code, .. } = &seed("add_numbers").implementation else {
        unreachable!()
    };
    // Approved: the hook runs after the review, before the registration.
    let (info, registered_when_hooked) = forge2
        .promote_with("add_numbers", &c, Some(code), async {
            forge2.agent_tools("agent-1").unwrap().len()
        })
        .await
        .unwrap();
    assert_eq!(registered_when_hooked, 0);
    assert_eq!(info.tier, Tier::Agent);
    assert!(forge2.session_tools(&c).unwrap().is_empty());
    let agent_tools = forge2.agent_tools("agent-1").unwrap();
    assert_eq!(agent_tools.len(), 1);
    // The session tier's calls came along: 6 calls, 5 of them successes.
    let carried = forge2.tool_stats("add_numbers", &c).unwrap();
    assert_eq!((carried.total_calls, carried.successes), (6, 5));
    assert_eq!(carried.p95_latency_ms, stats.p95_latency_ms);
    // It runs from the store now (artifact loaded and hash-checked).
    let other_session = ForgeContext::new("agent-1", "session-2");
    let out = forge2
        .invoke("add_numbers", &json!({"a": 40, "b": 2}), &other_session)
        .await
        .unwrap();
    assert_eq!((out.output, out.tier), (json!({"sum": 42}), Tier::Agent));
    let after = forge2.tool_stats("add_numbers", &other_session).unwrap();
    assert_eq!((after.total_calls, after.successes), (7, 6));
    // Another agent does not see it yet.
    let stranger = ForgeContext::new("agent-2", "s");
    assert!(matches!(
        forge2
            .invoke("add_numbers", &json!({"a": 1, "b": 1}), &stranger)
            .await,
        Err(InvokeError::NotFound { .. })
    ));

    // agent → shared needs a named human.
    assert!(matches!(
        forge2.approve("add_numbers", "agent-1", " ", None),
        Err(PromoteError::NoApprover)
    ));
    assert!(matches!(
        forge2.approve("nope", "agent-1", "alice", None),
        Err(PromoteError::NotFound { .. })
    ));
    let shared = forge2
        .approve("add_numbers", "agent-1", "alice", Some("reviewed"))
        .unwrap();
    assert_eq!(shared.tier, Tier::Shared);
    let out = forge2
        .invoke("add_numbers", &json!({"a": 1, "b": 1}), &stranger)
        .await
        .unwrap();
    assert_eq!((out.output, out.tier), (json!({"sum": 2}), Tier::Shared));

    let kinds: Vec<AuditKind> = audit(&st).iter().map(|e| e.kind).collect();
    let tail = &kinds[kinds.len() - 4..];
    assert_eq!(
        tail,
        [
            AuditKind::Promotion,
            AuditKind::Registration,
            AuditKind::Approval,
            AuditKind::Promotion
        ]
    );
    let approval = audit(&st)
        .into_iter()
        .find(|e| e.kind == AuditKind::Approval)
        .unwrap();
    assert_eq!(approval.payload["approver"], "alice");
    st.verify_audit().unwrap();

    // Session cleanup discards and audits.
    forge2.forge(&seed("slugify"), &c).await.unwrap();
    assert_eq!(forge2.cleanup_session(&c).unwrap(), 1);
    assert!(forge2.session_tools(&c).unwrap().is_empty());
    let last = audit(&st).pop().unwrap();
    assert_eq!(
        (last.kind, last.subject.as_str()),
        (AuditKind::Deletion, "slugify")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_snapshot_naming_missing_artifacts_is_refused_whole() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let here = Forge::builder(runtime(), store(a.path()))
        .judge(rules())
        .build();
    here.forge(&seed("add_numbers"), &ctx()).await.unwrap();
    let snapshot = here.snapshot_session(&ctx()).unwrap();
    // Another store has none of its artifacts.
    let elsewhere = Forge::builder(runtime(), store(b.path()))
        .judge(rules())
        .build();
    let err = elsewhere.restore_session(snapshot).unwrap_err();
    assert!(err.to_string().contains("is not in the store"), "{err}");
    assert!(elsewhere.session_tools(&ctx()).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn low_confidence_blocks_promotion() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        promotion_threshold: temper::forge::PromotionThreshold {
            uses: 0,
            confidence: 0.8,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime(), store(dir.path()))
        .judge(fixed(true, 0.8, "fine"))
        .config(config)
        .build();
    forge.forge(&seed("add_numbers"), &ctx()).await.unwrap();
    let err = forge
        .promote("add_numbers", &ctx(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, PromoteError::LowConfidence { .. }), "{err}");
    assert!(err.to_string().contains("needs more than 0.8"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reuse_validation_records_output_schema_failures() {
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime(), store(dir.path()))
        .judge(rules())
        .build();
    // Passes its test, but returns a string sum for string inputs.
    let mut r = with_code(
        "sloppy_add",
        "function execute(i) { return { sum: i.a + i.b }; }",
        &[],
    );
    r.input_schema = json!({"type": "object"});
    forge.forge(&r, &ctx()).await.unwrap();
    let err = forge
        .invoke("sloppy_add", &json!({"a": "4", "b": "2"}), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, InvokeError::Output { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("output does not match outputSchema: /sum"),
        "{err}"
    );
    let stats = forge.tool_stats("sloppy_add", &ctx()).unwrap();
    assert_eq!((stats.total_calls, stats.successes), (1, 0));
    let last = audit(forge.store()).pop().unwrap();
    assert_eq!(last.kind, AuditKind::InvocationFailure);
    assert!(
        last.payload["error"]
            .as_str()
            .unwrap()
            .contains("outputSchema")
    );

    // Runtime failures are recorded the same way.
    let r = with_code(
        "thrower",
        "function execute(i) {\n  if (i.a === 0) throw new Error('zero');\n  return { sum: i.a + i.b };\n}",
        &[],
    );
    forge.forge(&r, &ctx()).await.unwrap();
    let err = forge
        .invoke("thrower", &json!({"a": 0, "b": 1}), &ctx())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("zero") && err.to_string().contains("line 2"),
        "{err}"
    );
    assert!(matches!(
        forge.invoke("missing", &json!({}), &ctx()).await,
        Err(InvokeError::NotFound { .. })
    ));
}
