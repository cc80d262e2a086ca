//! Distribution of tools through OCI registries (`temper push` / `temper pull`).
//!
//! A Temper artifact (a `.wasm` component carrying its manifest section) is
//! stored with the CNCF Wasm OCI artifact layout, so other wasm tooling can
//! pull it: one layer of media type [`WASM_LAYER_MEDIA_TYPE`]
//! (`application/wasm`, the artifact's exact bytes) and a config of media type
//! [`WASM_CONFIG_MEDIA_TYPE`] (`application/vnd.wasm.config.v0+json`). The
//! manifest also carries annotations: the tool's name and description
//! (`org.opencontainers.image.title` / `.description`) and the blake3 id of
//! the bytes ([`ANNOTATION_BLAKE3`]).
//!
//! A pull is verified before anything uses the bytes: the config and layer
//! media types, the layer's size and sha256 digest as the registry's
//! manifest states them, the blake3 id against the manifest annotation, and
//! the Temper manifest section ([`temper_runtime::artifact::read_manifest`]).
//! [`pull_and_import`] then hands the bytes to [`Forge::import`], the same
//! checks as `temper import` (tests re-run, judge, capabilities against this
//! host's policy).
//!
//! The registry protocol is `oci-client`'s (reqwest + rustls with the webpki
//! roots, the same TLS stack as the `fetch` capability). Plain HTTP
//! (`insecure`) is only accepted for loopback registries (127.0.0.0/8,
//! `localhost`, `[::1]`).
//!
//! Credentials ([`OciAuth`]): basic (user/password) or a bearer token, from
//! the environment ([`ENV_USERNAME`], [`ENV_PASSWORD`], [`ENV_TOKEN`]) or an
//! auth file (TOML, [`OciAuth::from_file`]).
//!
//! ```no_run
//! # async fn demo(bytes: Vec<u8>) -> Result<(), temper_oci::OciError> {
//! use temper_oci::{OciOptions, OciReference, push_artifact, pull_artifact};
//! let reference = OciReference::parse("oci://127.0.0.1:5000/tools/slugify:1.0")?;
//! let options = OciOptions { insecure: true, ..OciOptions::default() };
//! let pushed = push_artifact(&bytes, &reference, &options).await?;
//! let pulled = pull_artifact(&reference, &options).await?;
//! assert_eq!(pulled.id, pushed.id);
//! # Ok(()) }
//! ```

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use temper_forge::{Forge, ForgeContext, Forged};
use temper_runtime::artifact::{self, ArtifactManifest};
use temper_store::Tier;

mod auth;
mod error;
mod reference;
mod referrers;

pub use auth::*;
pub use error::*;
pub use reference::*;
pub use referrers::*;

/// The CNCF Wasm OCI artifact config media type.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The CNCF Wasm OCI artifact layer media type (the component's bytes).
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Manifest annotation holding the blake3 id of the layer's bytes.
pub const ANNOTATION_BLAKE3: &str = "dev.temper.artifact.blake3";
/// Environment variable: registry user name (basic auth, with [`ENV_PASSWORD`]).
pub const ENV_USERNAME: &str = "TEMPER_OCI_USERNAME";
/// Environment variable: registry password (basic auth, with [`ENV_USERNAME`]).
pub const ENV_PASSWORD: &str = "TEMPER_OCI_PASSWORD";
/// Environment variable: registry bearer token.
pub const ENV_TOKEN: &str = "TEMPER_OCI_TOKEN";
/// The largest artifact a pull accepts (declared or streamed) unless
/// [`OciOptions::max_artifact_bytes`] says otherwise: the forge's default
/// `maxArtifactBytes`.
pub const MAX_ARTIFACT_BYTES: u64 = temper_forge::config::DEFAULT_MAX_ARTIFACT_BYTES;
/// The largest config blob a pull accepts.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// The config's `created`: fixed, so the same artifact always gives the same
/// manifest digest (the artifacts themselves are byte-reproducible).
const CREATED: &str = "1970-01-01T00:00:00Z";

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Credentials.
    pub auth: OciAuth,
    /// Plain HTTP instead of HTTPS; only accepted for loopback registries.
    pub insecure: bool,
    /// The largest layer a pull accepts, checked against the size the
    /// registry's manifest declares before the layer is downloaded (and
    /// while it streams); `None`: [`MAX_ARTIFACT_BYTES`], or the forge's
    /// `maxArtifactBytes` for [`pull_and_import`].
    pub max_artifact_bytes: Option<u64>,
}

