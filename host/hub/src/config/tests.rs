use std::path::PathBuf;

use super::*;

const SECRET: &str = "s3cr3t-value-DO-NOT-PRINT";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(format!("{name}.toml"))
}

/// Every variable is set to SECRET, except the one the tests leave unset;
/// TEMPER_TEST_CRLF holds a header-splitting value, TEMPER_TEST_CTRL one
/// with a control character.
fn env(name: &str) -> Option<String> {
    match name {
        "TEMPER_TEST_UNSET_VARIABLE" => None,
        "TEMPER_TEST_CRLF" => Some(format!("{SECRET}\r\nX-Injected: 1")),
        "TEMPER_TEST_CTRL" => Some(format!("{SECRET}\u{1}")),
        _ => Some(SECRET.to_string()),
    }
}

fn load(name: &str) -> Result<ToolsFile, ToolsFileError> {
    ToolsFile::load_with_env(&fixture(name), env)
}

/// Loads a bad fixture and checks that the error names the file, the table
/// and the key, says `reason`, and never quotes the secret.
fn bad(name: &str, table: &str, key: &str, reason: &str) {
    let err = load(name).expect_err(name);
    let msg = err.to_string();
    let debug = format!("{err:?}");
    assert!(
        msg.contains(&format!("{name}.toml")),
        "{name}: no file in {msg}"
    );
    assert!(
        msg.contains(&format!("[{table}]")),
        "{name}: no table [{table}] in {msg}"
    );
    assert!(
        msg.contains(&format!("`{key}`")),
        "{name}: no key `{key}` in {msg}"
    );
    assert!(msg.contains(reason), "{name}: no \"{reason}\" in {msg}");
    assert!(
        !msg.contains(SECRET) && !debug.contains(SECRET),
        "{name}: secret leaked: {debug}"
    );
    assert!(
        !msg.contains("hunter2") && !debug.contains("hunter2"),
        "{name}: literal key leaked: {debug}"
    );
}

#[test]
fn good_file_loads_with_every_table() {
    let f = load("good").unwrap();
    assert_eq!(f.upstreams.len(), 3);
    let search = &f.upstreams["search"];
    let Transport::Stdio { command, env } = &search.transport else {
        panic!("search is stdio")
    };
    assert_eq!(command, &["python3", "search_server.py"]);
    assert_eq!(env["SEARCH_API_KEY"].expose(), SECRET);
    assert_eq!(env["SEARCH_API_KEY"].origin(), "env:SEARCH_API_KEY");
    assert_eq!(env["LOG_LEVEL"].expose(), "info");
    assert_eq!(search.tools, ToolSelection::Only(vec!["web_search".into()]));
    assert!(search.tools.selects("web_search") && !search.tools.selects("other"));
    assert_eq!(search.timeout, Duration::from_millis(30000));
    assert_eq!(search.max_result_bytes, DEFAULT_MAX_RESULT_BYTES);
    assert!(!search.optional);
    assert_eq!(search.prefix, "");

    let gh = &f.upstreams["github"];
    let Transport::Http { url, headers } = &gh.transport else {
        panic!("github is http")
    };
    assert_eq!(url, "https://mcp.example.com/mcp", "trailing slash trimmed");
    assert_eq!(headers["Authorization"].expose(), SECRET);
    assert_eq!(gh.prefix, "github.");
    assert_eq!(gh.timeout, DEFAULT_TIMEOUT);

    let all = &f.upstreams["everything"];
    assert_eq!(all.tools, ToolSelection::All);
    assert!(all.optional);
    assert_eq!(all.max_result_bytes, 1024);

    let http = f.http_request.as_ref().unwrap();
    assert_eq!(http.domains, ["api.example.com", "*.example.org"]);
    assert_eq!(http.max_response_bytes, DEFAULT_HTTP_MAX_RESPONSE_BYTES);
    let gen_cfg = f.generate_text.as_ref().unwrap();
    assert_eq!(gen_cfg.url, "http://127.0.0.1:8080/v1");
    assert_eq!(gen_cfg.model, "qwen2.5");
    assert_eq!(gen_cfg.api_key.as_ref().unwrap().expose(), SECRET);
    assert_eq!(gen_cfg.max_tokens, 512);
}

