//! JSON-RPC 2.0 as the MCP stdio transport carries it: one message per line
//! (UTF-8 JSON without embedded newlines), in both directions.
//!
//! [`read_frame`] cuts the input into lines under a size cap
//! ([`MAX_MESSAGE_BYTES`]): an oversized line is skipped to its end and
//! reported, never buffered whole. [`parse_message`] classifies one line as
//! a request, a notification or a response, or gives the error answer to
//! send (`-32700` for text that is not JSON, `-32600` for JSON that is not a
//! JSON-RPC 2.0 message). Batches (JSON arrays) are answered with `-32600`:
//! MCP 2025-06-18 removed them and this server never needs them.

use std::io::{self, BufRead};

use serde_json::{Map, Value, json};

/// Largest message accepted, in bytes (the newline excluded). Forge
/// requests carry at most 1 MiB of source; 8 MiB leaves room for schemas and
/// test cases.
pub const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error object: what an error response carries.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// One of the codes above.
    pub code: i64,
    /// A short description for people.
    pub message: String,
    /// Structured detail (`error.data`), e.g. the supported versions of an
    /// `UnsupportedProtocolVersionError` (boxed: errors stay small).
    pub data: Option<Box<Value>>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data` as its `error.data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    /// `-32602`: the params are wrong; `message` says how.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// `-32601` naming `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    /// `-32603`: the server failed; `message` says how.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// The error object (`{code, message}`, and `data` when there is some).
    pub fn to_json(&self) -> Value {
        match &self.data {
            None => json!({ "code": self.code, "message": self.message }),
            Some(data) => json!({ "code": self.code, "message": self.message, "data": data }),
        }
    }
}

/// One incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it must be answered with the same `id`.
    Request {
        /// A string or a number (MCP forbids `null`).
        id: Value,
        /// The method.
        method: String,
        /// The params, if any.
        params: Option<Value>,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// The params, if any.
        params: Option<Value>,
    },
    /// A response to a request of ours (an upstream's elicitation or
    /// sampling relayed to a legacy stdio client).
    Response {
        /// Its id.
        id: Value,
        /// Its `result`, or its `error` object.
        outcome: Result<Value, Value>,
    },
}

/// A message that cannot be handled, with the error answer it gets: `id` is
/// the request's id when it could be read, `null` otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The id to answer with.
    pub id: Value,
    /// The error.
    pub error: RpcError,
}

/// Parses one line (without its newline).
pub fn parse_message(line: &[u8]) -> Result<Incoming, Rejected> {
    let reject = |id: Value, code, message: String| Rejected {
        id,
        error: RpcError::new(code, message),
    };
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| reject(Value::Null, PARSE_ERROR, format!("parse error: {e}")))?;
    let mut obj: Map<String, Value> = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(reject(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: batches are not supported".into(),
            ));
        }
        _ => {
            return Err(reject(
                Value::Null,
                INVALID_REQUEST,
                "invalid request: a message must be a JSON object".into(),
            ));
        }
    };
    let id = match obj.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(other) => {
            return Err(reject(
                Value::Null,
                INVALID_REQUEST,
                format!("invalid request: id must be a string or a number, got {other}"),
            ));
        }
    };
    let answer_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(reject(
            answer_id,
            INVALID_REQUEST,
            "invalid request: \"jsonrpc\" must be \"2.0\"".into(),
        ));
    }
    let params = obj.remove("params");
    if let Some(p) = &params
        && !(p.is_object() || p.is_array())
    {
        return Err(reject(
            answer_id,
            INVALID_REQUEST,
            "invalid request: params must be an object or an array".into(),
        ));
    }
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err(reject(
            answer_id,
            INVALID_REQUEST,
            "invalid request: method must be a string".into(),
        )),
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            let outcome = match obj.remove("error") {
                Some(error) => Err(error),
                None => Ok(obj.remove("result").unwrap_or(Value::Null)),
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, _) => Err(reject(
            answer_id,
            INVALID_REQUEST,
            "invalid request: no method".into(),
        )),
    }
}

/// A success response. `result` is moved in (`json!` would copy it: it
/// writes every interpolated value anew, a large tool result included).
pub fn response(id: &Value, result: Value) -> Value {
    let mut message = serde_json::Map::new();
    message.insert("jsonrpc".into(), Value::from("2.0"));
    message.insert("id".into(), id.clone());
    message.insert("result".into(), result);
    Value::Object(message)
}