/// What [`push_artifact`] stored.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pushed to.
    pub reference: OciReference,
    /// The manifest's digest (`sha256:...`): pull by `REPO@DIGEST` to pin it.
    pub manifest_digest: String,
    /// The manifest's size in bytes (a referrer's `subject` states it).
    pub manifest_size: u64,
    /// The layer's digest (`sha256:...`).
    pub layer_digest: String,
    /// The blake3 id of the artifact.
    pub id: String,
    /// The tool's name (from the manifest section).
    pub name: String,
}

/// A pulled and verified artifact.
#[derive(Debug, Clone)]
pub struct PulledArtifact {
    /// The reference pulled.
    pub reference: OciReference,
    /// The artifact's bytes (verified).
    pub bytes: Vec<u8>,
    /// The blake3 id of the bytes.
    pub id: String,
    /// The manifest section.
    pub manifest: ArtifactManifest,
    /// The OCI manifest's digest as the registry served it.
    pub manifest_digest: String,
    /// The layer's digest.
    pub layer_digest: String,
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

fn client(
    reference: &OciReference,
    options: &OciOptions,
    stage: OciStage,
) -> Result<Client, OciError> {
    if options.insecure && !reference.is_loopback() {
        return Err(OciError::InsecureRefused {
            stage,
            reference: reference.to_string(),
            registry: reference.registry.clone(),
        });
    }
    let protocol = if options.insecure {
        ClientProtocol::HttpsExcept(vec![reference.registry.clone()])
    } else {
        ClientProtocol::Https
    };
    let config = ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        max_concurrent_download: 2,
        max_concurrent_upload: 2,
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|e| OciError::Registry {
        stage,
        reference: reference.to_string(),
        detail: format!("cannot create the registry client: {e}"),
    })
}

/// Classifies an `oci-client` error by what the registry said.
fn classify(e: OciDistributionError, stage: OciStage, reference: &OciReference) -> OciError {
    let reference = reference.to_string();
    let detail = e.to_string();
    let auth = OciError::Auth {
        stage,
        reference: reference.clone(),
        detail: detail.clone(),
    };
    let not_found = OciError::NotFound {
        stage,
        reference: reference.clone(),
        detail: detail.clone(),
    };
    match &e {
        OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::UnauthorizedError { .. } => auth,
        OciDistributionError::ImageManifestNotFoundError(_) => not_found,
        OciDistributionError::DigestError(_) => OciError::Verify {
            reference,
            failure: VerifyFailure::ManifestDigest(detail),
        },
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => auth,
        OciDistributionError::ServerError { code: 404, .. } => not_found,
        OciDistributionError::RequestError(r)
            if matches!(r.status().map(|s| s.as_u16()), Some(401 | 403)) =>
        {
            auth
        }
        OciDistributionError::RequestError(r) if r.status().map(|s| s.as_u16()) == Some(404) => {
            not_found
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                auth
            } else if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                not_found
            } else {
                OciError::Registry {
                    stage,
                    reference,
                    detail,
                }
            }
        }
        _ => OciError::Registry {
            stage,
            reference,
            detail,
        },
    }
}

/// The CNCF Wasm config (`application/vnd.wasm.config.v0+json`).
fn wasm_config(bytes: &[u8], layer_digest: &str) -> Vec<u8> {
    let mut config = serde_json::json!({
        "created": CREATED,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    if let Ok(world) = artifact::world(bytes) {
        config["component"] = serde_json::json!({
            "exports": world.exports,
            "imports": world.imports,
        });
    }
    serde_json::to_vec(&config).expect("the config serializes")
}

/// Pushes a Temper artifact (`.wasm` with its manifest section) to
/// `reference` (which must name a tag) in the CNCF Wasm layout. The bytes are
/// checked for a manifest section first; returns the digests and the id.
pub async fn push_artifact(
    bytes: &[u8],
    reference: &OciReference,
    options: &OciOptions,
) -> Result<Pushed, OciError> {
    let stage = OciStage::Push;
    if reference.tag.is_none() || reference.digest.is_some() {
        return Err(OciError::Reference {
            reference: reference.to_string(),
            reason: "a push needs a tag (oci://HOST/REPO:TAG) and no digest".into(),
        });
    }
    let manifest = artifact::read_manifest(bytes).map_err(|source| OciError::NotAnArtifact {
        reference: reference.to_string(),
        source,
    })?;
    let client = client(reference, options, stage)?;
    let target = reference.to_client_reference();
    client
        .store_auth_if_needed(target.resolve_registry(), &options.auth.to_client())
        .await;

    let id = temper_runtime::id::ArtifactId::of(bytes).to_string();
    let layer_digest = sha256_digest(bytes);
    let config = wasm_config(bytes, &layer_digest);
    let config_digest = sha256_digest(&config);

    let mut annotations = BTreeMap::new();
    annotations.insert(
        "org.opencontainers.image.title".to_string(),
        manifest.name.clone(),
    );
    annotations.insert(
        "org.opencontainers.image.description".to_string(),
        manifest.description.clone(),
    );
    annotations.insert(ANNOTATION_BLAKE3.to_string(), id.clone());
    let oci_manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config: OciDescriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
            digest: config_digest.clone(),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.to_string(),
            digest: layer_digest.clone(),
            size: bytes.len() as i64,
            ..OciDescriptor::default()
        }],
        annotations: Some(annotations),
        ..OciImageManifest::default()
    };
    let body = serde_json::to_vec(&oci_manifest).expect("the manifest serializes");
    let manifest_digest = sha256_digest(&body);
    let manifest_size = body.len() as u64;

    client
        .push_blob(&target, bytes, &layer_digest)
        .await
        .map_err(|e| classify(e, stage, reference))?;
    client
        .push_blob(&target, &config, &config_digest)
        .await
        .map_err(|e| classify(e, stage, reference))?;
    client
        .push_manifest_raw(
            &target,
            body,
            OCI_IMAGE_MEDIA_TYPE.parse().expect("a valid header value"),
        )
        .await
        .map_err(|e| classify(e, stage, reference))?;
    Ok(Pushed {
        reference: reference.clone(),
        manifest_digest,
        manifest_size,
        layer_digest,
        id,
        name: manifest.name,
    })
}

