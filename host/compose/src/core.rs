//! The compose core: the part of every compose tool that runs its pipeline
//! (evaluates each step's `inputMapping` with [`super::mapping`], calls the
//! step, keeps its output), built once from `components/compose-core/` by
//! `build.rs` for `wasm32-unknown-unknown`.
//!
//! Its world is `temper:compose/core` ([`COMPOSE_WIT`]): it imports only
//! `temper:compose/steps` (and the type-only `temper:tool/types`), never
//! WASI or a capability, and exports `temper:tool/run@0.1.0`.

use std::sync::OnceLock;

use wit_component::ComponentEncoder;

/// The compose core as a core wasm module, as built from source (with its
/// `temper:compose/core` world embedded by `wit-bindgen`).
pub static CORE_WASM: &[u8] = include_bytes!(env!("TEMPER_COMPOSE_CORE_WASM"));

/// The `temper:compose@0.1.0` package: the `steps` interface and the
/// `core` world.
pub const COMPOSE_WIT: &str = include_str!("../../../wit/compose/compose.wit");

/// blake3 of [`CORE_WASM`], hex: which compose core built an artifact.
/// Hashed once per process.
pub fn core_id() -> String {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| blake3::hash(CORE_WASM).to_hex().to_string())
        .clone()
}

/// The compose core as a component (`wit-component`, validated), encoded
/// once per process.
pub fn core_component() -> Result<&'static [u8], String> {
    static COMPONENT: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    match COMPONENT.get_or_init(encode) {
        Ok(bytes) => Ok(bytes),
        Err(e) => Err(e.clone()),
    }
}

