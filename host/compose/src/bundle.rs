//! Bundles: a compose tool statically composed with its component steps
//! into one self-contained component (with `wac-graph`), which a host runs
//! without the registry.
//!
//! Wiring, for a compose adapter whose step imports are named after its
//! steps:
//! - a **component step** is instantiated inside the bundle and its
//!   `temper:tool/run` export satisfies the step import; its own imports
//!   (WASI, `temper:tool/log`, `fetch`, `crypto`) become imports of the
//!   bundle, shared by every step;
//! - a **host-native step** stays an import of the bundle, named after the
//!   *tool* (`web_search` → `web-search`), so the same native tool used by
//!   several steps, or by nested compose tools, is one import;
//! - **capabilities never widen**: the host grants a bundle one set of
//!   capabilities (the union of its steps'), so a step that was not granted
//!   `fetch` or `crypto` gets a generated *deny* instance instead of the
//!   shared import: it answers `capability not granted: NAME`, exactly as
//!   the host does. `fs.readFile` cannot be denied this way (its WASI
//!   interfaces carry resources): a bundle whose steps differ on
//!   `fs.readFile` is refused ([`BundleError::MixedFileGrants`]).

use std::collections::BTreeSet;
use std::fmt;

use thiserror::Error;
use wac_graph::{CompositionGraph, EncodeOptions, NodeId, types::Package};
use wasm_encoder::{
    CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function, FunctionSection,
    Instruction, Module, TypeSection, ValType,
};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;
use wit_parser::abi::{AbiVariant, WasmType};

use super::adapter::{RUN_INTERFACE, import_name, memory_and_heap, realloc_body};

/// The capabilities a bundle can deny per step, and the interface each
/// one is.
pub const DENIABLE: &[(&str, &str)] = &[
    ("fetch", "temper:tool/fetch@0.1.0"),
    ("crypto", "temper:tool/crypto@0.1.0"),
];

const TOOL_WIT: &str = include_str!("../../../wit/tool.wit");

/// One step of the compose tool being bundled.
#[derive(Debug, Clone)]
pub enum BundleStep {
    /// A component (a tool-world artifact, or a nested bundle) with the
    /// capabilities it is granted.
    Component {
        /// The component's bytes.
        bytes: Vec<u8>,
        /// Its capabilities (`fetch`, `crypto`, `fs.readFile`).
        capabilities: Vec<String>,
    },
    /// A host-native tool: stays an import named after the tool.
    Native {
        /// The tool's name.
        tool: String,
    },
}

/// Why a bundle could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BundleError {
    /// Steps differ on `fs.readFile`, which cannot be denied per step.
    #[error(
        "bundle: steps {with:?} are granted fs.readFile and steps {without:?} are not; a bundle shares one set of host imports, so it cannot keep them apart: run this tool linked instead"
    )]
    MixedFileGrants {
        /// Steps with the grant.
        with: Vec<String>,
        /// Steps without it.
        without: Vec<String>,
    },
    /// The adapter and the steps do not fit (a bug, or a corrupt artifact).
    #[error("bundle: {stage}: {message}")]
    Compose {
        /// What was being done.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },
}

fn err<E: fmt::Display>(stage: &'static str) -> impl Fn(E) -> BundleError {
    move |e| BundleError::Compose {
        stage,
        message: e.to_string(),
    }
}

/// The union of the steps' capabilities: what the bundle's host must grant.
pub fn bundle_capabilities(steps: &[(String, BundleStep)]) -> Vec<String> {
    let mut all = BTreeSet::new();
    for (_, step) in steps {
        if let BundleStep::Component { capabilities, .. } = step {
            all.extend(capabilities.iter().cloned());
        }
    }
    all.into_iter().collect()
}

/// The host-native tools a bundle imports (by tool name, sorted).
pub fn native_imports(steps: &[(String, BundleStep)]) -> Vec<String> {
    let all: BTreeSet<String> = steps
        .iter()
        .filter_map(|(_, s)| match s {
            BundleStep::Native { tool } => Some(tool.clone()),
            BundleStep::Component { .. } => None,
        })
        .collect();
    all.into_iter().collect()
}

