//! The generated adapter component of a compose tool.
//!
//! A compose tool is itself a component. For each one the host generates:
//!
//! 1. a **step dispatcher**: a small core module written with
//!    `wasm-encoder` that imports one `call` function per step (the
//!    component import is named after the step, see [`import_name`]),
//!    holds the pipeline (the request's `steps` array as JSON) as a data
//!    segment, and exports `temper:compose/steps` (`spec`, `call-step`),
//!    turned into a component by `wit-component` against a generated world;
//! 2. composed with `wac-graph` with the **compose core** (the mapping
//!    logic, [`super::core`], built once for wasm) into one component that
//!    exports `temper:tool/run@0.1.0` and imports only the steps (plus the
//!    type-only `temper:tool/types` instance).
//!
//! The adapter imports no capability and nothing from WASI: composing never
//! widens what a tool may do ([`check_adapter_imports`] proves it on the
//! bytes). The host links each step import to the step (see
//! [`super::run`]). Everything here is a pure function of its input: the
//! same steps give the same bytes.

use std::fmt;

use serde_json::Value;
use thiserror::Error;
use wac_graph::{CompositionGraph, EncodeOptions, types::Package};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, ImportSection, Instruction, MemorySection,
    MemoryType, Module, TypeSection, ValType,
};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

use crate::core;

/// The interface the dispatcher exports and the core imports.
pub const STEPS_INTERFACE: &str = "temper:compose/steps@0.1.0";
/// The type-only interface shared by every step import.
pub const TYPES_INTERFACE: &str = "temper:tool/types@0.1.0";
/// The export every tool provides.
pub const RUN_INTERFACE: &str = "temper:tool/run@0.1.0";
/// The function each step import provides.
pub const STEP_FUNC: &str = "call";

/// The WIT of the `tool` world's package, which the step imports use.
const TOOL_WIT: &str = include_str!("../../../wit/tool.wit");

// The dispatcher's memory layout (bytes).
/// Where `spec` returns its (pointer, length) pair.
const SPEC_RET: i32 = 8;
/// The return area `call-step` passes to a step import and returns.
const CALL_RET: i32 = 16;
/// Size reserved for that return area (a `result<string, tool-error>` is
/// far smaller).
const CALL_RET_SIZE: i32 = 240;
/// Where the pipeline's JSON starts.
const SPEC_PTR: i32 = CALL_RET + CALL_RET_SIZE;
const PAGE: u64 = 65536;

/// Why an adapter could not be generated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AdapterError {
    /// Two steps map to the same component import name.
    #[error(
        "steps[{index}] ({name:?}): its import name `{import}` is already used by steps[{first}] ({first_name:?}); rename one of them"
    )]
    ImportNameClash {
        /// The later step's index.
        index: usize,
        /// Its name.
        name: String,
        /// The shared import name.
        import: String,
        /// The first step with that import name.
        first: usize,
        /// Its name.
        first_name: String,
    },
    /// A step name has no import name (not a valid step name).
    #[error("steps[{index}] ({name:?}): no component import name can be made from this step name")]
    BadStepName {
        /// The step's index.
        index: usize,
        /// Its name.
        name: String,
    },
    /// A generation stage failed (a bug in Temper, not in the request).
    #[error("compose adapter: {stage}: {message}")]
    Internal {
        /// Which stage: `wit`, `dispatcher`, `core`, `compose`, `check`.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },
}

fn internal<E: fmt::Display>(stage: &'static str) -> impl Fn(E) -> AdapterError {
    move |e| AdapterError::Internal {
        stage,
        message: format!("{e:#}"),
    }
}

