//! The MCP revisions this server speaks and what tells them apart.
//!
//! - **Legacy** (`2024-11-05` … `2025-11-25`): an `initialize` handshake
//!   fixes the revision for the stdio connection or the HTTP session
//!   (`Mcp-Session-Id`).
//! - **Modern** (`2026-07-28`): no handshake, no protocol session. Every
//!   request carries its revision, client info and capabilities in
//!   `params._meta` ([`meta`]); the revision is chosen per request.
//!
//! A request is modern when its `_meta` names a protocol version, or when
//! its method exists only in the modern revision (`server/discover`,
//! `subscriptions/listen`); `initialize` is always legacy. [`envelope`]
//! checks a modern request's `_meta` (`-32602` when a required key is
//! missing, [`UNSUPPORTED_PROTOCOL_VERSION`] listing the supported versions
//! when its version is not one of ours).
//!
//! **Session identity** of modern requests: a client-chosen id in
//! `params._meta["dev.temper/session"]` ([`meta::SESSION`]), namespaced by
//! the caller's agent; [`modern_context`] maps it onto the engine's
//! [`ForgeContext`] (the one place that mapping lives). Without an id the
//! request runs in its principal's default session ([`DEFAULT_SESSION_ID`]).
//!
//! [`results`]: the typed results and notifications this layer produces.

use serde_json::Value;
use temper_forge::ForgeContext;

use crate::jsonrpc::RpcError;

pub mod results;

/// The modern revisions this server speaks (per-request `_meta`), newest
/// first.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// Every revision this server speaks, newest first: what `server/discover`
/// and [`UNSUPPORTED_PROTOCOL_VERSION`] errors list.
pub const ALL_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// The `_meta` keys this layer reads and writes.
pub mod meta {
    /// A modern request's protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// A modern request's client name and version (optional).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// A modern request's opt-in to log messages, and their lowest level
    /// (deprecated logging, SEP-2577).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// A modern request's client capabilities (required).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// The server's name and version, on every modern result.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// The `subscriptions/listen` request a notification belongs to.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// Temper's session of a modern request: a client-chosen id, namespaced
    /// by the caller's agent (see [`super::modern_context`]).
    pub const SESSION: &str = "dev.temper/session";
}

/// The HTTP headers and body fields disagree, or a required header is
/// missing (`HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request's protocol version is not one this server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A quota refused the request (SEP-3304's rate-limit error, answered with
/// HTTP `429` and `Retry-After`); `data.retryAfterSeconds` says when to
/// retry.
pub const RATE_LIMITED: i64 = -32023;

/// Methods that exist only in the modern revision.
pub const MODERN_ONLY_METHODS: &[&str] = &["server/discover", "subscriptions/listen"];

/// Longest `dev.temper/session` id, bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// Whether a request of `method` with `params` is a modern one (see the
/// module docs).
pub fn is_modern(method: &str, params: Option<&Value>) -> bool {
    if method == "initialize" {
        return false;
    }
    MODERN_ONLY_METHODS.contains(&method)
        || params
            .and_then(|p| p.get("_meta"))
            .is_some_and(|m| m.get(meta::PROTOCOL_VERSION).is_some())
}

/// What a modern request's `_meta` says about its client.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The protocol version it speaks (one of [`MODERN_PROTOCOL_VERSIONS`]).
    pub protocol_version: String,
    /// Its name and version, as it says (never used for decisions).
    pub client_info: Option<Value>,
    /// Its capabilities for this request.
    pub client_capabilities: Value,
    /// Its `dev.temper/session` id, checked ([`session_id`]).
    pub session: Option<String>,
}

/// The raw protocol version a modern request's `_meta` carries, if any
/// (what the HTTP headers are compared with before it is checked).
pub fn requested_version(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get(meta::PROTOCOL_VERSION)
}