/// Composes `adapter` (a compose adapter component, without its manifest)
/// with `steps` (by step name, in pipeline order). Same inputs, same bytes.
pub fn bundle(adapter: &[u8], steps: &[(String, BundleStep)]) -> Result<Vec<u8>, BundleError> {
    let union = bundle_capabilities(steps);
    if union.iter().any(|c| c == "fs.readFile") {
        let (with, without): (Vec<_>, Vec<_>) = steps
            .iter()
            .filter_map(|(name, s)| match s {
                BundleStep::Component { capabilities, .. } => Some((
                    name.clone(),
                    capabilities.iter().any(|c| c == "fs.readFile"),
                )),
                BundleStep::Native { .. } => None,
            })
            .partition(|(_, has)| *has);
        if !without.is_empty() {
            return Err(BundleError::MixedFileGrants {
                with: with.into_iter().map(|(n, _)| n).collect(),
                without: without.into_iter().map(|(n, _)| n).collect(),
            });
        }
    }

    let mut graph = CompositionGraph::new();
    let adapter_pkg = Package::from_bytes(
        "temper:bundle-adapter",
        None,
        adapter.to_vec(),
        graph.types_mut(),
    )
    .map_err(err("adapter"))?;
    let adapter_pkg = graph
        .register_package(adapter_pkg)
        .map_err(err("adapter"))?;
    let adapter_world = graph[adapter_pkg].ty();
    let adapter_inst = graph.instantiate(adapter_pkg);

    // One deny instance per capability some step lacks (while the bundle
    // as a whole has it).
    let mut deny_nodes: Vec<(&str, &str, NodeId)> = Vec::new();
    for (cap, iface) in DENIABLE {
        if !union.iter().any(|c| c == cap) {
            continue;
        }
        let lacking = steps.iter().any(|(_, s)| {
            matches!(s, BundleStep::Component { capabilities, .. } if !capabilities.iter().any(|c| c == cap))
        });
        if !lacking {
            continue;
        }
        let bytes = deny_component(cap, iface)?;
        let pkg = Package::from_bytes(
            &format!("temper:deny-{cap}"),
            None,
            bytes,
            graph.types_mut(),
        )
        .map_err(err("deny"))?;
        let pkg = graph.register_package(pkg).map_err(err("deny"))?;
        let inst = graph.instantiate(pkg);
        let export = graph
            .alias_instance_export(inst, iface)
            .map_err(err("deny"))?;
        deny_nodes.push((cap, iface, export));
    }

    let mut natives: Vec<(String, NodeId)> = Vec::new();
    for (index, (name, step)) in steps.iter().enumerate() {
        let import = import_name(name).ok_or_else(|| BundleError::Compose {
            stage: "step",
            message: format!("step {name:?} has no import name"),
        })?;
        let source = match step {
            BundleStep::Component {
                bytes,
                capabilities,
            } => {
                let pkg = Package::from_bytes(
                    &format!("temper:bundle-step{index}"),
                    None,
                    bytes.clone(),
                    graph.types_mut(),
                )
                .map_err(err("step"))?;
                let pkg = graph.register_package(pkg).map_err(err("step"))?;
                let inst = graph.instantiate(pkg);
                // A nested bundle's native imports (plain names) are the
                // bundle's native imports too: one per tool.
                let plain: Vec<(String, wac_graph::types::ItemKind)> = graph.types()
                    [graph[pkg].ty()]
                .imports
                .iter()
                .filter(|(name, _)| !name.contains(':'))
                .map(|(name, kind)| (name.clone(), *kind))
                .collect();
                for (name, kind) in plain {
                    let node = native_node(&mut graph, &mut natives, &name, kind)?;
                    graph
                        .set_instantiation_argument(inst, &name, node)
                        .map_err(err("native"))?;
                }
                for (cap, iface, deny) in &deny_nodes {
                    let imports_it = graph.types()[graph[pkg].ty()].imports.contains_key(*iface);
                    if imports_it && !capabilities.iter().any(|c| c == cap) {
                        graph
                            .set_instantiation_argument(inst, iface, *deny)
                            .map_err(err("deny"))?;
                    }
                }
                graph
                    .alias_instance_export(inst, RUN_INTERFACE)
                    .map_err(err("step"))?
            }
            BundleStep::Native { tool } => {
                let native = import_name(tool).ok_or_else(|| BundleError::Compose {
                    stage: "native",
                    message: format!("tool {tool:?} has no import name"),
                })?;
                let kind = *graph.types()[adapter_world]
                    .imports
                    .get(&import)
                    .ok_or_else(|| BundleError::Compose {
                        stage: "native",
                        message: format!("the adapter has no import `{import}`"),
                    })?;
                native_node(&mut graph, &mut natives, &native, kind)?
            }
        };
        graph
            .set_instantiation_argument(adapter_inst, &import, source)
            .map_err(err("link"))?;
    }
    let run = graph
        .alias_instance_export(adapter_inst, RUN_INTERFACE)
        .map_err(err("export"))?;
    graph.export(run, RUN_INTERFACE).map_err(err("export"))?;
    graph
        .encode(EncodeOptions {
            define_components: true,
            validate: true,
            processor: None,
        })
        .map_err(err("encode"))
}

