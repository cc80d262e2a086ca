//! Compose mode: pipelines of registered tools.
//!
//! - The mapping layer (the `temper-compose-mapping` crate, re-exported
//!   here): parsing a compose request's steps, the `inputMapping`
//!   expression language, building each step's input, and cycle checks
//!   between compose tools; plain data in, plain data out, shared with the
//!   wasm compose core.
//! - [`core`]: the compose core component, which runs that layer inside
//!   the sandbox.
//! - [`adapter`]: the generated adapter component of one compose tool (its
//!   steps as imports, composed with the core).
//! - [`run`]: loading an adapter and calling it with its steps linked
//!   ([`ComposeRuntime::load_compose`](run::ComposeRuntime::load_compose),
//!   [`ComposeRuntime::call_compose`](run::ComposeRuntime::call_compose)).
//! - [`bundle`]: one self-contained component of a compose tool and its
//!   component steps, and loading one
//!   ([`bundle::load_bundle`]).
//!
//! The rest of this page is the mapping layer's reference.
//!
//! A compose request chains tools the agent already has:
//!
//! ```json
//! "implementation": {
//!   "mode": "compose",
//!   "steps": [
//!     { "name": "search", "tool": "web_search", "inputMapping": { "q": "$input.topic" } },
//!     { "name": "summarize", "tool": "generate_text",
//!       "inputMapping": { "prompt": "Summarize these search results about \"$input.topic\":\n$prev.output" } }
//!   ]
//! }
//! ```
//!
//! Steps run in order. Each step's `inputMapping` (a JSON object) is turned
//! into that step's tool input; the last step's output is the compose
//! tool's output.
//!
//! # Steps ([`spec`])
//!
//! A step is an object with exactly `name`, `tool` and `inputMapping`.
//! Names are unique, made of ASCII letters, digits, `_` and `-`, start with
//! a letter and have at most [`spec::MAX_STEP_NAME_LEN`] bytes; `tool` is
//! a non-empty string; `inputMapping` is an object (`{}` for no input).
//! There are 1 to [`spec::MAX_STEPS`] steps.
//!
//! # References ([`expr`])
//!
//! | Expression          | Value                                                |
//! |---------------------|------------------------------------------------------|
//! | `$input`            | the compose tool's input                             |
//! | `$input.a.b`        | field `b` of field `a` of the input                  |
//! | `$prev`             | the output of the step just before (not in step 0)   |
//! | `$prev.x`           | field `x` of that output                             |
//! | `$steps.NAME`       | the output of the earlier step `NAME`                |
//! | `$steps.NAME.x.y`   | a field inside it                                    |
//! | `$input.items.0`    | element 0 of the array `items`                       |
//! | `${input.a b}`      | braced form: same meaning, explicit end              |
//! | `$$`                | a literal `$`                                        |
//!
//! **Path segments.** After the root, each `.segment` reads a field of an
//! object (by exact name) or an element of an array. On an array the
//! segment must be a decimal index without sign or leading zeros (`0`,
//! `1`, `12`); on an object a digit segment is just a field name, so
//! `$input.obj.0` reads the field `"0"`. Reading through a string, number,
//! boolean or null is an error naming the type found. Field names
//! containing `.` cannot be addressed.
//!
//! **Where a reference ends.** A bare reference is `$` followed by the
//! longest run of `[A-Za-z0-9_.-]`, minus trailing dots (which stay text):
//! in `"about \"$input.topic\":"` the reference is `$input.topic`, and in
//! `"See $input.a. Done"` it is `$input.a`. Because `-` belongs to the run,
//! `"$input.a-$input.b"` reads the field `a-`; write `"${input.a}-${input.b}"`.
//! A braced reference `${...}` ends at the first `}`; inside it a segment is
//! any text without `.` or `}` (so `${input.first name}` reads the field
//! `"first name"`), with no surrounding spaces allowed.
//!
//! **Escape.** `$$` is a literal `$` anywhere in a string: `"costs $$5"`
//! gives `"costs $5"`, `"$$input"` gives `"$input"`. Any other `$` must
//! start a reference: `"costs $5"` and `"$foo"` are refused at forge time.
//!
//! # Values ([`mapping`])
//!
//! - A string that is exactly one reference (`"$input.n"`, `"${prev}"`)
//!   becomes the referenced value with its JSON type: `{"n": "$input.n"}`
//!   with input `{"n": 3}` gives `{"n": 3}`.
//! - A string with references inside text is interpolated: strings are
//!   inserted raw, numbers/booleans/null as JSON text (`42`, `1.5`, `true`,
//!   `null`), objects and arrays as compact JSON (`{"a":1}`, `[1,"x"]`):
//!   `"n=$input.n"` gives `"n=3"`.
//! - A string without references is a literal (after `$$` → `$`); numbers,
//!   booleans and null are literals.
//! - Objects and arrays are mapped recursively (up to
//!   [`mapping::MAX_MAPPING_DEPTH`] levels); object keys are never
//!   evaluated.
//!
//! At forge time [`mapping::compile`] parses every string once and refuses
//! unknown roots, `$prev` in the first step, and `$steps.NAME` naming the
//! step itself, a later step or no step. At run time [`mapping::evaluate`]
//! refuses a missing field or an out-of-range index (never a silent
//! `null`). Every error names the step and the key path:
//!
//! ```text
//! steps[1] ("summarize") inputMapping.prompt: `$steps.format.output`: step "format" runs later (steps[2]); $steps.NAME must name an earlier step
//! steps[0] ("search") inputMapping.q: `$input.topic`: $input has no field "topic" (fields: "subject")
//! ```
//!
//! # Dependencies ([`deps`])
//!
//! [`ComposeSpec::tools`] lists the distinct tools a pipeline calls; a
//! compose tool may use another compose tool as a step, and
//! [`deps::check_cycles`] refuses any loop, naming it
//! (`compose cycle: a -> b -> a`).
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use temper_compose::{compile_steps, Context};
//!
//! let steps = json!([
//!     {"name": "search", "tool": "web_search", "inputMapping": {"q": "$input.topic"}},
//!     {"name": "summarize", "tool": "generate_text",
//!      "inputMapping": {"prompt": "About $input.topic ($$0.00):\n$prev.output", "n": "$steps.search.count"}},
//! ]);
//! let spec = compile_steps(steps.as_array().unwrap()).unwrap();
//! let input = json!({"topic": "wasm"});
//! let outputs = vec![("search".to_string(), json!({"output": "r1; r2", "count": 2}))];
//! let ctx = Context { input: &input, steps: &outputs };
//! assert_eq!(
//!     spec.steps[1].mapping.evaluate(&ctx).unwrap(),
//!     json!({"prompt": "About wasm ($0.00):\nr1; r2", "n": 2})
//! );
//! ```

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub use temper_compose_mapping::{deps, expr, mapping, spec};

