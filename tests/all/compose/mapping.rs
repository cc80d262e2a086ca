//! Compose mappings: every `inputMapping` form through forge and invoke,
//! and forge-time errors naming the step and key.

use std::sync::atomic::Ordering;

use serde_json::json;
use temper::RunError;
use temper::forge::{ForgeContext, ForgeError, Stage, ValidateError};

use super::{
    INC, compose, compose_seed, ctx, echo, forge_on, forged, refused, run_failure, runtime, sandbox,
};

// ---- 3. mapping semantics ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mapping_form_through_forge_and_invoke() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    let calls = echo(&forge);
    let request = compose_seed("mapping_forms");
    forged(&forge, &request, &ctx()).await;
    calls.store(0, Ordering::SeqCst);

    let input = json!({
        "a": {"b": "deep text"},
        "n": 3,
        "obj": {"k": [1, "x"]},
        "arr": [10, 20, 30],
        "flag": true,
        "first name": "Ada",
    });
    let out = forge.invoke("mapping_forms", &input, &ctx()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let first = json!({
        "whole": input,
        "ab": "deep text",
        "n": 3,
        "obj": {"k": [1, "x"]},
        "arr": [10, 20, 30],
        "flag": true,
        "second": 20,
        "braced": "deep text",
        "spaced": "Ada",
        "text": "n=3; obj={\"k\":[1,\"x\"]}; arr=[10,20,30]; flag=true; ab=deep text.",
        "adjacent": "3-true",
        "literal": "costs $5, not $input.n",
        "plain": "no references here",
        "nested": {"list": [3, {"deep": [1, "x"]}, "x3", 7, null, false], "empty": {}},
        "num": 2.5,
        "nothing": null,
        "yes": true,
    });
    let second = json!({
        "prev_n": 3,
        "prev_nested": {"list": [3, {"deep": [1, "x"]}, "x3", 7, null, false], "empty": {}},
        "from_first": "x",
        "deep_index": 1,
        "braced_steps": "deep text!",
        "prev_text": "prev flag=true, k=[1,\"x\"]",
    });
    assert_eq!(out.output, json!({"first": first, "second": second}));
    // Whole-string references kept their JSON types.
    assert!(out.output["first"]["n"].is_u64());
    assert!(out.output["first"]["flag"].is_boolean());
    assert!(out.output["first"]["obj"].is_object());
    assert!(out.output["first"]["arr"].is_array());
    assert!(out.output["first"]["num"].is_f64());

    // Missing fields and out-of-range indexes at run time: a clear error
    // naming step and key; the steps after it never run.
    let steps = json!([
        {"name": "first", "tool": "echo", "inputMapping": {"x": "$input.x", "pick": "$input.items.1"}},
        {"name": "second", "tool": "echo", "inputMapping": {"deep": {"y": ["$prev.x.deep"]}}},
        {"name": "third", "tool": "echo", "inputMapping": {}},
    ]);
    let request = compose(
        "mapping_errors",
        steps,
        &[json!({"x": {"deep": 1}, "items": [0, 1]})],
    );
    forged(&forge, &request, &ctx()).await;
    calls.store(0, Ordering::SeqCst);
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": {"other": 1}, "items": [0, 1]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[1] (\"second\") inputMapping.deep.y[0]: `$prev.x.deep`: $prev.x has no field \"deep\" (fields: \"other\")".into()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only steps[0] ran");
    calls.store(0, Ordering::SeqCst);
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": {"deep": 1}, "items": [0]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[0] (\"first\") inputMapping.pick: `$input.items.1`: index 1 is out of range: $input.items has 1 element(s)".into()
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no step ran");
    let failure = run_failure(
        &forge,
        "mapping_errors",
        json!({"x": "flat", "items": [0, 1]}),
        &ctx(),
    )
    .await;
    assert_eq!(
        failure.error,
        RunError::BadInput {
            message: "steps[1] (\"second\") inputMapping.deep.y[0]: `$prev.x.deep`: cannot read \"deep\" of $prev.x, which is string".into()
        }
    );
}

// ---- 8. forge-time validation ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_time_errors_name_the_step_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(), dir.path());
    echo(&forge);
    let other = ForgeContext::new("agent-b", "session-b");
    forged(
        &forge,
        &sandbox("private_inc", INC, &[], &[json!({"n": 1})]),
        &other,
    )
    .await;

    let cases = [
        (
            json!([
                {"name": "a", "tool": "echo", "inputMapping": {"x": {"y": ["$steps.later.v"]}}},
                {"name": "later", "tool": "echo", "inputMapping": {}},
            ]),
            "validate: compose: steps[0] (\"a\") inputMapping.x.y[0]: `$steps.later.v`: step \"later\" runs later (steps[1]); $steps.NAME must name an earlier step",
        ),
        (
            json!([{"name": "only", "tool": "echo", "inputMapping": {"q": "$prev.output"}}]),
            "validate: compose: steps[0] (\"only\") inputMapping.q: `$prev.output`: the first step has no previous step (use $input)",
        ),
        (
            json!([
                {"name": "a", "tool": "echo", "inputMapping": {}},
                {"name": "b", "tool": "no_such_tool", "inputMapping": {}},
            ]),
            "validate: compose: steps[1] (\"b\"): tool \"no_such_tool\" is not callable by agent \"agent-1\" in session \"session-1\" (not in its session, its agent tier, the shared tier, nor a host-native tool)",
        ),
        (
            json!([{"name": "borrow", "tool": "private_inc", "inputMapping": {"n": 1}}]),
            "validate: compose: steps[0] (\"borrow\"): tool \"private_inc\" is not callable by agent \"agent-1\" in session \"session-1\" (not in its session, its agent tier, the shared tier, nor a host-native tool)",
        ),
        (
            json!([{"name": "price", "tool": "echo", "inputMapping": {"note": "costs $5"}}]),
            "validate: compose: steps[0] (\"price\") inputMapping.note: a lone `$` must start a reference ($input, $prev, $steps.NAME or ${...}); write `$$` for a literal `$` (at character 6 of \"costs $5\")",
        ),
    ];
    for (i, (steps, expected)) in cases.into_iter().enumerate() {
        let name = format!("bad_{i}");
        let err = refused(&forge, &compose(&name, steps, &[json!({})]), &ctx()).await;
        assert_eq!(err.stage(), Stage::Validate, "{err}");
        assert!(
            matches!(
                err,
                ForgeError::Validate(ValidateError::Compose(_) | ValidateError::Step { .. })
            ),
            "{err:?}"
        );
        assert_eq!(err.to_string(), expected);
    }
    assert!(forge.session_tools(&ctx()).unwrap().is_empty());
    // The escaped form is accepted.
    let steps = json!([{"name": "price", "tool": "echo", "inputMapping": {"note": "costs $$5"}}]);
    forged(&forge, &compose("priced", steps, &[json!({})]), &ctx()).await;
    let out = forge.invoke("priced", &json!({}), &ctx()).await.unwrap();
    assert_eq!(out.output, json!({"note": "costs $5"}));
}
