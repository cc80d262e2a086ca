//! Bundles: a compose tool exported as one self-contained component
//! (`Forge::export_bundle`) runs without the registry and returns what the
//! linked tool returns; host-native steps stay imports named after their
//! tools; a step not granted a capability stays denied inside the bundle.

use crate::support;

use std::sync::Arc;

use serde_json::{Value, json};
use temper::artifact::read_manifest;
use temper::compose::adapter::component_imports;
use temper::forge::judge::RulesJudge;
use temper::forge::{ExportError, Forge, ForgeContext, NativeToolSpec};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation, TestCase};
use temper::store::{Registry, Tier};

fn forge(dir: &std::path::Path) -> Forge {
    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all().with_allow_crypto())
        .build()
        .unwrap();
    let store = Arc::new(Registry::open(dir).unwrap());
    let forge = Forge::builder(runtime, store)
        .judge(Arc::new(RulesJudge::standard()))
        .build();
    forge
        .register_native(
            NativeToolSpec {
                name: "web_search".into(),
                description: "Stand-in search.".into(),
                input_schema: json!({"type": "object", "required": ["q"]}),
                output_schema: json!({"type": "object", "required": ["output"]}),
            },
            |input: Value| async move {
                Ok(json!({"output": format!("results for {}", input["q"].as_str().unwrap_or("?"))}))
            },
        )
        .unwrap();
    forge
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-b", "session-b")
}

fn sandbox(name: &str, code: &str, allowlist: &[&str], input: Value) -> ForgeRequest {
    ForgeRequest {
        name: name.into(),
        description: format!("Test step {name}."),
        input_schema: json!({"type": "object"}),
        output_schema: json!({"type": "object"}),
        implementation: Implementation::Sandbox {
            code: code.into(),
            allowlist: allowlist.iter().map(|s| s.to_string()).collect(),
        },
        test_cases: vec![TestCase {
            input,
            expected_output: None,
            ..Default::default()
        }],
    }
}

fn compose(name: &str, steps: Value, input: Value) -> ForgeRequest {
    ForgeRequest {
        name: name.into(),
        description: format!("Pipeline {name}."),
        input_schema: json!({"type": "object"}),
        output_schema: json!({"type": "object"}),
        implementation: Implementation::Compose {
            steps: steps.as_array().unwrap().clone(),
        },
        test_cases: vec![TestCase {
            input,
            expected_output: None,
            ..Default::default()
        }],
    }
}

