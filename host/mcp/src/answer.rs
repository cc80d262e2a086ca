//! A gateway call's answer: a `tools/call` of an upstream's hub tool is
//! answered with the upstream's result as it came (every content block,
//! with its annotations and `_meta`; `structuredContent` only when the
//! upstream sent it; an `isError` result with the upstream's own content),
//! written once from the upstream's own text when that is exact
//! (`temper_hub::ToolResult::Raw`). Temper's own checks (the input against
//! the input schema before anything is sent, `structuredContent` against
//! the output schema after) and its failures (timeout, the upstream gone)
//! are Temper's own error results. What the upstream sends during the call
//! (progress, log messages, elicitation and sampling requests) is relayed
//! to the caller as `hub_relay.rs` says.
//!
//! A built-in's output (no upstream result) is answered as
//! [`Handler::handle`] and [`Handler::handle_modern`] answer a tool's: as
//! text, and as `structuredContent` when it is an object.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};
use temper_forge::CallOutput;
use temper_hub::{Relay, ToolResult};

use super::hub_relay::{self, Answers, Call, Driven, Owner, Sink};
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
    /// A `tools/call` result passed on from an upstream.
    PassedOn(PassedOn),
}

impl From<Value> for Answer {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

impl Answer {
    /// The result as a JSON value (copied out of the upstream's text when
    /// it is passed on).
    pub fn into_value(self) -> Value {
        match self {
            Self::Value(v) => v,
            Self::PassedOn(p) => Value::Object(p.result.into_map()),
        }
    }

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

/// A `tools/call` result (`CallToolResult`) passed on from an upstream as
/// it came (its own text, when that is exact).
#[derive(Debug)]
pub struct PassedOn {
    result: ToolResult,
}

impl Serialize for PassedOn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.result.serialize(s)
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
        let mut progress = Progress::of(params, notes);
        progress.log_level = hub_relay::log_level(Some(params), modern);
        let answers = Answers::of(Some(params), modern);
        if let Some(state) = params.get("requestState") {
            let Some(state) = state.as_str().filter(|_| modern) else {
                return Err(RpcError::invalid_params(
                    "tools/call: requestState must be a string, on a 2026-07-28 request",
                ));
            };
            let responses = params.get("inputResponses").and_then(Value::as_object);
            let (call, notes) = hub_relay::parked()
                .resume(state, &self.owner(name), responses)
                .map_err(|e| RpcError::invalid_params(format!("tools/call: {e}")))?;
            return Ok(Some(
                self.hub_drive(name, call, notes, &progress, answers, modern)
                    .await,
            ));
        }
        Ok(Some(
            self.hub_answer(name, &arguments, &progress, answers, modern)
                .await,
        ))
    }

    /// Who may resume a call of `name` this caller parks.
    fn owner(&self, name: &str) -> Owner {
        Owner {
            agent: self.ctx.agent_id.clone(),
            session: self.ctx.session_id.clone(),
            tool: name.to_string(),
        }
    }

    /// Calls the hub tool `name` and answers: the upstream's result passed
    /// on (see the module docs), a built-in's output as a tool result,
    /// Temper's own failures as error results. With `modern`, the result
    /// carries the 2026-07-28 members (`resultType`, `_meta`). What the
    /// upstream sends during the call is relayed when the caller can
    /// receive it (`hub_relay.rs`).
    pub(super) async fn hub_answer(
        &self,
        name: &str,
        arguments: &Value,
        progress: &Progress<'_>,
        answers: Answers,
        modern: bool,
    ) -> Answer {
        // Always with a relay: what the caller cannot take is dropped (a
        // log message) or refused saying why (an upstream's request).
        progress.report(0, 1, format!("calling {name}"));
        let (relay, notes) = Relay::new(progress.token.is_some());
        let (forge, ctx) = (self.forge.clone(), self.ctx.clone());
        let (tool, input) = (name.to_string(), arguments.clone());
        let call = Call::Here(Box::pin(async move {
            forge
                .call_native_output(&tool, &input, Some(relay), &ctx)
                .await
        }));
        self.hub_drive(name, call, notes, progress, answers, modern)
            .await
    }

    /// Drives a hub call to its end or to an `input_required` result,
    /// relaying its notes; answers as [`Self::hub_answer`].
    async fn hub_drive(
        &self,
        name: &str,
        call: Call,
        notes: tokio::sync::mpsc::Receiver<temper_hub::CallNote>,
        progress: &Progress<'_>,
        answers: Answers,
        modern: bool,
    ) -> Answer {
        let sink = Sink {
            notes: progress.notes,
            token: progress.token.as_ref(),
            carries: progress.notes.carries_notes(),
            log_level: progress.log_level,
        };
        let (driven, relayed) =
            hub_relay::drive(call, notes, &sink, answers, &self.owner(name)).await;
        match driven {
            Driven::InputRequired(result) => Answer::Value(result),
            Driven::Done(outcome) => {
                if relayed == 0 {
                    progress.report(1, 1, format!("{name}: done"));
                }
                self.hub_result(name, outcome, modern)
            }
        }
    }