/// Checks a modern request's `_meta`: the required keys are there
/// (`-32602` naming the missing ones), the version is one this server
/// speaks ([`unsupported_version`]), the session id is well formed.
pub fn envelope(params: Option<&Value>) -> Result<Envelope, RpcError> {
    let Some(m) = params
        .and_then(|p| p.get("_meta"))
        .filter(|m| m.is_object())
    else {
        return Err(RpcError::invalid_params(format!(
            "params._meta must be an object carrying the required {:?} and {:?} keys",
            meta::PROTOCOL_VERSION,
            meta::CLIENT_CAPABILITIES
        )));
    };
    let missing: Vec<&str> = [meta::PROTOCOL_VERSION, meta::CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|k| m.get(k).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::invalid_params(format!(
            "params._meta is missing the required key(s): {}",
            missing.join(", ")
        )));
    }
    let version = &m[meta::PROTOCOL_VERSION];
    let Some(v) = version.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "params._meta[{:?}] must be a string",
            meta::PROTOCOL_VERSION
        )));
    };
    if !MODERN_PROTOCOL_VERSIONS.contains(&v) {
        return Err(unsupported_version(v));
    }
    Ok(Envelope {
        protocol_version: v.to_string(),
        client_info: m.get(meta::CLIENT_INFO).cloned(),
        client_capabilities: m[meta::CLIENT_CAPABILITIES].clone(),
        session: session_id(m)?,
    })
}

/// The `UnsupportedProtocolVersionError` for `requested`: it lists every
/// version this server speaks (`data.supported`).
pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version {requested:?}: this server speaks {}",
            ALL_PROTOCOL_VERSIONS.join(", ")
        ),
    )
    .with_data(results::unsupported_version_data(requested))
}

/// The `dev.temper/session` id in `meta`, if any: a string of 1 to
/// [`MAX_SESSION_ID_BYTES`] visible ASCII characters (`-32602` otherwise).
pub fn session_id(meta: &Value) -> Result<Option<String>, RpcError> {
    let Some(id) = meta.get(meta::SESSION) else {
        return Ok(None);
    };
    let bad = |why: &str| {
        Err(RpcError::invalid_params(format!(
            "params._meta[{:?}] {why}",
            meta::SESSION
        )))
    };
    let Some(id) = id.as_str() else {
        return bad("must be a string");
    };
    if id.is_empty() || id.len() > MAX_SESSION_ID_BYTES {
        return bad(&format!(
            "must be 1 to {MAX_SESSION_ID_BYTES} bytes long, not {}",
            id.len()
        ));
    }
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("may hold visible ASCII characters only (no spaces or control characters)");
    }
    Ok(Some(id.to_string()))
}

/// Prefix of the engine session of a modern session id.
const NAMED_PREFIX: &str = "m:";

/// The `dev.temper/session` id of a principal's **default session**: where
/// a modern request that names no session runs. One per agent (the static
/// token's, the JWT's or the default identity's agent), stored and expired
/// like any named session, so what a client forges without naming a
/// session it can call in its next request, and so can the agent's other
/// clients. A client that wants a conversation scope of its own names one
/// (`forge_tool`'s result says which session it ran in).
pub const DEFAULT_SESSION_ID: &str = "default";

/// The engine context of a modern request by `agent` whose
/// `dev.temper/session` is `session`: the agent is the caller's (never taken
/// from the request), the engine session is `m:` + the id, so that it never
/// collides with a legacy HTTP session (`mcp-http/…`) or a stdio connection
/// (`…/mcp-PID-MILLIS`), and two agents' equal ids are two sessions.
/// Without an id, the agent's default session ([`DEFAULT_SESSION_ID`]).
pub fn modern_context(agent: &str, session: Option<&str>) -> ForgeContext {
    ForgeContext::new(
        agent,
        format!("{NAMED_PREFIX}{}", session.unwrap_or(DEFAULT_SESSION_ID)),
    )
}