/// The component import name of a step: the step name in kebab case, as
/// the component model requires (`web_search` → `web-search`,
/// `fetchData` → `fetchdata`, `step_2` → `step2`: a word may not start with
/// a digit, so digits join the word before). `None` when nothing is left.
pub fn import_name(step: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for part in step.split(['_', '-']).filter(|p| !p.is_empty()) {
        if !part.is_ascii() {
            return None;
        }
        let part = part.to_ascii_lowercase();
        let starts_with_digit = part.as_bytes()[0].is_ascii_digit();
        match words.last_mut() {
            Some(last) if starts_with_digit => last.push_str(&part),
            None if starts_with_digit => return None,
            _ => words.push(part),
        }
    }
    if words.is_empty()
        || words.iter().any(|w| {
            !w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
    {
        return None;
    }
    Some(words.join("-"))
}

/// The import names of `steps` (by step name), in order; refuses names
/// that clash after the kebab-case mapping.
pub fn import_names(steps: &[&str]) -> Result<Vec<String>, AdapterError> {
    let mut out: Vec<String> = Vec::with_capacity(steps.len());
    for (index, name) in steps.iter().enumerate() {
        let import = import_name(name).ok_or_else(|| AdapterError::BadStepName {
            index,
            name: name.to_string(),
        })?;
        if let Some(first) = out.iter().position(|i| *i == import) {
            return Err(AdapterError::ImportNameClash {
                index,
                name: name.to_string(),
                import,
                first,
                first_name: steps[first].to_string(),
            });
        }
        out.push(import);
    }
    Ok(out)
}

/// Generates the adapter component for a pipeline: `steps` is the compose
/// request's `implementation.steps` array (validated at forge time), kept
/// as given. Same steps, same bytes.
pub fn generate(steps: &[Value]) -> Result<Vec<u8>, AdapterError> {
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s.get("name").and_then(Value::as_str).unwrap_or(""))
        .collect();
    let imports = import_names(&names)?;
    let spec = serde_json::to_string(steps).map_err(internal("spec"))?;
    let dispatcher = dispatcher_component(&imports, spec.as_bytes())?;
    let core = core::core_component().map_err(internal("core"))?;
    compose(core, &dispatcher)
}

/// The generated world of a dispatcher: one import per step, the `steps`
/// export.
fn dispatcher_wit(imports: &[String]) -> String {
    let mut wit = String::from("package temper:compose-adapter;\n\nworld dispatcher {\n");
    for import in imports {
        wit.push_str(&format!(
            "  import %{import}: interface {{\n    use temper:tool/types@0.1.0.{{tool-error}};\n    call: func(input: string) -> result<string, tool-error>;\n  }}\n"
        ));
    }
    wit.push_str("  export temper:compose/steps@0.1.0;\n}\n");
    wit
}

/// The dispatcher as a component: its core module, with the generated
/// world embedded, encoded by `wit-component`.
fn dispatcher_component(imports: &[String], spec: &[u8]) -> Result<Vec<u8>, AdapterError> {
    let mut resolve = Resolve::default();
    resolve
        .push_str("tool.wit", TOOL_WIT)
        .map_err(internal("wit"))?;
    resolve
        .push_str("compose.wit", core::COMPOSE_WIT)
        .map_err(internal("wit"))?;
    let package = resolve
        .push_str("dispatcher.wit", &dispatcher_wit(imports))
        .map_err(internal("wit"))?;
    let world = resolve
        .select_world(&[package], Some("dispatcher"))
        .map_err(internal("wit"))?;
    let mut module = dispatcher_module(imports, spec)?;
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .map_err(internal("wit"))?;
    ComponentEncoder::default()
        .module(&module)
        .map_err(internal("dispatcher"))?
        .validate(true)
        .encode()
        .map_err(internal("dispatcher"))
}

/// The dispatcher's core module. Memory: the `spec` return pair at
/// [`SPEC_RET`], the `call-step` return area at [`CALL_RET`], the pipeline
/// JSON at [`SPEC_PTR`], then a bump heap for the strings the canonical ABI
/// copies in (a fresh instance per call, so nothing is ever freed).
fn dispatcher_module(imports: &[String], spec: &[u8]) -> Result<Vec<u8>, AdapterError> {
    let spec_len = i32::try_from(spec.len()).map_err(internal("dispatcher"))?;
    let heap_start = (SPEC_PTR as u64 + spec.len() as u64).div_ceil(8) * 8;
    let min_pages = heap_start.div_ceil(PAGE) + 1;

    let mut types = TypeSection::new();
    // 0: a step's lowered `call` (input ptr, input len, return area).
    types
        .ty()
        .function([ValType::I32, ValType::I32, ValType::I32], []);
    // 1: cabi_realloc.
    types.ty().function(
        [ValType::I32, ValType::I32, ValType::I32, ValType::I32],
        [ValType::I32],
    );
    // 2: `call-step` lifted (index, input ptr, input len) -> return area.
    types
        .ty()
        .function([ValType::I32, ValType::I32, ValType::I32], [ValType::I32]);
    // 3: `spec` lifted () -> return area.
    types.ty().function([], [ValType::I32]);

    let mut import_section = ImportSection::new();
    for import in imports {
        import_section.import(import, STEP_FUNC, wasm_encoder::EntityType::Function(0));
    }
    let n = imports.len() as u32;
    let (realloc_fn, call_step_fn, spec_fn) = (n, n + 1, n + 2);

    let mut functions = FunctionSection::new();
    functions.function(1).function(2).function(3);

    let (memories, globals) = memory_and_heap(min_pages, heap_start);

    let mut exports = ExportSection::new();
    exports
        .export("memory", ExportKind::Memory, 0)
        .export("cabi_realloc", ExportKind::Func, realloc_fn)
        .export(
            &format!("{STEPS_INTERFACE}#call-step"),
            ExportKind::Func,
            call_step_fn,
        )
        .export(
            &format!("{STEPS_INTERFACE}#spec"),
            ExportKind::Func,
            spec_fn,
        );

    let mut code = CodeSection::new();
    code.function(&realloc_body());
    code.function(&call_step_body(n));
    let mut spec_body = Function::new([]);
    spec_body
        .instruction(&Instruction::I32Const(SPEC_RET))
        .instruction(&Instruction::End);
    code.function(&spec_body);

    let mut data = DataSection::new();
    let mut pair = Vec::with_capacity(8);
    pair.extend_from_slice(&SPEC_PTR.to_le_bytes());
    pair.extend_from_slice(&spec_len.to_le_bytes());
    data.active(0, &ConstExpr::i32_const(SPEC_RET), pair);
    data.active(0, &ConstExpr::i32_const(SPEC_PTR), spec.iter().copied());

    let mut module = Module::new();
    module
        .section(&types)
        .section(&import_section)
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code)
        .section(&data);
    Ok(module.finish())
}

