//! Reproducibility check: rebuild an artifact from its source (or forge
//! request) with this host's shim and compare bytes, saying which part
//! differs: the source, the shim, the component, or a manifest field.

use serde::Serialize;
use serde_json::Value;

use crate::build;
use temper_runtime::artifact::{self, ArtifactError, ArtifactManifest};
use temper_runtime::error::BuildError;
use temper_runtime::id::blake3_hex;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_runtime::runtime::Runtime;

/// The outcome of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The file's artifact id (blake3 without its signature section).
    pub id: String,
    /// blake3 of the rebuilt artifact.
    pub rebuilt_id: String,
    /// True when the rebuilt bytes equal the file's.
    pub identical: bool,
    /// Each part that differs, for people (empty when identical).
    pub differences: Vec<String>,
}

/// Why a verification could not run.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The file is not a well-formed artifact.
    #[error("verify: {0}")]
    Artifact(#[from] ArtifactError),
    /// No source to rebuild from.
    #[error("verify: the artifact carries no source: pass --source or --request")]
    NoSource,
    /// The request or the file is a compose tool: its adapter pins its
    /// steps by the blake3 of artifacts in a registry, so it is rebuilt by
    /// forging the same request against that registry, not by `verify`.
    #[error(
        "verify: compose tools are not rebuilt by verify (their steps are pinned in a registry): forge the same request against the same registry and compare ids"
    )]
    Compose,
    /// The rebuild failed.
    #[error("verify: rebuilding failed: {0}")]
    Build(#[from] BuildError),
}

/// Rebuilds `file` from `source` (else the request's code, else the source
/// the file carries) and compares. With `request`, the expected manifest is
/// rebuilt from the request too; otherwise the file's manifest is reused
/// and only the source and component are checked against it.
pub async fn verify(
    runtime: &Runtime,
    file: &[u8],
    source: Option<&str>,
    request: Option<&ForgeRequest>,
) -> Result<VerifyReport, VerifyError> {
    // A signature section is not part of what is rebuilt (nor of the id).
    let file = &*temper_runtime::id::unsigned(file);
    let (manifest, component) = artifact::split(file)?;
    let from_request = match request.map(|r| &r.implementation) {
        Some(Implementation::Sandbox { code, .. }) => Some(code.as_str()),
        Some(Implementation::Compose { .. }) => return Err(VerifyError::Compose),
        None => None,
    };
    let source = source
        .or(from_request)
        .or(manifest.source.as_deref())
        .ok_or(VerifyError::NoSource)?;
    let mut differences = Vec::new();
    let source_hash = blake3_hex(source.as_bytes());
    if source_hash != manifest.source_blake3 {
        differences.push(format!(
            "source: the file was built from source {}, the given source hashes to {source_hash}",
            manifest.source_blake3
        ));
    }
    let shim = temper_runtime::shim::shim_id();
    if shim != manifest.shim_blake3 {
        differences.push(format!(
            "shim: the file was built with shim {}, this host's shim is {shim} (the component cannot match)",
            manifest.shim_blake3
        ));
    }
    let expected = match request {
        Some(r) => {
            let mut m = build::sandbox_manifest(r, source, manifest.source.is_some())?;
            // The pins of the tools it calls were made at forge time, from
            // the registry, not from the source: taken as recorded.
            m.calls = manifest.calls.clone();
            differences.extend(manifest_differences(&manifest, &m));
            m
        }
        None => manifest.clone(),
    };
    let built = runtime.build(source).await?;
    if built.bytes.as_slice() != component {
        let at = built
            .bytes
            .iter()
            .zip(component)
            .position(|(a, b)| a != b)
            .unwrap_or(built.bytes.len().min(component.len()));
        differences.push(format!(
            "component: the rebuilt component ({} bytes) differs from the file's ({} bytes) from byte {at}",
            built.bytes.len(),
            component.len()
        ));
    }
    let rebuilt = build::with_manifest(&built, &expected)?;
    let rebuilt = rebuilt.bytes.as_slice();
    let identical = rebuilt == file;
    if identical {
        differences.clear();
    } else if differences.is_empty() {
        differences.push("bytes differ".into());
    }
    Ok(VerifyReport {
        id: blake3_hex(file),
        rebuilt_id: blake3_hex(rebuilt),
        identical,
        differences,
    })
}

fn manifest_differences(file: &ArtifactManifest, expected: &ArtifactManifest) -> Vec<String> {
    let (Value::Object(a), Value::Object(b)) = (
        serde_json::to_value(file).expect("serializes"),
        serde_json::to_value(expected).expect("serializes"),
    ) else {
        return vec![];
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("manifest: field `{k}` differs from the request"))
        .collect()
}
