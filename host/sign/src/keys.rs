//! Ed25519 keys: generating a pair, their files, and key ids.
//!
//! A key pair is two files: `KEY` (the secret key, PKCS#8 PEM, created with
//! mode 0600 and never overwritten) and `KEY.pub` (the public key, PEM).
//! A key's id ([`key_id`]) is the first 16 hex characters of the blake3 of
//! its 32 public-key bytes: it is written into each signature (a hint; a
//! verifier tries every trusted key) and printed by `temper keygen` for the
//! trust file.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// Why a key could not be made, read or written. Never carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file exists: keys are never overwritten.
    #[error("key: {0} exists; choose another path (keys are never overwritten)")]
    Exists(PathBuf),
    /// Reading or writing a key file failed.
    #[error("key: {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a key of the expected kind.
    #[error("key: {path}: not an Ed25519 {kind} key in PEM form")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// `secret` or `public`.
        kind: &'static str,
    },
}

/// The id of a public key: 16 hex characters of the blake3 of its bytes.
pub fn key_id(public: &[u8]) -> String {
    blake3::hash(public).to_hex()[..16].to_string()
}

/// A secret signing key and its public half. Its `Debug` shows only the key
/// id: the secret never reaches a log or an error.
pub struct SigningKey {
    pair: wasmsign2::KeyPair,
    id: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A fresh key pair from the operating system's random source.
    pub fn generate() -> SigningKey {
        SigningKey::from_pair(wasmsign2::KeyPair::generate())
    }

    fn from_pair(pair: wasmsign2::KeyPair) -> SigningKey {
        let id = key_id(pair.pk.pk.as_ref());
        SigningKey { pair, id }
    }

    /// The key id ([`key_id`] of the public key).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The 32 public-key bytes, base64 (what a trust file's `ed25519 = …`
    /// holds).
    pub fn public_base64(&self) -> String {
        BASE64.encode(self.pair.pk.pk.as_ref())
    }

    /// The public key, as the signature library takes it.
    pub fn public_key(&self) -> wasmsign2::PublicKey {
        wasmsign2::PublicKey {
            pk: self.pair.pk.pk,
            key_id: None,
        }
    }

    pub(crate) fn secret(&self) -> &wasmsign2::SecretKey {
        &self.pair.sk
    }

    /// Writes `path` (the secret key, mode 0600, refusing to overwrite) and
    /// `path.pub` (the public key); returns the public key's path.
    pub fn write(&self, path: &Path) -> Result<PathBuf, KeyError> {
        let public_path = public_path(path);
        for p in [path, public_path.as_path()] {
            if p.exists() {
                return Err(KeyError::Exists(p.to_path_buf()));
            }
        }
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| KeyError::Io { path: p, source }
        };
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(io(path))?;
        file.write_all(self.pair.sk.to_pem().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io(path))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = options.open(&public_path).map_err(io(&public_path))?;
        file.write_all(self.pair.pk.to_pem().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io(&public_path))?;
        Ok(public_path)
    }

    /// Reads a secret key file written by [`SigningKey::write`] (or any
    /// PKCS#8 PEM Ed25519 secret key).
    pub fn read(path: &Path) -> Result<SigningKey, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let malformed = || KeyError::Malformed {
            path: path.to_path_buf(),
            kind: "secret",
        };
        let sk = wasmsign2::SecretKey::from_pem(&text).map_err(|_| malformed())?;
        let pk = wasmsign2::PublicKey {
            pk: sk.sk.public_key(),
            key_id: None,
        };
        Ok(SigningKey::from_pair(wasmsign2::KeyPair { pk, sk }))
    }
}

/// `KEY.pub` for `KEY`.
pub fn public_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Reads a public key file (PEM) and returns its 32 bytes as base64.
pub fn read_public_base64(path: &Path) -> Result<String, KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let pk = wasmsign2::PublicKey::from_pem(&text).map_err(|_| KeyError::Malformed {
        path: path.to_path_buf(),
        kind: "public",
    })?;
    Ok(BASE64.encode(pk.pk.as_ref()))
}

/// A key the trust policy names: its publisher, its id in the policy, the
/// public key, and the last day it may sign (inclusive).
#[derive(Debug, Clone)]
pub struct TrustedKey {
    /// The publisher it belongs to.
    pub publisher: String,
    /// Its id in the trust file.
    pub id: String,
    /// [`key_id`] of the public key.
    pub fingerprint: String,
    /// The public key.
    pub public: wasmsign2::PublicKey,
    /// The last day (UTC) a signature by it counts; `None`: no expiry.
    pub not_after: Option<crate::Date>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_round_trip_and_the_secret_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("team.key");
        let key = SigningKey::generate();
        let public = key.write(&path).unwrap();
        assert_eq!(public, dir.path().join("team.key.pub"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        let read = SigningKey::read(&path).unwrap();
        assert_eq!(read.id(), key.id());
        assert_eq!(read.public_base64(), key.public_base64());
        assert_eq!(read_public_base64(&public).unwrap(), key.public_base64());
        assert_eq!(key.id().len(), 16);
        // Never overwritten.
        assert!(matches!(
            SigningKey::generate().write(&path),
            Err(KeyError::Exists(_))
        ));
        // Debug shows the id, not the secret.
        let secret_pem = std::fs::read_to_string(&path).unwrap();
        let body: String = secret_pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let debug = format!("{key:?}");
        assert!(
            debug.contains(key.id()) && !debug.contains(&body),
            "{debug}"
        );
        // A public key is not a secret key, and garbage is neither.
        assert!(matches!(
            SigningKey::read(&public),
            Err(KeyError::Malformed { .. })
        ));
        std::fs::write(dir.path().join("junk"), "junk").unwrap();
        assert!(matches!(
            read_public_base64(&dir.path().join("junk")),
            Err(KeyError::Malformed { kind: "public", .. })
        ));
    }
}