/// The bundle's import of the native tool imported as `name`, made on
/// first use.
fn native_node(
    graph: &mut CompositionGraph,
    natives: &mut Vec<(String, NodeId)>,
    name: &str,
    kind: wac_graph::types::ItemKind,
) -> Result<NodeId, BundleError> {
    if let Some((_, node)) = natives.iter().find(|(n, _)| n == name) {
        return Ok(*node);
    }
    let node = graph.import(name, kind).map_err(err("native"))?;
    natives.push((name.to_string(), node));
    Ok(node)
}

/// Where a deny function's result lives, and the message.
const DENY_RET: i32 = 16;
const DENY_MSG: i32 = 64;

/// A component exporting `iface` whose every function returns
/// `err("capability not granted: CAP")` (each function of `fetch` and
/// `crypto` returns a `result<_, string>` whose payload sits at offset 4).
pub fn deny_component(cap: &str, iface: &str) -> Result<Vec<u8>, BundleError> {
    let e = err("deny");
    let mut resolve = Resolve::default();
    resolve.push_str("tool.wit", TOOL_WIT).map_err(&e)?;
    let world_wit = format!("package temper:deny;\n\nworld deny {{\n  export {iface};\n}}\n");
    let pkg = resolve.push_str("deny.wit", &world_wit).map_err(&e)?;
    let world = resolve.select_world(&[pkg], Some("deny")).map_err(&e)?;
    let iface_id = resolve
        .interfaces
        .iter()
        .find(|(id, _)| resolve.id_of(*id).as_deref() == Some(iface))
        .map(|(id, _)| id)
        .ok_or_else(|| BundleError::Compose {
            stage: "deny",
            message: format!("no interface {iface}"),
        })?;

    let message = format!("capability not granted: {cap}");
    let heap_start = (DENY_MSG as u64 + message.len() as u64).div_ceil(8) * 8;
    let mut types = TypeSection::new();
    let mut functions = FunctionSection::new();
    let mut exports = ExportSection::new();
    let mut code = CodeSection::new();
    // Function 0: cabi_realloc (type 0).
    types.ty().function(
        [ValType::I32, ValType::I32, ValType::I32, ValType::I32],
        [ValType::I32],
    );
    functions.function(0);
    code.function(&realloc_body());
    exports.export("cabi_realloc", ExportKind::Func, 0);
    exports.export("memory", ExportKind::Memory, 0);
    let funcs: Vec<_> = resolve.interfaces[iface_id]
        .functions
        .values()
        .cloned()
        .collect();
    for (i, func) in funcs.iter().enumerate() {
        let sig = resolve.wasm_signature(AbiVariant::GuestExport, func);
        if sig.results.len() != 1 || !sig.retptr {
            return Err(BundleError::Compose {
                stage: "deny",
                message: format!(
                    "{iface}#{}: result is not returned through memory",
                    func.name
                ),
            });
        }
        let params: Vec<ValType> = sig
            .params
            .iter()
            .map(|p| match p {
                WasmType::I64 | WasmType::PointerOrI64 => ValType::I64,
                WasmType::F32 => ValType::F32,
                WasmType::F64 => ValType::F64,
                _ => ValType::I32,
            })
            .collect();
        types.ty().function(params, [ValType::I32]);
        let index = i as u32 + 1;
        functions.function(index);
        let mut body = Function::new([]);
        body.instruction(&Instruction::I32Const(DENY_RET))
            .instruction(&Instruction::End);
        code.function(&body);
        exports.export(&format!("{iface}#{}", func.name), ExportKind::Func, index);
    }
    let (memories, globals) = memory_and_heap(1, heap_start);
    let mut data = DataSection::new();
    let mut ret = vec![1u8, 0, 0, 0];
    ret.extend_from_slice(&DENY_MSG.to_le_bytes());
    ret.extend_from_slice(&(message.len() as i32).to_le_bytes());
    data.active(0, &ConstExpr::i32_const(DENY_RET), ret);
    data.active(0, &ConstExpr::i32_const(DENY_MSG), message.bytes());
    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code)
        .section(&data);
    let mut module = module.finish();
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .map_err(&e)?;
    ComponentEncoder::default()
        .module(&module)
        .map_err(&e)?
        .validate(true)
        .encode()
        .map_err(&e)
}

