//! Running a tool's test cases and comparing outputs.
//!
//! Comparison semantics: an expected object matches when every expected key
//! is present and matches (extra keys in the output are allowed); arrays
//! match element by element with equal length; numbers compare by value
//! (`212` equals `212.0`); other scalars compare exactly.
//!
//! A case with `expectError` passes when the call fails instead: `true`
//! takes any error, a string must be part of the error message (an input
//! that does not match `inputSchema` is such an error, as every caller
//! would meet it).
//!
//! A case with a `cassette` runs with its `fetch` calls served from it (no
//! network); a case without one whose fetch cannot reach its host fails
//! with [`OFFLINE_HINT`] appended, saying how to give one.

use serde::Serialize;
use serde_json::Value;

use crate::schema::ToolSchemas;
use temper_runtime::capabilities::cassette::{self, Cassette};
use temper_runtime::request::TestCase;
use temper_runtime::runtime::{Runtime, Tool};

/// Why an output did not match: the JSON path and what differed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("at {path}: expected {expected}, got {actual}")]
pub struct Mismatch {
    /// Where, as a JSON-pointer-like path (`$`, `$.rows[1].age`).
    pub path: String,
    /// The expected value there (JSON text).
    pub expected: String,
    /// The actual value there (JSON text, or `nothing`).
    pub actual: String,
}

/// Checks `actual` against `expected` with the semantics above.
pub fn output_matches(expected: &Value, actual: &Value) -> Result<(), Mismatch> {
    matches_at("$", expected, actual)
}

fn matches_at(path: &str, expected: &Value, actual: &Value) -> Result<(), Mismatch> {
    let mismatch = || Mismatch {
        path: path.to_string(),
        expected: expected.to_string(),
        actual: actual.to_string(),
    };
    match (expected, actual) {
        (Value::Object(exp), Value::Object(act)) => {
            for (key, exp_value) in exp {
                let child = format!("{path}.{key}");
                match act.get(key) {
                    Some(act_value) => matches_at(&child, exp_value, act_value)?,
                    None => {
                        return Err(Mismatch {
                            path: child,
                            expected: exp_value.to_string(),
                            actual: "nothing".into(),
                        });
                    }
                }
            }
            Ok(())
        }
        (Value::Array(exp), Value::Array(act)) => {
            if exp.len() != act.len() {
                return Err(mismatch());
            }
            for (i, (e, a)) in exp.iter().zip(act).enumerate() {
                matches_at(&format!("{path}[{i}]"), e, a)?;
            }
            Ok(())
        }
        (Value::Number(e), Value::Number(a)) => {
            let equal = match (e.as_i64(), a.as_i64()) {
                (Some(x), Some(y)) => x == y,
                _ => e.as_f64() == a.as_f64(),
            };
            if equal { Ok(()) } else { Err(mismatch()) }
        }
        (e, a) if e == a => Ok(()),
        _ => Err(mismatch()),
    }
}

/// The outcome of one test case.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    /// The case's index in the request (0-based).
    pub index: usize,
    /// Whether it passed: the input matched `inputSchema`, the call
    /// succeeded, the output matched `outputSchema` and `expectedOutput`;
    /// or, for a case with `expectError`, the call failed (an input
    /// `inputSchema` refuses counts) with that error.
    pub passed: bool,
    /// The input the tool was called with.
    pub input: Value,
    /// The output, when the call succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Why it failed, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Runs every case against `tool`, each call isolated and under the limits
/// and grants of `tool`. With `schemas`, each input is checked against
/// `inputSchema` first (a mismatch fails the case without calling the tool)
/// and each output against `outputSchema`; then the output is compared with
/// `expectedOutput` when given ([`output_matches`]).
pub async fn run_cases(
    runtime: &Runtime,
    tool: &Tool,
    schemas: Option<&ToolSchemas>,
    cases: &[TestCase],
) -> Vec<CaseResult> {
    run_cases_with(schemas, cases, |input| async move {
        runtime
            .call(tool, &input)
            .await
            .map(|out| out.output)
            .map_err(|failure| failure.to_string())
    })
    .await
}

