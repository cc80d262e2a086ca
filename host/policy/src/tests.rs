//! Tests of the host policy: parsing (fixtures under `host/policy/testdata/`), grants, determinism.

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/", $name)
    };
}

fn load(path: &str) -> Result<HostPolicy, PolicyError> {
    HostPolicy::from_file(Path::new(path))
}

fn rules(list: &[&str]) -> Vec<DomainRule> {
    list.iter().map(|r| DomainRule::parse(r).unwrap()).collect()
}

#[test]
fn capability_names_round_trip() {
    for cap in Capability::ALL {
        assert_eq!(cap.to_string().parse::<Capability>().unwrap(), cap);
    }
    assert_eq!(
        "fs.readFile".parse::<Capability>().unwrap(),
        Capability::FsReadFile
    );
    for bad in ["net", "Fetch", "fs.readfile", "", "fs"] {
        assert_eq!(
            bad.parse::<Capability>(),
            Err(PolicyError::UnknownCapability(bad.to_string()))
        );
    }
}

#[test]
fn deny_all_is_the_default() {
    let p = HostPolicy::default();
    assert_eq!(p, HostPolicy::deny_all());
    assert!(p.allowed.is_empty());
    assert!(p.fetch.rules.is_empty());
    assert!(!p.fetch.allow_private);
    assert_eq!(p.fetch.max_redirects, 5);
    assert_eq!(p.fetch.max_request_body, 1 << 20);
    assert_eq!(p.fetch.max_response_body, 8 << 20);
    assert_eq!(p.fetch.max_headers, 64);
    assert_eq!(p.fetch.max_header_bytes, 16 << 10);
    assert_eq!(p.fetch.max_url_bytes, 8 << 10);
    assert!(p.read_dirs.is_empty());
    assert_eq!(p.limits, LimitsConfig::default());
    assert_eq!(p.grants(&[]).unwrap(), Grants::default());
}

#[test]
fn good_full_fixture() {
    let p = load(fixture!("good_full.toml")).unwrap();
    let expected = HostPolicy {
        allowed: Capability::ALL.into_iter().collect(),
        fetch: FetchPolicy {
            rules: rules(&[
                "api.example.test",
                "*.cdn.example.test",
                "https://secure.example.test",
                "api.example.test:8443",
                "http://127.0.0.1:8080",
                "[::1]",
            ]),
            allow_private: true,
            max_redirects: 3,
            max_request_body: 65536,
            max_response_body: 8388608,
            max_headers: 32,
            max_header_bytes: 8192,
            max_url_bytes: 4096,
        },
        read_dirs: vec![
            ReadDir {
                host: "./data".into(),
                guest: "/data".into(),
            },
            ReadDir {
                host: "/srv/models/".into(),
                guest: "/models".into(),
            },
            ReadDir {
                host: "assets".into(),
                guest: "/static/assets".into(),
            },
        ],
        limits: LimitsConfig {
            timeout_ms: Some(5000),
            memory_mb: Some(64),
            max_output_bytes: Some(1048576),
        },
        determinism: Some(Determinism {
            seed: 42,
            epoch_ms: 1_700_000_000_000,
        }),
        tools: ToolAllow::new(vec![
            "web_search".into(),
            "github.*".into(),
            "http_request".into(),
        ])
        .unwrap(),
        resources: ToolAllow::new(vec!["everything.demo://*".into()]).unwrap(),
        prompts: ToolAllow::new(vec!["everything.*".into()]).unwrap(),
        run_code: Vec::new(),
    };
    assert_eq!(p, expected);
    assert!(
        p.resources
            .allows("everything.demo://resource/static/document/a.md")
    );
    assert!(!p.resources.allows("demo://resource/static/document/a.md"));
    assert!(!HostPolicy::deny_all().prompts.allows("x"));
}

#[test]
fn good_fetch_url_cap_fixture() {
    let p = load(fixture!("good_fetch_url_cap.toml")).unwrap();
    assert_eq!(p.fetch.max_url_bytes, 2048);
    let long = format!("http://api.example.test/{}", "x".repeat(2048));
    assert!(matches!(
        p.fetch.check_url(&long),
        Err(crate::FetchDenied::UrlTooLong { limit: 2048, .. })
    ));
    // The rule written with a trailing dot allows that spelling.
    assert!(p.fetch.check_url("http://api.example.test./").is_ok());
}

