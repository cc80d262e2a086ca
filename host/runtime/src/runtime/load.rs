//! Loading: an artifact as a [`Tool`] — on the shared engine when this
//! host built it, else its own component compiled (cached, bounded) — and
//! the check that a component imports nothing outside the `tool` world.

use crate::bindings::RunIndices;
use crate::error::LoadError;
use crate::host_state::HostState;
use std::sync::Arc;
use temper_policy::Grants;
use wasmtime::component::{Component, Linker, types::ComponentItem};

use super::*;

/// Refuses components that import anything outside the `tool` world or do
/// not export `temper:tool/run`.
pub(super) fn check_tool_world(
    component: &Component,
    engine: &wasmtime::Engine,
    extra: &[String],
) -> Result<(), LoadError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if !ALLOWED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p))
            && !extra.iter().any(|e| e == name)
        {
            return Err(LoadError::ImportNotAllowed(name.to_string()));
        }
    }
    let exports_run = ty.exports(engine).any(|(name, item)| {
        name == RUN_EXPORT && matches!(item.ty, ComponentItem::ComponentInstance(_))
    });
    if !exports_run {
        return Err(LoadError::MissingExport(RUN_EXPORT.into()));
    }
    Ok(())
}

impl Runtime {
    /// A tool from an artifact built by this runtime: runs on the shared
    /// engine from its bytecode (no compile; callable at once).
    pub fn tool(&self, artifact: &Artifact) -> Tool {
        self.engine_tool(&artifact.id, artifact.bytecode.clone())
    }

    pub(super) fn engine_tool(&self, id: &str, bytecode: Arc<Vec<u8>>) -> Tool {
        Tool {
            inner: Arc::new(ToolInner {
                id: id.into(),
                form: ToolForm::Engine { bytecode },
                one_shot: false,
                heat: Default::default(),
            }),
            grants: Grants::default(),
            calls: ToolCalls::default(),
        }
    }

    /// A tool from component bytes (e.g. a `.wasm` file). An artifact this
    /// host built (its bytecode recorded, with or without a manifest
    /// section) runs on the shared engine; any other component is checked
    /// against the `tool` world and compiled (cached on disk, and kept in a
    /// bounded cache in memory). The runtime's admission gate, if it has
    /// one ([`crate::RuntimeBuilder::admission`]), is asked first: a refusal
    /// is [`LoadError::Refused`].
    pub async fn load(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        self.admit(&bytes)?;
        self.load_admitted(bytes).await
    }

    /// [`Runtime::load`] without asking the admission gate: for bytes the
    /// embedder has already admitted (its own registry's, an import it
    /// checked).
    pub async fn load_admitted(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        if let Some(bytecode) = self.recorded_bytecode(&bytes) {
            let id = crate::id::ArtifactId::of(&bytes).to_string();
            return Ok(self.engine_tool(&id, bytecode));
        }
        self.load_compiled_admitted(bytes).await
    }

    /// A tool that runs on its own compiled component, even when the engine
    /// could run it (e.g. to compare the two, or to run exactly what an
    /// exported file holds). The admission gate is asked first, as by
    /// [`Runtime::load`].
    pub async fn load_compiled(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        self.admit(&bytes)?;
        self.load_compiled_admitted(bytes).await
    }

    /// [`Runtime::load_compiled`] without asking the admission gate.
    pub(crate) async fn load_compiled_admitted(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        let id: Arc<str> = crate::id::ArtifactId::of(&bytes).to_string().into();
        let artifact = Arc::new(bytes);
        self.compiled(&id, &artifact).await?;
        Ok(Tool {
            inner: Arc::new(ToolInner {
                id,
                form: ToolForm::Component { artifact },
                one_shot: false,
                heat: Default::default(),
            }),
            grants: Grants::default(),
            calls: ToolCalls::default(),
        })
    }

    /// The compiled component of artifact `id`: from the bounded cache, or
    /// compiled now (from the on-disk cache when it was compiled before).
    pub(super) async fn compiled(
        &self,
        id: &Arc<str>,
        artifact: &Arc<Vec<u8>>,
    ) -> Result<Arc<Compiled>, LoadError> {
        let cell = {
            let mut cache = lock(&self.inner.compiled);
            match cache.get(id) {
                Some(cell) => cell.clone(),
                None => {
                    let cell = CompiledCell::default();
                    cache.insert(id.clone(), cell.clone());
                    cell
                }
            }
        };
        let rt = self.clone();
        let bytes = artifact.clone();
        cell.get_or_init(|| async move {
            tokio::task::spawn_blocking(move || rt.compile_tool(&bytes).map(Arc::new))
                .await
                .unwrap_or_else(|e| Err(LoadError::Invalid(e.to_string())))
        })
        .await
        .clone()
    }

    pub(super) fn compile_tool(&self, bytes: &[u8]) -> Result<Compiled, LoadError> {
        self.compile_tool_with(bytes, &self.inner.linker, &[])
    }

    /// Compiles `bytes` and links it with `linker`; besides the `tool`
    /// world's imports, it may import the plain names in `extra`.
    pub(super) fn compile_tool_with(
        &self,
        bytes: &[u8],
        linker: &Linker<HostState>,
        extra: &[String],
    ) -> Result<Compiled, LoadError> {
        let component = self
            .inner
            .engine
            .compile(bytes)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        check_tool_world(&component, self.inner.engine.engine(), extra)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let run = RunIndices::new(&pre).map_err(|_| LoadError::MissingExport(RUN_EXPORT.into()))?;
        Ok(Compiled { pre, run })
    }

    /// A tool whose component may import more than the `tool` world:
    /// `link` adds those imports to a copy of the runtime's linker and
    /// returns their names; any other import is refused. Grants are given
    /// as for any tool ([`Runtime::grant`]). Used for bundles
    /// (`temper_compose::bundle`), whose host-native steps are imports.
    pub async fn load_linked(
        &self,
        bytes: Vec<u8>,
        link: impl FnOnce(&mut Linker<HostState>) -> Result<Vec<String>, LoadError>,
    ) -> Result<Tool, LoadError> {
        let mut linker = self.inner.linker.clone();
        let names = link(&mut linker)?;
        let rt = self.clone();
        let artifact = Arc::new(bytes);
        let compile_bytes = artifact.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            rt.compile_tool_with(&compile_bytes, &linker, &names)
        })
        .await
        .map_err(|e| LoadError::Invalid(e.to_string()))??;
        Ok(Tool {
            inner: Arc::new(ToolInner {
                id: crate::id::ArtifactId::of(&artifact).to_string().into(),
                form: ToolForm::Pinned {
                    artifact,
                    compiled: Arc::new(compiled),
                },
                one_shot: false,
                heat: Default::default(),
            }),
            grants: Grants::default(),
            calls: ToolCalls::default(),
        })
    }
}