/// Lists the tags of `reference`'s repository (its tag, if any, is ignored).
pub async fn list_tags(
    reference: &OciReference,
    options: &OciOptions,
) -> Result<Vec<String>, OciError> {
    let stage = OciStage::Tags;
    let client = client(reference, options, stage)?;
    let target = reference.to_client_reference();
    let tags = client
        .list_tags(&target, &options.auth.to_client(), None, None)
        .await
        .map_err(|e| classify(e, stage, reference))?;
    Ok(tags.tags)
}

/// Reads a blob through `client` into memory, at most `limit` bytes; returns
/// the bytes and whether the transfer itself failed (the caller checks the
/// digest either way, so a registry serving altered bytes is told apart from
/// a broken connection).
async fn read_blob(
    client: &Client,
    target: &Reference,
    descriptor: &OciDescriptor,
    limit: u64,
    reference: &OciReference,
) -> Result<(Vec<u8>, Option<String>), OciError> {
    let mut stream = client
        .pull_blob_stream(target, descriptor)
        .await
        .map_err(|e| classify(e, OciStage::Pull, reference))?;
    let mut out = Vec::with_capacity(descriptor.size.clamp(0, limit as i64) as usize);
    let mut failed = None;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                if out.len() as u64 + chunk.len() as u64 > limit {
                    return Err(OciError::Verify {
                        reference: reference.to_string(),
                        failure: VerifyFailure::SizeMismatch {
                            declared: descriptor.size.max(0) as u64,
                            actual: out.len() as u64 + chunk.len() as u64,
                        },
                    });
                }
                out.extend_from_slice(&chunk);
            }
            Err(e) => {
                failed = Some(e.to_string());
                break;
            }
        }
    }
    Ok((out, failed))
}

