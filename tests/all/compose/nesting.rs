//! Compose tools as steps of others: nesting, cycles across tiers, the
//! depth limit, and the compose API's registration and import refusals.

use std::sync::Arc;

use serde_json::{Value, json};
use temper::RunError;
use temper::forge::{
    Forge, ForgeConfig, ForgeContext, ForgeError, InvokeError, NativeToolSpec, PromotionThreshold,
    Stage, ValidateError,
};
use temper::store::{Registry, Tier};

use super::{
    INC, TRIPLE, artifact_bytes, compose, ctx, echo, forge_on, forged, refused, rules, run_failure,
    runtime, sandbox,
};

// ---- 6. nested compose ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compose_tool_can_be_a_step_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    forged(
        &forge,
        &sandbox("triple", TRIPLE, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    forged(
        &forge,
        &sandbox("inc", INC, &[], &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "t", "tool": "triple", "inputMapping": {"n": "$input.n"}},
        {"name": "i", "tool": "inc", "inputMapping": {"n": "$prev.n"}},
    ]);
    let inner = forged(
        &forge,
        &compose("triple_then_inc", steps, &[json!({"n": 1})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "first", "tool": "triple_then_inc", "inputMapping": {"n": "$input.x"}},
        {"name": "again", "tool": "triple_then_inc", "inputMapping": {"n": "$prev.n"}},
        {"name": "report", "tool": "echo",
         "inputMapping": {"text": "x=$input.x -> ${steps.first.n} -> $prev.label", "n": "$prev.n"}},
    ]);
    let outer = forged(
        &forge,
        &compose("nested", steps, &[json!({"x": 1})]),
        &ctx(),
    )
    .await;
    assert_eq!(
        outer.tool.steps[0].blake3.as_deref(),
        Some(inner.tool.id.as_str())
    );
    assert_eq!(
        outer.tool.steps[1].blake3.as_deref(),
        Some(inner.tool.id.as_str())
    );
    assert_eq!(outer.tool.steps[2].blake3, None);

    let out = forge
        .invoke("nested", &json!({"x": 2}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"text": "x=2 -> 7 -> n=22", "n": 22}));
    let logs: Vec<(&str, &str)> = out
        .logs
        .iter()
        .map(|l| (l.level, l.message.as_str()))
        .collect();
    assert_eq!(
        logs,
        [
            ("info", "[first] [t] triple 2"),
            ("info", "[again] [t] triple 7")
        ]
    );
    // An inner failure surfaces through both levels, each naming its step.
    let failure = run_failure(&forge, "nested", json!({"x": "two"}), &ctx()).await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 0,
            step: "first".into(),
            tool: "triple_then_inc".into(),
            message: "invoke triple_then_inc: run: step 0 (\"t\", tool triple) failed: invoke triple: run: the tool threw: TypeError: n must be a number (at line 2, column 42)".into(),
        }
    );
}

