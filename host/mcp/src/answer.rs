//! A gateway call's answer written once: a `tools/call` of a hub tool whose
//! upstream sent its output as exact JSON text (`CallOutput::raw`, checked
//! against the tool's output schema like any output) is answered with that
//! text, not with a value written anew. It goes out as `structuredContent`
//! as it is, and once more, escaped, as the text content block.
//!
//! The text content is made from the checked `structuredContent`, not
//! passed on from the upstream's own `content` (the spec would let a
//! gateway do that): a client that reads only the text must read what was
//! checked, and the upstream's text was not.
//!
//! Every other request, and every hub call whose output has no such text
//! (a built-in's, an output with a float, a text-only result, an error),
//! is answered as [`Handler::handle`] and [`Handler::handle_modern`]
//! answer it.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::run_code::{DESCRIBE_TOOLS, RUN_CODE};
use super::{Handler, Notifier, Progress};
use crate::jsonrpc::{self, RpcError};
use crate::protocol::results;
use crate::tools::{self, FORGE_TOOL, PROMOTE_TOOL, STATS_TOOL};

/// A request's result: a JSON value, or a hub tool's output passed on.
#[derive(Debug)]
pub enum Answer {
    /// Any result.
    Value(Value),
    /// A `tools/call` result carrying a hub tool's output as its
    /// upstream's text.
    PassedOn(PassedOn),
}

impl From<Value> for Answer {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

impl Answer {
    /// The success response to request `id` carrying this result.
    pub fn into_response(self, id: &Value) -> Outgoing {
        match self {
            Self::Value(result) => Outgoing::Value(jsonrpc::response(id, result)),
            Self::PassedOn(result) => Outgoing::PassedOn {
                id: id.clone(),
                result,
            },
        }
    }
}

/// A message to send: a JSON value, or a response carrying a hub tool's
/// output passed on.
#[derive(Debug)]
pub enum Outgoing {
    /// Any message.
    Value(Value),
    /// A success response whose result is a [`PassedOn`].
    PassedOn {
        /// The request's id.
        id: Value,
        /// The result.
        result: PassedOn,
    },
}

impl From<Value> for Outgoing {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

impl Serialize for Outgoing {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Value(v) => v.serialize(s),
            // The members of `jsonrpc::response`, in its order.
            Self::PassedOn { id, result } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("jsonrpc", "2.0")?;
                m.serialize_entry("id", id)?;
                m.serialize_entry("result", result)?;
                m.end()
            }
        }
    }
}

/// A `tools/call` result (`CallToolResult`) whose output is JSON text
/// already checked: the members of `tools::tool_result_owned`, in its
/// order, then the modern revision's (`resultType`, `_meta`).
#[derive(Debug)]
pub struct PassedOn {
    output: Box<RawValue>,
    modern: Map<String, Value>,
}