/// A generated module's memory (growable from `min_pages`) and the bump
/// pointer global of [`realloc_body`], starting at `heap_start`.
pub(crate) fn memory_and_heap(min_pages: u64, heap_start: u64) -> (MemorySection, GlobalSection) {
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: min_pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(heap_start as i32),
    );
    (memories, globals)
}

/// `cabi_realloc(old_ptr, old_size, align, new_size) -> ptr`: a bump
/// allocator that grows memory as needed (the store's memory cap still
/// applies) and copies the old contents on a resize.
pub(crate) fn realloc_body() -> Function {
    use Instruction as I;
    // Locals: 0 old_ptr, 1 old_size, 2 align, 3 new_size, 4 ptr, 5 end (i64).
    let mut f = Function::new([(1, ValType::I32), (1, ValType::I64)]);
    for ins in [
        // ptr = (bump + align - 1) & -align
        I::GlobalGet(0),
        I::LocalGet(2),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        I::I32Const(0),
        I::LocalGet(2),
        I::I32Sub,
        I::I32And,
        I::LocalSet(4),
        // end = ptr + new_size (as i64: no wrap-around)
        I::LocalGet(4),
        I::I64ExtendI32U,
        I::LocalGet(3),
        I::I64ExtendI32U,
        I::I64Add,
        I::LocalTee(5),
        // more than 4 GiB: trap
        I::I64Const(1 << 32),
        I::I64GtU,
        I::If(BlockType::Empty),
        I::Unreachable,
        I::End,
        // grow while end > memory size in bytes
        I::LocalGet(5),
        I::MemorySize(0),
        I::I64ExtendI32U,
        I::I64Const(16),
        I::I64Shl,
        I::I64GtU,
        I::If(BlockType::Empty),
        // pages = (end - size_bytes + 65535) >> 16
        I::LocalGet(5),
        I::MemorySize(0),
        I::I64ExtendI32U,
        I::I64Const(16),
        I::I64Shl,
        I::I64Sub,
        I::I64Const(65535),
        I::I64Add,
        I::I64Const(16),
        I::I64ShrU,
        I::I32WrapI64,
        I::MemoryGrow(0),
        I::I32Const(-1),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::Unreachable,
        I::End,
        I::End,
        // a resize copies min(old_size, new_size) bytes
        I::LocalGet(0),
        I::If(BlockType::Empty),
        I::LocalGet(4),
        I::LocalGet(0),
        I::LocalGet(1),
        I::LocalGet(3),
        I::LocalGet(1),
        I::LocalGet(3),
        I::I32LtU,
        I::Select,
        I::MemoryCopy {
            src_mem: 0,
            dst_mem: 0,
        },
        I::End,
        // bump = end
        I::LocalGet(5),
        I::I32WrapI64,
        I::GlobalSet(0),
        I::LocalGet(4),
        I::End,
    ] {
        f.instruction(&ins);
    }
    f
}

