//! Forge-time side effects: what a forge's TEST stage may call.
//!
//! A forge's test cases run the tool for real, and with it every tool it
//! calls (compose steps, code-mode calls, nested at any depth). For a hub
//! tool that may act on its upstream (one not marked `readOnlyHint: true`),
//! that is a side effect of merely forging. While a case runs, its
//! [`TestCalls`] is in scope (a task-local, set around the case's call by
//! [`scope`]); every hub-tool call passes [`serve`] first:
//!
//! - a call the case's `recordedCalls` answers (same tool, equal input) is
//!   answered from there, with no call to the upstream, whatever the
//!   tool's hints;
//! - otherwise a tool that may be called live (read-only, a built-in, or
//!   an upstream with `allow_live_tests = true`) is called as usual;
//! - any other call is refused, naming the tool, its upstream and the
//!   input, and saying how to supply the answer.
//!
//! Outside a forge's tests (an agent's call, a gateway call) nothing
//! changes.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use temper_runtime::request::RecordedCall;

/// Most characters of a call's input quoted in a refusal.
const MAX_QUOTED_INPUT: usize = 200;

tokio::task_local! {
    static CASE: Arc<TestCalls>;
}

/// The recorded answers of the test case running.
#[derive(Debug)]
pub struct TestCalls {
    /// The case's index in the request.
    pub index: usize,
    /// Its `recordedCalls`.
    pub recorded: Vec<RecordedCall>,
}

/// Runs `fut` (one test case's call) with `calls` in scope.
pub async fn scope<F: Future>(calls: TestCalls, fut: F) -> F::Output {
    CASE.scope(Arc::new(calls), fut).await
}

/// What a call to the hub tool `tool` (from `source`, e.g. `upstream
/// "nice"`) with `input` gets while a forge tests: `None` to call it as
/// usual (no forge test is running, or it may be called live and no
/// answer is recorded); `Some` answer from the case's `recordedCalls`, or
/// the refusal.
pub fn serve(tool: &str, source: &str, live: bool, input: &Value) -> Option<Result<Value, String>> {
    let case = CASE.try_with(Arc::clone).ok()?;
    if let Some(recorded) = case
        .recorded
        .iter()
        .find(|r| r.tool == tool && &r.input == input)
    {
        return Some(match (&recorded.output, &recorded.error) {
            (_, Some(error)) => Err(format!("{tool}: {error} (recorded answer)")),
            (Some(output), None) => Ok(output.clone()),
            (None, None) => Ok(Value::Null),
        });
    }
    if live {
        return None;
    }
    Some(Err(refusal(case.index, tool, source, input)))
}

/// The refusal of a live call to `tool` in case `index`'s run.
fn refusal(index: usize, tool: &str, source: &str, input: &Value) -> String {
    let mut quoted = input.to_string();
    if quoted.len() > MAX_QUOTED_INPUT {
        let mut end = MAX_QUOTED_INPUT;
        while !quoted.is_char_boundary(end) {
            end -= 1;
        }
        quoted.truncate(end);
        quoted.push('…');
    }
    let upstream = source
        .strip_prefix("upstream ")
        .map(|n| n.trim_matches('"'))
        .unwrap_or(source);
    format!(
        "not called while forging: {tool:?} ({source}) is not marked readOnlyHint: true, so \
         calling it from a test would act on the upstream. Record its answer to this input in \
         testCases[{index}].recordedCalls: [{{\"tool\": {tool:?}, \"input\": {quoted}, \
         \"output\": …}}] (or \"error\": \"…\"), or ask the operator to set \
         allow_live_tests = true in [upstream.{upstream}] of the tools file"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls(recorded: Vec<RecordedCall>) -> TestCalls {
        TestCalls { index: 1, recorded }
    }

    #[tokio::test]
    async fn outside_a_forge_test_every_call_goes_through() {
        assert!(serve("nice.admin", "upstream \"nice\"", false, &json!({})).is_none());
    }

    #[tokio::test]
    async fn a_tool_that_may_act_is_refused_unless_its_answer_is_recorded() {
        let recorded = RecordedCall {
            tool: "nice.admin".into(),
            input: json!({"id": 1}),
            output: Some(json!({"done": true})),
            error: None,
        };
        let (hit, miss, live) = scope(calls(vec![recorded]), async {
            (
                serve("nice.admin", "upstream \"nice\"", false, &json!({"id": 1})),
                serve("nice.admin", "upstream \"nice\"", false, &json!({"id": 2})),
                serve("nice.read", "upstream \"nice\"", true, &json!({"id": 2})),
            )
        })
        .await;
        assert_eq!(hit, Some(Ok(json!({"done": true}))));
        assert_eq!(
            miss,
            Some(Err(
                "not called while forging: \"nice.admin\" (upstream \"nice\") is not marked readOnlyHint: true, so calling it from a test would act on the upstream. Record its answer to this input in testCases[1].recordedCalls: [{\"tool\": \"nice.admin\", \"input\": {\"id\":2}, \"output\": …}] (or \"error\": \"…\"), or ask the operator to set allow_live_tests = true in [upstream.nice] of the tools file".into()
            ))
        );
        assert_eq!(live, None, "a read-only tool is called live");
    }

    #[tokio::test]
    async fn a_recorded_error_is_the_calls_error_and_long_inputs_are_cut() {
        let recorded = RecordedCall {
            tool: "nice.admin".into(),
            input: json!(null),
            output: None,
            error: Some("no such user".into()),
        };
        let (error, long) = scope(calls(vec![recorded]), async {
            (
                serve("nice.admin", "upstream \"nice\"", false, &json!(null)),
                serve(
                    "nice.admin",
                    "upstream \"nice\"",
                    false,
                    &json!("x".repeat(5000)),
                ),
            )
        })
        .await;
        assert_eq!(
            error,
            Some(Err("nice.admin: no such user (recorded answer)".into()))
        );
        let long = long.unwrap().unwrap_err();
        assert!(long.len() < 900, "{}", long.len());
    }
}
