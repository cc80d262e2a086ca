//! The issuer's key set (RFC 7517 JWKS): read from a file or fetched over
//! HTTPS, kept for `cache_secs`, fetched again when a token names a `kid`
//! it does not hold (key rotation), at most once per `min_refetch_secs`.
//!
//! Bounded: a set of at most [`MAX_KEYS`] keys and [`MAX_BYTES`] bytes, one
//! set held at a time. Only signature keys that can verify an accepted
//! algorithm are kept (RSA, EC P-256, Ed25519, with `use` absent or `sig`);
//! symmetric (`oct`) and encryption keys are dropped, so no token can name
//! them. Fail closed: when the set cannot be fetched and the held one is
//! older than `cache_secs`, every token is refused until a fetch succeeds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use url::Url;

use super::config::{JwksConfig, JwksSource};

/// Most keys a set may hold.
pub const MAX_KEYS: usize = 100;
/// Largest key set document, bytes.
pub const MAX_BYTES: usize = 512 << 10;
/// Time allowed for one fetch.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a key set could not be had. Names the file or the URL (without
/// credentials or query: see [`display_url`]), never a token.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    /// The file could not be read.
    #[error("jwks: cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The URL could not be fetched (connection, TLS, status, size).
    #[error("jwks: cannot fetch {url}: {reason}")]
    Fetch {
        /// The URL, as [`display_url`] shows it.
        url: String,
        /// Why.
        reason: String,
    },
    /// The `ca_file` is unusable.
    #[error("jwks: ca_file {path}: {reason}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The document is not a key set.
    #[error("jwks: {origin}: {reason}")]
    Parse {
        /// The file or URL.
        origin: String,
        /// Why.
        reason: String,
    },
}

/// A key that verifies one kind of signature.
#[derive(Clone)]
pub struct Key {
    kind: KeyKind,
    /// The `alg` the key set declares for it, if any.
    declared: Option<KeyAlgorithm>,
    decoding: DecodingKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Rsa,
    P256,
    Ed25519,
}

impl Key {
    /// Whether this key may verify a token signed with `alg`: its type
    /// fits, and the `alg` the set declares for it (if any) is `alg`.
    pub fn fits(&self, alg: Algorithm) -> bool {
        let (kind, declared) = match alg {
            Algorithm::RS256 => (KeyKind::Rsa, KeyAlgorithm::RS256),
            Algorithm::ES256 => (KeyKind::P256, KeyAlgorithm::ES256),
            Algorithm::EdDSA => (KeyKind::Ed25519, KeyAlgorithm::EdDSA),
            _ => return false,
        };
        self.kind == kind && self.declared.is_none_or(|d| d == declared)
    }

    /// The key for `jsonwebtoken::decode`.
    pub fn decoding(&self) -> &DecodingKey {
        &self.decoding
    }
}

/// A parsed key set: `kid` → key.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: HashMap<String, Arc<Key>>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kids: Vec<&String> = self.keys.keys().collect();
        kids.sort();
        f.debug_struct("KeySet").field("kids", &kids).finish()
    }
}

impl KeySet {
    /// Parses a JWKS document; `origin` names it in errors. Keys this
    /// verifier cannot use are skipped (logged by `kid`), as are keys
    /// without a `kid` (a token must name its key).
    pub fn parse(bytes: &[u8], origin: &str) -> Result<Self, JwksError> {
        let bad = |reason: String| JwksError::Parse {
            origin: origin.to_string(),
            reason,
        };
        if bytes.len() > MAX_BYTES {
            return Err(bad(format!("over {MAX_BYTES} bytes")));
        }
        #[derive(serde::Deserialize)]
        struct Doc {
            keys: Vec<Value>,
        }
        let doc: Doc = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("not a key set ({{\"keys\": [...]}}): {e}")))?;
        if doc.keys.len() > MAX_KEYS {
            return Err(bad(format!(
                "{} keys, more than {MAX_KEYS}",
                doc.keys.len()
            )));
        }
        let mut keys = HashMap::new();
        for (i, raw) in doc.keys.into_iter().enumerate() {
            let kid = raw.get("kid").and_then(Value::as_str).map(str::to_string);
            match usable(raw) {
                Ok(key) => {
                    let Some(kid) = kid else {
                        tracing::warn!("jwks: {origin}: key #{i} has no kid: skipped");
                        continue;
                    };
                    if keys.insert(kid.clone(), Arc::new(key)).is_some() {
                        return Err(bad(format!("kid {kid:?} appears twice")));
                    }
                }
                Err(why) => {
                    tracing::debug!("jwks: {origin}: key #{i} (kid {kid:?}) skipped: {why}");
                }
            }
        }
        Ok(Self { keys })
    }

    /// The key named `kid`.
    pub fn get(&self, kid: &str) -> Option<Arc<Key>> {
        self.keys.get(kid).cloned()
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn usable(raw: Value) -> Result<Key, String> {
    let jwk: Jwk = serde_json::from_value(raw).map_err(|e| format!("not a JWK: {e}"))?;
    if let Some(u) = &jwk.common.public_key_use
        && *u != PublicKeyUse::Signature
    {
        return Err("not a signature key (use)".into());
    }
    if let Some(ops) = &jwk.common.key_operations
        && !ops.contains(&KeyOperations::Verify)
    {
        return Err("not a verification key (key_ops)".into());
    }
    let kind = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => KeyKind::Rsa,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => KeyKind::P256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            KeyKind::Ed25519
        }
        _ => return Err("a key type or curve no accepted algorithm uses".into()),
    };
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| format!("bad key material: {e}"))?;
    Ok(Key {
        kind,
        declared: jwk.common.key_algorithm,
        decoding,
    })
}