/// An error response.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() })
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// What [`read_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One line, without its newline (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line over the cap, skipped; `bytes` is its length.
    TooLarge {
        /// The line's length in bytes.
        bytes: usize,
    },
    /// End of input.
    Eof,
}

/// Reads the next line of at most `cap` bytes. A longer line is consumed
/// without being kept and reported as [`Frame::TooLarge`]; a last line
/// without a newline still counts.
pub fn read_frame<R: BufRead>(reader: &mut R, cap: usize) -> io::Result<Frame> {
    let mut line = Vec::new();
    let mut len = 0usize;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if len == 0 {
                Frame::Eof
            } else {
                finish(line, len, cap)
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        len += take;
        if len <= cap {
            line.extend_from_slice(&chunk[..take]);
        } else if !line.is_empty() {
            line = Vec::new();
        }
        reader.consume(take + usize::from(done));
        if done {
            return Ok(finish(line, len, cap));
        }
    }
}

fn finish(mut line: Vec<u8>, len: usize, cap: usize) -> Frame {
    if len > cap {
        return Frame::TooLarge { bytes: len };
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Frame::Line(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], cap: usize) -> Vec<Frame> {
        // A tiny buffer so lines span several fill_buf calls.
        let mut r = io::BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        loop {
            match read_frame(&mut r, cap).unwrap() {
                Frame::Eof => return out,
                f => out.push(f),
            }
        }
    }

    #[test]
    fn frames_lines_under_the_cap_and_skips_longer_ones() {
        let got = frames(b"abc\r\n0123456789\nok\n\nlast", 5);
        assert_eq!(
            got,
            vec![
                Frame::Line(b"abc".to_vec()),
                Frame::TooLarge { bytes: 10 },
                Frame::Line(b"ok".to_vec()),
                Frame::Line(Vec::new()),
                Frame::Line(b"last".to_vec()),
            ]
        );
        assert_eq!(
            frames(b"0123456789", 5),
            vec![Frame::TooLarge { bytes: 10 }]
        );
        assert_eq!(frames(b"", 5), Vec::<Frame>::new());
    }

    fn rejected(line: &str) -> Rejected {
        parse_message(line.as_bytes()).unwrap_err()
    }

    #[test]
    fn classifies_messages() {
        assert_eq!(
            parse_message(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).unwrap(),
            Incoming::Request {
                id: json!(7),
                method: "ping".into(),
                params: None
            }
        );
        assert_eq!(
            parse_message(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#)
                .unwrap(),
            Incoming::Notification {
                method: "notifications/initialized".into(),
                params: Some(json!({}))
            }
        );
        assert_eq!(
            parse_message(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap(),
            Incoming::Response {
                id: json!("a"),
                outcome: Ok(json!({}))
            }
        );
    }

    #[test]
    fn rejects_with_the_right_code_and_id() {
        let r = rejected("{not json");
        assert_eq!((r.id, r.error.code), (Value::Null, PARSE_ERROR));
        assert_eq!(rejected("[1]").error.code, INVALID_REQUEST);
        assert_eq!(rejected("42").error.code, INVALID_REQUEST);
        let r = rejected(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#);
        assert_eq!((r.id, r.error.code), (json!(3), INVALID_REQUEST));
        let r = rejected(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
        assert_eq!((r.id, r.error.code), (Value::Null, INVALID_REQUEST));
        let r = rejected(r#"{"jsonrpc":"2.0","id":4,"method":5}"#);
        assert_eq!((r.id, r.error.code), (json!(4), INVALID_REQUEST));
        let r = rejected(r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}"#);
        assert_eq!((r.id, r.error.code), (json!(5), INVALID_REQUEST));
        assert_eq!(
            rejected(r#"{"jsonrpc":"2.0","id":6}"#).error.code,
            INVALID_REQUEST
        );
        assert_eq!(
            parse_message(b"\xff\xfe{}").unwrap_err().error.code,
            PARSE_ERROR
        );
    }

    #[test]
    fn builds_messages() {
        let e = RpcError::method_not_found("nope");
        assert_eq!(
            error_response(&json!(1), &e),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "method not found: nope"}})
        );
        assert_eq!(
            response(&json!("x"), json!({})),
            json!({"jsonrpc": "2.0", "id": "x", "result": {}})
        );
        assert_eq!(
            response(&json!("x"), json!({"a": 1})).to_string(),
            r#"{"jsonrpc":"2.0","id":"x","result":{"a":1}}"#,
            "members in protocol order"
        );
    }
}