/// `call-step(index, ptr, len) -> ret`: a `br_table` over the step
/// imports; each passes the input through and returns the shared return
/// area. An index past the last step traps (the core never makes one).
fn call_step_body(steps: u32) -> Function {
    use Instruction as I;
    let mut f = Function::new([]);
    // Outermost: the default (out of range); innermost: step 0.
    for _ in 0..=steps {
        f.instruction(&I::Block(BlockType::Empty));
    }
    f.instruction(&I::LocalGet(0));
    let targets: Vec<u32> = (0..steps).collect();
    f.instruction(&I::BrTable(targets.into(), steps));
    for step in 0..steps {
        f.instruction(&I::End);
        for ins in [
            I::LocalGet(1),
            I::LocalGet(2),
            I::I32Const(CALL_RET),
            I::Call(step),
            I::I32Const(CALL_RET),
            I::Return,
        ] {
            f.instruction(&ins);
        }
    }
    f.instruction(&I::End);
    f.instruction(&I::Unreachable);
    f.instruction(&I::End);
    f
}

/// Composes the core with a dispatcher: the dispatcher's `steps` export
/// satisfies the core's import; the step imports and the types interface
/// stay imports of the result; `run` is exported.
fn compose(core: &[u8], dispatcher: &[u8]) -> Result<Vec<u8>, AdapterError> {
    let mut graph = CompositionGraph::new();
    let core_pkg = Package::from_bytes(
        "temper:compose-core",
        None,
        core.to_vec(),
        graph.types_mut(),
    )
    .map_err(compose_err)?;
    let core_pkg = graph.register_package(core_pkg).map_err(compose_err)?;
    let disp_pkg = Package::from_bytes(
        "temper:compose-dispatcher",
        None,
        dispatcher.to_vec(),
        graph.types_mut(),
    )
    .map_err(compose_err)?;
    let disp_pkg = graph.register_package(disp_pkg).map_err(compose_err)?;
    let dispatcher = graph.instantiate(disp_pkg);
    let core = graph.instantiate(core_pkg);
    let steps = graph
        .alias_instance_export(dispatcher, STEPS_INTERFACE)
        .map_err(compose_err)?;
    graph
        .set_instantiation_argument(core, STEPS_INTERFACE, steps)
        .map_err(compose_err)?;
    let run = graph
        .alias_instance_export(core, RUN_INTERFACE)
        .map_err(compose_err)?;
    graph.export(run, RUN_INTERFACE).map_err(compose_err)?;
    graph
        .encode(EncodeOptions {
            define_components: true,
            validate: true,
            processor: None,
        })
        .map_err(compose_err)
}

