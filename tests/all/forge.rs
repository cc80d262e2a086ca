//! The forge pipeline end to end: the seed examples through validate →
//! build → test → judge → register; refusals naming their stage; the LLM
//! judge against a real endpoint on 127.0.0.1; promotion and approval
//! rules; reuse validation; many tasks on one store; and a child process
//! killed at random points while it forges.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::chat::{self, Reply};
use support::http::TlsTestServer;
use temper::Runtime;
use temper::capabilities::fetch::TransportOptions;
use temper::forge::judge::{
    Judge, LlmJudge, LlmJudgeConfig, NO_JUDGE_REASON, ReviewFocus, ReviewFuture, RulesJudge,
    Scores, ToolCandidate, Verdict,
};
use temper::forge::{
    Forge, ForgeConfig, ForgeContext, ForgeError, ForgeResult, InvokeError, PromoteError, Stage,
    ValidateError,
};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation};
use temper::store::{AuditKind, Registry, Tier};

fn runtime_with(policy: HostPolicy, transport: TransportOptions) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .transport(transport)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(HostPolicy::deny_all(), TransportOptions::default())
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

fn store(dir: &Path) -> Arc<Registry> {
    Arc::new(Registry::open(dir).expect("store"))
}

fn seed(name: &str) -> ForgeRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn renamed(mut r: ForgeRequest, name: &str) -> ForgeRequest {
    r.name = name.into();
    r
}