/// upper (no capability) → digest (crypto) → search (native); nested in
/// `outer` after a second native search.
async fn forge_pipeline(forge: &Forge) {
    let c = ctx();
    forge
        .forge(
            &sandbox(
                "upper",
                "function execute(i) { return { text: String(i.text).toUpperCase() }; }",
                &[],
                json!({"text": "a"}),
            ),
            &c,
        )
        .await
        .unwrap();
    forge
        .forge(
            &sandbox(
                "digest",
                "function execute(i) { return { hex: crypto.createHash('sha256').update(i.text).digest('hex'), text: i.text }; }",
                &["crypto"],
                json!({"text": "a"}),
            ),
            &c,
        )
        .await
        .unwrap();
    forge
        .forge(
            &compose(
                "inner",
                json!([
                    {"name": "up", "tool": "upper", "inputMapping": {"text": "$input.text"}},
                    {"name": "hash", "tool": "digest", "inputMapping": {"text": "$prev.text"}},
                    {"name": "search", "tool": "web_search", "inputMapping": {"q": "${prev.text} ${prev.hex}"}}
                ]),
                json!({"text": "abc"}),
            ),
            &c,
        )
        .await
        .unwrap();
    forge
        .forge(
            &compose(
                "outer",
                json!([
                    {"name": "first", "tool": "web_search", "inputMapping": {"q": "$input.text"}},
                    {"name": "nested", "tool": "inner", "inputMapping": {"text": "$prev.output"}}
                ]),
                json!({"text": "abc"}),
            ),
            &c,
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_runs_standalone_with_the_linked_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge(dir.path());
    forge_pipeline(&forge).await;
    let c = ctx();

    for (name, input) in [
        ("inner", json!({"text": "hello"})),
        ("outer", json!({"text": "wasm"})),
    ] {
        let linked = forge.invoke(name, &input, &c).await.unwrap();
        let exported = forge.export_bundle(name, &c).unwrap();
        let again = forge.export_bundle(name, &c).unwrap();
        assert_eq!(exported.bytes, again.bytes, "same tool, same bundle bytes");

        let manifest = read_manifest(&exported.bytes).unwrap();
        assert_eq!(manifest.mode, "bundle");
        assert_eq!(
            manifest.capabilities,
            ["crypto"],
            "union of the steps' grants"
        );
        // Imports: the tool world's (from the JS steps) and the native tool
        // by its own name; no step import is left.
        let imports: Vec<String> = component_imports(&exported.bytes)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert!(imports.contains(&"web-search".to_string()), "{imports:?}");
        for gone in ["up", "hash", "search", "first", "nested"] {
            assert!(
                !imports.contains(&gone.to_string()),
                "{gone} in {imports:?}"
            );
        }
        assert!(
            imports.iter().all(|i| i == "web-search"
                || i.starts_with("wasi:")
                || i.starts_with("temper:tool/")),
            "{imports:?}"
        );

        // A second host with only the bundle file (no registry entries).
        let dir2 = tempfile::tempdir().unwrap();
        let standalone = self::forge(dir2.path());
        let tool = standalone
            .load_bundle(exported.bytes.clone(), &ctx())
            .await
            .unwrap();
        let out = standalone
            .runtime()
            .call(&tool, &input.to_string())
            .await
            .unwrap();
        let out: Value = serde_json::from_str(&out.output).unwrap();
        assert_eq!(out, linked.output, "{name}");
    }

    // The expected values, so the comparison above cannot pass vacuously.
    let out = forge
        .invoke("inner", &json!({"text": "hello"}), &c)
        .await
        .unwrap()
        .output;
    let hex = "3733cd977ff8eb18b987357e22ced99f46097f31ecb239e878ae63760e83e4d5";
    assert_eq!(out, json!({"output": format!("results for HELLO {hex}")}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_without_its_native_tool_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge(dir.path());
    forge_pipeline(&forge).await;
    let bytes = forge.export_bundle("inner", &ctx()).unwrap().bytes;

    let runtime = support::runtime_builder()
        .policy(HostPolicy::deny_all().with_allow_crypto())
        .build()
        .unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let bare = Forge::builder(runtime, Arc::new(Registry::open(dir2.path()).unwrap()))
        .judge(Arc::new(RulesJudge::standard()))
        .build();
    let err = bare
        .load_bundle(bytes.clone(), &ctx())
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("web-search"), "{err}");
    // Importing it into the registry is refused the same way; nothing lands.
    let err = bare
        .import(bytes, &ForgeContext::new("a", "s"), Tier::Session)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("web-search"), "{err}");
    assert!(
        bare.visible_tools(&ForgeContext::new("a", "s"))
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_without_crypto_stays_denied_inside_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge(dir.path());
    let c = ctx();
    // A step that reaches crypto without asking for it (the static scan does
    // not see through the computed name), next to a step granted crypto.
    forge
        .forge(
            &sandbox(
                "sneaky",
                "function execute(i) { if (!i.go) return { r: 'idle' }; const c = globalThis['cry' + 'pto']; return { r: c.createHash('sha256').update('x').digest('hex') }; }",
                &[],
                json!({"go": false}),
            ),
            &c,
        )
        .await
        .unwrap();
    forge
        .forge(
            &sandbox(
                "digest",
                "function execute(i) { return { hex: crypto.createHash('sha256').update(String(i.go)).digest('hex'), go: i.go }; }",
                &["crypto"],
                json!({"go": false}),
            ),
            &c,
        )
        .await
        .unwrap();
    forge
        .forge(
            &compose(
                "mixed",
                json!([
                    {"name": "hash", "tool": "digest", "inputMapping": {"go": "$input.go"}},
                    {"name": "sneak", "tool": "sneaky", "inputMapping": {"go": "$prev.go"}}
                ]),
                json!({"go": false}),
            ),
            &c,
        )
        .await
        .unwrap();

    // Linked: the host denies the ungranted step.
    let err = forge
        .invoke("mixed", &json!({"go": true}), &c)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("capability not granted: crypto"),
        "{err}"
    );
    // Bundled: the bundle as a whole holds crypto (the digest step needs
    // it), but the sneaky step's crypto import is the deny instance.
    let exported = forge.export_bundle("mixed", &c).unwrap();
    assert_eq!(
        read_manifest(&exported.bytes).unwrap().capabilities,
        ["crypto"]
    );
    let tool = forge.load_bundle(exported.bytes, &ctx()).await.unwrap();
    let err = forge
        .runtime()
        .call(&tool, r#"{"go": true}"#)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("capability not granted: crypto"),
        "{err}"
    );
    // The granted step still hashes inside the bundle.
    let out = forge
        .runtime()
        .call(&tool, r#"{"go": false}"#)
        .await
        .unwrap();
    assert_eq!(out.output, r#"{"r":"idle"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_compose_tools_are_bundled() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge(dir.path());
    forge_pipeline(&forge).await;
    let err = forge.export_bundle("upper", &ctx()).unwrap_err();
    assert!(
        matches!(err, ExportError::NotCompose(ref n) if n == "upper"),
        "{err}"
    );
    let err = forge.export_bundle("nope", &ctx()).unwrap_err();
    assert!(matches!(err, ExportError::NotFound(_)), "{err}");
}
