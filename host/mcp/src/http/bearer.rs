//! Who a request comes from: its bearer token checked against the tokens
//! file (`--tokens`) and/or as a JWT (`--auth jwt`, [`crate::auth`]); the
//! answers to a refused one; the RFC 9728 metadata document.
//!
//! With both configured, a token the tokens file knows is a static token
//! and any other is verified as a JWT. A refusal is `401` with an empty
//! body (`403` for a valid JWT with none of the mapped scopes); with JWTs
//! configured its `WWW-Authenticate` names the metadata URL, plus
//! `error="invalid_token"` when a token was presented. A JWT's reason
//! (`expired`, `wrong audience`, …) is logged, never the token or its
//! claims.

use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};

use super::session::Principal;
use super::wire::{Body, empty, json_response};
use super::{ENDPOINT, State};
use crate::access::Access;
use crate::auth::{Reason, Refusal, metadata};
use temper_forge::{HubNarrowing, NarrowedBy};

impl State {
    /// The principal of a request, or why there is none.
    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        if self.tokens.is_none() && self.jwt.is_none() {
            return Ok(Principal {
                key: "local".into(),
                agent: self.base_agent.clone(),
                access: Access::ALL,
                calls_per_minute: None,
                max_concurrent: self.config.max_concurrent,
                tool_quotas: Default::default(),
                tools: None,
                features: (None, None),
            });
        }
        let token = bearer(headers).ok_or(Refusal::Missing)?;
        if let Some(entry) = self
            .tokens
            .as_ref()
            .and_then(|source| source.current())
            .and_then(|tokens| tokens.authenticate(token).cloned())
        {
            return Ok(Principal {
                key: entry.key,
                agent: entry.agent,
                access: entry.access,
                calls_per_minute: entry.calls_per_minute,
                max_concurrent: entry.max_concurrent.unwrap_or(self.config.max_concurrent),
                tools: entry
                    .tools
                    .map(|allow| HubNarrowing::new(allow, NarrowedBy::Token)),
                tool_quotas: entry.tool_calls_per_minute,
                features: (entry.resources, entry.prompts),
            });
        }
        let Some(jwt) = &self.jwt else {
            return Err(Refusal::Invalid(Reason::UnknownToken));
        };
        match jwt.verify(token).await {
            Ok(g) => Ok(Principal {
                key: g.key,
                agent: g.agent,
                access: g.access,
                calls_per_minute: g.calls_per_minute,
                max_concurrent: g.max_concurrent.unwrap_or(self.config.max_concurrent),
                tools: g
                    .tools
                    .map(|allow| HubNarrowing::new(allow, NarrowedBy::Scopes)),
                tool_quotas: g.tool_calls_per_minute,
                features: (None, None),
            }),
            Err(refusal) => {
                tracing::info!("bearer token refused: {refusal}");
                Err(refusal)
            }
        }
    }
}

/// The token of `Authorization: Bearer TOKEN`, if there is one.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty()).then_some(token)
}

/// The answer to a refused request.
pub(super) fn refused(state: &State, refusal: Refusal) -> Response<Body> {
    let (status, challenge) = match (&state.jwt, refusal) {
        (None, _) => (StatusCode::UNAUTHORIZED, "Bearer".to_string()),
        (Some(jwt), Refusal::InsufficientScope) => (
            StatusCode::FORBIDDEN,
            metadata::insufficient_scope(jwt.config()),
        ),
        (Some(jwt), r) => (
            StatusCode::UNAUTHORIZED,
            metadata::challenge(jwt.config(), r != Refusal::Missing),
        ),
    };
    let mut r = empty(status);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(&challenge).expect("URLs and scope tokens are header-safe"),
    );
    r
}

/// The RFC 9728 metadata document, when `req` asks for it and JWTs are
/// configured (public: no token, any origin).
pub(super) fn metadata<B>(state: &State, req: &Request<B>) -> Option<Response<Body>> {
    let jwt = state.jwt.as_ref()?;
    if !metadata::serves(req.uri().path(), jwt.config(), ENDPOINT) {
        return None;
    }
    let mut r = if req.method() == Method::GET {
        json_response(StatusCode::OK, &metadata::document(jwt.config()))
    } else {
        let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        r
    };
    r.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Some(r)
}