/// The add_numbers seed renamed, with other code and allowlist.
fn with_code(name: &str, code: &str, allowlist: &[&str]) -> ForgeRequest {
    let mut r = renamed(seed("add_numbers"), name);
    r.implementation = Implementation::Sandbox {
        code: code.into(),
        allowlist: allowlist.iter().map(|s| s.to_string()).collect(),
    };
    r
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

fn audit(store: &Registry) -> Vec<temper::store::AuditEntry> {
    store.audit_entries(0, 100_000).unwrap()
}

/// A judge with a fixed answer, to script panels.
struct Fixed {
    approved: bool,
    confidence: f64,
    reason: &'static str,
}

impl Judge for Fixed {
    fn review<'a>(&'a self, _c: &'a ToolCandidate) -> ReviewFuture<'a> {
        let scores = Scores {
            safety: 1.0,
            correctness: 1.0,
            determinism: 1.0,
            confidence: self.confidence,
        };
        let v = Verdict::new(self.approved, scores, vec![self.reason.into()], "fixed");
        Box::pin(async move { v })
    }
}

fn fixed(approved: bool, confidence: f64, reason: &'static str) -> Arc<dyn Judge> {
    Arc::new(Fixed {
        approved,
        confidence,
        reason,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_examples_register_with_the_rules_judge() {
    // check_http_status fetches https://httpstat.us/…: served here by a TLS
    // server on 127.0.0.1 that the transport resolves and trusts.
    let server = TlsTestServer::start("httpstat.us").await;
    let port = server.port();
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("httpstat.us:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;
    let transport = TransportOptions {
        resolve_overrides: HashMap::from([(
            "httpstat.us".to_string(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )]),
        extra_roots_pem: vec![server.root_pem().into_bytes()],
    };
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime_with(policy, transport), store(dir.path()))
        .judge(rules())
        .build();

    let names = [
        "slugify",
        "add_numbers",
        "parse_csv",
        "convert_temperature",
        "check_http_status",
    ];
    for name in names {
        let mut request = seed(name);
        if name == "check_http_status" {
            request.test_cases[0].input["url"] =
                json!(format!("https://httpstat.us:{port}/status/200"));
        }
        let outcome = forge.forge(&request, &ctx()).await;
        let result = ForgeResult::from(&outcome);
        assert!(result.success, "{name}: {:?}", result.errors);
        let verdict = result.verdict.as_ref().unwrap();
        assert!(
            verdict.approved && verdict.judge == "rules",
            "{name}: {verdict:?}"
        );
        let tool = result.tool.unwrap();
        assert_eq!(tool.tier, Tier::Session);
        assert!(
            forge
                .store()
                .has_artifact(&temper::store::ArtifactId::from_hex(&tool.id).unwrap())
                .unwrap()
        );
        // The seed's JSON result shape.
        let doc = serde_json::to_value(ForgeResult::from(&outcome)).unwrap();
        assert_eq!(doc["success"], true);
        assert_eq!(doc["tool"]["name"], name);
        assert_eq!(doc["verdict"]["approved"], true);
    }
    let listed: Vec<String> = forge
        .session_tools(&ctx())
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(listed.len(), 5, "{listed:?}");

    let out = forge
        .invoke("slugify", &json!({"text": "Hello World!"}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"slug": "hello-world"}));
    let out = forge
        .invoke(
            "convert_temperature",
            &json!({"value": 100, "from": "C", "to": "F"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out.output["result"].as_f64(), Some(212.0));

    // Source is not kept at rest by default; its blake3 is.
    let snapshot = forge.snapshot_session(&ctx()).unwrap();
    let slug = &snapshot.tools["slugify"];
    assert!(slug.manifest.artifact.source.is_none());
    let Implementation::Sandbox { code, .. } = &seed("slugify").implementation else {
        unreachable!()
    };
    assert_eq!(
        slug.manifest.artifact.source_blake3,
        blake3::hash(code.as_bytes()).to_hex().as_str()
    );
    assert!(
        !serde_json::to_string(&snapshot)
            .unwrap()
            .contains("toLowerCase")
    );

    let entries = audit(forge.store());
    let decisions: Vec<_> = entries
        .iter()
        .filter(|e| e.kind == AuditKind::ForgeDecision && e.payload["approved"] == true)
        .collect();
    assert_eq!(decisions.len(), 5);
    assert_eq!(
        forge.store().verify_audit().unwrap().entries,
        entries.len() as u64
    );
}

/// Forges `request` and returns the refusal, checking its stage and that a
/// refusing forge_decision entry naming that stage was audited.
async fn refused(forge: &Forge, request: &ForgeRequest, stage: Stage) -> ForgeError {
    let err = forge
        .forge(request, &ctx())
        .await
        .err()
        .unwrap_or_else(|| panic!("{} was registered", request.name));
    assert_eq!(err.stage(), stage, "{err}");
    let last = audit(forge.store()).pop().unwrap();
    assert_eq!(last.kind, AuditKind::ForgeDecision);
    assert_eq!(last.payload["approved"], false);
    assert_eq!(last.payload["stage"], stage.as_str());
    assert_eq!(last.subject, request.name);
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_their_stage_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let policy = HostPolicy::deny_all().with_allow_crypto();
    let config = ForgeConfig {
        max_session_tools: 1,
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(
        runtime_with(policy, TransportOptions::default()),
        store(dir.path()),
    )
    .judge(rules())
    .config(config)
    .build();

    // TEST: a failing test case.
    let mut r = renamed(seed("slugify"), "slug_wrong");
    r.test_cases[1].expected_output = Some(json!({"slug": "spaces--symbols"}));
    let err = refused(&forge, &r, Stage::Test).await;
    let text = err.to_string();
    assert!(
        text.starts_with("test: 1 of 2 test case(s) failed: case #1"),
        "{text}"
    );
    assert!(text.contains("$.slug"), "{text}");

    // TEST: an input that does not match inputSchema.
    let mut r = renamed(seed("add_numbers"), "add_strings");
    r.test_cases[0].input = json!({"a": "2", "b": 3});
    let err = refused(&forge, &r, Stage::Test).await;
    assert!(
        err.to_string()
            .contains("input does not match inputSchema: /a"),
        "{err}"
    );

    // VALIDATE: an invalid schema.
    let mut r = renamed(seed("add_numbers"), "bad_schema");
    r.input_schema = json!({"type": "objcet"});
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(
        matches!(err, ForgeError::Validate(ValidateError::Schema(_))),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("inputSchema is not a valid JSON Schema"),
        "{err}"
    );

    // VALIDATE: a blocked API.
    let r = with_code(
        "spawner",
        "function execute(i) { return require('child_process').execSync('id'); }",
        &[],
    );
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(err.to_string().contains("blocked API `require`"), "{err}");

    // VALIDATE: an allowlist wider than the host policy (which allows crypto only).
    let r = with_code(
        "wants_fetch",
        "function execute(i) { return { sum: i.a + i.b }; }",
        &["fetch"],
    );
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(
        err.to_string().contains(
            "capability \"fetch\" is requested by the tool but not allowed by the host policy"
        ),
        "{err}"
    );

    // VALIDATE: a compose step without its mapping, and one naming no tool
    // this agent can call, are refused naming the step.
    let mut r = renamed(seed("add_numbers"), "composed");
    r.implementation = Implementation::Compose {
        steps: vec![json!({"name": "a", "tool": "x"})],
    };
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(err.to_string().contains("steps[0] (\"a\")"), "{err}");
    r.implementation = Implementation::Compose {
        steps: vec![json!({"name": "a", "tool": "no_such_tool", "inputMapping": {}})],
    };
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(
        err.to_string()
            .contains("steps[0] (\"a\"): tool \"no_such_tool\" is not callable"),
        "{err}"
    );

    // VALIDATE: a syntax error, with its line and column.
    let r = with_code(
        "broken",
        "function execute(i) {\n  return { sum: i.a + };\n}",
        &[],
    );
    let err = refused(&forge, &r, Stage::Validate).await;
    assert!(
        matches!(err, ForgeError::Validate(ValidateError::Syntax(_))),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("validate: syntax error: SyntaxError")
            && text.contains("(at line 2, column"),
        "{text}"
    );

    // JUDGE: the rules judge refuses an allowlist wider than the code's use.
    let r = with_code(
        "idle_crypto",
        "function execute(i) { return { sum: i.a + i.b }; }",
        &["crypto"],
    );
    let err = refused(&forge, &r, Stage::Judge).await;
    assert!(
        err.to_string()
            .contains("allowlist grants `crypto` but the code does not appear to use it"),
        "{err}"
    );

    // A request that is not a forge request at all.
    let err = forge
        .forge_json(r#"{"name": "x"}"#, &ctx())
        .await
        .unwrap_err();
    assert_eq!(err.stage(), Stage::Validate);
    assert!(err.to_string().contains("not a forge request"), "{err}");

    // Over the tool count: maxSessionTools is 1 here.
    forge.forge(&seed("add_numbers"), &ctx()).await.unwrap();
    let err = refused(&forge, &seed("slugify"), Stage::Validate).await;
    assert!(
        err.to_string()
            .contains("already holds 1 tools (maxSessionTools)"),
        "{err}"
    );
    // The same name again is refused too (in another session it would be
    // a new tool; here the name is taken first).
    let err = refused(&forge, &seed("add_numbers"), Stage::Validate).await;
    assert!(
        err.to_string()
            .contains("already exists in the session tier"),
        "{err}"
    );

    // Nothing refused was registered.
    let names: Vec<String> = forge
        .session_tools(&ctx())
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["add_numbers"]);
    forge.store().verify_audit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tool_limit_is_enforced_at_forge_and_promotion() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        max_agent_tools: 1,
        promotion_threshold: temper::forge::PromotionThreshold {
            uses: 0,
            confidence: 0.8,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime(), store(dir.path()))
        .judge(rules())
        .config(config)
        .build();
    forge.forge(&seed("add_numbers"), &ctx()).await.unwrap();
    forge.forge(&seed("slugify"), &ctx()).await.unwrap();
    forge.promote("add_numbers", &ctx(), None).await.unwrap();
    let err = forge.promote("slugify", &ctx(), None).await.unwrap_err();
    assert!(
        matches!(err, PromoteError::AgentFull { limit: 1, .. }),
        "{err}"
    );
    let err = refused(&forge, &seed("parse_csv"), Stage::Validate).await;
    assert!(
        err.to_string()
            .contains("already owns 1 tools (maxAgentTools)"),
        "{err}"
    );
}

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

#[test]
fn eight_threads_forge_and_invoke_against_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let rt = rt.clone();
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                tokio.block_on(async move {
                    // Each thread opens its own handle on the same store.
                    let forge = Forge::builder(rt, store(&path)).judge(rules()).build();
                    let c = ForgeContext::new(format!("agent-{}", i % 2), format!("s{i}"));
                    let name = format!("add_{i}");
                    forge
                        .forge(&renamed(seed("add_numbers"), &name), &c)
                        .await
                        .unwrap();
                    for n in 0..5 {
                        let out = forge
                            .invoke(&name, &json!({"a": n, "b": i}), &c)
                            .await
                            .unwrap();
                        assert_eq!(out.output, json!({"sum": n + i}));
                    }
                    forge.promote(&name, &c, None).await.unwrap();
                    for n in 0..3 {
                        forge
                            .invoke(&name, &json!({"a": n, "b": 0}), &c)
                            .await
                            .unwrap();
                    }
                    let stats = forge.tool_stats(&name, &c).unwrap();
                    assert_eq!(
                        stats.total_calls, 8,
                        "a promoted tool keeps its 5 session-tier calls"
                    );
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let st = Registry::open(dir.path()).unwrap();
    let report = st.verify_audit().unwrap();
    // Per thread: forge decision, promotion, registration.
    assert_eq!(report.entries, 8 * 3);
    assert_eq!(st.tools_for_agent("agent-0").unwrap().len(), 4);
    assert_eq!(st.tools_for_agent("agent-1").unwrap().len(), 4);
}

/// Environment variable that turns `crash_child` into the forging child.
const CRASH_DIR_ENV: &str = "TEMPER_CRASH_CHILD_DIR";

/// The child of `killed_forging_process_leaves_a_consistent_store`: forges,
/// calls, promotes and approves tools in a loop until it is killed.
#[test]
#[ignore = "run only as the crash test's child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_DIR_ENV) else {
        return;
    };
    let agent = std::env::var("TEMPER_CRASH_AGENT").unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async move {
        let config = ForgeConfig {
            promotion_threshold: temper::forge::PromotionThreshold {
                uses: 1,
                confidence: 0.8,
            },
            max_agent_tools: 1000,
            ..ForgeConfig::default()
        };
        let rt = runtime();
        // Kill points are spread over forging work, not process start-up.
        rt.warm_up().await.unwrap();
        let forge = Forge::builder(rt, store(Path::new(&dir)))
            .judge(rules())
            .config(config)
            .build();
        let c = ForgeContext::new(agent, "s");
        println!("ready");
        for i in 0.. {
            // Unique across runs: shared-tier names are global.
            let name = format!("{}_add_{i}", c.agent_id);
            // A distinct source per tool: distinct artifacts get written.
            let code = format!(
                "function execute(input) {{ return {{ sum: input.a + input.b + {i} - {i} }}; }}"
            );
            let r = with_code(&name, &code, &[]);
            forge.forge(&r, &c).await.unwrap();
            forge
                .invoke(&name, &json!({"a": 1, "b": 2}), &c)
                .await
                .unwrap();
            forge.promote(&name, &c, None).await.unwrap();
            if i % 2 == 0 {
                forge
                    .approve(&name, &c.agent_id, "crash-test", None)
                    .unwrap();
            }
            forge
                .invoke(&name, &json!({"a": 1, "b": 2}), &c)
                .await
                .unwrap();
        }
    });
}

/// Checks what a crash must never break: the audit chain verifies; every
/// registry row's artifact is present and hashes to its id; every row has
/// its registration entry; every shared tool has its approval.
/// Artifacts in `checked` were rebuilt and checked by an earlier round
/// (content-addressed files are never rewritten with other content).
fn assert_consistent(
    dir: &Path,
    agents: &[String],
    codec: &Arc<dyn temper::store::ArtifactCodec>,
    checked: &mut std::collections::HashSet<temper::ArtifactId>,
) -> usize {
    let st = Registry::open(dir).expect("the store opens after a crash");
    // Compact records are rebuilt (and checked against their ids) by a runtime.
    st.attach_codec(codec.clone());
    st.verify_audit().expect("audit chain intact");
    let entries = audit(&st);
    let by_seq: std::collections::HashMap<i64, &temper::store::AuditEntry> =
        entries.iter().map(|e| (e.seq, e)).collect();
    let mut rows = st.shared_tools().unwrap();
    let shared = rows.len();
    for a in agents {
        rows.extend(st.tools_for_agent(a).unwrap());
    }
    for r in &rows {
        if !checked.contains(&r.artifact) {
            st.get_artifact(&r.artifact)
                .expect("registered artifact present and intact");
            checked.insert(r.artifact.clone());
        }
        let reg = by_seq.get(&r.created_seq).expect("registration entry");
        assert_eq!(
            (reg.kind, reg.subject.as_str()),
            (AuditKind::Registration, r.name.as_str())
        );
    }
    let shared_rows: std::collections::HashSet<(&str, Option<&str>)> = rows
        .iter()
        .filter(|r| r.tier == Tier::Shared)
        .map(|r| (r.name.as_str(), r.agent_id.as_deref()))
        .collect();
    for e in entries.iter().filter(|e| e.kind == AuditKind::Approval) {
        assert!(shared_rows.contains(&(e.subject.as_str(), e.agent.as_deref())));
    }
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.kind == AuditKind::Approval)
            .count(),
        shared
    );
    for id in st.artifact_ids().unwrap() {
        if checked.insert(id.clone()) {
            st.get_artifact(&id)
                .expect("every listed artifact is complete");
        }
    }
    rows.len()
}

#[test]
fn killed_forging_process_leaves_a_consistent_store() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let runs = 50;
    let codec = support::runtime_builder().build().unwrap().artifact_codec();
    let mut checked = std::collections::HashSet::new();
    let mut agents = Vec::new();
    let mut registered = 0;
    for run in 0..runs {
        let agent = format!("a{run}");
        agents.push(agent.clone());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "forge::crash_child",
                "--exact",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_ENV, dir.path())
            .env("TEMPER_CRASH_AGENT", &agent)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it is working, then kill it at a random point.
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while !line.contains("ready") {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!("crash child exited before starting: {:?}", child.wait());
            }
        }
        let delay = rand::random_range(0..800u64);
        std::thread::sleep(Duration::from_millis(delay));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run {run}: the child stopped on its own ({status}) instead of being killed");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        registered = assert_consistent(dir.path(), &agents, &codec, &mut checked);
    }
    eprintln!("{runs} kills, {registered} tools registered at the end");
    assert!(
        registered > 0,
        "the children got far enough to register tools"
    );
}