#[test]
fn good_example_fixture_matches_the_docs() {
    let p = load(fixture!("good_example.toml")).unwrap();
    assert_eq!(
        p.allowed,
        [Capability::Fetch, Capability::Crypto]
            .into_iter()
            .collect()
    );
    assert_eq!(
        p.fetch,
        FetchPolicy {
            rules: rules(&["api.example.test", "*.cdn.example.test"]),
            ..FetchPolicy::default()
        }
    );
    assert!(p.read_dirs.is_empty());
    assert_eq!(
        p.limits,
        LimitsConfig {
            timeout_ms: Some(5000),
            ..LimitsConfig::default()
        }
    );
}

#[test]
fn module_doc_example_parses() {
    let source = include_str!("lib.rs");
    let start = source.find("//! ```toml\n").expect("doc example") + "//! ```toml\n".len();
    let end = start
        + source[start..]
            .find("//! ```\n")
            .expect("end of doc example");
    let text: String = source[start..end]
        .lines()
        .map(|l| l.strip_prefix("//!").unwrap_or(l).trim_start_matches(' '))
        .collect::<Vec<_>>()
        .join("\n");
    let p = HostPolicy::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(p.allowed.len(), 3);
    assert_eq!(p.fetch.rules.len(), 4);
    assert_eq!(p.read_dirs.len(), 1);
    assert_eq!(p.limits.timeout_ms, Some(5000));
    assert_eq!(
        p.determinism,
        Some(Determinism::seeded(42).with_epoch_ms(1_700_000_000_000))
    );
}

#[test]
fn determinism_fixtures() {
    let p = load(fixture!("good_deterministic.toml")).unwrap();
    assert_eq!(
        p.determinism,
        Some(Determinism {
            seed: 42,
            epoch_ms: 1_700_000_000_000
        })
    );
    assert_eq!(p.allowed, [Capability::Crypto].into_iter().collect());
    // `enabled = false` keeps the section but switches the mode off.
    assert_eq!(
        load(fixture!("good_deterministic_off.toml"))
            .unwrap()
            .determinism,
        None
    );
    // Defaults: writing the section turns it on, seed 0, the Unix epoch.
    assert_eq!(
        HostPolicy::from_toml("[determinism]\n")
            .unwrap()
            .determinism,
        Some(Determinism::default())
    );
    assert_eq!(
        HostPolicy::from_toml("[determinism]\nseed = 9\n")
            .unwrap()
            .determinism,
        Some(Determinism::seeded(9))
    );
    // The largest representable date is accepted, one more is not.
    let at = |ms: u64| HostPolicy::from_toml(&format!("[determinism]\nepoch_ms = {ms}\n"));
    assert_eq!(
        at(MAX_EPOCH_MS).unwrap().determinism.unwrap().epoch_ms,
        MAX_EPOCH_MS
    );
    assert!(matches!(
        at(MAX_EPOCH_MS + 1),
        Err(PolicyError::BadValue { key, .. }) if key == "determinism.epoch_ms"
    ));
    // No section: real clocks.
    assert_eq!(HostPolicy::from_toml("").unwrap().determinism, None);
}

#[test]
fn determinism_builder() {
    let p = HostPolicy::deny_all().with_determinism(Determinism::seeded(7));
    assert_eq!(
        p.determinism,
        Some(Determinism {
            seed: 7,
            epoch_ms: 0
        })
    );
    assert!(p.allowed.is_empty(), "determinism grants nothing");
    assert_eq!(
        Determinism::seeded(1).with_epoch_ms(u64::MAX).epoch_ms,
        MAX_EPOCH_MS
    );
}

#[test]
fn good_empty_fixture_is_deny_all() {
    assert_eq!(
        load(fixture!("good_empty.toml")).unwrap(),
        HostPolicy::deny_all()
    );
}

#[test]
fn good_fetch_no_domains_allows_no_host() {
    let p = load(fixture!("good_fetch_no_domains.toml")).unwrap();
    assert_eq!(p.allowed, [Capability::Fetch].into_iter().collect());
    assert!(p.fetch.rules.is_empty());
    assert!(p.grants(&["fetch".into()]).unwrap().fetch);
    assert_eq!(
        p.fetch
            .check_url("https://api.example.test/")
            .unwrap_err()
            .to_string(),
        "host not allowed: api.example.test (allowed: none)"
    );
}

