//! Each malformed request under `testdata/requests` is refused with the
//! exact text an agent reads, in `forge_tool`'s schema terms.

use super::*;
use crate::error::ValidateError;

fn refusal(fixture: &str) -> String {
    let path = format!(
        "{}/testdata/requests/{fixture}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let error = parse(&text).expect_err(fixture);
    ValidateError::Request(error).to_string()
}

const PREFIX: &str = "validate: not a forge request: ";

#[test]
fn every_malformed_request_is_answered_in_the_schemas_terms() {
    let cases = [
        (
            "implementation_string",
            r#"implementation must be an object such as {"mode": "sandbox", "code": "…"}, got a string"#,
        ),
        (
            "name_missing",
            r#"name is missing: a snake_case string such as "add_numbers""#,
        ),
        (
            "name_number",
            r#"name must be a snake_case string such as "add_numbers", got a number"#,
        ),
        (
            "test_cases_missing",
            r#"testCases is missing: an array of test cases such as {"input": {…}, "expectedOutput": {…}}"#,
        ),
        (
            "test_cases_object",
            r#"testCases must be an array of test cases such as {"input": {…}, "expectedOutput": {…}}, got an object"#,
        ),
        (
            "mode_unknown",
            r#"implementation.mode must be "sandbox" (with code) or "compose" (with steps), got "python""#,
        ),
        (
            "mode_missing",
            r#"implementation.mode is missing: "sandbox" (with code) or "compose" (with steps)"#,
        ),
        (
            "code_missing",
            "implementation.code is missing: a string of JavaScript defining function execute(input) { … }",
        ),
        (
            "allowlist_number",
            r#"implementation.allowlist[1] must be a capability name such as "fetch", got a number"#,
        ),
        (
            "steps_string",
            r#"implementation.steps must be an array of steps such as {"name": "first", "tool": "slugify", "inputMapping": {"text": "$input.text"}}, got a string"#,
        ),
        (
            "test_case_string",
            r#"testCases[1] must be an object such as {"input": {…}, "expectedOutput": {…}} or {"input": {…}, "expectError": true}, got a string"#,
        ),
        (
            "test_case_input_missing",
            "testCases[0].input is missing: the input the tool is called with (JSON matching inputSchema)",
        ),
        (
            "expect_error_false",
            "testCases[1].expectError must be true or a part of the expected error message (a non-empty string), got false (leave it out for a call that succeeds)",
        ),
        (
            "expect_error_and_output",
            "testCases[0] has both expectedOutput and expectError: give expectedOutput for a call that succeeds, expectError for one that fails",
        ),
        (
            "recorded_call_no_answer",
            "testCases[0].recordedCalls[0] has neither output nor error: give the tool's answer to this input",
        ),
        (
            "output_schema_string",
            r#"outputSchema must be a JSON Schema object such as {"type": "object", "properties": {…}} (or left out), got a string"#,
        ),
        (
            "cassette_string",
            r#"testCases[0].cassette must be an array of recorded HTTP exchanges such as {"request": {"method": "GET", "url": "…"}, "response": {"status": 200, "headers": [["content-type", "application/json"]], "body": "…"}}, got a string"#,
        ),
        (
            "not_an_object",
            "the request must be an object with name, description, inputSchema, implementation and testCases (outputSchema optional), got an array",
        ),
    ];
    for (fixture, expected) in cases {
        assert_eq!(refusal(fixture), format!("{PREFIX}{expected}"), "{fixture}");
    }
}

#[test]
fn no_refusal_uses_the_deserializers_words() {
    let dir = format!("{}/testdata/requests", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = refusal(&name);
        for serde_word in [
            "internally tagged",
            "line 1 column",
            "invalid type",
            "missing field",
        ] {
            assert!(!text.contains(serde_word), "{name}: {text}");
        }
    }
}

#[test]
fn text_that_is_not_json_says_so() {
    let e = parse("{\"name\": ").unwrap_err();
    assert!(e.starts_with("the request is not JSON: "), "{e}");
}

#[test]
fn a_well_formed_request_parses_and_output_schema_may_be_left_out() {
    let text = std::fs::read_to_string(format!(
        "{}/testdata/requests/name_number.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["name"] = "add_numbers".into();
    value.as_object_mut().unwrap().remove("outputSchema");
    let request = from_value(value).unwrap();
    assert_eq!(request.name, "add_numbers");
    assert!(request.output_schema.is_null());
}
