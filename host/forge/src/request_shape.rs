//! Reading a forge request, refused in the terms of `forge_tool`'s input
//! schema: a document that is not a forge request is answered with the
//! field, what it must be (with an example) and what it is, never with the
//! deserializer's words (`expected internally tagged enum ...`).
//!
//! [`parse`] walks the JSON against the request's shape first
//! ([`shape_error`]); only a document that passes is deserialized.

use serde_json::Value;

use super::schema::json_type;
use temper_runtime::request::ForgeRequest;

const NAME: &str = r#"a snake_case string such as "add_numbers""#;
const DESCRIPTION: &str = "a string saying what the tool does";
const SCHEMA: &str = r#"a JSON Schema object such as {"type": "object", "properties": {…}}"#;
const IMPLEMENTATION: &str = r#"an object such as {"mode": "sandbox", "code": "…"}"#;
const MODE: &str = r#""sandbox" (with code) or "compose" (with steps)"#;
const CODE: &str = "a string of JavaScript defining function execute(input) { … }";
const ALLOWLIST: &str = r#"an array of capability names such as ["fetch"]"#;
const STEPS: &str = r#"an array of steps such as {"name": "first", "tool": "slugify", "inputMapping": {"text": "$input.text"}}"#;
const TEST_CASES: &str = r#"an array of test cases such as {"input": {…}, "expectedOutput": {…}}"#;
const TEST_CASE: &str = r#"an object such as {"input": {…}, "expectedOutput": {…}} or {"input": {…}, "expectError": true}"#;
const EXPECT_ERROR: &str = "true or a part of the expected error message (a non-empty string)";
const CASSETTE: &str = r#"an array of recorded HTTP exchanges such as {"request": {"method": "GET", "url": "…"}, "response": {"status": 200, "headers": [["content-type", "application/json"]], "body": "…"}}"#;
const RECORDED_CALLS: &str =
    r#"an array of recorded answers such as {"tool": "nice.admin", "input": {…}, "output": {…}}"#;
const RECORDED_CALL: &str = r#"an object such as {"tool": "nice.admin", "input": {…}, "output": {…}} (or "error": "…" in place of "output")"#;

/// Parses `text` as a forge request; why not, in the schema's terms.
pub fn parse(text: &str) -> Result<ForgeRequest, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the request is not JSON: {e}"))?;
    from_value(value)
}

