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
//! the Temper manifest section ([`crate::artifact::read_manifest`]).
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
//! # async fn demo(bytes: Vec<u8>) -> Result<(), temper::oci::OciError> {
//! use temper::oci::{OciOptions, OciReference, push_artifact, pull_artifact};
//! let reference = OciReference::parse("oci://127.0.0.1:5000/tools/slugify:1.0")?;
//! let options = OciOptions { insecure: true, ..OciOptions::default() };
//! let pushed = push_artifact(&bytes, &reference, &options).await?;
//! let pulled = pull_artifact(&reference, &options).await?;
//! assert_eq!(pulled.id, pushed.id);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::artifact::{self, ArtifactError, ArtifactManifest};
use crate::forge::{Forge, ForgeContext, ForgeError, Forged};
use crate::store::Tier;

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
/// The largest artifact a pull accepts (declared or streamed).
pub const MAX_ARTIFACT_BYTES: u64 = 64 * 1024 * 1024;
/// The largest config blob a pull accepts.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;
/// The config's `created`: fixed, so the same artifact always gives the same
/// manifest digest (the artifacts themselves are byte-reproducible).
const CREATED: &str = "1970-01-01T00:00:00Z";

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
    #[error("layer size {0} bytes is not accepted (limit {MAX_ARTIFACT_BYTES} bytes)")]
    LayerSize(i64),
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

/// A parsed `oci://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST)` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `HOST[:PORT]` (IPv6 in brackets).
    pub registry: String,
    /// The repository path, e.g. `tools/slugify`.
    pub repository: String,
    /// The tag, if given.
    pub tag: Option<String>,
    /// The manifest digest (`sha256:...`), if given.
    pub digest: Option<String>,
}

impl OciReference {
    /// Parses `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
    pub fn parse(text: &str) -> Result<OciReference, OciError> {
        let bad = |reason: &str| OciError::Reference {
            reference: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| bad("must start with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected oci://HOST[:PORT]/REPO:TAG"))?;
        validate_registry(registry).map_err(|r| bad(&r))?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or_else(|| bad("the digest must be sha256:HEX"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("the digest must be sha256: and 64 hex digits"));
                }
                (p, Some(d.to_ascii_lowercase()))
            }
            None => (path, None),
        };
        let last_slash = path.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (repository, tag) = match path[last_slash..].rfind(':') {
            Some(i) => (
                &path[..last_slash + i],
                Some(path[last_slash + i + 1..].to_string()),
            ),
            None => (path, None),
        };
        if repository.is_empty() {
            return Err(bad("the repository is empty"));
        }
        for component in repository.split('/') {
            let ok = !component.is_empty()
                && component.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && component.as_bytes()[0].is_ascii_alphanumeric()
                && component.as_bytes()[component.len() - 1].is_ascii_alphanumeric();
            if !ok {
                return Err(bad(&format!(
                    "repository component {component:?}: lowercase letters, digits and . _ - between them"
                )));
            }
        }
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && (t.as_bytes()[0].is_ascii_alphanumeric() || t.as_bytes()[0] == b'_')
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(bad(&format!(
                    "tag {t:?}: up to 128 of letters, digits, . _ - (not starting with . or -)"
                )));
            }
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// Whether the registry host is loopback (127.0.0.0/8, `localhost`, `[::1]`).
    pub fn is_loopback(&self) -> bool {
        let host = host_of(&self.registry);
        if host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    fn to_client_reference(&self) -> Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => {
                Reference::with_digest(self.registry.clone(), self.repository.clone(), d.clone())
            }
            (None, Some(t)) => {
                Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone())
            }
            (None, None) => Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".into(),
            ),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for OciReference {
    type Err = OciError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OciReference::parse(s)
    }
}

/// The host part of `HOST[:PORT]` (IPv6 kept in brackets).
fn host_of(registry: &str) -> &str {
    if registry.starts_with('[') {
        match registry.find(']') {
            Some(i) => &registry[..=i],
            None => registry,
        }
    } else {
        registry.split(':').next().unwrap_or(registry)
    }
}

fn validate_registry(registry: &str) -> Result<(), String> {
    if registry.is_empty() {
        return Err("the registry host is empty".into());
    }
    if registry.contains('@') {
        return Err(
            "credentials in the reference are not accepted (use the env or an auth file)".into(),
        );
    }
    let host = host_of(registry);
    let port = &registry[host.len()..];
    if !port.is_empty() {
        let p = port
            .strip_prefix(':')
            .ok_or_else(|| format!("bad registry {registry:?}"))?;
        p.parse::<u16>()
            .map_err(|_| format!("bad registry port {p:?}"))?;
    }
    if host.starts_with('[') {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("bad IPv6 registry host {host:?}"))?;
    } else if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
    {
        return Err(format!("bad registry host {host:?}"));
    }
    Ok(())
}

