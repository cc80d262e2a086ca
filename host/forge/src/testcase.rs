//! Running a tool's test cases and comparing outputs.
//!
//! Comparison semantics: an expected object matches when every expected key
//! is present and matches (extra keys in the output are allowed); arrays
//! match element by element with equal length; numbers compare by value
//! (`212` equals `212.0`); other scalars compare exactly.

use serde::Serialize;
use serde_json::Value;

use crate::schema::ToolSchemas;
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
    /// succeeded, the output matched `outputSchema` and `expectedOutput`.
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
        let (output, failure) = run_case(&call, schemas, case).await;
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
}