fn compose_err<E: fmt::Display>(e: E) -> AdapterError {
    AdapterError::Internal {
        stage: "compose",
        message: e.to_string(),
    }
}

/// What an adapter component imports, checked on its bytes: exactly the
/// type-only `temper:tool/types` instance and one instance per step named
/// `expected` (in any order), each exporting only `call`. Anything else
/// (WASI, `fetch`, `crypto`, files) is an error naming it.
pub fn check_adapter_imports(bytes: &[u8], expected: &[String]) -> Result<(), AdapterError> {
    let names = component_imports(bytes).map_err(internal("check"))?;
    let mut seen = Vec::new();
    for (name, exports) in names {
        if name == TYPES_INTERFACE {
            continue;
        }
        if !expected.contains(&name) {
            return Err(AdapterError::Internal {
                stage: "check",
                message: format!("the adapter imports `{name}`, which is not a step"),
            });
        }
        if exports != [STEP_FUNC] {
            return Err(AdapterError::Internal {
                stage: "check",
                message: format!("step import `{name}` exports {exports:?}, not just `call`"),
            });
        }
        seen.push(name);
    }
    if let Some(missing) = expected.iter().find(|e| !seen.contains(e)) {
        return Err(AdapterError::Internal {
            stage: "check",
            message: format!("the adapter does not import step `{missing}`"),
        });
    }
    Ok(())
}

/// The top-level imports of a component, with the functions each imported
/// instance exports (types are skipped).
pub fn component_imports(bytes: &[u8]) -> Result<Vec<(String, Vec<String>)>, String> {
    let decoded = wit_component::decode(bytes).map_err(|e| format!("{e:#}"))?;
    let wit_component::DecodedWasm::Component(resolve, world) = &decoded else {
        return Err("not a component".into());
    };
    let world = &resolve.worlds[*world];
    let mut out = Vec::new();
    for (key, item) in &world.imports {
        let name = resolve.name_world_key(key);
        let funcs = match item {
            wit_parser::WorldItem::Interface { id, .. } => {
                resolve.interfaces[*id].functions.keys().cloned().collect()
            }
            wit_parser::WorldItem::Function(f) => vec![f.name.clone()],
            wit_parser::WorldItem::Type { .. } => continue,
        };
        out.push((name, funcs));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_names_are_kebab_case() {
        for (step, import) in [
            ("search", "search"),
            ("web_search", "web-search"),
            ("fetch-data", "fetch-data"),
            ("fetchData", "fetchdata"),
            ("step_2", "step2"),
            ("a__b", "a-b"),
            ("type", "type"),
            ("X1_y", "x1-y"),
        ] {
            assert_eq!(import_name(step).as_deref(), Some(import), "{step}");
        }
        assert_eq!(import_name("_"), None);
        assert_eq!(import_name("2x"), None);
        assert_eq!(import_name("naïve"), None);
        let err = import_names(&["step_2", "step2"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "steps[1] (\"step2\"): its import name `step2` is already used by steps[0] (\"step_2\"); rename one of them"
        );
    }

    #[test]
    fn a_keyword_step_name_still_generates() {
        let steps = serde_json::json!([
            {"name": "type", "tool": "t", "inputMapping": {}},
            {"name": "func", "tool": "t", "inputMapping": {"x": "$prev"}}
        ]);
        let bytes = generate(steps.as_array().unwrap()).unwrap();
        check_adapter_imports(&bytes, &["type".into(), "func".into()]).unwrap();
    }
}