impl Serialize for PassedOn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct Text<'a> {
            r#type: &'static str,
            text: &'a str,
        }
        let mut m = s.serialize_map(Some(3 + self.modern.len()))?;
        m.serialize_entry(
            "content",
            &[Text {
                r#type: "text",
                text: self.output.get(),
            }],
        )?;
        m.serialize_entry("isError", &false)?;
        m.serialize_entry("structuredContent", &self.output)?;
        for (k, v) in &self.modern {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Names `tools/call` takes to a meta-tool, never to a hub tool.
const META_TOOLS: [&str; 5] = [
    FORGE_TOOL,
    PROMOTE_TOOL,
    STATS_TOOL,
    RUN_CODE,
    DESCRIBE_TOOLS,
];

impl Handler {
    /// Answers one request, of the modern revision when `modern` (the
    /// transport checked its `_meta`), as [`Self::handle`] or
    /// [`Self::handle_modern`] does, except that a hub tool's output with
    /// an exact text of its upstream's is passed on ([`Answer::PassedOn`]).
    pub async fn answer(
        &self,
        method: &str,
        params: Option<&Value>,
        notes: &dyn Notifier,
        modern: bool,
    ) -> Result<Answer, RpcError> {
        if method == "tools/call"
            && let Some(answer) = self.hub_call(params, notes, modern).await?
        {
            return Ok(answer);
        }
        if modern {
            self.handle_modern(method, params, notes)
                .await
                .map(Answer::Value)
        } else {
            self.handle(method, params, notes).await.map(Answer::Value)
        }
    }

    /// A `tools/call` of a hub tool this caller may use and no forged tool
    /// it sees shadows, answered; `None` for any other call (and for a
    /// request `handle` must refuse), left to `handle`. The same checks and
    /// answers as `call_tool` and `invoke` give a hub tool.
    async fn hub_call(
        &self,
        params: Option<&Value>,
        notes: &dyn Notifier,
        modern: bool,
    ) -> Result<Option<Answer>, RpcError> {
        let Some(params) = params.filter(|p| p.is_object()) else {
            return Ok(None);
        };
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Ok(None);
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Cow::Owned(json!({})),
            Some(a @ Value::Object(_)) => Cow::Borrowed(a),
            Some(_) => return Ok(None),
        };
        if META_TOOLS.contains(&name) || !self.goes_to_hub(name).await? {
            return Ok(None);
        }
        let progress = Progress::of(params, notes);
        // The messages are formatted only for a caller that asked for
        // progress.
        if progress.token.is_some() {
            progress.report(0, 1, format!("calling {name}"));
        }
        let outcome = self.forge.call_native_output(name, &arguments).await;
        if progress.token.is_some() {
            progress.report(1, 1, format!("{name}: done"));
        }
        let answer = match outcome {
            Some(Ok(out)) => match out.raw {
                Some(output) if out.value.is_object() => {
                    let mut extra = Value::Object(Map::new());
                    if modern {
                        results::complete(&mut extra);
                    }
                    let Value::Object(modern) = extra else {
                        unreachable!("an object")
                    };
                    return Ok(Some(Answer::PassedOn(PassedOn { output, modern })));
                }
                _ => tools::tool_result_owned(out.value, false),
            },
            Some(Err(e)) => tools::tool_error("invoke", &e),
            None => tools::tool_error("invoke", &self.not_found(name)),
        };
        let mut answer = answer;
        if modern {
            results::complete(&mut answer);
        }
        Ok(Some(Answer::Value(answer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed(text: &str, modern: bool) -> PassedOn {
        let mut extra = Value::Object(Map::new());
        if modern {
            results::complete(&mut extra);
        }
        let Value::Object(modern) = extra else {
            unreachable!()
        };
        PassedOn {
            output: RawValue::from_string(text.into()).unwrap(),
            modern,
        }
    }

    #[test]
    fn a_passed_on_output_is_written_as_tool_result_owned_writes_it() {
        let text = r#"{"items":[{"id":1,"name":"a \"b\"\n"}],"n":-3}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let id = json!("r-1");
        let ours = Answer::PassedOn(passed(text, false)).into_response(&id);
        let theirs = jsonrpc::response(&id, tools::tool_result_owned(value.clone(), false));
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&theirs).unwrap()
        );
        // Modern: the same members `results::complete` adds, after them.
        let ours = Answer::PassedOn(passed(text, true)).into_response(&id);
        let mut result = tools::tool_result_owned(value, false);
        results::complete(&mut result);
        let theirs = jsonrpc::response(&id, result);
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            serde_json::to_string(&theirs).unwrap()
        );
    }

    #[test]
    fn the_upstreams_text_is_passed_on_as_it_is() {
        // Its spacing kept: the bytes that were checked, not a rewrite.
        let text = "{ \"a\" : [1, 2] }";
        let out =
            serde_json::to_string(&Answer::PassedOn(passed(text, false)).into_response(&json!(7)))
                .unwrap();
        let msg: Value = serde_json::from_str(&out).unwrap();
        assert!(
            out.contains(r#""structuredContent":{ "a" : [1, 2] }"#),
            "{out}"
        );
        assert_eq!(msg["result"]["content"][0]["text"], json!(text));
        assert_eq!(msg["result"]["structuredContent"], json!({"a": [1, 2]}));
    }
}
