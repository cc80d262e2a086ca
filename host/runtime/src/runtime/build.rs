//! Building: JS source to QuickJS bytecode (the syntax check) and bytecode
//! to the self-contained, reproducible artifact (a Wizer snapshot).

use crate::bindings::ToolError;
use crate::error::{BuildError, RunError};
use crate::static_check;
use std::sync::Arc;

use super::*;

pub(super) fn top_level_error(err: ToolError) -> BuildError {
    match err {
        ToolError::Compile(js) | ToolError::Js(js) => BuildError::Load(js.into()),
        other => BuildError::TopLevel(RunError::from(other).to_string()),
    }
}

/// Refuses a source over [`MAX_SOURCE_BYTES`].
fn refuse_oversized(source: &str) -> Result<(), BuildError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(BuildError::SourceTooLarge {
            actual: source.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    Ok(())
}

/// The bytecode a guest `compile` call gave, or its failure as a build
/// error (a syntax error keeps its JS message, line and column).
fn compile_outcome(
    store: &Store<HostState>,
    compiled: wasmtime::Result<Result<Vec<u8>, ToolError>>,
    limits: &Limits,
) -> Result<Vec<u8>, BuildError> {
    match compiled {
        Ok(Ok(bytecode)) => Ok(bytecode),
        Ok(Err(ToolError::Compile(js))) => Err(BuildError::Compile(js.into())),
        Ok(Err(other)) => Err(top_level_error(other)),
        Err(trap) => Err(BuildError::TopLevel(describe_trap(store, &trap, limits))),
    }
}

impl Runtime {
    /// Builds JS source into a component artifact: static check, compile to
    /// QuickJS bytecode, load in a fresh shim instance with fixed clocks and
    /// random, and snapshot it. Same source, same shim: same bytes.
    pub async fn build(&self, source: &str) -> Result<Artifact, BuildError> {
        refuse_oversized(source)?;
        static_check::check(source)?;
        let bytecode = self.compile_source(source).await?;
        self.artifact_from_bytecode(bytecode).await
    }

    /// Compiles `source` to QuickJS bytecode in a throw-away shim instance
    /// (the only place `eval` exists): the syntax check. A syntax error
    /// comes back as [`BuildError::Compile`] with its line and column.
    pub async fn compile_source(&self, source: &str) -> Result<Vec<u8>, BuildError> {
        refuse_oversized(source)?;
        let shim = self.shim().await?;
        let (mut store, _instance, exports) = self.shim_instance(shim).await?;
        let compiled = exports.call_compile(&mut store, source).await;
        compile_outcome(&store, compiled, &self.inner.limits)
    }

    /// The self-contained artifact of a tool's `bytecode` (from
    /// [`Runtime::compile_source`]; the second half of [`Runtime::build`]):
    /// load it in a fresh shim instance under the build's fixed clocks and
    /// random, and snapshot it. The artifact depends only on the shim, the
    /// prelude and the bytecode, so a store that keeps the compact form
    /// (bytecode + manifest) rebuilds the very same bytes (the same id).
    pub async fn artifact_from_bytecode(&self, bytecode: Vec<u8>) -> Result<Artifact, BuildError> {
        let shim = self.shim().await?;
        // Load (run the top level) and snapshot.
        let (mut store, instance, exports) = self.shim_instance(shim).await?;
        match exports
            .call_load(&mut store, &shim.prelude, &bytecode)
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(top_level_error(err)),
            Err(trap) => {
                return Err(BuildError::TopLevel(describe_trap(
                    &store,
                    &trap,
                    &self.inner.limits,
                )));
            }
        }
        let bytes = shim
            .wizer
            .snapshot_component(
                &shim.context,
                &mut crate::snapshot::InstanceSnapshot {
                    store: &mut store,
                    instance,
                },
            )
            .await
            .map_err(internal("snapshot"))?;
        let id = blake3::hash(&bytes).to_hex().to_string();
        let bytecode = Arc::new(bytecode);
        self.record_bytecode(&id, &bytecode);
        Ok(Artifact {
            bytes: Arc::new(bytes),
            id,
            bytecode,
        })
    }

    /// Compiles `source` to QuickJS bytecode as [`Runtime::compile_source`]
    /// does (same QuickJS, same compile code: the same bytecode and the same
    /// errors), in a throw-away instance of the shared engine instead of a
    /// fresh shim instance: the engine's snapshot holds a compiler runtime
    /// made before it was taken, so neither the shim's memory nor a QuickJS
    /// runtime is set up per compile. The instance is used for this compile
    /// only and dropped off the request path.
    pub async fn compile_on_engine(&self, source: &str) -> Result<Vec<u8>, BuildError> {
        refuse_oversized(source)?;
        let engine = self.engine_rt().await?;
        let mut store = self.new_store(Clocks::Fixed);
        let instance = engine
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(internal("instantiate engine"))?;
        let exports = engine
            .shim
            .load(&mut store, &instance)
            .map_err(internal("instantiate engine"))?;
        let compiled = exports.call_compile(&mut store, source).await;
        let result = compile_outcome(&store, compiled, &self.inner.limits);
        self.retire(store);
        result
    }

    /// A tool run once from `source` (a code-mode run): static check and
    /// compile (on the engine, [`Runtime::compile_on_engine`]), no snapshot
    /// and no artifact; it runs on the shared engine under the runtime's
    /// limits, in a fresh instance of its own, with nothing pre-warmed for
    /// it. Its id is the blake3 of its bytecode. Grant it with
    /// [`Runtime::grant`].
    pub async fn one_shot_tool(&self, source: &str) -> Result<Tool, BuildError> {
        static_check::check(source)?;
        let bytecode = self.compile_on_engine(source).await?;
        let id = blake3::hash(&bytecode).to_hex().to_string();
        Ok(Tool {
            inner: Arc::new(ToolInner {
                id: id.as_str().into(),
                form: ToolForm::Engine {
                    bytecode: Arc::new(bytecode),
                },
                one_shot: true,
                heat: Default::default(),
            }),
            grants: temper_policy::Grants::default(),
            calls: ToolCalls::default(),
        })
    }
}
