//! Registry credentials: basic or bearer, from the environment or an auth
//! file (TOML).

use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use super::*;

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
pub(super) struct AuthEntry {
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

/// An auth file: `[registries."HOST[:PORT]"]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuthFile {
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

    pub(super) fn from_parts(
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

    pub(super) fn to_client(&self) -> RegistryAuth {
        match self {
            OciAuth::Anonymous => RegistryAuth::Anonymous,
            OciAuth::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            OciAuth::Bearer { token } => RegistryAuth::Bearer(token.clone()),
        }
    }
}