/// Pulls the artifact at `reference` and verifies it: the Wasm media types,
/// the layer's size and sha256 digest as the registry's manifest states
/// them, the blake3 id against the manifest's annotation (when present),
/// and the Temper manifest section. Nothing is stored.
pub async fn pull_artifact(
    reference: &OciReference,
    options: &OciOptions,
) -> Result<PulledArtifact, OciError> {
    let stage = OciStage::Pull;
    let verify = |failure| OciError::Verify {
        reference: reference.to_string(),
        failure,
    };
    let client = client(reference, options, stage)?;
    let target = reference.to_client_reference();
    let (manifest, manifest_digest) = client
        .pull_image_manifest(&target, &options.auth.to_client())
        .await
        .map_err(|e| classify(e, stage, reference))?;

    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(verify(VerifyFailure::ConfigMediaType(
            manifest.config.media_type.clone(),
        )));
    }
    let layer = match manifest.layers.as_slice() {
        [one] if one.media_type == WASM_LAYER_MEDIA_TYPE => one.clone(),
        layers => {
            let listed: Vec<&str> = layers.iter().map(|l| l.media_type.as_str()).collect();
            return Err(verify(VerifyFailure::Layers(format!("{listed:?}"))));
        }
    };
    let limit = options.max_artifact_bytes.unwrap_or(MAX_ARTIFACT_BYTES);
    if layer.size < 0 || layer.size as u64 > limit {
        return Err(verify(VerifyFailure::LayerSize {
            size: layer.size,
            limit,
        }));
    }
    if manifest.config.size < 0 || manifest.config.size as u64 > MAX_CONFIG_BYTES {
        return Err(verify(VerifyFailure::Config(format!(
            "size {} bytes not accepted",
            manifest.config.size
        ))));
    }

    // The config: a JSON object, its digest as stated.
    let (config, failed) = read_blob(
        &client,
        &target,
        &manifest.config,
        MAX_CONFIG_BYTES,
        reference,
    )
    .await?;
    let config_digest = sha256_digest(&config);
    if config_digest != manifest.config.digest {
        return Err(verify(VerifyFailure::Config(format!(
            "digest mismatch: the manifest states {}, the bytes are {config_digest}",
            manifest.config.digest
        ))));
    }
    if let Some(why) = failed {
        return Err(OciError::Registry {
            stage,
            reference: reference.to_string(),
            detail: format!("config transfer failed: {why}"),
        });
    }
    if !serde_json::from_slice::<serde_json::Value>(&config).is_ok_and(|v| v.is_object()) {
        return Err(verify(VerifyFailure::Config("not a JSON object".into())));
    }

    // The layer: size, then digest, then blake3, then the manifest section.
    let (bytes, failed) = read_blob(&client, &target, &layer, layer.size as u64, reference).await?;
    let actual = sha256_digest(&bytes);
    if bytes.len() as u64 == layer.size as u64 && actual != layer.digest {
        return Err(verify(VerifyFailure::LayerDigest {
            expected: layer.digest.clone(),
            actual,
        }));
    }
    if let Some(why) = failed {
        return Err(OciError::Registry {
            stage,
            reference: reference.to_string(),
            detail: format!("layer transfer failed: {why}"),
        });
    }
    if bytes.len() as u64 != layer.size as u64 {
        return Err(verify(VerifyFailure::SizeMismatch {
            declared: layer.size as u64,
            actual: bytes.len() as u64,
        }));
    }
    if actual != layer.digest {
        return Err(verify(VerifyFailure::LayerDigest {
            expected: layer.digest.clone(),
            actual,
        }));
    }
    let id = temper_runtime::id::ArtifactId::of(&bytes).to_string();
    if let Some(annotated) = manifest
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_BLAKE3))
        && *annotated != id
    {
        return Err(verify(VerifyFailure::Blake3 {
            annotated: annotated.clone(),
            actual: id,
        }));
    }
    let artifact_manifest =
        artifact::read_manifest(&bytes).map_err(|e| verify(VerifyFailure::Manifest(e)))?;
    Ok(PulledArtifact {
        reference: reference.clone(),
        bytes,
        id,
        manifest: artifact_manifest,
        manifest_digest,
        layer_digest: layer.digest,
    })
}

/// The pulled artifact with the signatures pushed as referrers of its
/// manifest ([`pull_signatures`]) added to its signature section: what an
/// import checks against the trust policy.
pub async fn with_referrer_signatures(
    pulled: &PulledArtifact,
    options: &OciOptions,
) -> Result<Vec<u8>, OciError> {
    let signatures = pull_signatures(&pulled.reference, &pulled.manifest_digest, options).await?;
    temper_sign::combine(&pulled.bytes, &signatures).map_err(|e| OciError::Registry {
        stage: OciStage::Pull,
        reference: pulled.reference.to_string(),
        detail: format!("referrer signatures: {e}"),
    })
}

/// Pulls and verifies `reference` ([`pull_artifact`]) and the signatures
/// pushed as its referrers ([`with_referrer_signatures`]), then imports it
/// with [`Forge::import_from`] (its reference scopes the trust policy's
/// rules): the same checks as `temper import` (trust policy, tests re-run
/// here, judge, capabilities against this host's policy).
pub async fn pull_and_import(
    forge: &Forge,
    reference: &OciReference,
    options: &OciOptions,
    ctx: &ForgeContext,
    tier: Tier,
) -> Result<(PulledArtifact, Forged), OciError> {
    let bounded = OciOptions {
        max_artifact_bytes: Some(
            options
                .max_artifact_bytes
                .unwrap_or_else(|| forge.max_artifact_bytes()),
        ),
        ..options.clone()
    };
    let pulled = pull_artifact(reference, &bounded).await?;
    let bytes = with_referrer_signatures(&pulled, options).await?;
    let from = reference.to_string();
    let forged = forge
        .import_from(bytes, ctx, tier, Some(&from))
        .await
        .map_err(|e| OciError::Import {
            reference: reference.to_string(),
            source: Box::new(e),
        })?;
    Ok((pulled, forged))
}

#[cfg(test)]
mod tests;
