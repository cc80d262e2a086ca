//! The forge pipeline on the seed examples (validate, build, test, judge,
//! register), refusals naming their stage and reason, and the agent tool
//! limit at forge and promotion.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::json;
use support::http::TlsTestServer;
use temper::capabilities::fetch::TransportOptions;
use temper::forge::{
    Forge, ForgeConfig, ForgeError, ForgeResult, PromoteError, Stage, ValidateError,
};
use temper::policy::HostPolicy;
use temper::request::Implementation;
use temper::store::{AuditKind, Tier};

use super::{audit, ctx, refused, renamed, rules, runtime, runtime_with, seed, store, with_code};

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

/// A request without `outputSchema` (optional in the seed's format) builds
/// the same artifact every time: two stores, the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_output_schema_builds_the_same_artifact() {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let forge = Forge::builder(runtime(), store(dir.path()))
            .judge(rules())
            .build();
        let mut request = seed("slugify");
        request.output_schema = serde_json::Value::Null;
        let forged = forge.forge(&request, &ctx()).await.unwrap();
        ids.push(forged.tool.id);
    }
    assert_eq!(ids[0], ids[1]);
    let with_schema = seed("slugify");
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime(), store(dir.path()))
        .judge(rules())
        .build();
    let forged = forge.forge(&with_schema, &ctx()).await.unwrap();
    assert_ne!(forged.tool.id, ids[0], "the schema is part of the artifact");
}

/// A fetch tool's tests on a host that cannot reach the network: without a
/// cassette the failing case says it is the offline path and how to pass
/// one; with the responses in the case's `cassette` it forges, no network.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_fetch_tool_forges_with_a_cassette() {
    // httpstat.us resolves to 127.0.0.1, where nothing listens on 443: the
    // network is unreachable for this host.
    let mut policy = HostPolicy::deny_all()
        .with_allow_net("httpstat.us")
        .unwrap();
    policy.fetch.allow_private = true;
    let transport = TransportOptions {
        resolve_overrides: HashMap::from([(
            "httpstat.us".to_string(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )]),
        extra_roots_pem: Vec::new(),
    };
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(runtime_with(policy, transport), store(dir.path()))
        .judge(rules())
        .build();
    let live = seed("check_http_status");
    let err = refused(&forge, &live, Stage::Test).await;
    let text = err.to_string();
    assert!(
        text.starts_with("test: 1 of 1 test case(s) failed: case #0: "),
        "{text}"
    );
    assert!(
        text.contains("fetch: request to https://httpstat.us/200 failed"),
        "{text}"
    );
    assert!(
        text.ends_with(temper::testcase::OFFLINE_HINT),
        "the offline path is named: {text}"
    );

    let mut offline = seed("check_http_status");
    offline.test_cases[0].cassette = Some(json!([{
        "request": {"method": "HEAD", "url": "https://httpstat.us/200"},
        "response": {"status": 200, "headers": [["content-type", "text/plain"]]}
    }]));
    let forged = forge.forge(&offline, &ctx()).await;
    let result = ForgeResult::from(&forged);
    assert!(result.success, "{:?}", result.errors);
    assert_eq!(
        result.test_results[0].output,
        Some(json!({"status": 200, "ok": true, "redirected": false}))
    );

    // A request the cassette does not hold is named, with no network.
    let mut missing = renamed(seed("check_http_status"), "check_other_status");
    missing.test_cases[0].input = json!({"url": "https://httpstat.us/404"});
    missing.test_cases[0].cassette = offline.test_cases[0].cassette.clone();
    let err = refused(&forge, &missing, Stage::Test).await;
    assert!(
        err.to_string().contains(
            "fetch: no recorded response for HEAD https://httpstat.us/404 in cassette testCases[0].cassette (replay mode: no network)"
        ),
        "{err}"
    );
}
