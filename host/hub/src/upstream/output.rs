//! What an upstream's tool call returns, as Temper sees it: the output value
//! (`structuredContent`, else the text parsed as JSON when it is JSON, else
//! `{"text": ...}`), the upstream's error text, and the schema checks.

use rmcp::model::CallToolResult;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A tool call's output, with the upstream's own JSON text of it when that
/// can be passed on as it is (a gateway writes it once, not anew).
#[derive(Debug, Clone)]
pub struct CallOutput {
    /// The output: what the output schema was checked against.
    pub value: Value,
    /// The upstream's text of exactly `value` (`structuredContent`, read
    /// strictly: no duplicate key, no number `serde_json` would change,
    /// see `strict.rs`); `None` when the output must be written anew (it
    /// came from the text content, holds such a number, or the call did
    /// not take the direct path).
    pub raw: Option<Box<RawValue>>,
}

impl CallOutput {
    /// An output without text of its own to pass on.
    pub fn value(value: Value) -> Self {
        Self { value, raw: None }
    }
}

/// The output of a tool call, or the upstream's error text when `isError`.
pub(super) fn output_of(result: CallToolResult) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let text = text_of(&result);
        let text = if text.is_empty() {
            "the tool reported an error".to_string()
        } else {
            shorten(&text, 2000)
        };
        return Err(text);
    }
    // The text (SDKs repeat the structured output there) is only read when
    // there is no structured output.
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    let text = text_of(&result);
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text })))
}

/// [`output_of`] for a `tools/call` result read as a JSON value (the
/// direct path): `structuredContent` is moved out, not copied; the text
/// content is only read when there is none, or on `isError`.
pub(super) fn output_of_value(result: Value) -> Result<Value, String> {
    let Value::Object(mut result) = result else {
        return Err(format!(
            "sent a tools/call result that is not an object: {}",
            shorten(&result.to_string(), 200)
        ));
    };
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let text = |result: &serde_json::Map<String, Value>| -> String {
        result
            .get("content")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default()
    };
    if is_error {
        let text = text(&result);
        return Err(if text.is_empty() {
            "the tool reported an error".to_string()
        } else {
            shorten(&text, 2000)
        });
    }
    // A later revision's other kinds of result (input required, a task)
    // are not a tool's output.
    if let Some(kind) = result.get("resultType").and_then(Value::as_str)
        && kind != "complete"
    {
        return Err(format!(
            "answered with a {kind:?} result, which Temper does not handle"
        ));
    }
    match result.swap_remove("structuredContent") {
        Some(Value::Null) | None => {}
        Some(structured) => return Ok(structured),
    }
    let text = text(&result);
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text })))
}

/// The text content, joined.
fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect()
}

/// `s` cut to at most `max` bytes (on a character boundary), marked with `...`.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Checks `value` against `validator`; the first five violations, each with
/// its place, joined.
pub(super) fn check(validator: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    // The fast path: collecting errors walks the value in a slower mode
    // (measured in the hub bench: `collect_errors` showed in the profile).
    if validator.is_valid(value) {
        return Ok(());
    }
    let violations: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "(root)".into() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations.join("; "))
    }
}