/// `temper` with the registry flags, in a scratch store.
fn cli(store: &Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    all.push("--store".into());
    all.push(store.into());
    support::temper_json(store, &[], all)
}

#[test]
fn cli_forge_call_stats_promote_approve_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let seed_file = |name: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds")
            .join(format!("{name}.json"))
            .to_string_lossy()
            .into_owned()
    };
    let slugify = seed_file("slugify");

    // No judge configured: refused, and the reason says so.
    let (ok, doc, _) = cli(store, &["forge", &slugify]);
    assert!(!ok);
    assert_eq!(doc["success"], false);
    assert_eq!(doc["stage"], "judge");
    assert!(
        doc["errors"][0]
            .as_str()
            .unwrap()
            .contains("no judge configured"),
        "{doc}"
    );

    let (ok, doc, err) = cli(store, &["forge", &slugify, "--judge", "rules"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(
        (doc["success"].clone(), doc["verdict"]["approved"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(doc["tool"]["tier"], "session");

    // The session tier outlives the process (until `session end`).
    let (ok, doc, _) = cli(store, &["tools"]);
    assert!(ok);
    assert_eq!(doc["tools"][0]["name"], "slugify");
    for text in ["Hello World", "A  b", "x", "Temper!", "Forge it"] {
        let input = json!({ "text": text }).to_string();
        let (ok, doc, err) = cli(store, &["call", "slugify", "--input", &input]);
        assert!(ok, "{doc} {err}");
        assert!(doc["output"]["slug"].is_string());
    }
    let (ok, doc, err) = cli(store, &["call", "slugify", "--input", "{\"txt\": 1}"]);
    assert!(!ok && doc["ok"] == false, "{doc}");
    assert!(err.contains("does not match inputSchema"), "{err}");
    let (ok, doc, _) = cli(store, &["stats", "slugify"]);
    assert!(ok);
    assert_eq!(
        (doc["totalCalls"].clone(), doc["successes"].clone()),
        (json!(6), json!(5))
    );

    // The store does not keep the source (only the process that forged
    // the tool had it): promotion asks for it.
    let (ok, _, err) = cli(store, &["promote", "slugify", "--judge", "rules"]);
    assert!(!ok && err.contains("pass it again"), "{err}");
    let source = dir.path().join("slugify.js");
    let Implementation::Sandbox { code, .. } = seed("slugify").implementation else {
        unreachable!()
    };
    std::fs::write(&source, code).unwrap();
    let (ok, doc, err) = cli(
        store,
        &[
            "promote",
            "slugify",
            "--judge",
            "rules",
            "--source",
            source.to_str().unwrap(),
        ],
    );
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["tool"]["tier"], "agent");
    let (ok, doc, err) = cli(
        store,
        &["approve", "slugify", "--by", "alice", "--note", "ok"],
    );
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["tool"]["tier"], "shared");
    let (ok, doc, _) = cli(
        store,
        &[
            "call",
            "slugify",
            "--input",
            "{\"text\": \"B C\"}",
            "--agent",
            "other",
        ],
    );
    assert!(ok);
    assert_eq!(doc["output"]["slug"], "b-c");

    let (ok, doc, _) = cli(store, &["audit", "verify"]);
    assert!(ok, "{doc}");
    let entries = doc["entries"].as_u64().unwrap();
    assert!(entries >= 6, "{doc}");

    // Edit one entry's payload behind the store's back (dropping the
    // append-only trigger first, as an attacker with the file would):
    // verify fails and names the entry.
    let db = rusqlite::Connection::open(store.join("temper.db")).unwrap();
    db.execute("DROP TRIGGER audit_no_update", []).unwrap();
    db.execute(
        "UPDATE audit SET payload = '{\"approved\":true}' WHERE seq = 1",
        [],
    )
    .unwrap();
    drop(db);
    let (ok, doc, err) = cli(store, &["audit", "verify"]);
    assert!(!ok && doc["ok"] == false, "{doc}");
    assert!(err.contains("seq 1"), "{err}");
}

/// Two `temper` processes on one session at once: neither loses the
/// other's tools or calls (the session tier is in the store).
#[test]
fn cli_processes_sharing_a_session_keep_each_others_tools_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let seed_file = |name: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds")
            .join(format!("{name}.json"))
            .to_string_lossy()
            .into_owned()
    };
    let forges: Vec<_> = ["slugify", "add_numbers"]
        .into_iter()
        .map(|name| {
            let (store, file) = (store.clone(), seed_file(name));
            std::thread::spawn(move || cli(&store, &["forge", &file, "--judge", "rules"]))
        })
        .collect();
    for f in forges {
        let (ok, doc, err) = f.join().unwrap();
        assert!(ok, "{doc} {err}");
    }
    let (ok, doc, _) = cli(&store, &["tools"]);
    assert!(ok);
    let mut names: Vec<&str> = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["add_numbers", "slugify"], "{doc}");

    let callers: Vec<_> = (0..3)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                let input = json!({"a": i, "b": 1}).to_string();
                for _ in 0..2 {
                    let (ok, doc, err) = cli(&store, &["call", "add_numbers", "--input", &input]);
                    assert!(ok, "{doc} {err}");
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    let (ok, doc, err) = cli(&store, &["stats", "add_numbers"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["totalCalls"], 6, "{doc}");
}
