//! Composing never widens capabilities: the adapter imports only its
//! steps, and an ungranted step stays ungranted.

use crate::support;
use support::ApproveAll;
use temper::compose::ComposeRuntime;

use std::sync::Arc;

use serde_json::json;
use temper::compose::adapter::component_imports;
use temper::forge::{Forge, Stage};
use temper::policy::HostPolicy;
use temper::store::Registry;
use temper::{Limits, LoadError, RunError};

use super::{
    JsonServer, artifact_bytes, compose, ctx, forge_on, forged, refused, run_failure, runtime_with,
    sandbox,
};

// ---- 4. non-widening -----------------------------------------------------------

const FETCHER: &str = "async function execute(input) {\n  const r = await fetch(input.url);\n  return { status: r.status, body: await r.json() };\n}";
const SNEAKY: &str = "async function execute(input) {\n  if (input.go) {\n    const r = await fetch(input.url);\n    return { status: r.status };\n  }\n  return { skipped: true };\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composing_never_widens_capabilities() {
    let server = JsonServer::start(r#"{"ok": true}"#).await;
    let port = server.port;
    let base = format!("http://127.0.0.1:{port}");
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("127.0.0.1:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;

    // The rules judge refuses a tool whose code uses fetch without listing it.
    let dir = tempfile::tempdir().unwrap();
    let strict = forge_on(runtime_with(policy.clone(), Limits::default()), dir.path());
    let sneaky = sandbox(
        "sneaky",
        SNEAKY,
        &[],
        &[json!({"go": false, "url": format!("{base}/sneaky")})],
    );
    let err = refused(&strict, &sneaky, &ctx()).await;
    assert_eq!(err.stage(), Stage::Judge, "{err}");
    assert!(
        err.to_string()
            .contains("code appears to use `fetch`, which the allowlist does not grant"),
        "{err}"
    );

    // A lenient judge lets it through: the runtime still never grants it.
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(
        runtime_with(policy, Limits::default()),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(Arc::new(ApproveAll))
    .build();
    let fetcher = forged(
        &forge,
        &sandbox(
            "fetcher",
            FETCHER,
            &["fetch"],
            &[json!({"url": format!("{base}/granted")})],
        ),
        &ctx(),
    )
    .await;
    let sneaky = forged(&forge, &sneaky, &ctx()).await;
    assert_eq!(fetcher.tool.allowlist, ["fetch"]);
    assert!(sneaky.tool.allowlist.is_empty());
    let steps = json!([
        {"name": "granted", "tool": "fetcher", "inputMapping": {"url": "$input.granted"}},
        {"name": "sneak", "tool": "sneaky", "inputMapping": {"go": "$input.go", "url": "$input.sneaky"}},
    ]);
    let case = json!({"go": false, "granted": format!("{base}/granted"), "sneaky": format!("{base}/sneaky")});
    let both = forged(&forge, &compose("both", steps, &[case]), &ctx()).await;
    assert_eq!(
        both.tool
            .steps
            .iter()
            .map(|s| s.blake3.as_deref().unwrap())
            .collect::<Vec<_>>(),
        [fetcher.tool.id.as_str(), sneaky.tool.id.as_str()]
    );
    // fetcher's tests (2 runs) and both's tests (2 runs) fetched /granted.
    assert_eq!(server.seen(), vec!["GET /granted"; 4]);

    // The granted step fetches; the ungranted one is denied, and named.
    let failure = run_failure(
        &forge,
        "both",
        json!({"go": true, "granted": format!("{base}/granted"), "sneaky": format!("{base}/sneaky")}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 1,
            step: "sneak".into(),
            tool: "sneaky".into(),
            message: "invoke sneaky: run: capability not granted: fetch (the tool's implementation.allowlist does not list \"fetch\": add it and forge the tool again)".into(),
        }
    );
    assert_eq!(server.seen(), vec!["GET /granted"; 5]);
    // Directly, the same.
    let failure = run_failure(
        &forge,
        "sneaky",
        json!({"go": true, "url": format!("{base}/sneaky")}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::CapabilityDenied {
            capability: "fetch".into()
        }
    );
    assert!(!server.seen().iter().any(|r| r.contains("/sneaky")));
    let out = forge
        .invoke(
            "both",
            &json!({"go": false, "granted": format!("{base}/granted"), "sneaky": "-"}),
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(out.output, json!({"skipped": true}));

    // The compose artifact imports its steps and the type-only interface,
    // nothing else; its manifest asks for no capability.
    let bytes = artifact_bytes(&forge, &both.tool.id);
    let imports = component_imports(&bytes).unwrap();
    assert_eq!(
        imports,
        vec![
            ("temper:tool/types@0.1.0".to_string(), vec![]),
            ("granted".to_string(), vec!["call".to_string()]),
            ("sneak".to_string(), vec!["call".to_string()]),
        ]
    );
    let manifest = temper::artifact::read_manifest(&bytes).unwrap();
    assert_eq!(manifest.mode, "compose");
    assert!(manifest.capabilities.is_empty());
    assert!(both.tool.allowlist.is_empty());

    // load_compose refuses components importing anything but their steps.
    let rt = forge.runtime();
    let sandbox_bytes = artifact_bytes(&forge, &fetcher.tool.id);
    let sandbox_imports: Vec<String> = component_imports(&sandbox_bytes)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(
        sandbox_imports.contains(&"temper:tool/fetch@0.1.0".to_string()),
        "{sandbox_imports:?}"
    );
    let err = rt
        .load_compose(Arc::new(sandbox_bytes), vec!["granted".into()])
        .await
        .err()
        .expect("a sandbox artifact is not an adapter");
    let LoadError::ImportNotAllowed(name) = &err else {
        panic!("expected ImportNotAllowed, got {err}");
    };
    assert!(sandbox_imports.contains(name), "{name}");
    let fetch_only =
        wat::parse_str(r#"(component (import "temper:tool/fetch@0.1.0" (instance)))"#).unwrap();
    let err = rt
        .load_compose(Arc::new(fetch_only), vec!["granted".into()])
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&err, LoadError::ImportNotAllowed(n) if n == "temper:tool/fetch@0.1.0"),
        "{err}"
    );
    let wide_step = wat::parse_str(
        r#"(component (import "granted" (instance (export "call" (func)) (export "fetch" (func)))))"#,
    )
    .unwrap();
    let err = rt
        .load_compose(Arc::new(wide_step), vec!["granted".into()])
        .await
        .err()
        .expect("refused");
    assert_eq!(
        err.to_string(),
        "load: import `granted (exports [\"call\", \"fetch\"], not just `call`)` is outside the `tool` world; refusing to instantiate"
    );
}