/// Registry credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum OciAuth {
    /// No credentials.
    #[default]
    Anonymous,
    /// HTTP basic auth.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
    /// A bearer token, sent as is.
    Bearer {
        /// The token.
        token: String,
    },
}

impl fmt::Debug for OciAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OciAuth::Anonymous => f.write_str("Anonymous"),
            OciAuth::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            OciAuth::Bearer { .. } => f.write_str("Bearer(<redacted>)"),
        }
    }
}

/// One registry's entry in an auth file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthEntry {
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

/// An auth file: `[registries."HOST[:PORT]"]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    registries: BTreeMap<String, AuthEntry>,
}

impl OciAuth {
    /// Credentials from environment values (looked up through `get`):
    /// [`ENV_TOKEN`] gives bearer; [`ENV_USERNAME`] with [`ENV_PASSWORD`]
    /// gives basic; one of the pair without the other, or a token with a
    /// user, is an error. `Ok(None)` when none is set.
    pub fn from_env_with(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OciAuth>, OciError> {
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let (user, pass, token) = (
            nonempty(ENV_USERNAME),
            nonempty(ENV_PASSWORD),
            nonempty(ENV_TOKEN),
        );
        Self::from_parts(user, pass, token, "the environment").map(|a| {
            if a == OciAuth::Anonymous {
                None
            } else {
                Some(a)
            }
        })
    }

    /// Credentials from the process environment (see [`OciAuth::from_env_with`]).
    pub fn from_env() -> Result<Option<OciAuth>, OciError> {
        Self::from_env_with(|k| std::env::var(k).ok())
    }

    fn from_parts(
        user: Option<String>,
        pass: Option<String>,
        token: Option<String>,
        origin: &str,
    ) -> Result<OciAuth, OciError> {
        match (user, pass, token) {
            (None, None, None) => Ok(OciAuth::Anonymous),
            (None, None, Some(token)) => Ok(OciAuth::Bearer { token }),
            (Some(username), Some(password), None) => Ok(OciAuth::Basic { username, password }),
            (_, _, Some(_)) => Err(OciError::Credentials(format!(
                "{origin}: a token and a user name/password are both set: choose one"
            ))),
            (Some(_), None, None) => Err(OciError::Credentials(format!(
                "{origin}: a user name without a password"
            ))),
            (None, Some(_), None) => Err(OciError::Credentials(format!(
                "{origin}: a password without a user name"
            ))),
        }
    }

    /// The credentials for `registry` (`HOST[:PORT]`, as in the reference)
    /// from an auth file (TOML; unknown keys are errors):
    ///
    /// ```toml
    /// [registries."registry.example.com"]
    /// token = "..."
    /// [registries."127.0.0.1:5000"]
    /// username = "ci"
    /// password = "..."
    /// ```
    ///
    /// `Ok(None)` when the file has no entry for the registry.
    pub fn from_file(path: &Path, registry: &str) -> Result<Option<OciAuth>, OciError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            OciError::Credentials(format!("cannot read auth file {}: {e}", path.display()))
        })?;
        let file: AuthFile = toml::from_str(&text)
            .map_err(|e| OciError::Credentials(format!("auth file {}: {e}", path.display())))?;
        match file.registries.get(registry) {
            None => Ok(None),
            Some(e) => Self::from_parts(
                e.username.clone(),
                e.password.clone(),
                e.token.clone(),
                &format!("auth file {} [registries.{registry:?}]", path.display()),
            )
            .map(Some),
        }
    }

    /// The credentials for `registry`: the environment first, then the auth
    /// file if one is given (and exists, for the default location), else
    /// anonymous.
    pub fn resolve(registry: &str, file: Option<&Path>) -> Result<OciAuth, OciError> {
        if let Some(a) = Self::from_env()? {
            return Ok(a);
        }
        if let Some(path) = file
            && let Some(a) = Self::from_file(path, registry)?
        {
            return Ok(a);
        }
        Ok(OciAuth::Anonymous)
    }

    fn to_client(&self) -> RegistryAuth {
        match self {
            OciAuth::Anonymous => RegistryAuth::Anonymous,
            OciAuth::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            OciAuth::Bearer { token } => RegistryAuth::Bearer(token.clone()),
        }
    }
}

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Credentials.
    pub auth: OciAuth,
    /// Plain HTTP instead of HTTPS; only accepted for loopback registries.
    pub insecure: bool,
}

