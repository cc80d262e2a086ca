//! The two components every runtime makes once and shares: the shared
//! engine (the shim snapshotted at the prelude, compiled once per shim
//! version) and the shim the build runs; the bytecode records that let
//! `load` run an artifact this host built on the engine.

use crate::bindings::{RunIndices, ShimIndices};
use crate::error::BuildError;
use crate::host_state::{Clocks, HostState};
use crate::shim;
use std::sync::Arc;
use wasmtime::Store;
use wasmtime::component::Component;
use wasmtime_wizer::Wizer;

use super::*;

impl Runtime {
    /// The shared engine: its snapshot from the cache (or made now: the
    /// engine guest instrumented, its prelude run under the build's fixed
    /// clocks, snapshotted), compiled once (or loaded from the cache).
    pub(super) async fn engine_rt(&self) -> Result<&EngineRuntime, BuildError> {
        self.inner
            .engine_rt
            .get_or_try_init(|| async {
                let name = format!("engine-{}.wasm", shim::engine_id());
                let cached = self.inner.engine.cache_get(&name);
                let from_cache = cached.is_some();
                let snapshot = match cached {
                    Some(bytes) => bytes,
                    None => self.snapshot_engine().await?,
                };
                let rt = self.inner.clone();
                let bytes = snapshot.clone();
                let component = tokio::task::spawn_blocking(move || rt.engine.compile(&bytes))
                    .await
                    .map_err(internal("compile engine"))?;
                let component = match component {
                    Ok(c) => c,
                    // A damaged cache file: make the snapshot again.
                    Err(_) if from_cache => {
                        let fresh = self.snapshot_engine().await?;
                        let rt = self.inner.clone();

                        tokio::task::spawn_blocking(move || rt.engine.compile(&fresh))
                            .await
                            .map_err(internal("compile engine"))?
                            .map_err(internal("compile engine"))?
                    }
                    Err(e) => return Err(internal("compile engine")(e)),
                };
                if !from_cache {
                    self.inner.engine.cache_put(&name, &snapshot);
                }
                let pre = self
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(internal("link engine"))?;
                Ok(EngineRuntime {
                    run: RunIndices::new(&pre).map_err(internal("link engine"))?,
                    shim: ShimIndices::new(&pre).map_err(internal("link engine"))?,
                    pre,
                })
            })
            .await
    }