/// Componentizes [`CORE_WASM`].
fn encode() -> Result<Vec<u8>, String> {
    ComponentEncoder::default()
        .module(CORE_WASM)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| format!("componentizing the compose core: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_runtime::bindings::ToolError;
    use wasmtime::component::{Component, Linker};
    use wasmtime::{Config, Engine, Store};

    const STEPS: &str = "temper:compose/steps@0.1.0";
    const TYPES: &str = "temper:tool/types@0.1.0";
    const RUN: &str = "temper:tool/run@0.1.0";

    fn engine() -> Engine {
        let mut config = Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).unwrap()
    }

    #[test]
    fn imports_only_steps_and_types_and_exports_run() {
        let engine = engine();
        let component = Component::new(&engine, core_component().unwrap()).unwrap();
        let ty = component.component_type();
        let mut imports: Vec<&str> = ty.imports(&engine).map(|(name, _)| name).collect();
        imports.sort_unstable();
        assert_eq!(imports, [STEPS, TYPES]);
        assert!(!imports.iter().any(|name| name.starts_with("wasi:")));
        let exports: Vec<&str> = ty.exports(&engine).map(|(name, _)| name).collect();
        assert_eq!(exports, [RUN]);
        // The module itself imports nothing but the steps functions.
        for import in wasmparser::Parser::new(0)
            .parse_all(CORE_WASM)
            .filter_map(|p| match p.unwrap() {
                wasmparser::Payload::ImportSection(s) => Some(s),
                _ => None,
            })
            .flat_map(|s| s.into_imports())
        {
            let import = import.unwrap();
            assert_eq!(import.module, STEPS, "{}::{}", import.module, import.name);
        }
    }

    #[test]
    fn encoding_is_deterministic() {
        let once = encode().unwrap();
        assert_eq!(once, encode().unwrap());
        assert_eq!(once, core_component().unwrap());
        assert_eq!(core_id(), blake3::hash(CORE_WASM).to_hex().to_string());
        assert_eq!(core_id().len(), 64);
    }

    /// The host side of `temper:compose/steps` in these tests.
    struct Steps {
        /// What `spec` returns.
        spec: String,
        /// `call-step` calls seen, as (index, input).
        calls: Vec<(u32, String)>,
        /// What step 0 returns (a JSON text).
        first_output: String,
        /// A step that fails, and how.
        fail: Option<(u32, ToolError)>,
    }

    fn pipeline() -> String {
        serde_json::json!([
            {"name": "first", "tool": "echo",
             "inputMapping": {"x": "$input.x", "tag": "$$lit"}},
            {"name": "second", "tool": "wrap",
             "inputMapping": {"text": "got $prev.y for ${input.x} ($$5)", "n": "$steps.first.n"}},
        ])
        .to_string()
    }

    fn host_steps() -> Steps {
        Steps {
            spec: pipeline(),
            calls: Vec::new(),
            first_output: r#"{"y": "Y", "n": [1, {"b": 2, "a": 1}]}"#.into(),
            fail: None,
        }
    }

    /// Runs the core's `call` once against `data`; returns the result and
    /// the steps' state afterwards.
    fn run(data: Steps, input: &str) -> (Result<String, ToolError>, Steps) {
        let engine = engine();
        let component = Component::new(&engine, core_component().unwrap()).unwrap();
        let mut linker: Linker<Steps> = Linker::new(&engine);
        linker.instance(TYPES).unwrap();
        let mut steps = linker.instance(STEPS).unwrap();
        steps
            .func_wrap("spec", |store, (): ()| Ok((store.data().spec.clone(),)))
            .unwrap();
        steps
            .func_wrap("call-step", |mut store, (index, input): (u32, String)| {
                let data = store.data_mut();
                data.calls.push((index, input.clone()));
                if let Some((at, e)) = &data.fail
                    && *at == index
                {
                    return Ok((Err(e.clone()),));
                }
                let out = match index {
                    0 => data.first_output.clone(),
                    // Not re-serialized by the core: spacing kept.
                    _ => format!("{{ \"wrapped\" : {input} }}"),
                };
                Ok((Ok::<String, ToolError>(out),))
            })
            .unwrap();
        let mut store = Store::new(&engine, data);
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let run = instance.get_export_index(&mut store, None, RUN).unwrap();
        let call = instance
            .get_export_index(&mut store, Some(&run), "call")
            .unwrap();
        let call = instance
            .get_typed_func::<(&str,), (Result<String, ToolError>,)>(&mut store, &call)
            .unwrap();
        let (result,) = call.call(&mut store, (input,)).unwrap();
        (result, store.into_data())
    }

    #[test]
    fn runs_the_pipeline() {
        let (result, steps) = run(host_steps(), r#"{"x": "hello"}"#);
        assert_eq!(
            result.unwrap(),
            r#"{ "wrapped" : {"text":"got Y for hello ($5)","n":[1,{"b":2,"a":1}]} }"#
        );
        assert_eq!(
            steps.calls,
            [
                (0, r#"{"x":"hello","tag":"$lit"}"#.to_string()),
                (
                    1,
                    r#"{"text":"got Y for hello ($5)","n":[1,{"b":2,"a":1}]}"#.into()
                ),
            ]
        );
    }

    #[test]
    fn a_step_error_comes_back_unchanged() {
        let data = Steps {
            fail: Some((1, ToolError::Timeout(5))),
            ..host_steps()
        };
        let (result, steps) = run(data, r#"{"x": "hello"}"#);
        assert!(matches!(result, Err(ToolError::Timeout(5))), "{result:?}");
        assert_eq!(steps.calls.len(), 2);

        let data = Steps {
            fail: Some((0, ToolError::CapabilityDenied("fetch".into()))),
            ..host_steps()
        };
        let (result, steps) = run(data, r#"{"x": "hello"}"#);
        assert!(
            matches!(&result, Err(ToolError::CapabilityDenied(m)) if m == "fetch"),
            "{result:?}"
        );
        assert_eq!(steps.calls.len(), 1);
    }

    #[test]
    fn a_missing_field_is_bad_input_naming_step_and_key() {
        let (result, steps) = run(host_steps(), r#"{"z": 1}"#);
        let Err(ToolError::BadInput(message)) = result else {
            panic!("{result:?}");
        };
        assert_eq!(
            message,
            "steps[0] (\"first\") inputMapping.x: `$input.x`: $input has no field \"x\" (fields: \"z\")"
        );
        assert!(steps.calls.is_empty());

        let data = Steps {
            first_output: r#"{"n": 1}"#.into(),
            ..host_steps()
        };
        let (result, steps) = run(data, r#"{"x": "hello"}"#);
        let Err(ToolError::BadInput(message)) = result else {
            panic!("{result:?}");
        };
        assert!(
            message.starts_with(
                "steps[1] (\"second\") inputMapping.text: `$prev.y`: $prev has no field \"y\""
            ),
            "{message}"
        );
        assert_eq!(steps.calls.len(), 1);
    }

    #[test]
    fn bad_json_input_is_bad_input() {
        let (result, steps) = run(host_steps(), "{not json");
        assert!(matches!(result, Err(ToolError::BadInput(_))), "{result:?}");
        assert!(steps.calls.is_empty());
    }

    #[test]
    fn bad_step_output_and_bad_spec_are_internal() {
        let data = Steps {
            first_output: "not json".into(),
            ..host_steps()
        };
        let (result, _) = run(data, r#"{"x": "hello"}"#);
        let Err(ToolError::Internal(message)) = result else {
            panic!("{result:?}");
        };
        assert!(
            message.starts_with("steps[0] (\"first\"): output is not valid JSON"),
            "{message}"
        );

        for spec in [
            "{",
            "{}",
            "[]",
            r#"[{"name": "a", "tool": "t", "inputMapping": {"q": "$prev"}}]"#,
        ] {
            let data = Steps {
                spec: spec.into(),
                ..host_steps()
            };
            let (result, steps) = run(data, "{}");
            let Err(ToolError::Internal(message)) = result else {
                panic!("{spec}: {result:?}");
            };
            assert!(message.starts_with("compose spec: "), "{spec}: {message}");
            assert!(steps.calls.is_empty());
        }
    }
}
