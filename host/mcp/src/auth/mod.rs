//! OAuth 2.1 resource-server authentication for `temper mcp --http`
//! (`--auth jwt --auth-config FILE`): bearer JWTs checked against the
//! issuer's key set, and RFC 9728 protected-resource metadata.
//!
//! Transport-independent: [`JwtVerifier::verify`] turns a token into a
//! [`Grant`] (the agent, its tiers, limits and hub-tool narrowing) or a
//! [`Refusal`]; [`crate::http`] makes the grant its principal, answers a
//! refusal with `401`/`403` and the challenge of [`metadata`], and serves
//! the metadata document.
//!
//! - [`config`]: the TOML file.
//! - [`jwks`]: the key set, from a file or HTTPS, cached and refetched.
//! - [`jwt`](mod@jwt): verification.
//! - [`metadata`]: RFC 9728 document and challenges.
//! - [`provider`]: `jsonwebtoken`'s crypto on `ring`.
//!
//! **Sessions and limits belong to the agent**: a JWT grant's key is
//! `jwt:<agent>` (one issuer per server, so the agent stands for the
//! (issuer, subject) pair). Every token of an agent reaches that agent's
//! sessions, so a session outlives the short-lived access token that
//! opened it (clients refresh tokens mid-session), and a token of another
//! agent gets `404` for it. A static token's key (`sha256:…`) never equals
//! one, so the two kinds of principal never share sessions or quotas.

pub mod config;
pub mod jwks;
pub mod jwt;
pub mod metadata;
pub mod provider;
mod verified;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use config::{ConfigError, JwtConfig};
pub use jwks::JwksError;
pub use jwt::JwtVerifier;

use crate::access::Access;

/// What a verified token grants.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// Who owns sessions and limits: `jwt:<agent>`.
    pub key: String,
    /// The agent (from the agent claim).
    pub agent: String,
    /// The tiers (from the scopes, or all).
    pub access: Access,
    /// The per-agent `tools/call` quota, if any.
    pub calls_per_minute: Option<u32>,
    /// The per-agent cap on requests in flight, if any.
    pub max_concurrent: Option<u32>,
    /// The per-agent, per-tool quotas.
    pub tool_calls_per_minute: crate::tool_quotas::ToolQuotas,
    /// The hub tools, narrowing the host policy's; `None`: the policy's.
    pub tools: Option<temper_policy::ToolAllow>,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No bearer token (`401`, no `error`).
    #[error("no bearer token")]
    Missing,
    /// A token that does not verify (`401`, `error="invalid_token"`).
    #[error("{0}")]
    Invalid(Reason),
    /// A valid token carrying none of the mapped scopes (`403`,
    /// `error="insufficient_scope"`).
    #[error("none of the mapped scopes")]
    InsufficientScope,
}

/// Why a token does not verify: logged (never the token, never a claim),
/// never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// A token neither the tokens file knows nor a JWT (no `--auth jwt`).
    #[error("unknown token")]
    UnknownToken,
    /// Not a JWT, an unknown `alg` (`none` included), overlong.
    #[error("malformed token")]
    Malformed,
    /// An `alg` the config does not accept (HMAC always).
    #[error("algorithm not accepted")]
    Algorithm,
    /// No `kid` in the header.
    #[error("no kid")]
    NoKid,
    /// A `kid` the key set does not have (after a refetch).
    #[error("unknown kid")]
    UnknownKid,
    /// The key's type or declared `alg` does not fit the token's `alg`.
    #[error("key does not fit the algorithm")]
    KeyMismatch,
    /// The signature does not verify.
    #[error("bad signature")]
    BadSignature,
    /// `exp` is past (beyond the skew).
    #[error("expired")]
    Expired,
    /// `nbf` is ahead (beyond the skew).
    #[error("not yet valid")]
    NotYetValid,
    /// `iss` is not the issuer.
    #[error("wrong issuer")]
    WrongIssuer,
    /// `aud` does not hold the audience.
    #[error("wrong audience")]
    WrongAudience,
    /// `exp`, `iss` or `aud` is missing.
    #[error("a required claim is missing")]
    MissingClaim,
    /// The agent claim is missing, not a string, or not a valid agent id.
    #[error("bad agent claim")]
    BadAgent,
    /// The key set is stale and cannot be fetched (fail closed).
    #[error("key set unavailable")]
    KeysUnavailable,
}

/// Why `--auth jwt` could not start.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The config file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The key set.
    #[error(transparent)]
    Jwks(#[from] JwksError),
}

/// Loads `--auth-config FILE` and its key set.
pub async fn load_jwt(path: &std::path::Path) -> Result<JwtVerifier, AuthError> {
    let config = JwtConfig::load(path)?;
    Ok(JwtVerifier::new(config).await?)
}
