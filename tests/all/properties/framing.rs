//! Properties of the MCP JSON-RPC framing: any line is a message or a
//! typed rejection, and frames respect the cap.

use std::io::BufReader;

use proptest::prelude::*;
use serde_json::{Value, json};
use temper::mcp::jsonrpc::{self, Frame, Incoming};

use super::{bounded, config, json_value, text};

// ---- MCP JSON-RPC framing ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// Any line is a message or a rejection with a JSON-RPC error code and
    /// an id that is null, a string or a number.
    #[test]
    fn any_line_is_a_message_or_a_typed_rejection(line in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        text().prop_map(String::into_bytes),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (prop::option::of(json_value()), prop::option::of(json_value()), prop::option::of(json_value()))
            .prop_map(|(id, method, params)| {
                let mut o = json!({"jsonrpc": "2.0"});
                if let Some(v) = id { o["id"] = v; }
                if let Some(v) = method { o["method"] = v; }
                if let Some(v) = params { o["params"] = v; }
                o.to_string().into_bytes()
            }),
    ]) {
        match bounded("parse_message", || jsonrpc::parse_message(&line)) {
            Ok(_) => {}
            Err(rejected) => {
                prop_assert!(
                    [jsonrpc::PARSE_ERROR, jsonrpc::INVALID_REQUEST].contains(&rejected.error.code),
                    "{rejected:?}"
                );
                prop_assert!(rejected.id.is_null() || rejected.id.is_string() || rejected.id.is_number());
            }
        }
    }

    /// A well-formed request parses to exactly its id, method and params.
    #[test]
    fn well_formed_requests_parse_exactly(
        id in prop_oneof![any::<i64>().prop_map(|n| json!(n)), text().prop_map(Value::String)],
        method in text(),
        params in prop::option::of(prop::collection::vec((text(), json_value()), 0..3)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()))),
    ) {
        let mut o = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = &params { o["params"] = p.clone(); }
        let parsed = jsonrpc::parse_message(o.to_string().as_bytes()).unwrap();
        prop_assert_eq!(parsed, Incoming::Request { id, method, params });
    }

    /// Reading frames from any byte stream, through any buffer size: each
    /// line is at most `cap` bytes and newline-free, over-long lines are
    /// reported with their length, and every byte is accounted for.
    #[test]
    fn frames_respect_the_cap_and_account_for_every_byte(
        input in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'{'), any::<u8>()], 0..400),
        cap in 0usize..64,
        buffer in 1usize..32,
    ) {
        let mut reader = BufReader::with_capacity(buffer, &input[..]);
        let mut accounted = 0usize;
        let mut frames = 0usize;
        loop {
            frames += 1;
            prop_assert!(frames <= input.len() + 2, "no progress");
            match jsonrpc::read_frame(&mut reader, cap).unwrap() {
                Frame::Eof => break,
                Frame::Line(line) => {
                    prop_assert!(line.len() <= cap);
                    prop_assert!(!line.contains(&b'\n'));
                    accounted += line.len();
                }
                Frame::TooLarge { bytes } => {
                    prop_assert!(bytes > cap);
                    accounted += bytes;
                }
            }
        }
        // Every byte is in a frame, a newline, or a stripped `\r`.
        let newlines = input.iter().filter(|&&b| b == b'\n').count();
        let crs = input.iter().filter(|&&b| b == b'\r').count();
        prop_assert!(accounted + newlines <= input.len());
        prop_assert!(accounted + newlines + crs >= input.len());
    }
}