#[test]
fn secrets_never_print() {
    let f = load("good").unwrap();
    let debug = format!("{f:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    assert!(
        debug.contains("env:SEARCH_API_KEY"),
        "the origin is shown: {debug}"
    );
    let s = Secret::new("env:X", SECRET);
    assert_eq!(s.to_string(), "env:X [redacted]");
    assert!(!format!("{s:?}").contains(SECRET));
}

#[test]
fn default_selection_is_none() {
    let f = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.a]\ncommand = [\"x\"]\n",
        env,
    )
    .unwrap();
    assert_eq!(f.upstreams["a"].tools, ToolSelection::None);
    assert!(!f.upstreams["a"].tools.selects("anything"));
    assert!(!f.upstreams["a"].allow_live_tests, "off by default");
    let empty = ToolsFile::parse(Path::new("t.toml"), "", env).unwrap();
    assert!(empty.upstreams.is_empty() && empty.http_request.is_none());
}

#[test]
fn unreadable_file_names_it() {
    let err = load("does_not_exist").unwrap_err();
    assert!(matches!(err, ToolsFileError::Read { .. }));
    assert!(err.to_string().contains("does_not_exist.toml"), "{err}");
}

#[test]
fn syntax_error_names_the_file() {
    let err = load("bad_syntax").unwrap_err();
    assert!(matches!(err, ToolsFileError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("bad_syntax.toml"), "{err}");
}

#[test]
fn unknown_keys_name_table_and_key() {
    bad(
        "bad_unknown_key",
        "upstream.search",
        "timeout",
        "unknown field",
    );
    bad(
        "bad_unknown_builtin",
        "builtin",
        "send_mail",
        "unknown field",
    );
    let err = load("bad_unknown_top").unwrap_err().to_string();
    assert!(
        err.contains("bad_unknown_top.toml") && err.contains("`whatever`"),
        "{err}"
    );
}

#[test]
fn wrong_types_name_table_and_key() {
    bad(
        "bad_type_timeout",
        "upstream.search",
        "timeout_ms",
        "invalid type",
    );
    bad(
        "bad_type_env_value",
        "upstream.search",
        "env.KEY",
        "invalid type",
    );
    bad(
        "bad_http_missing_domains",
        "builtin.http_request",
        "domains",
        "missing field",
    );
}

#[test]
fn transport_errors() {
    bad(
        "bad_no_transport",
        "upstream.search",
        "command",
        "give `command`",
    );
    bad("bad_both_transports", "upstream.search", "url", "not both");
    bad(
        "bad_empty_command",
        "upstream.search",
        "command",
        "must name a program",
    );
    bad(
        "bad_env_on_url",
        "upstream.gh",
        "env",
        "only for a `command`",
    );
    bad(
        "bad_headers_on_command",
        "upstream.search",
        "headers",
        "only for a `url`",
    );
    bad(
        "bad_header_name",
        "upstream.gh",
        "headers.Bad Header",
        "not a valid header name",
    );
    bad("bad_url_scheme", "upstream.gh", "url", "http or https");
    bad(
        "bad_url_credentials",
        "upstream.gh",
        "url",
        "must not carry credentials",
    );
    bad(
        "bad_header_crlf",
        "upstream.gh",
        "headers.Authorization",
        "line break",
    );
    bad(
        "bad_header_reserved",
        "upstream.gh",
        "headers.Mcp-Session-Id",
        "set by Temper's MCP client",
    );
    bad(
        "bad_header_control",
        "upstream.gh",
        "headers.Authorization",
        "characters HTTP refuses",
    );
    bad(
        "bad_upstream_name",
        "upstream.Search Engine",
        "(name)",
        "lowercase",
    );
}

#[test]
fn env_errors_name_the_variable_not_a_value() {
    bad(
        "bad_env_missing",
        "upstream.search",
        "env.KEY",
        "TEMPER_TEST_UNSET_VARIABLE is not set",
    );
    bad(
        "bad_env_empty_name",
        "upstream.search",
        "env.KEY",
        "needs a variable name",
    );
}

#[test]
fn selection_and_limit_errors() {
    bad(
        "bad_star_not_alone",
        "upstream.search",
        "tools",
        "stands alone",
    );
    bad(
        "bad_tools_duplicate",
        "upstream.search",
        "tools",
        "listed twice",
    );
    bad(
        "bad_tools_empty_name",
        "upstream.search",
        "tools",
        "empty tool name",
    );
    bad("bad_prefix", "upstream.search", "prefix", "lowercase");
    bad(
        "bad_timeout_zero",
        "upstream.search",
        "timeout_ms",
        "at least 1",
    );
    bad(
        "bad_timeout_huge",
        "upstream.search",
        "timeout_ms",
        "at most 600000",
    );
    bad(
        "bad_max_result_zero",
        "upstream.search",
        "max_result_bytes",
        "at least 1",
    );
}

#[test]
fn builtin_errors() {
    bad(
        "bad_http_no_domains",
        "builtin.http_request",
        "domains",
        "at least one",
    );
    bad(
        "bad_http_domain_rule",
        "builtin.http_request",
        "domains",
        "bad domain rule",
    );
    bad(
        "bad_gen_literal_key",
        "builtin.generate_text",
        "api_key",
        "must be `env:NAME`",
    );
    bad(
        "bad_gen_empty_model",
        "builtin.generate_text",
        "model",
        "must not be empty",
    );
    bad(
        "bad_gen_max_tokens",
        "builtin.generate_text",
        "max_tokens",
        "at least 1",
    );
    bad("bad_gen_url", "builtin.generate_text", "url", "not a URL");
    bad(
        "bad_http_resolve_addr",
        "builtin.http_request",
        "resolve.api.example.com",
        "not `IP:PORT`",
    );
    bad(
        "bad_http_ca_file",
        "builtin.http_request",
        "ca_file",
        "holds no PEM certificate",
    );
}

#[test]
fn http_request_defaults_and_resolve() {
    let f = load("good").unwrap();
    let http = f.http_request.unwrap();
    assert!(
        !http.allow_private,
        "private addresses are refused by default"
    );
    assert!(http.resolve.is_empty() && http.ca_pem.is_none());
    assert_eq!(
        f.generate_text.unwrap().timeout,
        DEFAULT_GENERATE_TIMEOUT,
        "an LLM's default limit, not an upstream's"
    );
    let http = load("http_resolve").unwrap().http_request.unwrap();
    assert!(http.allow_private);
    let addrs = &http.resolve["api.example.com"];
    assert_eq!(addrs.len(), 2);
    assert_eq!(addrs[0].to_string(), "127.0.0.1:8443");
    assert_eq!(addrs[1].port(), 8443);
}

#[test]
fn every_bad_fixture_is_tested() {
    let src = include_str!("tests.rs");
    for entry in std::fs::read_dir(fixture("x").parent().unwrap()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".toml") {
            assert!(
                src.contains(&format!("\"{stem}\"")),
                "fixture {name} has no test"
            );
        }
    }
}

