//! Tests of the judge's types: camelCase on the wire, clamped scores,
//! focus prompts, and a verdict found in prose.

use crate::judge::llm::find_json_object;
use crate::judge::*;

use super::candidate;

// ---------------------------------------------------------------- types

#[test]
fn candidate_and_verdict_use_camel_case() {
    let value = serde_json::to_value(candidate()).unwrap();
    for key in [
        "inputSchema",
        "outputSchema",
        "testResults",
        "usedApis",
        "repeatRun",
    ] {
        assert!(value.get(key).is_some(), "missing {key}");
    }
    assert!(value.get("composition").is_none(), "None is omitted");

    let minimal: ToolCandidate =
        serde_json::from_str(r#"{"name": "t", "description": "d", "inputSchema": {}}"#).unwrap();
    assert!(minimal.test_results.is_empty() && minimal.repeat_run.is_none());

    let verdict = Verdict::reject("none", vec!["x".into()]);
    let v = serde_json::to_value(&verdict).unwrap();
    assert_eq!(v["approved"], false);
    assert_eq!(v["judge"], "none");
    let back: Verdict = serde_json::from_value(v).unwrap();
    assert_eq!(back, verdict);
}

#[test]
fn verdict_scores_are_clamped() {
    let v = Verdict::new(
        true,
        Scores {
            safety: 1.7,
            correctness: -0.2,
            determinism: f64::NAN,
            confidence: 0.5,
        },
        vec![],
        "t",
    );
    assert_eq!(
        (v.safety, v.correctness, v.determinism, v.confidence),
        (1.0, 0.0, 0.0, 0.5)
    );
}

#[test]
fn focus_prompts_differ_and_share_the_criteria() {
    let creation = ReviewFocus::Creation.system_prompt();
    let safety = ReviewFocus::Safety.system_prompt();
    let correctness = ReviewFocus::Correctness.system_prompt();
    assert_eq!(creation, SYSTEM_PROMPT);
    assert!(safety.starts_with(SYSTEM_PROMPT) && safety.ends_with(SAFETY_REVIEWER_FOCUS));
    assert!(
        correctness.starts_with(SYSTEM_PROMPT) && correctness.ends_with(CORRECTNESS_REVIEWER_FOCUS)
    );
    assert!(SYSTEM_PROMPT.contains("\"approved\""));
    assert!(SYSTEM_PROMPT.contains("JSON"));
}

#[test]
fn verdict_object_is_found_in_prose() {
    let text = r#"Note {this} and {"example": 1}. Verdict: {"approved": false, "reasons": ["a } b"]} done"#;
    let found = find_json_object(text).unwrap();
    assert_eq!(found["approved"], false);
    assert_eq!(found["reasons"][0], "a } b");
    assert_eq!(find_json_object(r#"x {"k": 1} y"#).unwrap()["k"], 1);
    assert!(find_json_object("{ unbalanced").is_none());
    assert!(find_json_object("no braces").is_none());
}
