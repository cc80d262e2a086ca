//! The routing headers of a 2026-07-28 POST (the parent module's docs,
//! rungs 2 and 3): whether a POST is modern, the headers checked against
//! the body, and the HTTP status of an error answer.

use http::{HeaderMap, Response, StatusCode};
use serde_json::Value;

use super::super::VERSION_HEADER;
use super::super::wire::{Body, json_response};
use crate::jsonrpc::{self, RpcError};
use crate::protocol::{self, HEADER_MISMATCH};

/// The method header.
pub const METHOD_HEADER: &str = "mcp-method";
/// The name header (`tools/call`'s `params.name`).
pub const NAME_HEADER: &str = "mcp-name";

/// Methods whose `Mcp-Name` header mirrors a body field, and the field.
const NAME_BEARING: &[(&str, &str)] = &[
    ("tools/call", "name"),
    ("prompts/get", "name"),
    ("resources/read", "uri"),
];

/// Whether a POST is a modern one (see the module docs).
pub(in crate::http) fn is_modern(
    headers: &HeaderMap,
    method: Option<&str>,
    params: Option<&Value>,
) -> bool {
    headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| protocol::MODERN_PROTOCOL_VERSIONS.contains(&v))
        || method.is_some_and(|m| protocol::is_modern(m, params))
}