pub mod core;

pub mod adapter;
pub mod bundle;
pub mod run;

use serde_json::Value;
use thiserror::Error;

use temper_runtime::request::{ForgeRequest, Implementation};

pub use deps::{CycleError, check_cycles};
pub use expr::{ExprError, Reference, Root};
pub use mapping::{
    CompiledMapping, CompiledSpec, CompiledStep, Context, MappingError, MappingErrorKind, compile,
    evaluate,
};
pub use run::ComposeRuntime;
pub use spec::{ComposeSpec, SpecError, Step, StepRef};

/// Why a compose request's steps are refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ComposeError {
    /// The steps' shape (names, tools, mapping objects).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// An expression inside a mapping.
    #[error(transparent)]
    Mapping(#[from] MappingError),
}

/// Parses and compiles `implementation.steps` of a compose request.
pub fn compile_steps(steps: &[Value]) -> Result<CompiledSpec, ComposeError> {
    let spec = ComposeSpec::parse(steps)?;
    Ok(compile(&spec)?)
}

/// Compiles a forge request's compose steps; `Ok(None)` for a request that
/// is not in compose mode.
pub fn compile_request(request: &ForgeRequest) -> Result<Option<CompiledSpec>, ComposeError> {
    match &request.implementation {
        Implementation::Compose { steps } => compile_steps(steps).map(Some),
        Implementation::Sandbox { .. } => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> ForgeRequest {
        let path = format!(
            "{}/../../tests/fixtures/compose/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        ForgeRequest::from_json(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn outputs(entries: &[(&str, Value)]) -> Vec<(String, Value)> {
        entries
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn research_and_summarize_parses_compiles_and_maps() {
        let request = fixture("research_and_summarize");
        assert_eq!(request.name, "research_and_summarize");
        let spec = compile_request(&request).unwrap().expect("compose mode");
        assert_eq!(spec.tools(), vec!["web_search", "generate_text"]);
        let names: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["search", "summarize"]);

        let input = &request.test_cases[0].input;
        let search_in = spec.steps[0]
            .mapping
            .evaluate(&Context { input, steps: &[] })
            .unwrap();
        assert_eq!(search_in, json!({"q": "agent orchestration frameworks"}));

        // Stand-in output of web_search.
        let done = outputs(&[(
            "search",
            json!({"output": "1. LangGraph\n2. CrewAI", "sources": ["https://a.test", "https://b.test"]}),
        )]);
        let summarize_in = spec.steps[1]
            .mapping
            .evaluate(&Context {
                input,
                steps: &done,
            })
            .unwrap();
        assert_eq!(
            summarize_in,
            json!({
                "prompt": "Summarize these search results about \"agent orchestration frameworks\":\n1. LangGraph\n2. CrewAI"
            })
        );

        // A web_search stand-in without `output`: a clear error, not "null".
        let done = outputs(&[("search", json!({"results": []}))]);
        let e = spec.steps[1]
            .mapping
            .evaluate(&Context {
                input,
                steps: &done,
            })
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "steps[1] (\"summarize\") inputMapping.prompt: `$prev.output`: $prev has no field \"output\" (fields: \"results\")"
        );
    }

    #[test]
    fn fetch_analyze_report_parses_compiles_and_maps() {
        let request = fixture("fetch_analyze_report");
        let spec = compile_request(&request).unwrap().expect("compose mode");
        assert_eq!(spec.tools(), vec!["http_request", "generate_text"]);
        let input = &request.test_cases[0].input;

        let fetch_in = spec.steps[0]
            .mapping
            .evaluate(&Context { input, steps: &[] })
            .unwrap();
        assert_eq!(
            fetch_in,
            json!({"url": "https://api.example.com/metrics", "method": "GET"})
        );

        let mut done = outputs(&[(
            "fetch",
            json!({"status": 200, "body": {"visits": [3, 5, 8]}}),
        )]);
        let analyze_in = spec.steps[1]
            .mapping
            .evaluate(&Context {
                input,
                steps: &done,
            })
            .unwrap();
        assert_eq!(
            analyze_in,
            json!({"prompt": "Analyze trends in this data for last 7 days:\n{\"visits\":[3,5,8]}"})
        );

        done.push((
            "analyze".to_owned(),
            json!({"output": "Visits are rising."}),
        ));
        let format_in = spec.steps[2]
            .mapping
            .evaluate(&Context {
                input,
                steps: &done,
            })
            .unwrap();
        assert_eq!(
            format_in,
            json!({"prompt": "Format this analysis as a markdown report:\nVisits are rising."})
        );

        // `timeRange` is optional in the input schema; without it the
        // mapping says so instead of writing "null".
        let input = json!({"endpoint": "https://api.example.com/metrics"});
        let e = spec.steps[1]
            .mapping
            .evaluate(&Context {
                input: &input,
                steps: &done[..1],
            })
            .unwrap_err();
        assert!(
            e.to_string().starts_with("steps[1] (\"analyze\") inputMapping.prompt: `$input.timeRange`: $input has no field \"timeRange\""),
            "{e}"
        );
    }

    #[test]
    fn sandbox_requests_are_not_compose() {
        let request = ForgeRequest::from_json(
            r#"{"name": "x", "description": "d", "implementation": {"mode": "sandbox", "code": ""}}"#,
        )
        .unwrap();
        assert_eq!(compile_request(&request).unwrap(), None);
    }

    #[test]
    fn errors_from_either_stage() {
        let e = compile_steps(&[]).unwrap_err();
        assert!(matches!(e, ComposeError::Spec(SpecError::NoSteps)));
        let e = compile_steps(
            json!([{"name": "a", "tool": "t", "inputMapping": {"q": "$prev"}}])
                .as_array()
                .unwrap(),
        )
        .unwrap_err();
        assert!(matches!(e, ComposeError::Mapping(_)), "{e}");
    }
}
