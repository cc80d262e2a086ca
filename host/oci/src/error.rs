//! What can go wrong: the stage ([`OciStage`]), the reference, and for a
//! pulled artifact which check refused it ([`VerifyFailure`]).

use std::fmt;
use temper_forge::ForgeError;
use temper_runtime::artifact::ArtifactError;

use super::*;

/// The operation an [`OciError`] happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OciStage {
    /// Uploading blobs and the manifest.
    Push,
    /// Fetching the manifest, config or layer.
    Pull,
    /// Checking the pulled bytes (media types, digest, blake3, manifest section).
    Verify,
    /// Listing a repository's tags.
    Tags,
    /// Importing the verified bytes through the forge's checks.
    Import,
}

impl fmt::Display for OciStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OciStage::Push => "push",
            OciStage::Pull => "pull",
            OciStage::Verify => "verify",
            OciStage::Tags => "tags",
            OciStage::Import => "import",
        })
    }
}

/// Why a pulled artifact was refused at the verify stage.
#[derive(Debug, thiserror::Error)]
pub enum VerifyFailure {
    /// The manifest's config is not a Wasm config.
    #[error("config media type is {0:?}, expected {WASM_CONFIG_MEDIA_TYPE:?}")]
    ConfigMediaType(String),
    /// The manifest does not hold exactly one `application/wasm` layer.
    #[error("expected exactly one {WASM_LAYER_MEDIA_TYPE:?} layer, found: {0}")]
    Layers(String),
    /// The layer's declared size is negative or too large.
    #[error(
        "the layer is {size} bytes, over the {limit}-byte cap (maxArtifactBytes in --forge-config); refused before download"
    )]
    LayerSize {
        /// The size the manifest declares.
        size: i64,
        /// The cap.
        limit: u64,
    },
    /// The bytes served are not the size the manifest declares.
    #[error("layer is {actual} bytes, the manifest declares {declared}")]
    SizeMismatch {
        /// Declared by the manifest.
        declared: u64,
        /// Received.
        actual: u64,
    },
    /// The layer's sha256 is not the digest the manifest states.
    #[error("layer digest mismatch: the manifest states {expected}, the bytes are {actual}")]
    LayerDigest {
        /// The manifest's digest.
        expected: String,
        /// The digest of the bytes served.
        actual: String,
    },
    /// The blake3 id of the bytes differs from the manifest's annotation.
    #[error("blake3 id mismatch: annotated {annotated}, the bytes are {actual}")]
    Blake3 {
        /// The annotation's id.
        annotated: String,
        /// The bytes' id.
        actual: String,
    },
    /// The bytes carry no valid Temper manifest section.
    #[error("not a Temper artifact: {0}")]
    Manifest(#[source] ArtifactError),
    /// The config blob is not the CNCF Wasm config.
    #[error("config blob: {0}")]
    Config(String),
    /// The OCI manifest's bytes do not match the digest asked for or stated.
    #[error("manifest digest: {0}")]
    ManifestDigest(String),
}

/// An OCI push/pull failure, naming the stage and the reference.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference is not `oci://HOST[:PORT]/REPO(:TAG|@DIGEST)`.
    #[error("invalid OCI reference {reference:?}: {reason}")]
    Reference {
        /// The text given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `insecure` (plain HTTP) asked for a registry that is not loopback.
    #[error(
        "{stage} {reference}: --insecure (plain HTTP) refused for registry {registry}: only allowed for 127.0.0.1, localhost and [::1]"
    )]
    InsecureRefused {
        /// The operation.
        stage: OciStage,
        /// The reference.
        reference: String,
        /// The registry host.
        registry: String,
    },
    /// The credentials could not be read (env or auth file).
    #[error("registry credentials: {0}")]
    Credentials(String),
    /// The bytes to push are not a Temper artifact.
    #[error("push {reference}: not a Temper artifact: {source}")]
    NotAnArtifact {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: ArtifactError,
    },
    /// The registry refused the credentials (or their absence).
    #[error("{stage} {reference}: authentication failed: {detail}")]
    Auth {
        /// The operation.
        stage: OciStage,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// The tag, digest or repository does not exist.
    #[error("{stage} {reference}: not found in the registry: {detail}")]
    NotFound {
        /// The operation.
        stage: OciStage,
        /// The reference.
        reference: String,
        /// The registry's answer.
        detail: String,
    },
    /// Any other registry or transport failure.
    #[error("{stage} {reference}: {detail}")]
    Registry {
        /// The operation.
        stage: OciStage,
        /// The reference.
        reference: String,
        /// What happened.
        detail: String,
    },
    /// The pulled artifact failed verification; nothing was imported.
    #[error("verify {reference}: {failure}")]
    Verify {
        /// The reference.
        reference: String,
        /// What did not match.
        #[source]
        failure: VerifyFailure,
    },
    /// The verified artifact was refused by the forge's import checks.
    #[error("import {reference}: refused at the {} stage: {source}", source.stage())]
    Import {
        /// The reference.
        reference: String,
        /// The forge's refusal.
        #[source]
        source: Box<ForgeError>,
    },
}

impl OciError {
    /// The operation that failed (a bad reference or unreadable credentials,
    /// found before any operation starts, report [`OciStage::Pull`]).
    pub fn stage(&self) -> OciStage {
        match self {
            OciError::Reference { .. } | OciError::Credentials(_) => OciStage::Pull,
            OciError::NotAnArtifact { .. } => OciStage::Push,
            OciError::InsecureRefused { stage, .. }
            | OciError::Auth { stage, .. }
            | OciError::NotFound { stage, .. }
            | OciError::Registry { stage, .. } => *stage,
            OciError::Verify { .. } => OciStage::Verify,
            OciError::Import { .. } => OciStage::Import,
        }
    }
}
