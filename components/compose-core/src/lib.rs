//! Temper's compose core: the part of every compose tool that runs its
//! pipeline, built once for `wasm32-unknown-unknown` (so it imports no WASI)
//! against the `temper:compose/core` world (`wit/compose/compose.wit`).
//!
//! It imports only `temper:compose/steps`: the pipeline (`spec`) and one
//! way to call a step (`call-step`), both provided by the dispatcher the
//! host generates for each compose tool. The input mappings are evaluated
//! by `temper-compose-mapping`, the same code the host checks them with at
//! forge time.

wit_bindgen::generate!({
    world: "temper:compose/core",
    path: ["../../wit", "../../wit/compose"],
    // `steps` uses `temper:tool/types` from the other package.
    generate_all,
});

use exports::temper::tool::run::Guest;
use serde_json::Value;
use temper::compose::steps;
use temper::tool::types::ToolError;
use temper_compose_mapping::mapping::{CompiledSpec, Context, compile};
use temper_compose_mapping::spec::ComposeSpec;

/// The `run` export: the compose tool itself.
struct Core;

impl Guest for Core {
    /// Runs the pipeline on one JSON input; returns the last step's output
    /// text unchanged, or the first error (a step's own error unchanged).
    fn call(input: String) -> Result<String, ToolError> {
        let input: Value = serde_json::from_str(&input)
            .map_err(|e| ToolError::BadInput(format!("input is not valid JSON: {e}")))?;
        let spec = load_spec()?;
        let mut outputs: Vec<(String, Value)> = Vec::with_capacity(spec.steps.len());
        let mut last = String::new();
        for (index, step) in spec.steps.iter().enumerate() {
            let context = Context {
                input: &input,
                steps: &outputs,
            };
            let step_input = step
                .mapping
                .evaluate(&context)
                .map_err(|e| ToolError::BadInput(e.to_string()))?;
            let step_input = serde_json::to_string(&step_input).map_err(|e| {
                ToolError::Internal(format!(
                    "steps[{index}] ({:?}): serializing the input: {e}",
                    step.name
                ))
            })?;
            let output = steps::call_step(index as u32, &step_input)?;
            let value: Value = serde_json::from_str(&output).map_err(|e| {
                ToolError::Internal(format!(
                    "steps[{index}] ({:?}): output is not valid JSON: {e}",
                    step.name
                ))
            })?;
            outputs.push((step.name.clone(), value));
            last = output;
        }
        Ok(last)
    }
}

/// The pipeline from `steps::spec()`, parsed and compiled.
fn load_spec() -> Result<CompiledSpec, ToolError> {
    let fail = |msg: String| ToolError::Internal(format!("compose spec: {msg}"));
    let text = steps::spec();
    let value: Value = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let Value::Array(items) = value else {
        return Err(fail("not a JSON array".into()));
    };
    let spec = ComposeSpec::parse(&items).map_err(|e| fail(e.to_string()))?;
    compile(&spec).map_err(|e| fail(e.to_string()))
}

export!(Core);