/// What [`push_artifact`] stored.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pushed to.
    pub reference: OciReference,
    /// The manifest's digest (`sha256:...`): pull by `REPO@DIGEST` to pin it.
    pub manifest_digest: String,
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

    let id = crate::id::blake3_hex(bytes);
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
    if layer.size < 0 || layer.size as u64 > MAX_ARTIFACT_BYTES {
        return Err(verify(VerifyFailure::LayerSize(layer.size)));
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
    let id = crate::id::blake3_hex(&bytes);
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

/// Pulls and verifies `reference` ([`pull_artifact`]), then imports it with
/// [`Forge::import`]: the same checks as `temper import` (tests re-run here,
/// judge, capabilities against this host's policy).
pub async fn pull_and_import(
    forge: &Forge,
    reference: &OciReference,
    options: &OciOptions,
    ctx: &ForgeContext,
    tier: Tier,
) -> Result<(PulledArtifact, Forged), OciError> {
    let pulled = pull_artifact(reference, options).await?;
    let forged = forge
        .import(pulled.bytes.clone(), ctx, tier)
        .await
        .map_err(|e| OciError::Import {
            reference: reference.to_string(),
            source: Box::new(e),
        })?;
    Ok((pulled, forged))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse() {
        let r = OciReference::parse("oci://127.0.0.1:5000/tools/slugify:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "tools/slugify");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/slugify:1.0");

        let r = OciReference::parse("oci://[::1]:5000/a").unwrap();
        assert!(r.is_loopback());
        assert_eq!(r.tag, None);
        let r = OciReference::parse("oci://localhost/a/b:x").unwrap();
        assert!(r.is_loopback());
        let d = format!("sha256:{}", "a".repeat(64));
        let r = OciReference::parse(&format!("oci://registry.example.com/a@{d}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert!(!r.is_loopback());
        assert!(
            !OciReference::parse("oci://127.0.0.1.example.com/a:b")
                .unwrap()
                .is_loopback()
        );

        for bad in [
            "http://h/a:b",
            "oci://h",
            "oci:///a:b",
            "oci://h/A:b",
            "oci://h/a:",
            "oci://h/a:-x",
            "oci://u:p@h/a:b",
            "oci://h:99999/a:b",
            "oci://h/a@sha256:12",
            "oci://h//a:b",
        ] {
            assert!(
                matches!(OciReference::parse(bad), Err(OciError::Reference { .. })),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn credentials_from_env_values() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(OciAuth::from_env_with(env(&[])).unwrap(), None);
        assert_eq!(
            OciAuth::from_env_with(env(&[(ENV_TOKEN, "t")])).unwrap(),
            Some(OciAuth::Bearer { token: "t".into() })
        );
        assert_eq!(
            OciAuth::from_env_with(env(&[(ENV_USERNAME, "u"), (ENV_PASSWORD, "p")])).unwrap(),
            Some(OciAuth::Basic {
                username: "u".into(),
                password: "p".into()
            })
        );
        for half in [
            &[(ENV_USERNAME, "u")][..],
            &[(ENV_PASSWORD, "p")][..],
            &[(ENV_USERNAME, "u"), (ENV_PASSWORD, "p"), (ENV_TOKEN, "t")][..],
        ] {
            let half: &'static [(&'static str, &'static str)] = half;
            assert!(matches!(
                OciAuth::from_env_with(env(half)),
                Err(OciError::Credentials(_))
            ));
        }
        let secret = format!(
            "{:?}",
            OciAuth::Basic {
                username: "u".into(),
                password: "hunter2".into()
            }
        );
        assert!(!secret.contains("hunter2"), "{secret}");
    }

    #[test]
    fn credentials_from_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.toml");
        std::fs::write(
            &path,
            "[registries.\"127.0.0.1:5000\"]\nusername = \"ci\"\npassword = \"pw\"\n\
             [registries.\"r.example\"]\ntoken = \"tok\"\n",
        )
        .unwrap();
        assert_eq!(
            OciAuth::from_file(&path, "127.0.0.1:5000").unwrap(),
            Some(OciAuth::Basic {
                username: "ci".into(),
                password: "pw".into()
            })
        );
        assert_eq!(
            OciAuth::from_file(&path, "r.example").unwrap(),
            Some(OciAuth::Bearer {
                token: "tok".into()
            })
        );
        assert_eq!(OciAuth::from_file(&path, "other").unwrap(), None);
        std::fs::write(&path, "[registries.\"h\"]\nuser = \"x\"\n").unwrap();
        assert!(matches!(
            OciAuth::from_file(&path, "h"),
            Err(OciError::Credentials(_))
        ));
    }
}