/// The `dev.temper/session` id a client sends to reach `ctx` (a context
/// [`modern_context`] made), if it is one.
pub fn client_session_id(ctx: &ForgeContext) -> Option<&str> {
    ctx.session_id.strip_prefix(NAMED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(meta: Value) -> Value {
        json!({ "_meta": meta })
    }

    #[test]
    fn tells_the_revisions_apart() {
        assert!(!is_modern("tools/list", Some(&json!({}))));
        assert!(!is_modern("tools/list", None));
        assert!(is_modern(
            "tools/list",
            Some(&params(json!({meta::PROTOCOL_VERSION: "2026-07-28"})))
        ));
        assert!(is_modern("server/discover", None));
        assert!(is_modern("subscriptions/listen", Some(&json!({}))));
        assert!(!is_modern(
            "initialize",
            Some(&params(json!({meta::PROTOCOL_VERSION: "2026-07-28"})))
        ));
    }

    #[test]
    fn checks_the_envelope() {
        let ok = params(json!({
            meta::PROTOCOL_VERSION: "2026-07-28",
            meta::CLIENT_CAPABILITIES: {},
            meta::CLIENT_INFO: {"name": "c", "version": "1"},
            meta::SESSION: "abc-1",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        }));
        let e = envelope(Some(&ok)).unwrap();
        assert_eq!(e.protocol_version, "2026-07-28");
        assert_eq!(e.session.as_deref(), Some("abc-1"));
        assert_eq!(e.client_info.unwrap()["name"], "c");

        let e = envelope(None).unwrap_err();
        assert_eq!(e.code, crate::jsonrpc::INVALID_PARAMS);
        let e = envelope(Some(&params(json!({meta::PROTOCOL_VERSION: "2026-07-28"})))).unwrap_err();
        assert_eq!(e.code, crate::jsonrpc::INVALID_PARAMS);
        assert!(e.message.contains(meta::CLIENT_CAPABILITIES), "{e}");

        let e = envelope(Some(&params(
            json!({meta::PROTOCOL_VERSION: "1999-01-01", meta::CLIENT_CAPABILITIES: {}}),
        )))
        .unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        let data = e.data.unwrap();
        assert_eq!(data["requested"], "1999-01-01");
        assert_eq!(data["supported"], json!(ALL_PROTOCOL_VERSIONS));
        // A legacy version is not a modern request's version either.
        let e = envelope(Some(&params(
            json!({meta::PROTOCOL_VERSION: "2025-06-18", meta::CLIENT_CAPABILITIES: {}}),
        )))
        .unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
    }

    #[test]
    fn refuses_hostile_session_ids() {
        let long = "x".repeat(MAX_SESSION_ID_BYTES + 1);
        for bad in [
            json!(""),
            json!(long),
            json!("a b"),
            json!("a\nb"),
            json!("é"),
            json!(7),
            json!(null),
        ] {
            let e = session_id(&json!({ meta::SESSION: bad })).unwrap_err();
            assert_eq!(e.code, crate::jsonrpc::INVALID_PARAMS, "{bad}");
            assert!(e.message.contains(meta::SESSION), "{e}");
        }
        let max = "y".repeat(MAX_SESSION_ID_BYTES);
        assert_eq!(
            session_id(&json!({ meta::SESSION: max })).unwrap(),
            Some(max)
        );
        assert_eq!(session_id(&json!({})).unwrap(), None);
    }

    #[test]
    fn maps_sessions_into_the_agents_namespace() {
        let a = modern_context("alice", Some("s1"));
        assert_eq!(
            (a.agent_id.as_str(), a.session_id.as_str()),
            ("alice", "m:s1")
        );
        assert_eq!(client_session_id(&a), Some("s1"));
        // No id: the agent's default session, the same for every request
        // of the agent, another for another agent.
        let d = modern_context("alice", None);
        assert_eq!(d, modern_context("alice", None));
        assert_eq!(d, modern_context("alice", Some(DEFAULT_SESSION_ID)));
        assert_eq!(client_session_id(&d), Some(DEFAULT_SESSION_ID));
        assert_ne!(d, modern_context("bob", None));
        assert_eq!(modern_context("bob", None).agent_id, "bob");
        // Never a legacy or stdio session.
        assert_eq!(
            client_session_id(&ForgeContext::new("alice", "mcp-http/x")),
            None
        );
    }
}