#[test]
fn annotation_overrides_are_read_by_their_mcp_names() {
    let f = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.fs]\ncommand = [\"x\"]\ntools = [\"*\"]\n\n[upstream.fs.annotations.write_file]\ndestructiveHint = true\ntitle = \"Write a file\"\n",
        |_| None,
    )
    .unwrap();
    let up = &f.upstreams["fs"];
    assert_eq!(
        serde_json::Value::Object(up.annotations["write_file"].clone()),
        serde_json::json!({"title": "Write a file", "destructiveHint": true})
    );
    // An unknown hint, and a hint of the wrong type, are refused.
    let err = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.fs]\ncommand = [\"x\"]\n[upstream.fs.annotations.write_file]\ndangerous = true\n",
        |_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("[upstream.fs.annotations.write_file] `dangerous`"),
        "{err}"
    );
    let err = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.fs]\ncommand = [\"x\"]\n[upstream.fs.annotations.write_file]\nreadOnlyHint = \"yes\"\n",
        |_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("readOnlyHint"), "{err}");
}

#[test]
fn allow_live_tests_is_read_and_typed() {
    let f = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.nice]\ncommand = [\"x\"]\nallow_live_tests = true\n",
        |_| None,
    )
    .unwrap();
    assert!(f.upstreams["nice"].allow_live_tests);
    let err = ToolsFile::parse(
        Path::new("t.toml"),
        "[upstream.nice]\ncommand = [\"x\"]\nallow_live_tests = \"yes\"\n",
        |_| None,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("allow_live_tests"), "{err}");
}
