//! What an agent reads when it forges over MCP (`temper mcp` over stdio):
//! a malformed request answered in `forge_tool`'s schema terms, test cases
//! that expect an error, and requests without `outputSchema` (the seed's
//! format makes it optional).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::mcp_stdio::{McpStdio, tool_output};

fn start(dir: &Path) -> McpStdio {
    McpStdio::start(
        &["--store", dir.join("store").to_str().unwrap()],
        &dir.join("stderr.txt"),
        &[],
        "no-secret-here",
    )
}

fn seed(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_malformed_request_is_answered_in_the_schemas_terms() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start(dir.path());
    let mut request = seed("add_numbers");
    request["implementation"] = json!("function execute(input) { return input.a + input.b; }");
    let r = m.call("forge_tool", request);
    let result = refusal(&r);
    assert_eq!(result["stage"], json!("validate"), "{result}");
    assert_eq!(
        result["errors"],
        json!([
            "validate: not a forge request: implementation must be an object such as {\"mode\": \"sandbox\", \"code\": \"…\"}, got a string"
        ])
    );
    let mut request = seed("add_numbers");
    request["implementation"]["mode"] = json!("python");
    let result = refusal(&m.call("forge_tool", request));
    assert_eq!(
        result["errors"],
        json!([
            "validate: not a forge request: implementation.mode must be \"sandbox\" (with code) or \"compose\" (with steps), got \"python\""
        ])
    );
    m.close();
}

#[test]
fn a_test_case_may_expect_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start(dir.path());
    let mut request = seed("add_numbers");
    request["name"] = json!("checked_add");
    request["implementation"]["code"] = json!(
        "function execute(input) { if (input.a < 0) throw new Error('a must be >= 0'); return { result: input.a + input.b }; }"
    );
    request["testCases"] = json!([
        {"input": {"a": 2, "b": 3}, "expectedOutput": {"result": 5}},
        {"input": {"a": -1, "b": 3}, "expectError": "a must be >= 0"},
        {"input": {"a": "x"}, "expectError": true}
    ]);
    let forged = tool_output(&m.call("forge_tool", request.clone()));
    assert_eq!(forged["success"], json!(true), "{forged}");

    // A case that expects an error the call does not raise fails, saying so.
    request["name"] = json!("checked_add_two");
    request["testCases"] = json!([{"input": {"a": 1, "b": 3}, "expectError": true}]);
    let refused = refusal(&m.call("forge_tool", request));
    assert_eq!(refused["stage"], json!("test"), "{refused}");
    assert_eq!(
        refused["errors"],
        json!([
            "test: 1 of 1 test case(s) failed: case #0: expectError: the call was expected to fail but returned {\"result\":4}"
        ])
    );
    m.close();
}

#[test]
fn the_seed_requests_forge_without_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = start(dir.path());
    for name in ["add_numbers", "slugify", "parse_csv", "convert_temperature"] {
        let mut request = seed(name);
        request.as_object_mut().unwrap().remove("outputSchema");
        let forged = tool_output(&m.call("forge_tool", request));
        assert_eq!(forged["success"], json!(true), "{name}: {forged}");
    }
    let listed = m.tools();
    let slugify = listed.iter().find(|t| t["name"] == "slugify").unwrap();
    assert!(slugify.get("outputSchema").is_none(), "{slugify}");
    let out = tool_output(&m.call("slugify", json!({"text": "Hello World"})));
    assert_eq!(out, json!({"slug": "hello-world"}));
    m.close();
}

/// A refused tool call's structured content (an error result).
fn refusal(response: &Value) -> Value {
    let r = &response["result"];
    assert_eq!(r["isError"], json!(true), "not refused: {response}");
    r["structuredContent"].clone()
}