/// [`run_cases`] with any way of calling the tool: `call` takes the input
/// as JSON text and returns the output as JSON text, or why it failed
/// (compose tools run this way).
pub async fn run_cases_with<F, Fut>(
    schemas: Option<&ToolSchemas>,
    cases: &[TestCase],
    call: F,
) -> Vec<CaseResult>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let mut results = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        // The case's recorded answers are in scope for every tool the run
        // calls (`test_calls`: no side effect of testing on an upstream).
        let calls = crate::test_calls::TestCalls {
            index,
            recorded: case.recorded_calls.clone(),
        };
        let run = crate::test_calls::scope(calls, run_case(&call, schemas, case));
        let (output, failure) = match &case.cassette {
            None => {
                let (output, failure) = run.await;
                (output, failure.map(with_offline_hint))
            }
            Some(given) => {
                match Cassette::from_json(&format!("testCases[{index}].cassette"), given) {
                    Ok(tape) => cassette::scoped(tape, run).await,
                    Err(e) => (None, Some(e.to_string())),
                }
            }
        };
        results.push(CaseResult {
            index,
            passed: failure.is_none(),
            input: case.input.clone(),
            output,
            failure,
        });
    }
    results
}

async fn run_case<F, Fut>(
    call: &F,
    schemas: Option<&ToolSchemas>,
    case: &TestCase,
) -> (Option<Value>, Option<String>)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let (output, error) = call_case(call, schemas, case).await;
    match (&case.expect_error, error) {
        (None, error) => (output, error),
        (Some(expected), Some(error)) => (output, expected_error_differs(expected, &error)),
        (Some(_), None) => {
            let got = output.as_ref().map_or_else(String::new, Value::to_string);
            (
                output,
                Some(format!(
                    "expectError: the call was expected to fail but returned {got}"
                )),
            )
        }
    }
}

/// Calls the tool with the case's input (checked against `inputSchema`
/// first, as every caller's is) and checks the output: JSON, matching
/// `outputSchema`, then `expectedOutput`. Returns the output when there is
/// one and why the case failed.
async fn call_case<F, Fut>(
    call: &F,
    schemas: Option<&ToolSchemas>,
    case: &TestCase,
) -> (Option<Value>, Option<String>)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    if let Some(schemas) = schemas
        && let Err(mismatch) = schemas.input.check(&case.input)
    {
        return (None, Some(format!("input {mismatch}")));
    }
    let out = match call(case.input.to_string()).await {
        Err(failure) => return (None, Some(failure)),
        Ok(out) => out,
    };
    let output = match serde_json::from_str::<Value>(&out) {
        Err(e) => return (None, Some(format!("output is not JSON: {e}"))),
        Ok(v) => v,
    };
    if let Some(schemas) = schemas
        && let Err(mismatch) = schemas.output.check(&output)
    {
        return (Some(output), Some(format!("output {mismatch}")));
    }
    let failure = case
        .expected_output
        .as_ref()
        .and_then(|exp| output_matches(exp, &output).err())
        .map(|m| format!("output differs from expectedOutput {m}"));
    (Some(output), failure)
}

/// What a case failed by an unreachable network is told: a fetch tool's
/// tests run live, so on a host with no network they fail; a cassette in
/// the case serves them instead.
pub const OFFLINE_HINT: &str = " (the offline path: this host could not reach the network, and a \
    fetch tool's tests run live; give the test case the responses to serve instead, as \
    \"cassette\": [{\"request\": {\"method\": \"GET\", \"url\": \"…\"}, \"response\": \
    {\"status\": 200, \"headers\": [[\"content-type\", \"application/json\"]], \"body\": \"…\"}}])";

/// `failure` with [`OFFLINE_HINT`] when a fetch could not reach its host
/// (a connection or name failure, or a timeout; not a policy refusal).
fn with_offline_hint(failure: String) -> String {
    let unreachable = failure.contains("fetch: request to ")
        && (failure.contains(" failed") || failure.contains(" timed out"));
    if unreachable {
        failure + OFFLINE_HINT
    } else {
        failure
    }
}

