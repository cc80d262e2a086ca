//! The forge's BUILD stage, for both modes, as library functions: a
//! sandbox request's JavaScript built on the shim, a compose request's
//! generated adapter; each with its manifest section embedded, so the
//! result is the self-contained artifact that is registered, exported and
//! rebuilt by [`crate::verify`] and `temper build`.

use std::sync::Arc;

use serde_json::Value;

use temper_compose::adapter;
use temper_runtime::artifact::{self, ArtifactManifest, CallRef, StepRef};
use temper_runtime::error::BuildError;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_runtime::runtime::{Artifact, Runtime};

/// A built artifact: the component alone and the artifact (the component
/// with its manifest section), with the manifest.
#[derive(Clone)]
pub struct Built {
    /// The component as built, without a manifest section.
    pub component: Artifact,
    /// The component with `manifest` embedded: what is registered.
    pub artifact: Artifact,
    /// The manifest embedded in `artifact`.
    pub manifest: ArtifactManifest,
}

/// `component` with `manifest` embedded, and its id.
pub fn with_manifest(
    component: &Artifact,
    manifest: &ArtifactManifest,
) -> Result<Artifact, BuildError> {
    let bytes = artifact::embed(&component.bytes, manifest).map_err(|e| BuildError::Internal {
        stage: "embed manifest",
        message: e.to_string(),
    })?;
    Ok(Artifact {
        id: temper_runtime::id::ArtifactId::of(&bytes).to_string(),
        bytes: Arc::new(bytes),
        bytecode: component.bytecode.clone(),
    })
}

/// The sandbox request's manifest for its JavaScript `code` (usually the
/// request's own; [`crate::verify`] may pass another source to compare),
/// keeping the source in it when `keep_source`. A compose request is
/// refused: it has no source.
pub fn sandbox_manifest(
    request: &ForgeRequest,
    code: &str,
    keep_source: bool,
) -> Result<ArtifactManifest, BuildError> {
    let Implementation::Sandbox { allowlist, .. } = &request.implementation else {
        return Err(BuildError::ComposeRequest(request.name.clone()));
    };
    Ok(ArtifactManifest::sandbox(
        &request.name,
        &request.description,
        &request.input_schema,
        &request.output_schema,
        allowlist,
        &request.test_cases,
        code,
        keep_source,
    ))
}

/// BUILD for a sandbox request: its code compiled on `runtime`'s shim, its
/// manifest embedded (with the source when `keep_source`).
pub async fn build_sandbox(
    runtime: &Runtime,
    request: &ForgeRequest,
    keep_source: bool,
) -> Result<Built, BuildError> {
    build_sandbox_from(runtime, request, None, keep_source).await
}

/// [`build_sandbox`] from the code's `bytecode` when it was compiled
/// already (the forge compiles at VALIDATE, to report syntax errors there).
pub async fn build_sandbox_from(
    runtime: &Runtime,
    request: &ForgeRequest,
    bytecode: Option<Vec<u8>>,
    keep_source: bool,
) -> Result<Built, BuildError> {
    build_sandbox_calling(runtime, request, bytecode, keep_source, Vec::new()).await
}

/// [`build_sandbox_from`] for a tool that calls other tools (code mode):
/// `calls` are its `tool:NAME` grants as VALIDATE pinned them, recorded in
/// its manifest.
pub async fn build_sandbox_calling(
    runtime: &Runtime,
    request: &ForgeRequest,
    bytecode: Option<Vec<u8>>,
    keep_source: bool,
    calls: Vec<CallRef>,
) -> Result<Built, BuildError> {
    let Implementation::Sandbox { code, .. } = &request.implementation else {
        return Err(BuildError::ComposeRequest(request.name.clone()));
    };
    let mut manifest = sandbox_manifest(request, code, keep_source)?;
    manifest.calls = calls;
    let component = match bytecode {
        Some(bytecode) => runtime.artifact_from_bytecode(bytecode).await?,
        None => runtime.build(code).await?,
    };
    let artifact = with_manifest(&component, &manifest)?;
    Ok(Built {
        component,
        artifact,
        manifest,
    })
}

/// BUILD for a compose request whose steps were pinned at VALIDATE
/// (`refs`): the adapter generated from `steps`, checked to import nothing
/// but its steps, with its manifest embedded. Returns the artifact's bytes
/// and its manifest.
pub fn build_compose(
    request: &ForgeRequest,
    steps: &[Value],
    refs: Vec<StepRef>,
) -> Result<(Vec<u8>, ArtifactManifest), BuildError> {
    let adapter_err = |e: adapter::AdapterError| BuildError::Internal {
        stage: "compose adapter",
        message: e.to_string(),
    };
    let component = adapter::generate(steps).map_err(adapter_err)?;
    let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
    let imports = adapter::import_names(&names).map_err(adapter_err)?;
    adapter::check_adapter_imports(&component, &imports).map_err(adapter_err)?;
    let pipeline = serde_json::to_string(steps).expect("JSON values serialize");
    let manifest =
        ArtifactManifest::compose(request, &pipeline, refs, temper_compose::core::core_id());
    let bytes = artifact::embed(&component, &manifest).map_err(|e| BuildError::Internal {
        stage: "embed manifest",
        message: e.to_string(),
    })?;
    Ok((bytes, manifest))
}