/// `url` without credentials, query or fragment: how errors and logs name
/// a key set URL.
pub fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// Where a set is loaded from.
enum Loader {
    File(PathBuf),
    Url { url: Url, client: reqwest::Client },
}

impl Loader {
    fn new(config: &JwksConfig) -> Result<Self, JwksError> {
        Ok(match &config.source {
            JwksSource::File(path) => Loader::File(path.clone()),
            JwksSource::Url(url) => Loader::Url {
                url: url.clone(),
                client: client(config.ca_file.as_deref())?,
            },
        })
    }

    fn origin(&self) -> String {
        match self {
            Loader::File(path) => path.display().to_string(),
            Loader::Url { url, .. } => display_url(url),
        }
    }

    async fn load(&self) -> Result<KeySet, JwksError> {
        let bytes = match self {
            // A small local file (capped below): read in place.
            Loader::File(path) => std::fs::read(path).map_err(|source| JwksError::Read {
                path: path.clone(),
                source,
            })?,
            Loader::Url { url, client } => fetch(client, url).await?,
        };
        KeySet::parse(&bytes, &self.origin())
    }
}

fn client(ca_file: Option<&std::path::Path>) -> Result<reqwest::Client, JwksError> {
    let mut builder = reqwest::Client::builder()
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT);
    if let Some(path) = ca_file {
        let ca = |reason: String| JwksError::Ca {
            path: path.to_path_buf(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| ca(e.to_string()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca("no PEM certificate in it".into()));
        }
        builder = builder.tls_built_in_root_certs(false);
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| JwksError::Fetch {
        url: "(client)".into(),
        reason: e.to_string(),
    })
}

async fn fetch(client: &reqwest::Client, url: &Url) -> Result<Vec<u8>, JwksError> {
    let fail = |reason: String| JwksError::Fetch {
        url: display_url(url),
        reason,
    };
    let mut resp = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| fail(chain(&e.without_url())))?;
    if resp.status() != reqwest::StatusCode::OK {
        return Err(fail(format!("HTTP status {}", resp.status())));
    }
    if resp.content_length().is_some_and(|n| n > MAX_BYTES as u64) {
        return Err(fail(format!("over {MAX_BYTES} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| fail(chain(&e.without_url())))?
    {
        if body.len() + chunk.len() > MAX_BYTES {
            return Err(fail(format!("over {MAX_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error and its causes, `: `-separated (reqwest's own message is only
/// "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Why no key was found for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The set (fresh, or fetched again) has no such `kid`.
    UnknownKid,
    /// The held set is stale and cannot be fetched: fail closed.
    Unavailable,
}

struct Held {
    set: Arc<KeySet>,
    fetched: Instant,
}

/// The cached key set of one issuer.
pub struct Jwks {
    loader: Loader,
    cache_for: Duration,
    min_refetch: Duration,
    held: RwLock<Held>,
    /// The last fetch attempt; held across a fetch, so one runs at a time
    /// and the others wait for its result.
    attempt: tokio::sync::Mutex<Instant>,
    fetches: std::sync::atomic::AtomicU64,
}

impl Jwks {
    /// Loads the set once: an error here (a missing file, an unreachable
    /// URL, an invalid set) stops the server from starting.
    pub async fn load(config: &JwksConfig) -> Result<Self, JwksError> {
        let loader = Loader::new(config)?;
        let set = loader.load().await?;
        if set.is_empty() {
            return Err(JwksError::Parse {
                origin: loader.origin(),
                reason: "no usable signature key (RSA, EC P-256 or Ed25519 with a kid)".into(),
            });
        }
        let now = Instant::now();
        Ok(Self {
            loader,
            cache_for: config.cache_for,
            min_refetch: config.min_refetch,
            held: RwLock::new(Held {
                set: Arc::new(set),
                fetched: now,
            }),
            attempt: tokio::sync::Mutex::new(now),
            fetches: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// The file or URL it loads from, as errors name it.
    pub fn origin(&self) -> String {
        self.loader.origin()
    }

    /// How many loads ran (the first included).
    pub fn fetches(&self) -> u64 {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn held(&self) -> (Arc<KeySet>, bool) {
        let h = self.held.read().unwrap_or_else(|p| p.into_inner());
        (h.set.clone(), h.fetched.elapsed() < self.cache_for)
    }

    /// The key named `kid`: from the held set while it is fresh; else, or
    /// when it lacks `kid`, after fetching again (at most once per
    /// `min_refetch`).
    pub async fn key(&self, kid: &str) -> Result<Arc<Key>, Missing> {
        let (set, fresh) = self.held();
        if fresh && let Some(k) = set.get(kid) {
            return Ok(k);
        }
        self.refetch().await;
        let (set, fresh) = self.held();
        if !fresh {
            return Err(Missing::Unavailable);
        }
        set.get(kid).ok_or(Missing::UnknownKid)
    }

    async fn refetch(&self) {
        let mut last = self.attempt.lock().await;
        if last.elapsed() < self.min_refetch {
            return;
        }
        *last = Instant::now();
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.loader.load().await {
            Ok(set) if !set.is_empty() => {
                tracing::info!("jwks: loaded {} ({} keys)", self.origin(), set.len());
                *self.held.write().unwrap_or_else(|p| p.into_inner()) = Held {
                    set: Arc::new(set),
                    fetched: Instant::now(),
                };
            }
            Ok(_) => tracing::error!(
                "jwks: {} has no usable key; keeping the held set until it is stale",
                self.origin()
            ),
            Err(e) => tracing::error!("{e}; keeping the held set until it is stale"),
        }
    }
}