    /// The engine snapshot: the engine guest after `load(prelude, [])` under
    /// the build's fixed clocks and random. Deterministic.
    pub(super) async fn snapshot_engine(&self) -> Result<Vec<u8>, BuildError> {
        let wizer = load_wizer();
        let (context, instrumented) = wizer
            .instrument_component(shim::ENGINE_WASM)
            .map_err(internal("instrument engine"))?;
        let engine = self.inner.engine.engine().clone();
        // Used once: not worth a place in the compile cache.
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &instrumented))
            .await
            .map_err(internal("compile engine"))?
            .map_err(internal("compile engine"))?;
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(internal("link engine"))?;
        let indices = ShimIndices::new(&pre).map_err(internal("link engine"))?;
        let prelude = {
            let mut store = self.new_store(Clocks::Fixed);
            let instance = pre
                .instantiate_async(&mut store)
                .await
                .map_err(internal("instantiate engine"))?;
            let exports = indices
                .load(&mut store, &instance)
                .map_err(internal("instantiate engine"))?;
            prelude_bytecode(&mut store, &exports).await?
        };
        let mut store = self.new_store(Clocks::Fixed);
        let instance = pre
            .instantiate_async(&mut store)
            .await
            .map_err(internal("instantiate engine"))?;
        let exports = indices
            .load(&mut store, &instance)
            .map_err(internal("instantiate engine"))?;
        exports
            .call_load(&mut store, &prelude, &[])
            .await
            .map_err(internal("engine prelude"))?
            .map_err(|e| BuildError::Internal {
                stage: "engine prelude",
                message: format!("{e:?}"),
            })?;
        wizer
            .snapshot_component(
                &context,
                &mut crate::snapshot::InstanceSnapshot {
                    store: &mut store,
                    instance,
                },
            )
            .await
            .map_err(internal("snapshot engine"))
    }

    /// The name of the on-disk bytecode record of built artifact `id`
    /// (this shim's: bytecode only runs on the QuickJS that compiled it).
    pub(super) fn record_name(id: &str) -> String {
        format!("bytecode-{id}-{}.qjsbc", &shim::shim_id()[..16])
    }

    /// Remembers that built artifact `id` is the snapshot of `bytecode`, so
    /// [`Runtime::load`] can run that artifact on the engine: in memory
    /// (bounded) and in the cache directory (blake3-checked on read).
    pub(super) fn record_bytecode(&self, id: &str, bytecode: &Arc<Vec<u8>>) {
        lock(&self.inner.bytecodes).insert(id.to_string(), bytecode.clone());
        let mut record = Vec::with_capacity(32 + bytecode.len());
        record.extend_from_slice(blake3::hash(bytecode).as_bytes());
        record.extend_from_slice(bytecode);
        self.inner.engine.cache_put(&Self::record_name(id), &record);
    }

    /// The bytecode `bytes` is the snapshot of, if this host (this shim)
    /// built it: looked up by the blake3 of the component without its
    /// manifest section.
    pub(super) fn recorded_bytecode(&self, bytes: &[u8]) -> Option<Arc<Vec<u8>>> {
        let component = crate::artifact::split(bytes).map_or(bytes, |(_, c)| c);
        self.recorded_bytecode_of(component)
    }

    /// [`Runtime::recorded_bytecode`] of a component without its manifest
    /// section.
    pub(super) fn recorded_bytecode_of(&self, component: &[u8]) -> Option<Arc<Vec<u8>>> {
        // A signature section is not part of what was recorded.
        let id = crate::id::ArtifactId::of(component).to_string();
        if let Some(b) = lock(&self.inner.bytecodes).get(&id) {
            return Some(b.clone());
        }
        let record = self.inner.engine.cache_get(&Self::record_name(&id))?;
        let (hash, body) = record.split_at_checked(32)?;
        if blake3::hash(body).as_bytes() != hash {
            return None;
        }
        let bytecode = Arc::new(body.to_vec());
        lock(&self.inner.bytecodes).insert(id, bytecode.clone());
        Some(bytecode)
    }

    pub(super) async fn shim(&self) -> Result<&ShimRuntime, BuildError> {
        self.inner
            .shim
            .get_or_try_init(|| async {
                let wizer = load_wizer();
                let (context, instrumented) = wizer
                    .instrument_component(shim::SHIM_WASM)
                    .map_err(internal("instrument shim"))?;
                let rt = self.inner.clone();
                let component =
                    tokio::task::spawn_blocking(move || rt.engine.compile(&instrumented))
                        .await
                        .map_err(internal("compile shim"))?
                        .map_err(internal("compile shim"))?;
                let pre = self
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(internal("link shim"))?;
                let shim_indices = ShimIndices::new(&pre).map_err(internal("link shim"))?;
                let mut runtime = ShimRuntime {
                    pre,
                    shim: shim_indices,
                    wizer,
                    context,
                    prelude: Vec::new(),
                };
                runtime.prelude = self.compile_prelude(&runtime).await?;
                Ok(runtime)
            })
            .await
    }

    /// A fresh store with fixed clocks and random, and a shim instance in it:
    /// what every build step (and the snapshot) runs in.
    pub(super) async fn shim_instance(
        &self,
        shim: &ShimRuntime,
    ) -> Result<
        (
            Store<HostState>,
            wasmtime::component::Instance,
            crate::bindings::exports::temper::tool::shim::Guest,
        ),
        BuildError,
    > {
        let mut store = self.new_store(Clocks::Fixed);
        let instance = shim
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(internal("instantiate shim"))?;
        let exports = shim
            .shim
            .load(&mut store, &instance)
            .map_err(internal("instantiate shim"))?;
        Ok((store, instance, exports))
    }

    pub(super) async fn compile_prelude(&self, shim: &ShimRuntime) -> Result<Vec<u8>, BuildError> {
        let (mut store, _instance, exports) = self.shim_instance(shim).await?;
        prelude_bytecode(&mut store, &exports).await
    }
}

/// A Wizer that snapshots a shim (or the engine) after its `load` export
/// ran; the export is kept (component-mode Wizer 48 needs it).
fn load_wizer() -> Wizer {
    let mut wizer = Wizer::new();
    wizer
        .init_func("temper:tool/shim@0.1.0#load".to_string())
        .keep_init_func(true);
    wizer
}

/// The prelude compiled to bytecode in a throw-away shim (or engine)
/// instance: `eval` exists only there.
async fn prelude_bytecode(
    store: &mut Store<HostState>,
    exports: &crate::bindings::exports::temper::tool::shim::Guest,
) -> Result<Vec<u8>, BuildError> {
    exports
        .call_compile_prelude(store, shim::PRELUDE_JS)
        .await
        .map_err(internal("compile prelude"))?
        .map_err(|e| BuildError::Internal {
            stage: "compile prelude",
            message: format!("{e:?}"),
        })
}