/// Whether the error a case met is the one its `expectError` asks for:
/// `true` takes any error, a string must be part of the message. `None`
/// when it is; otherwise why not.
pub fn expected_error_differs(expected: &Value, error: &str) -> Option<String> {
    match expected {
        Value::Bool(true) => None,
        Value::String(part) if error.contains(part.as_str()) => None,
        Value::String(part) => Some(format!(
            "expectError: the error does not contain {part:?}: {error}"
        )),
        other => Some(format!(
            "expectError must be true or a part of the error message, got {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        assert!(output_matches(&json!({"result": 212}), &json!({"result": 212.0})).is_ok());
        assert!(output_matches(&json!(0), &json!(-0.0)).is_ok());
        assert!(output_matches(&json!(273.15), &json!(273.15)).is_ok());
        let err = output_matches(&json!({"result": 212}), &json!({"result": 212.5})).unwrap_err();
        assert_eq!(err.path, "$.result");
    }

    #[test]
    fn extra_keys_allowed_missing_keys_not() {
        let expected = json!({"status": 200, "ok": true});
        assert!(
            output_matches(
                &expected,
                &json!({"status": 200, "ok": true, "redirected": false})
            )
            .is_ok()
        );
        let err = output_matches(&expected, &json!({"status": 200})).unwrap_err();
        assert_eq!(err.path, "$.ok");
        assert_eq!(err.actual, "nothing");
    }

    #[test]
    fn arrays_match_exactly_and_recursively() {
        let expected = json!({"rows": [{"name": "Alice"}, {"name": "Bob"}]});
        assert!(
            output_matches(
                &expected,
                &json!({"rows": [{"name": "Alice", "age": "30"}, {"name": "Bob"}]})
            )
            .is_ok()
        );
        let err = output_matches(&expected, &json!({"rows": [{"name": "Alice"}]})).unwrap_err();
        assert_eq!(err.path, "$.rows");
        let err = output_matches(
            &expected,
            &json!({"rows": [{"name": "Alice"}, {"name": "Eve"}]}),
        )
        .unwrap_err();
        assert_eq!(err.path, "$.rows[1].name");
    }

    #[test]
    fn scalars_and_types_compare_exactly() {
        assert!(output_matches(&json!("30"), &json!(30)).is_err());
        assert!(output_matches(&json!(null), &json!(null)).is_ok());
        assert!(output_matches(&json!(true), &json!(1)).is_err());
        assert!(output_matches(&json!({}), &json!([])).is_err());
    }

    /// A tool that fails on a negative `n` and doubles it otherwise.
    async fn double(input: String) -> Result<String, String> {
        let v: Value = serde_json::from_str(&input).unwrap();
        let n = v["n"].as_i64().unwrap();
        if n < 0 {
            Err("execute threw: Error: n must be >= 0".into())
        } else {
            Ok(json!({ "n": n * 2 }).to_string())
        }
    }

    fn case(input: Value, expect_error: Option<Value>) -> TestCase {
        TestCase {
            input,
            expect_error,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn expect_error_passes_on_the_error_it_names() {
        let cases = [
            case(json!({"n": -1}), Some(json!(true))),
            case(json!({"n": -1}), Some(json!("must be >= 0"))),
            case(json!({"n": -1}), Some(json!("overflow"))),
            case(json!({"n": 2}), Some(json!(true))),
        ];
        let results = run_cases_with(None, &cases, double).await;
        assert!(results[0].passed, "{:?}", results[0]);
        assert!(results[1].passed, "{:?}", results[1]);
        assert!(!results[2].passed);
        assert_eq!(
            results[2].failure.as_deref(),
            Some(
                "expectError: the error does not contain \"overflow\": execute threw: Error: n must be >= 0"
            )
        );
        assert!(!results[3].passed);
        assert_eq!(
            results[3].failure.as_deref(),
            Some("expectError: the call was expected to fail but returned {\"n\":4}")
        );
    }

    #[tokio::test]
    async fn an_input_the_schema_refuses_is_an_expected_error() {
        let schemas = ToolSchemas::compile(
            &json!({"type": "object", "required": ["n"]}),
            &json!({"type": "object"}),
        )
        .unwrap();
        let cases = [case(json!({}), Some(json!("does not match inputSchema")))];
        let results = run_cases_with(Some(&schemas), &cases, double).await;
        assert!(results[0].passed, "{:?}", results[0]);
    }

    #[test]
    fn an_unreachable_network_says_how_to_pass_a_cassette() {
        let failed = with_offline_hint(
            "execute threw: TypeError: fetch: request to https://httpstat.us/200 failed: error sending request: dns error".into(),
        );
        assert!(failed.ends_with(OFFLINE_HINT), "{failed}");
        assert!(failed.contains("the offline path"), "{failed}");
        let denied = with_offline_hint("fetch: not allowed: 127.0.0.1".into());
        assert_eq!(denied, "fetch: not allowed: 127.0.0.1");
    }

    #[tokio::test]
    async fn a_bad_cassette_fails_its_case_naming_it() {
        let cases = [TestCase {
            input: json!({"n": 1}),
            cassette: Some(
                json!([{"request": {"method": "GET", "url": "ftp://x"}, "response": {"status": 200}}]),
            ),
            ..Default::default()
        }];
        let results = run_cases_with(None, &cases, double).await;
        assert_eq!(
            results[0].failure.as_deref(),
            Some(
                "fetch cassette testCases[0].cassette: invalid: interaction 0: URL \"ftp://x\" is not http or https"
            )
        );
    }
}