/// A tool from a bundle (see the module docs), loaded into `runtime`: a
/// `tool`-world component that may also import host-native tools, each an
/// instance named after the tool (`web-search`) with one `call`, linked
/// here to `natives` (tool name, what runs it). Any other import is
/// refused. Grants are given as for any tool
/// ([`Runtime::grant`](temper_runtime::runtime::Runtime::grant)).
pub async fn load_bundle(
    runtime: &temper_runtime::runtime::Runtime,
    bytes: Vec<u8>,
    natives: Vec<(String, std::sync::Arc<dyn super::run::StepCall>)>,
) -> Result<temper_runtime::runtime::Tool, temper_runtime::error::LoadError> {
    use temper_runtime::bindings::ToolError;
    use temper_runtime::error::LoadError;
    runtime
        .load_linked(bytes, move |linker| {
            let mut names = Vec::with_capacity(natives.len());
            for (tool, call) in natives {
                let name = import_name(&tool).ok_or_else(|| {
                    LoadError::Invalid(format!("no import name for tool {tool:?}"))
                })?;
                linker
                    .instance(&name)
                    .and_then(|mut i| {
                        i.func_wrap_async(
                            super::adapter::STEP_FUNC,
                            move |_store, (input,): (String,)| {
                                let call = call.clone();
                                Box::new(async move {
                                    let out = call.call(input).await;
                                    Ok((out.map(|o| o.output).map_err(ToolError::Internal),))
                                })
                            },
                        )
                    })
                    .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
                names.push(name);
            }
            Ok(names)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(caps: &[&str]) -> BundleStep {
        BundleStep::Component {
            bytes: Vec::new(),
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn mixed_file_grants_are_refused_naming_the_steps() {
        let steps = vec![
            ("reader".to_string(), component(&["fs.readFile"])),
            ("other".to_string(), component(&["fetch"])),
            (
                "native".to_string(),
                BundleStep::Native { tool: "t".into() },
            ),
        ];
        assert_eq!(
            bundle(&[], &steps).unwrap_err(),
            BundleError::MixedFileGrants {
                with: vec!["reader".into()],
                without: vec!["other".into()],
            }
        );
        assert_eq!(bundle_capabilities(&steps), ["fetch", "fs.readFile"]);
        assert_eq!(native_imports(&steps), ["t"]);
    }

    #[test]
    fn deny_components_answer_for_every_function() {
        for (cap, iface) in DENIABLE {
            let bytes = deny_component(cap, iface).unwrap();
            let exports: Vec<String> = wit_component::decode(&bytes)
                .map(|d| match d {
                    wit_component::DecodedWasm::Component(resolve, world) => resolve.worlds[world]
                        .exports
                        .keys()
                        .map(|k| resolve.name_world_key(k))
                        .collect(),
                    _ => Vec::new(),
                })
                .unwrap();
            assert_eq!(exports, [iface.to_string()]);
            let imports = crate::adapter::component_imports(&bytes).unwrap();
            assert!(
                imports.iter().all(|(n, _)| n == "temper:tool/types@0.1.0"),
                "{imports:?}"
            );
        }
    }
}
