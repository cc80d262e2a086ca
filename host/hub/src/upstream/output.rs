//! What an upstream's tool call returns, as Temper sees it: the upstream's
//! result as it came (a gateway passes it on), the value compose steps and
//! code mode use, the upstream's error text, and the schema checks.
//!
//! The value (documented in the hub chapter of the book):
//! - `structuredContent` when the upstream sent it (read strictly,
//!   `strict.rs`: what the output schema is checked against);
//! - else, when every content block is text: the texts (joined with a line
//!   break when there are several) parsed as JSON when they are JSON,
//!   else the text as a string;
//! - else (an image, audio, a resource or a resource link among the
//!   blocks, or no block at all): `{"content": [the blocks as they came]}`.

use serde::ser::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::strict;

/// An upstream's `CallToolResult` as a gateway passes it on.
#[derive(Debug, Clone)]
pub enum ToolResult {
    /// The upstream's own text, as it came: its `structuredContent`, when
    /// it has one, is exactly the value that was checked.
    Raw(Box<RawValue>),
    /// The upstream's result read as a value, its `structuredContent`
    /// replaced by the value that was checked (a number `serde_json` reads
    /// as an `f64`: the client gets the number that was checked, never
    /// other digits).
    Value(Map<String, Value>),
}

impl ToolResult {
    /// The result as a JSON object (copied out of the text when raw).
    pub fn to_map(&self) -> Map<String, Value> {
        match self {
            Self::Raw(raw) => serde_json::from_str(raw.get()).unwrap_or_default(),
            Self::Value(map) => map.clone(),
        }
    }

    /// The result as a JSON object, moved when it is one already.
    pub fn into_map(self) -> Map<String, Value> {
        match self {
            Self::Raw(_) => self.to_map(),
            Self::Value(map) => map,
        }
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Raw(raw) => raw.serialize(s),
            Self::Value(map) => map.serialize(s),
        }
    }
}

/// A tool call's outcome: its value, the upstream's result to pass on, and
/// whether the upstream reported an error (`isError`).
#[derive(Debug, Clone)]
pub struct CallOutput {
    /// The output: what the output schema was checked against, and what
    /// compose steps and code mode get (see the module docs). `Null` when
    /// `error` is set.
    pub value: Value,
    /// The upstream's result, for a gateway to pass on; `None` for a
    /// built-in's output (a gateway writes the value).
    pub result: Option<ToolResult>,
    /// `Some(the upstream's text)` when the result is an `isError` one:
    /// a gateway passes `result` on as it is, a compose step fails with
    /// this text.
    pub error: Option<String>,
}

impl CallOutput {
    /// An output without a result of its own to pass on (a built-in's).
    pub fn value(value: Value) -> Self {
        Self {
            value,
            result: None,
            error: None,
        }
    }
}

/// The members of a `tools/call` result that say what it is; every other
/// member (the content) is skipped. Duplicate members are refused (by
/// serde), so what is read here is what any reader reads.
#[derive(serde::Deserialize)]
struct Lean<'a> {
    #[serde(rename = "structuredContent", default, borrow)]
    structured: Option<&'a RawValue>,
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(rename = "resultType", default, borrow)]
    result_type: Option<std::borrow::Cow<'a, str>>,
}

/// The content blocks of a result.
#[derive(serde::Deserialize)]
struct Blocks {
    #[serde(default)]
    content: Vec<Value>,
}

/// Why a result is not taken.
#[derive(Debug)]
pub(super) enum Bad {
    /// Not a `CallToolResult` Temper reads: what is wrong with it.
    Result(String),
    /// Its `structuredContent` is refused by the strict reading.
    Structured(String),
}

/// Reads an upstream's `tools/call` result (its text, as it came): the
/// output value, the result to pass on, the error text of an `isError`
/// result. Refuses a result that is not an object, has a member twice, is
/// of a kind Temper does not handle (`resultType` other than `complete`),
/// or whose `structuredContent` the strict reading refuses.
pub(super) fn read_result(raw: Box<RawValue>) -> Result<CallOutput, Bad> {
    let lean: Lean<'_> = serde_json::from_str(raw.get()).map_err(|e| {
        Bad::Result(format!(
            "sent a tools/call result Temper does not read: {e}"
        ))
    })?;
    // A later revision's other kinds of result (input required, a task)
    // are not a tool's output.
    if let Some(kind) = lean.result_type.as_deref()
        && kind != "complete"
    {
        return Err(Bad::Result(format!(
            "answered with a {kind:?} result, which Temper does not handle"
        )));
    }
    if lean.is_error == Some(true) {
        let text = text_of(&blocks(&raw)?);
        let text = if text.is_empty() {
            "the tool reported an error".to_string()
        } else {
            shorten(&text, 2000)
        };
        return Ok(CallOutput {
            value: Value::Null,
            result: Some(ToolResult::Raw(raw)),
            error: Some(text),
        });
    }
    match lean.structured.filter(|s| s.get() != "null") {
        Some(structured) => {
            let checked = strict::read(structured).map_err(|e| {
                Bad::Structured(format!(
                    "structuredContent is not JSON Temper passes on: {e}"
                ))
            })?;
            if checked.exact {
                return Ok(CallOutput {
                    value: checked.value,
                    result: Some(ToolResult::Raw(raw)),
                    error: None,
                });
            }
            // Written anew around the value that was checked.
            let mut map: Map<String, Value> = serde_json::from_str(raw.get())
                .map_err(|e| Bad::Result(format!("sent a tools/call result: {e}")))?;
            map.insert("structuredContent".into(), checked.value.clone());
            Ok(CallOutput {
                value: checked.value,
                result: Some(ToolResult::Value(map)),
                error: None,
            })
        }
        None => {
            let value = value_of_content(blocks(&raw)?.content);
            Ok(CallOutput {
                value,
                result: Some(ToolResult::Raw(raw)),
                error: None,
            })
        }
    }
}

/// The content blocks of `raw`.
fn blocks(raw: &RawValue) -> Result<Blocks, Bad> {
    serde_json::from_str(raw.get()).map_err(|e| {
        Bad::Result(format!(
            "sent a tools/call result whose content is not a list of blocks: {e}"
        ))
    })
}

/// The value of a result without `structuredContent` (see the module
/// docs).
pub fn value_of_content(content: Vec<Value>) -> Value {
    let all_text = !content.is_empty()
        && content
            .iter()
            .all(|c| c.get("type").and_then(Value::as_str) == Some("text"));
    if !all_text {
        let mut map = Map::new();
        map.insert("content".into(), Value::Array(content));
        return Value::Object(map);
    }
    let text = text_of(&Blocks { content });
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// The text blocks' texts, joined with line breaks.
fn text_of(blocks: &Blocks) -> String {
    let texts: Vec<&str> = blocks
        .content
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    texts.join("\n")
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