#[test]
fn good_unicode_fixture_normalizes_rules() {
    let p = load(fixture!("good_unicode.toml")).unwrap();
    let shown: Vec<String> = p.fetch.rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "xn--bcher-kva.example.test",
            "*.xn--mnchen-3ya.example.test",
            // Written with a trailing dot: kept, so it also allows
            // URLs spelled with the dot.
            "api.example.test."
        ]
    );
    assert!(
        p.fetch
            .check_url("http://xn--bcher-kva.example.test/")
            .is_ok()
    );
    assert!(p.fetch.check_url("http://a.münchen.example.test/").is_ok());
    assert!(p.fetch.check_url("http://api.example.test/").is_ok());
}

/// How a malformed fixture must fail.
enum Want {
    Rule(&'static str),
    Unknown(&'static str),
    Toml(&'static [&'static str]),
    ReadDir(&'static str),
    Section(&'static str),
    Value(&'static str),
}

#[test]
fn malformed_fixtures_name_the_culprit() {
    let table: &[(&str, Want)] = &[
        (
            fixture!("bad_unknown_capability.toml"),
            Want::Unknown("net"),
        ),
        (
            fixture!("bad_wildcard_no_dot.toml"),
            Want::Rule("*example.test"),
        ),
        (
            fixture!("bad_wildcard_middle.toml"),
            Want::Rule("api.*.example.test"),
        ),
        (fixture!("bad_wildcard_alone.toml"), Want::Rule("*")),
        (fixture!("bad_empty_rule.toml"), Want::Rule("")),
        (
            fixture!("bad_rule_scheme.toml"),
            Want::Rule("ftp://files.example.test"),
        ),
        (
            fixture!("bad_rule_port.toml"),
            Want::Rule("api.example.test:99999"),
        ),
        (
            fixture!("bad_rule_path.toml"),
            Want::Rule("https://api.example.test/v1"),
        ),
        (
            fixture!("bad_rule_userinfo.toml"),
            Want::Rule("user@api.example.test"),
        ),
        (
            fixture!("bad_rule_ipv6_unbracketed.toml"),
            Want::Rule("::1"),
        ),
        (
            fixture!("bad_unknown_top_key.toml"),
            Want::Toml(&["allowed", "line 2"]),
        ),
        (
            fixture!("bad_unknown_fetch_key.toml"),
            Want::Toml(&["domain", "line 4"]),
        ),
        (
            fixture!("bad_unknown_read_key.toml"),
            Want::Toml(&["path", "line 4"]),
        ),
        (
            fixture!("bad_unknown_limits_key.toml"),
            Want::Toml(&["timeout", "line 2"]),
        ),
        (
            fixture!("bad_type.toml"),
            Want::Toml(&["allow_private", "line 4"]),
        ),
        (
            fixture!("bad_domains_not_list.toml"),
            Want::Toml(&["domains", "line 4"]),
        ),
        (fixture!("bad_syntax.toml"), Want::Toml(&["line 3"])),
        (
            fixture!("bad_read_missing_host.toml"),
            Want::Toml(&["host"]),
        ),
        (fixture!("bad_guest_relative.toml"), Want::ReadDir("data")),
        (
            fixture!("bad_guest_dotdot.toml"),
            Want::ReadDir("/data/../etc"),
        ),
        (fixture!("bad_guest_duplicate.toml"), Want::ReadDir("/data")),
        (
            fixture!("bad_fetch_without_allow.toml"),
            Want::Section("fetch"),
        ),
        (
            fixture!("bad_read_without_allow.toml"),
            Want::Section("read"),
        ),
        (
            fixture!("bad_limits_zero.toml"),
            Want::Value("limits.timeout_ms"),
        ),
        (
            fixture!("bad_url_cap_zero.toml"),
            Want::Value("fetch.max_url_bytes"),
        ),
        (
            fixture!("bad_determinism_unknown_key.toml"),
            Want::Toml(&["clock", "line 3"]),
        ),
        (
            fixture!("bad_determinism_epoch.toml"),
            Want::Value("determinism.epoch_ms"),
        ),
        (
            fixture!("bad_determinism_seed_negative.toml"),
            Want::Toml(&["seed", "line 2"]),
        ),
    ];
    for (path, want) in table {
        let err = load(path).expect_err(path);
        let msg = err.to_string();
        match (want, &err) {
            (Want::Rule(r), PolicyError::BadDomainRule { rule, .. }) => {
                assert_eq!(rule, r, "{path}");
                assert!(msg.contains(&format!("\"{r}\"")), "{path}: {msg}");
            }
            (Want::Unknown(n), PolicyError::UnknownCapability(name)) => {
                assert_eq!(name, n, "{path}");
                assert!(msg.contains(n), "{path}: {msg}");
            }
            (Want::Toml(needles), PolicyError::Toml(_)) => {
                for n in *needles {
                    assert!(msg.contains(n), "{path}: {msg:?} lacks {n:?}");
                }
            }
            (Want::ReadDir(s), PolicyError::BadReadDir { spec, .. }) => {
                assert_eq!(spec, s, "{path}: {msg}");
            }
            (Want::Section(s), PolicyError::SectionWithoutCapability { section, .. }) => {
                assert_eq!(section, s, "{path}: {msg}");
            }
            (Want::Value(k), PolicyError::BadValue { key, .. }) => {
                assert_eq!(key, k, "{path}: {msg}");
            }
            _ => panic!("{path}: unexpected error {err:?}"),
        }
    }
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let err = load(fixture!("does_not_exist.toml")).unwrap_err();
    assert!(matches!(err, PolicyError::Io { .. }));
    assert!(err.to_string().contains("does_not_exist.toml"), "{err}");
}

#[test]
fn grants_are_the_intersection() {
    let host = HostPolicy::deny_all().with_allow_crypto();
    let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    let err = host.grants(&names(&["fetch"])).unwrap_err();
    assert_eq!(err, PolicyError::NotAllowedByHost(Capability::Fetch));
    assert!(err.to_string().contains("\"fetch\""), "{err}");

    assert_eq!(
        host.grants(&names(&["crypto", "fs.readFile"])),
        Err(PolicyError::NotAllowedByHost(Capability::FsReadFile))
    );
    assert_eq!(
        host.grants(&names(&["crypto", "net"])),
        Err(PolicyError::UnknownCapability("net".into()))
    );
    assert_eq!(
        host.grants(&names(&["crypto"])).unwrap(),
        Grants {
            fetch: false,
            fs_read: false,
            crypto: true
        }
    );
    // The host allowing more does not grant more than the tool lists.
    let wide = HostPolicy::deny_all()
        .with_allow_crypto()
        .with_allow_net("api.example.test")
        .unwrap()
        .with_allow_read("./data")
        .unwrap();
    assert_eq!(wide.grants(&[]).unwrap(), Grants::default());
    assert_eq!(
        wide.grants(&names(&["fetch", "fs.readFile", "crypto", "fetch"]))
            .unwrap(),
        Grants {
            fetch: true,
            fs_read: true,
            crypto: true
        }
    );
    assert_eq!(
        HostPolicy::deny_all().grants(&names(&["crypto"])),
        Err(PolicyError::NotAllowedByHost(Capability::Crypto))
    );
}

#[test]
fn allow_net_flag() {
    let p = HostPolicy::deny_all()
        .with_allow_net("api.example.test, *.cdn.example.test,https://secure.example.test")
        .unwrap();
    assert!(p.allowed.contains(&Capability::Fetch));
    assert_eq!(
        p.fetch.rules,
        rules(&[
            "api.example.test",
            "*.cdn.example.test",
            "https://secure.example.test"
        ])
    );
    let p = p.with_allow_net("[::1]:8080").unwrap();
    assert_eq!(p.fetch.rules.len(), 4);

    for bad in [
        "",
        "a.example.test,",
        "*example.test",
        "a.example.test,,b.example.test",
    ] {
        assert!(
            matches!(
                HostPolicy::deny_all().with_allow_net(bad),
                Err(PolicyError::BadDomainRule { .. })
            ),
            "{bad:?}"
        );
    }
    let err = HostPolicy::deny_all()
        .with_allow_net("ok.example.test,a.*.test")
        .unwrap_err();
    assert!(err.to_string().contains("\"a.*.test\""), "{err}");
}

#[test]
fn allow_read_flag() {
    let dir = |spec: &str| {
        let p = HostPolicy::deny_all().with_allow_read(spec).unwrap();
        assert!(p.allowed.contains(&Capability::FsReadFile));
        assert_eq!(p.read_dirs.len(), 1);
        let d = p.read_dirs[0].clone();
        (d.host.to_string_lossy().into_owned(), d.guest)
    };
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(dir("./data"), s("./data", "/data"));
    assert_eq!(dir("./data/"), s("./data/", "/data"));
    assert_eq!(dir("/srv/models"), s("/srv/models", "/models"));
    assert_eq!(dir("./data:/data"), s("./data", "/data"));
    assert_eq!(dir("./data:/mnt/in/"), s("./data", "/mnt/in"));
    assert_eq!(dir("./data://x/./y"), s("./data", "/x/y"));
    assert_eq!(dir(".:/work"), s(".", "/work"));
    assert_eq!(dir("./a:b"), s("./a:b", "/a:b"));
    assert_eq!(dir("data:/"), s("data", "/"));

    for bad in [
        "",
        ".",
        "/",
        "..",
        "./data:",
        "./data:/../etc",
        "./data:/a/../../b",
        ":/data",
    ] {
        assert!(
            matches!(
                HostPolicy::deny_all().with_allow_read(bad),
                Err(PolicyError::BadReadDir { .. })
            ),
            "{bad:?}"
        );
    }
    let dup = HostPolicy::deny_all()
        .with_allow_read("./a:/data")
        .unwrap()
        .with_allow_read("./b/data")
        .unwrap_err();
    assert!(matches!(dup, PolicyError::BadReadDir { spec, .. } if spec == "/data"));
}

#[test]
fn flags_and_file_compose() {
    let p = HostPolicy::from_toml("allow = [\"crypto\"]")
        .unwrap()
        .with_allow_net("api.example.test")
        .unwrap();
    assert_eq!(
        p.allowed,
        [Capability::Fetch, Capability::Crypto]
            .into_iter()
            .collect()
    );
    assert!(p.fetch.check_url("https://api.example.test/").is_ok());
}

#[test]
fn tools_allow_is_deny_by_default_with_globs() {
    assert!(!HostPolicy::deny_all().tools.allows("web_search"));
    assert!(
        !HostPolicy::from_toml("")
            .unwrap()
            .tools
            .allows("web_search")
    );
    let p = load(fixture!("good_full.toml")).unwrap();
    assert!(p.tools.allows("web_search"));
    assert!(p.tools.allows("http_request"));
    assert!(p.tools.allows("github.search_issues"));
    assert!(p.tools.allows("github."));
    assert!(!p.tools.allows("github"), "the glob needs the dot");
    assert!(!p.tools.allows("web_search2"), "no implicit prefix match");
    assert!(!p.tools.allows("xweb_search"));
    assert!(!p.tools.allows("generate_text"));
    let all = ToolAllow::new(vec!["*".into()]).unwrap();
    assert!(all.allows("anything.at_all") && all.allows(""));
    let mid = ToolAllow::new(vec!["a*b*c".into()]).unwrap();
    assert!(mid.allows("abc") && mid.allows("axxbyyc") && mid.allows("abbc"));
    assert!(!mid.allows("acb") && !mid.allows("ab"));
    // Hostile: many stars against a long non-matching name stays fast.
    let stars = ToolAllow::new(vec!["*a*a*a*a*a*a*a*a*a*a*b".into()]).unwrap();
    let t = std::time::Instant::now();
    assert!(!stars.allows(&"a".repeat(10_000)));
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn bad_tools_sections() {
    let err = load(fixture!("bad_tools_empty_glob.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("tools.allow"), "{err}");
    let err = load(fixture!("bad_tools_unknown_key.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("allowed"), "{err}");
}

#[test]
fn run_code_allow_is_checked_against_the_hosts_allow() {
    let p =
        HostPolicy::from_toml("allow = [\"crypto\"]\n[run_code]\nallow = [\"crypto\"]\n").unwrap();
    assert_eq!(p.run_code, ["crypto"]);
    assert!(HostPolicy::from_toml("").unwrap().run_code.is_empty());
    let err = HostPolicy::from_toml("[run_code]\nallow = [\"fetch\"]\n").unwrap_err();
    assert!(err.to_string().contains("fetch"), "{err}");
    assert!(HostPolicy::from_toml("[run_code]\nallow = [\"sockets\"]\n").is_err());
}