/// The HTTP status of an error answer with `code`.
pub(super) fn status_for(code: i64) -> StatusCode {
    match code {
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        jsonrpc::PARSE_ERROR
        | jsonrpc::INVALID_REQUEST
        | jsonrpc::INVALID_PARAMS
        | HEADER_MISMATCH
        | protocol::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// An error answer with the status its code calls for.
pub(super) fn refuse(id: &Value, error: &RpcError) -> Response<Body> {
    json_response(status_for(error.code), &jsonrpc::error_response(id, error))
}

/// The single value of header `name` as visible ASCII, `None` when absent;
/// an error when it is sent twice or holds anything else.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, RpcError> {
    let mut all = headers.get_all(name).iter();
    let Some(first) = all.next() else {
        return Ok(None);
    };
    if all.next().is_some() {
        return Err(RpcError::new(
            HEADER_MISMATCH,
            format!("Header mismatch: {name} header appears more than once"),
        ));
    }
    first
        .to_str()
        .ok()
        .filter(|v| v.bytes().all(|b| (0x20..0x7f).contains(&b)))
        .map(Some)
        .ok_or_else(|| {
            RpcError::new(
                HEADER_MISMATCH,
                format!("Header mismatch: {name} header holds characters other than visible ASCII"),
            )
        })
}

/// Decodes the `=?base64?…?=` sentinel of an `Mcp-Name` value (canonical
/// Base64 of UTF-8 only); a plain value is itself.
fn decode_name(value: &str) -> Option<String> {
    use base64::Engine;
    let Some(payload) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(value.to_string());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Checks the routing headers against the body (module docs, rung 2).
pub(super) fn check_headers(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), RpcError> {
    let mismatch = |header: &str, sent: &str, body: &str, field: &str| {
        Err(RpcError::new(
            HEADER_MISMATCH,
            format!(
                "Header mismatch: {header} header value {sent:?} does not match body value {body:?} ({field})"
            ),
        ))
    };
    let missing = |header: &str, body: &str, field: &str| {
        Err(RpcError::new(
            HEADER_MISMATCH,
            format!("Header mismatch: {header} header missing (body value {body:?} in {field})"),
        ))
    };
    let body_version = match protocol::requested_version(params) {
        Some(Value::String(v)) => v.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let version_field = format!("params._meta[{:?}]", protocol::meta::PROTOCOL_VERSION);
    match single(headers, VERSION_HEADER)? {
        None => return missing("MCP-Protocol-Version", &body_version, &version_field),
        Some(v) if v != body_version => {
            return mismatch("MCP-Protocol-Version", v, &body_version, &version_field);
        }
        Some(_) => {}
    }
    match single(headers, METHOD_HEADER)? {
        None => return missing("Mcp-Method", method, "method"),
        Some(v) if v != method => return mismatch("Mcp-Method", v, method, "method"),
        Some(_) => {}
    }
    let Some((_, field)) = NAME_BEARING.iter().find(|(m, _)| *m == method) else {
        return Ok(());
    };
    let Some(body_name) = params.and_then(|p| p.get(*field)).and_then(Value::as_str) else {
        // The handler says what is wrong with the params.
        return Ok(());
    };
    let field = format!("params.{field}");
    match single(headers, NAME_HEADER)? {
        None => missing("Mcp-Name", body_name, &field),
        Some(v) => match decode_name(v) {
            Some(name) if name == body_name => Ok(()),
            Some(name) => mismatch("Mcp-Name", &name, body_name, &field),
            None => Err(RpcError::new(
                HEADER_MISMATCH,
                "Header mismatch: Mcp-Name header holds a malformed =?base64?...?= value",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn call(name: &str) -> Value {
        json!({"name": name, "_meta": {protocol::meta::PROTOCOL_VERSION: "2026-07-28"}})
    }

    #[test]
    fn headers_must_match_the_body() {
        let ok = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "slugify"),
        ]);
        assert!(check_headers(&ok, "tools/call", Some(&call("slugify"))).is_ok());

        let e = check_headers(&ok, "tools/call", Some(&call("other"))).unwrap_err();
        assert_eq!(e.code, HEADER_MISMATCH);
        assert!(
            e.message.contains("\"slugify\"") && e.message.contains("\"other\""),
            "{e}"
        );

        let e = check_headers(&ok, "tools/list", Some(&call("slugify"))).unwrap_err();
        assert!(
            e.message.contains("Mcp-Method") && e.message.contains("\"tools/list\""),
            "{e}"
        );

        let no_name = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
        ]);
        let e = check_headers(&no_name, "tools/call", Some(&call("slugify"))).unwrap_err();
        assert!(e.message.contains("Mcp-Name header missing"), "{e}");

        let no_method = headers(&[("mcp-protocol-version", "2026-07-28")]);
        let e = check_headers(&no_method, "tools/list", Some(&call("x"))).unwrap_err();
        assert!(e.message.contains("Mcp-Method header missing"), "{e}");

        let twice = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-method", "tools/list"),
        ]);
        let e = check_headers(&twice, "tools/list", Some(&call("x"))).unwrap_err();
        assert!(e.message.contains("more than once"), "{e}");

        let mut binary = headers(&[("mcp-protocol-version", "2026-07-28")]);
        binary.insert(
            METHOD_HEADER,
            HeaderValue::from_bytes(b"tools/\xfflist").unwrap(),
        );
        let e = check_headers(&binary, "tools/list", Some(&call("x"))).unwrap_err();
        assert_eq!(e.code, HEADER_MISMATCH);
        assert!(e.message.contains("visible ASCII"), "{e}");

        let old = headers(&[
            ("mcp-protocol-version", "2025-06-18"),
            ("mcp-method", "tools/list"),
        ]);
        let e = check_headers(&old, "tools/list", Some(&call("x"))).unwrap_err();
        assert!(
            e.message.contains("\"2025-06-18\"") && e.message.contains("\"2026-07-28\""),
            "{e}"
        );
    }

    #[test]
    fn names_may_be_base64() {
        assert_eq!(decode_name("plain").as_deref(), Some("plain"));
        // "Hello, 世界", the spec's example.
        assert_eq!(
            decode_name("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(),
            Some("Hello, 世界")
        );
        assert_eq!(decode_name("=?base64?not base64?="), None);
        // Non-canonical (trailing bits set) is refused.
        assert_eq!(decode_name("=?base64?SGk=?="), Some("Hi".into()));
        assert_eq!(decode_name("=?base64?SGl=?="), None);
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ]);
        assert!(check_headers(&h, "tools/call", Some(&call("Hello, 世界"))).is_ok());
    }

    #[test]
    fn statuses() {
        assert_eq!(status_for(jsonrpc::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status_for(HEADER_MISMATCH), StatusCode::BAD_REQUEST);
        assert_eq!(
            status_for(protocol::UNSUPPORTED_PROTOCOL_VERSION),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(status_for(jsonrpc::INTERNAL_ERROR), StatusCode::OK);
    }
}
