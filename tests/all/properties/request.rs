//! Properties of the forge request parser: any text or JSON parses or is
//! refused, and requests round-trip.

use proptest::prelude::*;
use serde_json::Value;
use temper::request::{ForgeRequest, Implementation};

use super::{bounded, config, json_value, test_case, text};

fn forge_request() -> impl Strategy<Value = ForgeRequest> {
    let implementation = prop_oneof![
        (text(), prop::collection::vec(text(), 0..3))
            .prop_map(|(code, allowlist)| Implementation::Sandbox { code, allowlist }),
        prop::collection::vec(json_value(), 0..3)
            .prop_map(|steps| Implementation::Compose { steps }),
    ];
    (
        "[a-z_]{1,16}",
        text(),
        json_value(),
        json_value(),
        implementation,
        prop::collection::vec(test_case(), 0..3),
    )
        .prop_map(
            |(name, description, input_schema, output_schema, implementation, test_cases)| {
                ForgeRequest {
                    name,
                    description,
                    input_schema,
                    output_schema,
                    implementation,
                    test_cases,
                }
            },
        )
}

// ---- forge request ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn forge_requests_parse_or_refuse_any_text(s in text()) {
        let _ = bounded("ForgeRequest::from_json", || ForgeRequest::from_json(&s));
    }

    #[test]
    fn forge_requests_parse_or_refuse_any_json(v in json_value()) {
        let _ = bounded("ForgeRequest::from_json", || ForgeRequest::from_json(&v.to_string()));
    }

    #[test]
    fn forge_requests_round_trip(request in forge_request()) {
        let text = serde_json::to_string(&request).unwrap();
        let back = ForgeRequest::from_json(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        prop_assert_eq!(back, request);
    }
}

/// `"expectedOutput": null` expects the tool to return `null`; an absent
/// field expects nothing. (Until this was fixed, `null` read back as absent
/// and such a test case checked nothing.)
#[test]
fn null_expected_output_expects_null() {
    let r = ForgeRequest::from_json(
        r#"{"name":"n","description":"d","implementation":{"mode":"sandbox","code":""},
            "testCases":[{"input":{},"expectedOutput":null},{"input":{}}]}"#,
    )
    .unwrap();
    assert_eq!(r.test_cases[0].expected_output, Some(Value::Null));
    assert_eq!(r.test_cases[1].expected_output, None);
    let back = ForgeRequest::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}
