//! Bearer JWT verification: the header's `alg` must be one the config
//! accepts (RS256, ES256, EdDSA: never `none`, never HMAC), its `kid` must
//! name a key of the issuer's set whose type (and declared `alg`) fits,
//! the signature must verify with that key, `exp` must be in the future
//! and `nbf` (when present) in the past, both within the clock skew, `iss`
//! must be the issuer and `aud` must hold the audience. The agent claim
//! must be a valid agent id. Keys embedded in the token (`jwk`, `jku`,
//! `x5u`, `x5c`) are ignored.

use std::collections::HashSet;
use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::config::JwtConfig;
use super::jwks::{Jwks, JwksError, Key, Missing};
use super::verified::{self, Entry, Verified};
use super::{Grant, Reason, Refusal};
use crate::access::Access;

/// Longest token accepted, bytes.
pub const MAX_TOKEN_BYTES: usize = 16 << 10;

/// Verifies tokens of one issuer.
pub struct JwtVerifier {
    config: JwtConfig,
    keys: Jwks,
    /// Tokens accepted before (bounded, see [`super::verified`]).
    verified: Verified,
}

impl JwtVerifier {
    /// Loads the key set (see [`Jwks::load`]).
    pub async fn new(config: JwtConfig) -> Result<Self, JwksError> {
        super::provider::install();
        let keys = Jwks::load(&config.jwks).await?;
        Ok(Self {
            config,
            keys,
            verified: Verified::default(),
        })
    }

    /// The config.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// The key set.
    pub fn keys(&self) -> &Jwks {
        &self.keys
    }

    /// The grant of `token`, or why it is refused. A token accepted before
    /// is taken from [`verified`](super::verified) while its `exp` (with
    /// the skew) has not passed and the key set still holds the key that
    /// verified it; otherwise it is checked in full.
    pub async fn verify(&self, token: &str) -> Result<Grant, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(Reason::Malformed));
        }
        let digest = verified::digest(token);
        let now = unix_now();
        if let Some((grant, kid, key)) = self.verified.get(&digest, now) {
            match self.keys.key(&kid).await {
                Ok(current) if Arc::ptr_eq(&current, &key) => return Ok(grant),
                _ => self.verified.forget(&digest),
            }
        }
        self.verified.missed();
        let (grant, kid, key, exp) = self.verify_fully(token).await?;
        if let Some(exp) = exp {
            let until = exp.saturating_add(i64::try_from(self.config.clock_skew_secs).unwrap_or(0));
            let entry = Entry {
                grant: grant.clone(),
                kid,
                key,
                until,
            };
            self.verified.put(digest, entry, now);
        }
        Ok(grant)
    }

    /// How many tokens were checked in full (not from the cache).
    #[cfg(test)]
    pub(super) fn full_checks(&self) -> u64 {
        self.verified
            .misses
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many accepted tokens are held (tests).
    #[cfg(test)]
    pub(super) fn held_tokens(&self) -> usize {
        self.verified.len()
    }

    /// The whole check: the grant, the `kid` and key that verified it, and
    /// the token's `exp` (Unix seconds) when it is a number.
    async fn verify_fully(
        &self,
        token: &str,
    ) -> Result<(Grant, String, Arc<Key>, Option<i64>), Refusal> {
        let invalid = |r| Err(Refusal::Invalid(r));
        // `alg: none` and unknown algorithms do not parse as a header.
        let Ok(header) = jsonwebtoken::decode_header(token) else {
            return invalid(Reason::Malformed);
        };
        let alg = header.alg;
        if !self.config.algorithms.contains(&alg) {
            return invalid(Reason::Algorithm);
        }
        let Some(kid) = header.kid.as_deref() else {
            return invalid(Reason::NoKid);
        };
        let key = match self.keys.key(kid).await {
            Ok(k) => k,
            Err(Missing::UnknownKid) => return invalid(Reason::UnknownKid),
            Err(Missing::Unavailable) => return invalid(Reason::KeysUnavailable),
        };
        if !key.fits(alg) {
            return invalid(Reason::KeyMismatch);
        }
        let claims = match jsonwebtoken::decode::<Map<String, Value>>(
            token,
            key.decoding(),
            &self.validation(alg),
        ) {
            Ok(data) => data.claims,
            Err(e) => return invalid(reason_of(e.kind())),
        };
        let agent = match claims.get(&self.config.agent_claim) {
            Some(Value::String(a)) if crate::tokens::agent_problem(a).is_none() => a.clone(),
            _ => return invalid(Reason::BadAgent),
        };
        let (access, tools) = self.grant_of(&claims)?;
        let exp = claims.get("exp").and_then(|e| {
            e.as_i64().or_else(|| {
                e.as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f.floor() as i64)
            })
        });
        let grant = Grant {
            key: format!("jwt:{agent}"),
            agent,
            access,
            calls_per_minute: self.config.calls_per_minute,
            max_concurrent: self.config.max_concurrent,
            tool_calls_per_minute: self.config.tool_calls_per_minute.clone(),
            tools,
        };
        Ok((grant, kid.to_owned(), key, exp))
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.config.clock_skew_secs;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.validate_aud = true;
        v.required_spec_claims = HashSet::from(["exp", "iss", "aud"].map(String::from));
        v.set_issuer(&[&self.config.issuer]);
        v.set_audience(&[&self.config.audience]);
        v
    }

    /// The tiers and hub tools the token's scopes grant: everything when
    /// the config maps no scopes; else the union over the mapped scopes it
    /// carries (tools narrowed only when every one of them narrows).
    fn grant_of(
        &self,
        claims: &Map<String, Value>,
    ) -> Result<(Access, Option<temper_policy::ToolAllow>), Refusal> {
        let Some(map) = &self.config.scopes else {
            return Ok((Access::ALL, None));
        };
        let carried: Vec<&str> = match claims.get(&self.config.scope_claim) {
            Some(Value::String(s)) => s.split_ascii_whitespace().collect(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut access = Access {
            session: false,
            agent: false,
            shared: false,
        };
        let mut globs = Some(Vec::new());
        let mut any = false;
        for grant in carried.iter().filter_map(|s| map.get(*s)) {
            any = true;
            access.session |= grant.access.session;
            access.agent |= grant.access.agent;
            access.shared |= grant.access.shared;
            match (&mut globs, &grant.tools) {
                (Some(all), Some(tools)) => all.extend(tools.iter().cloned()),
                _ => globs = None,
            }
        }
        if !any {
            return Err(Refusal::InsufficientScope);
        }
        let tools = globs
            .map(temper_policy::ToolAllow::new)
            .transpose()
            // Each list was checked when the config was loaded.
            .map_err(|_| Refusal::InsufficientScope)?;
        Ok((access, tools))
    }
}

/// The wall clock in Unix seconds (as `exp` is, and as the full check
/// reads it).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn reason_of(kind: &ErrorKind) -> Reason {
    match kind {
        ErrorKind::ExpiredSignature => Reason::Expired,
        ErrorKind::ImmatureSignature => Reason::NotYetValid,
        ErrorKind::InvalidIssuer => Reason::WrongIssuer,
        ErrorKind::InvalidAudience => Reason::WrongAudience,
        ErrorKind::InvalidSignature => Reason::BadSignature,
        ErrorKind::MissingRequiredClaim(_) => Reason::MissingClaim,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => Reason::KeyMismatch,
        _ => Reason::Malformed,
    }
}
