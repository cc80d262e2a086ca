//! RFC 9728 protected-resource metadata and the `WWW-Authenticate`
//! challenges that point to it.
//!
//! The metadata of resource `https://mcp.example/mcp` lives at
//! `https://mcp.example/.well-known/oauth-protected-resource/mcp` (RFC 9728
//! §3.1: the well-known segment goes between the host and the path); the
//! server also answers on the bare `/.well-known/oauth-protected-resource`
//! (clients that fall back to the root) and on the suffix of its own
//! endpoint (when the audience's path differs, as behind a proxy that
//! rewrites it).

use serde_json::{Value, json};
use url::Url;

use super::config::JwtConfig;

/// The well-known path prefix.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata URL of `resource` (RFC 9728 §3.1).
pub fn metadata_url(resource: &Url) -> String {
    let mut url = resource.clone();
    let path = resource.path().trim_end_matches('/');
    url.set_path(&format!("{WELL_KNOWN}{path}"));
    url.set_query(None);
    url.to_string()
}

/// Whether `path` is one the metadata is served on, for a server whose
/// endpoint is `endpoint`.
pub fn serves(path: &str, config: &JwtConfig, endpoint: &str) -> bool {
    let Some(rest) = path.strip_prefix(WELL_KNOWN) else {
        return false;
    };
    let rest = rest.trim_end_matches('/');
    rest.is_empty() || rest == endpoint || rest == config.audience_url.path().trim_end_matches('/')
}

/// The metadata document.
pub fn document(config: &JwtConfig) -> Value {
    let mut doc = json!({
        "resource": config.audience,
        "authorization_servers": config.authorization_servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "Temper MCP server",
    });
    if let Some(scopes) = &config.scopes {
        doc["scopes_supported"] = json!(scopes.keys().collect::<Vec<_>>());
    }
    doc
}

/// The `WWW-Authenticate` value of a `401`: the metadata URL, and
/// `error="invalid_token"` when a token was presented (RFC 6750 §3.1).
pub fn challenge(config: &JwtConfig, token_given: bool) -> String {
    let mut v = format!(
        "Bearer resource_metadata=\"{}\"",
        metadata_url(&config.audience_url)
    );
    if token_given {
        v.push_str(", error=\"invalid_token\"");
    }
    v
}

/// The `WWW-Authenticate` value of a `403` for a valid token that carries
/// none of the mapped scopes.
pub fn insufficient_scope(config: &JwtConfig) -> String {
    let mut v = format!(
        "Bearer resource_metadata=\"{}\", error=\"insufficient_scope\"",
        metadata_url(&config.audience_url)
    );
    if let Some(scopes) = &config.scopes {
        let all: Vec<&str> = scopes.keys().map(String::as_str).collect();
        v.push_str(&format!(", scope=\"{}\"", all.join(" ")));
    }
    v
}
