//! Failures as JavaScript errors: each [`Failure`] (classified by
//! `temper-embed` from the typed error's variant, never its text) becomes
//! a rejected promise whose message is a JSON report:
//!
//! | kind | `code` | extra fields |
//! |---|---|---|
//! | refused | `EFORGE_REFUSED` | `stage`, `result` (a forge's or import's) |
//! | timeout | `ETIMEOUT` | `limitMs` |
//! | memory | `EMEMORY` | `limitBytes` |
//! | capability | `ECAPABILITY` | `capability` |
//! | tool failed | `ETOOL` | `jsMessage`, `line`, `column` |
//! | not found | `ENOTFOUND` | `tool` (the name asked for) |
//! | invalid input | `EINPUT` | `schema`, `at` |
//! | busy | `EBUSY` | |
//! | host | `EHOST` | |
//!
//! plus `message` and `logs` (console lines before the failure).
//! `index.cjs` parses it into an `Error` carrying those properties; the
//! report starts with [`MARKER`] so that it never takes another error for
//! one.

use serde_json::{Map, Value, json};
use temper_embed::{ErrorKind, Failure};

/// What starts a failure report in an error's message.
pub const MARKER: &str = "TEMPER_FAILURE:";

/// The `code` of `kind`.
pub fn code(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Refused { .. } => "EFORGE_REFUSED",
        ErrorKind::Timeout { .. } => "ETIMEOUT",
        ErrorKind::Memory { .. } => "EMEMORY",
        ErrorKind::Capability { .. } => "ECAPABILITY",
        ErrorKind::ToolFailed { .. } => "ETOOL",
        ErrorKind::NotFound { .. } => "ENOTFOUND",
        ErrorKind::InvalidInput { .. } => "EINPUT",
        ErrorKind::Busy => "EBUSY",
        ErrorKind::Host => "EHOST",
    }
}

/// The JSON report of `failure`.
pub fn report(failure: &Failure) -> Value {
    let mut r = Map::new();
    r.insert("code".into(), json!(code(&failure.kind)));
    r.insert("message".into(), json!(failure.message));
    match &failure.kind {
        ErrorKind::Refused { stage } => {
            r.insert("stage".into(), json!(stage));
        }
        ErrorKind::Timeout { limit_ms } => {
            r.insert("limitMs".into(), json!(limit_ms));
        }
        ErrorKind::Memory { limit_bytes } => {
            r.insert("limitBytes".into(), json!(limit_bytes));
        }
        ErrorKind::Capability { capability } => {
            r.insert("capability".into(), json!(capability));
        }
        ErrorKind::ToolFailed {
            message,
            line,
            column,
        } => {
            r.insert("jsMessage".into(), json!(message));
            r.insert("line".into(), json!(line));
            r.insert("column".into(), json!(column));
        }
        ErrorKind::NotFound { name } => {
            r.insert("tool".into(), json!(name));
        }
        ErrorKind::InvalidInput { schema, at } => {
            r.insert("schema".into(), json!(schema));
            r.insert("at".into(), json!(at));
        }
        ErrorKind::Busy | ErrorKind::Host => {}
    }
    r.insert(
        "logs".into(),
        serde_json::to_value(&failure.logs).unwrap_or(Value::Null),
    );
    if let Some(result) = &failure.result {
        r.insert(
            "result".into(),
            serde_json::to_value(result).unwrap_or(Value::Null),
        );
    }
    Value::Object(r)
}

/// `failure` as the napi error `index.cjs` reads.
pub fn to_napi(failure: Failure) -> napi::Error {
    napi::Error::from_reason(format!("{MARKER}{}", report(&failure)))
}

/// A napi error for a failure of the host (not the tool's doing).
pub fn host(message: impl std::fmt::Display) -> napi::Error {
    to_napi(Failure::host(message))
}

/// A napi error for a caller's input that could not be handed over.
pub fn input(message: impl std::fmt::Display) -> napi::Error {
    to_napi(Failure::invalid_input(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_carry_code_and_fields() {
        let f = Failure {
            kind: ErrorKind::ToolFailed {
                message: "boom".into(),
                line: Some(3),
                column: Some(9),
            },
            message: "tool threw".into(),
            logs: Vec::new(),
            result: None,
        };
        let r = report(&f);
        assert_eq!(r["code"], "ETOOL");
        assert_eq!(r["jsMessage"], "boom");
        assert_eq!(r["line"], 3);
        let e = to_napi(f);
        assert!(e.reason.starts_with(MARKER));
        let back: Value = serde_json::from_str(&e.reason[MARKER.len()..]).unwrap();
        assert_eq!(back, r);
        let refused = Failure {
            kind: ErrorKind::Refused { stage: "judge" },
            message: "no".into(),
            logs: Vec::new(),
            result: None,
        };
        assert_eq!(report(&refused)["stage"], "judge");
        assert_eq!(report(&refused)["code"], "EFORGE_REFUSED");
    }
}