/// [`parse`] for a request already read as JSON.
pub fn from_value(value: Value) -> Result<ForgeRequest, String> {
    if let Some(error) = shape_error(&value) {
        return Err(error);
    }
    // The shape passed: whatever serde still finds is named as it says.
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn must_be(field: &str, what: &str, got: &Value) -> String {
    format!("{field} must be {what}, got {}", json_type(got))
}

fn missing(field: &str, what: &str) -> String {
    format!("{field} is missing: {what}")
}

/// The first way `request` departs from `forge_tool`'s input schema, in
/// its terms; `None` when its shape is a forge request's.
pub fn shape_error(request: &Value) -> Option<String> {
    let Value::Object(fields) = request else {
        return Some(format!(
            "the request must be an object with name, description, inputSchema, implementation \
             and testCases (outputSchema optional), got {}",
            json_type(request)
        ));
    };
    for (field, what) in [("name", NAME), ("description", DESCRIPTION)] {
        match fields.get(field) {
            None => return Some(missing(field, what)),
            Some(Value::String(_)) => {}
            Some(other) => return Some(must_be(field, what, other)),
        }
    }
    match fields.get("inputSchema") {
        None => return Some(missing("inputSchema", SCHEMA)),
        Some(Value::Object(_) | Value::Bool(_)) => {}
        Some(other) => return Some(must_be("inputSchema", SCHEMA, other)),
    }
    match fields.get("outputSchema") {
        None | Some(Value::Null | Value::Object(_) | Value::Bool(_)) => {}
        Some(other) => {
            return Some(must_be(
                "outputSchema",
                &format!("{SCHEMA} (or left out)"),
                other,
            ));
        }
    }
    match fields.get("implementation") {
        None => return Some(missing("implementation", IMPLEMENTATION)),
        Some(Value::Object(implementation)) => {
            if let Some(e) = implementation_error(implementation) {
                return Some(e);
            }
        }
        Some(other) => return Some(must_be("implementation", IMPLEMENTATION, other)),
    }
    match fields.get("testCases") {
        None => Some(missing("testCases", TEST_CASES)),
        Some(Value::Array(cases)) => cases
            .iter()
            .enumerate()
            .find_map(|(i, case)| test_case_error(i, case)),
        Some(other) => Some(must_be("testCases", TEST_CASES, other)),
    }
}

fn implementation_error(implementation: &serde_json::Map<String, Value>) -> Option<String> {
    match implementation.get("mode") {
        None => Some(missing("implementation.mode", MODE)),
        Some(Value::String(mode)) if mode == "sandbox" => {
            match implementation.get("code") {
                None => return Some(missing("implementation.code", CODE)),
                Some(Value::String(_)) => {}
                Some(other) => return Some(must_be("implementation.code", CODE, other)),
            }
            match implementation.get("allowlist") {
                None | Some(Value::Null) => None,
                Some(Value::Array(entries)) => entries.iter().enumerate().find_map(|(i, entry)| {
                    (!entry.is_string()).then(|| {
                        must_be(
                            &format!("implementation.allowlist[{i}]"),
                            r#"a capability name such as "fetch""#,
                            entry,
                        )
                    })
                }),
                Some(other) => Some(must_be("implementation.allowlist", ALLOWLIST, other)),
            }
        }
        Some(Value::String(mode)) if mode == "compose" => match implementation.get("steps") {
            None => Some(missing("implementation.steps", STEPS)),
            Some(Value::Array(_)) => None,
            Some(other) => Some(must_be("implementation.steps", STEPS, other)),
        },
        Some(Value::String(mode)) => {
            Some(format!("implementation.mode must be {MODE}, got {mode:?}"))
        }
        Some(other) => Some(must_be("implementation.mode", MODE, other)),
    }
}

fn test_case_error(index: usize, case: &Value) -> Option<String> {
    let at = format!("testCases[{index}]");
    let Value::Object(fields) = case else {
        return Some(must_be(&at, TEST_CASE, case));
    };
    if !fields.contains_key("input") {
        return Some(missing(
            &format!("{at}.input"),
            "the input the tool is called with (JSON matching inputSchema)",
        ));
    }
    if let Some(expect) = fields.get("expectError") {
        if let Some(e) = expect_error_error(&at, expect) {
            return Some(e);
        }
        if fields.contains_key("expectedOutput") {
            return Some(format!(
                "{at} has both expectedOutput and expectError: give expectedOutput for a call that \
                 succeeds, expectError for one that fails"
            ));
        }
    }
    match fields.get("cassette") {
        None | Some(Value::Null | Value::Array(_) | Value::Object(_)) => {}
        Some(other) => return Some(must_be(&format!("{at}.cassette"), CASSETTE, other)),
    }
    match fields.get("recordedCalls") {
        None | Some(Value::Null) => None,
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .find_map(|(i, call)| recorded_call_error(&format!("{at}.recordedCalls[{i}]"), call)),
        Some(other) => Some(must_be(
            &format!("{at}.recordedCalls"),
            RECORDED_CALLS,
            other,
        )),
    }
}

/// Why `expect` is not a valid `expectError` of the case at `at`.
pub(crate) fn expect_error_error(at: &str, expect: &Value) -> Option<String> {
    match expect {
        Value::Bool(true) => None,
        Value::String(s) if !s.is_empty() => None,
        Value::String(_) => Some(format!(
            "{at}.expectError must be {EXPECT_ERROR}, got an empty string"
        )),
        Value::Bool(false) => Some(format!(
            "{at}.expectError must be {EXPECT_ERROR}, got false (leave it out for a call that succeeds)"
        )),
        other => Some(must_be(&format!("{at}.expectError"), EXPECT_ERROR, other)),
    }
}

fn recorded_call_error(at: &str, call: &Value) -> Option<String> {
    let Value::Object(fields) = call else {
        return Some(must_be(at, RECORDED_CALL, call));
    };
    match fields.get("tool") {
        None => {
            return Some(missing(
                &format!("{at}.tool"),
                "the name of the tool called",
            ));
        }
        Some(Value::String(_)) => {}
        Some(other) => return Some(must_be(&format!("{at}.tool"), "a tool name", other)),
    }
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "tool" | "input" | "output" | "error"))
    {
        return Some(format!(
            "{at} has an unknown field {unknown:?}: a recorded answer has tool, input and output (or error)"
        ));
    }
    match (fields.get("output"), fields.get("error")) {
        (Some(_), Some(_)) => Some(format!("{at} has both output and error: give one")),
        (None, None) => Some(format!(
            "{at} has neither output nor error: give the tool's answer to this input"
        )),
        (None, Some(Value::String(_))) | (Some(_), None) => None,
        (None, Some(other)) => Some(must_be(
            &format!("{at}.error"),
            "the error message, a string",
            other,
        )),
    }
}

#[cfg(test)]
mod tests;