// ---- 7. cycles across tiers -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_through_a_promoted_tool_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        promotion_threshold: PromotionThreshold {
            uses: 2,
            confidence: 0.8,
        },
        ..ForgeConfig::default()
    };
    let forge = Forge::builder(runtime(), Arc::new(Registry::open(dir.path()).unwrap()))
        .judge(rules())
        .config(config)
        .build();
    let s1 = ForgeContext::new("agent-a", "s1");
    let s2 = ForgeContext::new("agent-a", "s2");
    let t1 = forged(&forge, &sandbox("t1", INC, &[], &[json!({"n": 1})]), &s1).await;
    let steps = json!([{"name": "call_t1", "tool": "t1", "inputMapping": {"n": "$input.n"}}]);
    let c2 = forged(&forge, &compose("c2", steps, &[json!({"n": 1})]), &s1).await;
    assert_eq!(
        c2.tool.steps[0].blake3.as_deref(),
        Some(t1.tool.id.as_str())
    );
    for n in 0..2 {
        let out = forge.invoke("c2", &json!({"n": n}), &s1).await.unwrap();
        assert_eq!(out.output["n"], json!(n + 1));
    }
    let promoted = forge.promote("c2", &s1, None).await.unwrap();
    assert_eq!(promoted.tier, Tier::Agent);
    assert_eq!(promoted.mode, "compose");
    assert_eq!(forge.cleanup_session(&s1).unwrap(), 1, "t1 was discarded");

    // In a new session, `t1` is free as a name, but a compose `t1` calling
    // c2 would call itself.
    let steps = json!([{"name": "call_c2", "tool": "c2", "inputMapping": {"n": "$input.n"}}]);
    let err = refused(&forge, &compose("t1", steps, &[json!({"n": 1})]), &s2).await;
    assert_eq!(err.stage(), Stage::Validate);
    assert!(
        matches!(err, ForgeError::Validate(ValidateError::Cycle(_))),
        "{err}"
    );
    assert!(
        err.to_string().contains("compose cycle: t1 -> c2 -> t1"),
        "{err}"
    );
    // c2 still runs: its step is pinned by blake3, not by t1's session.
    let out = forge.invoke("c2", &json!({"n": 41}), &s2).await.unwrap();
    assert_eq!(out.output, json!({"n": 42, "label": "n=42"}));
    assert_eq!(out.tier, Tier::Agent);
    assert!(matches!(
        forge.invoke("t1", &json!({"n": 1}), &s2).await,
        Err(InvokeError::NotFound { .. })
    ));
    // The same on a restarted host (nothing cached in memory).
    drop(forge);
    let restarted = forge_on(runtime(), dir.path());
    let out = restarted.invoke("c2", &json!({"n": 1}), &s2).await.unwrap();
    assert_eq!(out.output, json!({"n": 2, "label": "n=2"}));
}

// ---- 10. limits and refusals of the compose API ---------------------------

/// Compose tools nested past `MAX_COMPOSE_DEPTH` are refused when the test
/// stage runs them (cycles are impossible by hash; the depth still bounds
/// a long honest chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nesting_past_the_depth_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    let max = temper::forge::MAX_COMPOSE_DEPTH;
    let mut below = "echo".to_string();
    for level in 0..max {
        let name = format!("level{level}");
        let steps = json!([{"name": "s", "tool": below, "inputMapping": {"n": level}}]);
        forged(&forge, &compose(&name, steps, &[json!({})]), &ctx()).await;
        below = name;
    }
    // `max` compose tools deep runs (echo sees the innermost mapping,
    // level0's); one more does not.
    let out = forge.invoke(&below, &json!({}), &ctx()).await.unwrap();
    assert_eq!(out.output, json!({"n": 0}));
    let steps = json!([{"name": "s", "tool": below, "inputMapping": {"n": 99}}]);
    let err = refused(&forge, &compose("too_deep", steps, &[json!({})]), &ctx()).await;
    assert_eq!(err.stage(), Stage::Test, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("compose tools nest more than {max} levels deep")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_registration_and_compose_import_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let spec = |name: &str, output: Value| NativeToolSpec {
        name: name.into(),
        description: "d".into(),
        input_schema: json!({"type": "object"}),
        output_schema: output,
    };
    let ok = |_: Value| async { Ok(json!({})) };
    forge
        .register_native(spec("echo", json!({"type": "object"})), ok)
        .unwrap();
    for (name, schema, why) in [
        (
            "echo",
            json!({"type": "object"}),
            "is already a host-native tool",
        ),
        ("../x", json!({"type": "object"}), "path characters"),
        ("Echo2", json!({"type": "object"}), "snake_case"),
        ("fine", json!({"type": 12}), "outputSchema"),
    ] {
        let err = forge.register_native(spec(name, schema), ok).unwrap_err();
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
    assert_eq!(
        forge
            .native_tools()
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        ["echo"]
    );

    // A compose artifact names steps pinned in this store: importing it
    // elsewhere is refused with the way out, and nothing lands.
    let steps = json!([{"name": "s", "tool": "echo", "inputMapping": {"a": 1}}]);
    let f = forged(&forge, &compose("piped", steps, &[json!({})]), &ctx()).await;
    let bytes = artifact_bytes(&forge, &f.tool.id);
    let dir2 = tempfile::tempdir().unwrap();
    let other = forge_on(runtime(), dir2.path());
    let err = other
        .import(bytes, &ForgeContext::new("b", "s"), Tier::Agent)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("export it with --bundle"), "{err}");
    assert!(
        other
            .visible_tools(&ForgeContext::new("b", "s"))
            .unwrap()
            .is_empty()
    );
}