    /// The answer for a hub call's `outcome`.
    fn hub_result(
        &self,
        name: &str,
        outcome: Option<Result<CallOutput, String>>,
        modern: bool,
    ) -> Answer {
        let answer = match outcome {
            Some(Ok(CallOutput {
                result: Some(result),
                ..
            })) => {
                if !modern {
                    return Answer::PassedOn(PassedOn { result });
                }
                match completed_raw(&result) {
                    Some(result) => return Answer::PassedOn(PassedOn { result }),
                    None => Value::Object(result.into_map()),
                }
            }
            Some(Ok(out)) => tools::tool_result_owned(out.value, false),
            Some(Err(e)) => tools::tool_error("invoke", &e),
            None => tools::tool_error("invoke", &self.not_found(name)),
        };
        let mut answer = answer;
        if modern {
            results::complete(&mut answer);
        }
        Answer::Value(answer)
    }
}

/// An upstream's raw result with the 2026-07-28 members (`resultType`,
/// `_meta`) appended to its own text, when it has neither (so its bytes
/// still go out as they came); `None` otherwise (the result is then
/// written anew with them, as [`results::complete`] does).
fn completed_raw(result: &ToolResult) -> Option<ToolResult> {
    #[derive(serde::Deserialize)]
    struct Members {
        #[serde(rename = "_meta", default)]
        meta: Option<serde::de::IgnoredAny>,
        #[serde(rename = "resultType", default)]
        result_type: Option<serde::de::IgnoredAny>,
    }
    let ToolResult::Raw(raw) = result else {
        return None;
    };
    let members: Members = serde_json::from_str(raw.get()).ok()?;
    if members.meta.is_some() || members.result_type.is_some() {
        return None;
    }
    let mut extra = Value::Object(Map::new());
    results::complete(&mut extra);
    let extra = extra.to_string();
    let extra = extra.strip_prefix('{')?.strip_suffix('}')?;
    let text = raw.get().trim_end().strip_suffix('}')?;
    let sep = if text.trim_end().ends_with('{') {
        ""
    } else {
        ","
    };
    let joined = format!("{text}{sep}{extra}}}");
    serde_json::value::RawValue::from_string(joined)
        .ok()
        .map(ToolResult::Raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    #[test]
    fn an_upstreams_result_is_passed_on_as_it_came() {
        // Its spacing, its blocks, their annotations and `_meta` kept.
        let text = r#"{ "content" : [{"type":"image","data":"AA==","mimeType":"image/png","annotations":{"priority":0.5}},{"type":"text","text":"a","_meta":{"k":1}}], "isError": false }"#;
        let result = ToolResult::Raw(RawValue::from_string(text.into()).unwrap());
        let out =
            serde_json::to_string(&Answer::PassedOn(PassedOn { result }).into_response(&json!(7)))
                .unwrap();
        assert_eq!(
            out,
            format!(r#"{{"jsonrpc":"2.0","id":7,"result":{text}}}"#)
        );
    }

    #[test]
    fn a_modern_caller_gets_the_upstreams_bytes_with_the_members_added() {
        let text = r#"{ "content" : [] }"#;
        let result = ToolResult::Raw(RawValue::from_string(text.into()).unwrap());
        let Some(ToolResult::Raw(done)) = completed_raw(&result) else {
            panic!("not raw")
        };
        assert!(
            done.get()
                .starts_with(r#"{ "content" : [] ,"resultType":"complete""#),
            "{}",
            done.get()
        );
        let mut expected = json!({"content": []});
        results::complete(&mut expected);
        assert_eq!(serde_json::from_str::<Value>(done.get()).unwrap(), expected);
        // An empty result, and one with its own `_meta` (written anew).
        let empty = ToolResult::Raw(RawValue::from_string("{}".into()).unwrap());
        let Some(ToolResult::Raw(done)) = completed_raw(&empty) else {
            panic!("not raw")
        };
        assert!(done.get().starts_with(r#"{"resultType""#), "{}", done.get());
        let own = ToolResult::Raw(RawValue::from_string(r#"{"_meta":{"a":1}}"#.into()).unwrap());
        assert!(completed_raw(&own).is_none());
    }

    #[test]
    fn relayed_progress_keeps_the_numbers_and_message_under_the_callers_token() {
        let note = json!({"progressToken": "temper-hub-3", "progress": 2, "total": 5, "message": "step 2", "extra": 1});
        assert_eq!(
            hub_relay::relayed_progress(&note, &json!("tok")),
            Some(json!({"progressToken": "tok", "progress": 2, "total": 5, "message": "step 2"}))
        );
        assert_eq!(
            hub_relay::relayed_progress(&json!({"progress": "x"}), &json!(1)),
            None
        );
        assert_eq!(
            hub_relay::relayed_progress(
                &json!({"progress": 1, "total": "x", "message": 3}),
                &json!(1)
            ),
            Some(json!({"progressToken": 1, "progress": 1}))
        );
    }
}
