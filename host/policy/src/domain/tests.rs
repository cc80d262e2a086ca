//! Tests of the domain rules and the URL check: matching, refusals, SSRF cases.

use super::*;

fn rule(s: &str) -> DomainRule {
    DomainRule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn rules_parse_and_round_trip() {
    let table: &[(&str, &str)] = &[
        ("api.example.com", "api.example.com"),
        ("API.Example.COM.", "api.example.com."),
        ("*.cdn.example.com.", "*.cdn.example.com."),
        ("*.cdn.example.com", "*.cdn.example.com"),
        ("https://api.example.com", "https://api.example.com"),
        ("HTTPS://api.example.com/", "https://api.example.com"),
        ("api.example.com:8443", "api.example.com:8443"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("[::1]", "[::1]"),
        ("[::1]:9000", "[::1]:9000"),
        (
            "https://*.cdn.example.com:8443",
            "https://*.cdn.example.com:8443",
        ),
        ("bücher.example", "xn--bcher-kva.example"),
        ("*.bücher.example", "*.xn--bcher-kva.example"),
        ("2130706433", "127.0.0.1"),
        ("localhost", "localhost"),
    ];
    for (input, shown) in table {
        let r = rule(input);
        assert_eq!(r.to_string(), *shown, "{input}");
        assert_eq!(rule(&r.to_string()), r, "round trip of {input}");
    }
    assert_eq!(rule("https://a.example").scheme(), Some(RuleScheme::Https));
    assert_eq!(rule("a.example:81").port(), Some(81));
    assert_eq!(
        rule("*.a.example").host(),
        &RuleHost::Wildcard("a.example".into())
    );
}

#[test]
fn malformed_rules_are_named() {
    let table: &[&str] = &[
        "",
        "*",
        "*.",
        "*example.com",
        "a.*.com",
        "api.*",
        "*.*.example.com",
        "**.example.com",
        "*.com",
        "*.127.0.0.1",
        "*.[::1]",
        "ftp://files.example.com",
        "ws://api.example.com",
        "https://",
        "https://api.example.com/v1",
        "api.example.com?x",
        "api.example.com#x",
        "user@api.example.com",
        "api.example.com:",
        "api.example.com:0",
        "api.example.com:65536",
        "api.example.com:http",
        "::1",
        "[::1",
        "[::1]x",
        "a..example.com",
        "api example.com",
        "api%2eexample.com",
        "a\\b.example.com",
        "exa!mple.com",
        ".example.com",
        "api_v2.example.com",
        "api.example.com..",
        "a-very-long-label-that-goes-on-and-on-and-on-past-sixty-three-chars.example.com",
    ];
    for input in table {
        match DomainRule::parse(input) {
            Err(PolicyError::BadDomainRule { rule, reason }) => {
                assert_eq!(rule, *input);
                assert!(!reason.is_empty());
                let msg = PolicyError::BadDomainRule {
                    rule: rule.clone(),
                    reason,
                }
                .to_string();
                assert!(msg.contains(&format!("\"{input}\"")), "{msg}");
            }
            other => panic!("{input:?} should be a BadDomainRule, got {other:?}"),
        }
    }
}

/// The policy the SSRF matrix runs against.
fn matrix_policy() -> FetchPolicy {
    FetchPolicy {
        rules: [
            "api.example.test",
            "*.cdn.example.test",
            "https://secure.example.test",
            "api.example.test:8443",
            "bücher.example.test",
        ]
        .iter()
        .map(|s| rule(s))
        .collect(),
        ..FetchPolicy::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V {
    Ok,
    Host,
    Scheme,
    SchemeForHost,
    Userinfo,
    Ip,
    Invalid,
    Port,
    TooLong,
    BadHost,
    Dot,
}

fn verdict(r: &Result<CheckedUrl, FetchDenied>) -> V {
    match r {
        Ok(_) => V::Ok,
        Err(FetchDenied::HostNotAllowed { .. }) => V::Host,
        Err(FetchDenied::SchemeNotAllowed(_)) => V::Scheme,
        Err(FetchDenied::SchemeNotAllowedForHost { .. }) => V::SchemeForHost,
        Err(FetchDenied::UserinfoNotAllowed) => V::Userinfo,
        Err(FetchDenied::IpNotAllowed(_)) => V::Ip,
        Err(FetchDenied::InvalidUrl(_)) => V::Invalid,
        Err(FetchDenied::PortNotAllowed { .. }) => V::Port,
        Err(FetchDenied::UrlTooLong { .. }) => V::TooLong,
        Err(FetchDenied::InvalidHost { .. }) => V::BadHost,
        Err(FetchDenied::TrailingDot { .. }) => V::Dot,
        Err(e) => panic!("check_url never returns {e:?}"),
    }
}

/// (url, expected verdict). Printed in the module report; keep compact.
const MATRIX: &[(&str, V)] = &[
    // Allowed baseline.
    ("http://api.example.test/", V::Ok),
    ("https://api.example.test/v1/items?q=1#frag", V::Ok),
    // IP literals in every encoding: no rule names them.
    ("http://127.0.0.1/", V::Ip),
    ("http://2130706433/", V::Ip),
    ("http://0x7f000001/", V::Ip),
    ("http://0177.0.0.1/", V::Ip),
    ("http://127.1/", V::Ip),
    ("http://0x7f.1/", V::Ip),
    ("http://127.0.0.1.:80/", V::Ip),
    ("http://[::1]/", V::Ip),
    ("http://[::ffff:127.0.0.1]/", V::Ip),
    ("http://[::ffff:7f00:1]/", V::Ip),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", V::Ip),
    ("http://169.254.169.254/latest/meta-data/", V::Ip),
    ("http://0.0.0.0/", V::Ip),
    ("http://0/", V::Ip),
    ("http://[::]/", V::Ip),
    ("http://8.8.8.8/", V::Ip),
    ("http://[fe80::1%25eth0]/", V::Invalid),
    // Userinfo tricks.
    ("http://api.example.test@evil.test/", V::Userinfo),
    ("http://evil.test@api.example.test/", V::Userinfo),
    ("http://user:pass@api.example.test/", V::Userinfo),
    ("http://:pass@api.example.test/", V::Userinfo),
    // Trailing dots and case.
    ("http://api.example.test./", V::Dot),
    ("http://API.Example.TEST./", V::Dot),
    ("http://api.example.test../", V::BadHost),
    ("HTTP://API.EXAMPLE.TEST/", V::Ok),
    // Wildcard vs bare suffix and look-alikes.
    ("https://cdn.example.test/", V::Host),
    ("https://x.cdn.example.test/", V::Ok),
    ("https://x.y.cdn.example.test/", V::Ok),
    ("https://X.CDN.example.test./lib.js", V::Dot),
    // Not DNS names: refused before any rule is matched.
    ("http://*.cdn.example.test/", V::BadHost),
    ("http://a_b.cdn.example.test/", V::BadHost),
    ("http://ex!mple.cdn.example.test/", V::BadHost),
    ("http://a*.cdn.example.test/", V::BadHost),
    ("http://x.cdn.example.test/#frag", V::Ok),
    ("https://evilcdn.example.test/", V::Host),
    ("https://cdn.example.test.evil.test/", V::Host),
    ("https://x.cdn.example.test.evil.test/", V::Host),
    ("http://example.test/", V::Host),
    ("http://evil.test/", V::Host),
    ("http://api.example.test.evil.test/", V::Host),
    ("http://apiexample.test/", V::Host),
    // Ports.
    ("https://api.example.test:8443/", V::Ok),
    ("http://api.example.test:8443/", V::Ok),
    ("http://api.example.test:8080/", V::Port),
    ("https://api.example.test:443/", V::Ok),
    ("http://api.example.test:80/", V::Ok),
    ("http://api.example.test:443/", V::Port),
    ("https://x.cdn.example.test:8443/", V::Port),
    ("http://api.example.test:0/", V::Port),
    ("http://api.example.test:65536/", V::Invalid),
    // Non-http schemes.
    ("ftp://api.example.test/", V::Scheme),
    ("file:///etc/passwd", V::Scheme),
    ("file://api.example.test/etc/passwd", V::Scheme),
    ("data:text/plain,hello", V::Scheme),
    ("javascript:alert(1)", V::Scheme),
    ("ws://api.example.test/", V::Scheme),
    ("wss://api.example.test/", V::Scheme),
    ("gopher://api.example.test:70/", V::Scheme),
    ("blob:https://api.example.test/uuid", V::Scheme),
    // Scheme-restricted rule.
    ("https://secure.example.test/", V::Ok),
    ("http://secure.example.test/", V::SchemeForHost),
    ("https://secure.example.test:8443/", V::Port),
    // Unicode / punycode hosts.
    ("http://bücher.example.test/", V::Ok),
    ("http://xn--bcher-kva.example.test/", V::Ok),
    ("http://BÜCHER.example.test/", V::Ok),
    ("http://\u{0430}pi.example.test/", V::Host), // Cyrillic 'а' homograph
    ("http://api\u{3002}example\u{3002}test/", V::Ok), // ideographic full stops
    ("http://ａｐｉ.example.test/", V::Ok),       // fullwidth letters map to ASCII
    // Backslash, percent-encoding, control characters.
    ("http://api.example.test\\@evil.test/", V::Invalid),
    ("http:\\\\evil.test\\", V::Invalid),
    ("http://api%2Eexample.test/", V::Invalid),
    ("http://%61pi.example.test/", V::Invalid),
    ("http://127.0.0.1%2f.api.example.test/", V::Invalid),
    ("http://api.exa\tmple.test/", V::Invalid),
    ("http://api.example.test\n.evil.test/", V::Invalid),
    ("http://api.example.test/%2e%2e/%5c", V::Ok),
    // Empty and missing hosts, garbage.
    ("http:///", V::Invalid),
    ("http://", V::Invalid),
    ("http://:80/", V::Invalid),
    ("http://./", V::Invalid),
    ("https:", V::Invalid),
    ("//api.example.test/", V::Invalid),
    ("api.example.test", V::Invalid),
    ("", V::Invalid),
    ("http://[::1/", V::Invalid),
    ("http://evil.test#@api.example.test/", V::Host),
    ("http://evil.test?@api.example.test/", V::Host),
    ("http:api.example.test/", V::Ok),
    ("http:/api.example.test/", V::Ok),
];

#[test]
fn ssrf_matrix() {
    let policy = matrix_policy();
    assert!(MATRIX.len() >= 40);
    let mut failures = Vec::new();
    for (url, expected) in MATRIX {
        let got = policy.check_url(url);
        if verdict(&got) != *expected {
            failures.push(format!("{url:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "matrix failures:\n{}",
        failures.join("\n")
    );
}

/// Prints the matrix with the actual messages (`cargo test -- --nocapture
/// print_matrix --ignored`).
#[test]
#[ignore]
fn print_matrix() {
    let policy = matrix_policy();
    for (url, _) in MATRIX {
        match policy.check_url(url) {
            Ok(c) => println!("{url:?} => Ok({} {}:{})", c.url, c.host, c.port),
            Err(e) => println!("{url:?} => {e}"),
        }
    }
}

#[test]
fn messages_have_the_documented_shapes() {
    let policy = FetchPolicy {
        rules: vec![rule("api.example.test"), rule("*.cdn.example.test")],
        ..FetchPolicy::default()
    };
    let msg = |u: &str| policy.check_url(u).unwrap_err().to_string();
    assert_eq!(
        msg("http://evil.test/"),
        "host not allowed: evil.test (allowed: api.example.test, *.cdn.example.test)"
    );
    assert_eq!(
        msg("ftp://api.example.test/"),
        "scheme not allowed: ftp (only http and https)"
    );
    assert_eq!(
        msg("http://u:p@api.example.test/"),
        "userinfo not allowed in URL"
    );
    assert_eq!(
        msg("http://2130706433/"),
        "IP address not allowed: 127.0.0.1"
    );
    assert_eq!(
        msg("http://[::ffff:127.0.0.1]/"),
        "IP address not allowed: ::ffff:127.0.0.1"
    );
    assert!(msg("http://").starts_with("invalid URL: "));
    assert_eq!(
        msg("http://api.example.test:8443/"),
        "port not allowed: 8443 for api.example.test"
    );
    let empty = FetchPolicy::default();
    assert_eq!(
        empty
            .check_url("https://api.example.test/")
            .unwrap_err()
            .to_string(),
        "host not allowed: api.example.test (allowed: none)"
    );
    let checked = policy.check_url("http://api.example.test/").unwrap();
    assert_eq!(
        policy
            .check_resolved(&checked, &["127.0.0.1".parse().unwrap()])
            .unwrap_err()
            .to_string(),
        "private address not allowed: api.example.test resolved to 127.0.0.1"
    );
}

#[test]
fn checked_url_parts_are_normalized() {
    let policy = matrix_policy();
    let c = policy
        .check_url("HTTPS://API.Example.TEST:8443/a?b#frag")
        .unwrap();
    assert_eq!(c.host, HostKind::Domain("api.example.test".into()));
    assert_eq!(c.port, 8443);
    assert_eq!(c.url.scheme(), "https");
    assert_eq!(c.url.as_str(), "https://api.example.test:8443/a?b");
    let c = policy.check_url("http://bücher.example.test/").unwrap();
    assert_eq!(
        c.host,
        HostKind::Domain("xn--bcher-kva.example.test".into())
    );
    assert_eq!(c.port, 80);
    let c = policy.check_url("https://api.example.test/").unwrap();
    assert_eq!(c.port, 443);
}

#[test]
fn empty_rules_allow_nothing() {
    let policy = FetchPolicy::default();
    for url in [
        "http://api.example.test/",
        "https://example.com/",
        "http://localhost/",
    ] {
        assert!(matches!(
            policy.check_url(url),
            Err(FetchDenied::HostNotAllowed { .. })
        ));
    }
    assert!(matches!(
        policy.check_url("http://127.0.0.1/"),
        Err(FetchDenied::IpNotAllowed(_))
    ));
}

#[test]
fn ip_rules_allow_exactly_that_ip_in_any_encoding() {
    let policy = FetchPolicy {
        rules: vec![rule("http://127.0.0.1:8080"), rule("[::1]")],
        ..FetchPolicy::default()
    };
    for url in [
        "http://127.0.0.1:8080/",
        "http://2130706433:8080/",
        "http://0x7f.1:8080/",
        "http://[::ffff:127.0.0.1]:8080/",
        "http://[::1]/",
        "https://[0:0:0:0:0:0:0:1]/",
    ] {
        let c = policy
            .check_url(url)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let addrs = match c.host {
            HostKind::Ip(ip) => vec![ip],
            HostKind::Domain(_) => panic!("{url} is an IP literal"),
        };
        assert_eq!(policy.check_resolved(&c, &addrs).unwrap(), addrs, "{url}");
    }
    assert!(matches!(
        policy.check_url("https://127.0.0.1:8080/"),
        Err(FetchDenied::SchemeNotAllowedForHost { .. })
    ));
    assert!(matches!(
        policy.check_url("http://127.0.0.1/"),
        Err(FetchDenied::PortNotAllowed { port: 80, .. })
    ));
    assert!(matches!(
        policy.check_url("http://127.0.0.2:8080/"),
        Err(FetchDenied::IpNotAllowed(_))
    ));
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn resolved_addresses() {
    let policy = matrix_policy();
    let c = policy.check_url("https://api.example.test/").unwrap();

    let public = ips(&["93.184.216.34", "2606:4700:4700::1111"]);
    assert_eq!(policy.check_resolved(&c, &public).unwrap(), public);

    let refused = [
        "127.0.0.1",
        "127.8.9.10",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.251",
        "192.0.2.1",
        "fc00::1",
        "fd00::1",
        "fe80::1",
        "::1",
        "::",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a00:1",
        "2001:db8::1",
        "ff02::1",
    ];
    for addr in refused {
        let a = ips(&[addr]);
        match policy.check_resolved(&c, &a) {
            Err(FetchDenied::PrivateAddress { host, addr: got }) => {
                assert_eq!(host, "api.example.test");
                assert_eq!(got, a[0]);
            }
            other => panic!("{addr} should be refused, got {other:?}"),
        }
        let open = FetchPolicy {
            allow_private: true,
            ..policy.clone()
        };
        assert_eq!(
            open.check_resolved(&c, &a).unwrap(),
            a,
            "{addr} with allow_private"
        );
    }

    // Mixed answers keep only the public addresses (DNS rebinding).
    let mixed = ips(&["127.0.0.1", "93.184.216.34", "10.0.0.1"]);
    assert_eq!(
        policy.check_resolved(&c, &mixed).unwrap(),
        ips(&["93.184.216.34"])
    );
    // An empty answer is an error, not an empty success.
    assert!(matches!(
        policy.check_resolved(&c, &[]),
        Err(FetchDenied::NoAddresses { .. })
    ));
}

#[test]
fn a_rule_naming_a_private_ip_allows_it_for_resolved_names() {
    let policy = FetchPolicy {
        rules: vec![rule("internal.example.test"), rule("10.0.0.5")],
        ..FetchPolicy::default()
    };
    let c = policy.check_url("http://internal.example.test/").unwrap();
    assert_eq!(
        policy.check_resolved(&c, &ips(&["10.0.0.5"])).unwrap(),
        ips(&["10.0.0.5"])
    );
    assert_eq!(
        policy
            .check_resolved(&c, &ips(&["::ffff:10.0.0.5"]))
            .unwrap(),
        ips(&["::ffff:10.0.0.5"])
    );
    assert!(matches!(
        policy.check_resolved(&c, &ips(&["10.0.0.6"])),
        Err(FetchDenied::PrivateAddress { .. })
    ));
}

#[test]
fn trailing_dots_need_a_rule_written_with_the_dot() {
    let policy = matrix_policy();
    let err = policy.check_url("http://api.example.test./").unwrap_err();
    assert_eq!(
        err,
        FetchDenied::TrailingDot {
            host: "api.example.test.".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "host not allowed: api.example.test. (a trailing dot is refused unless a rule is written with it, like `api.example.test.`)"
    );
    let dotted = FetchPolicy {
        rules: vec![rule("api.example.test."), rule("*.cdn.example.test.")],
        ..FetchPolicy::default()
    };
    for url in [
        "http://api.example.test./x",
        "http://api.example.test/x",
        "http://a.cdn.example.test./x",
    ] {
        let c = dotted
            .check_url(url)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        // Connected to, and sent, without the dot.
        assert!(
            matches!(&c.host, HostKind::Domain(d) if !d.ends_with('.')),
            "{url}"
        );
        assert!(!c.url.host_str().unwrap().ends_with('.'), "{url}");
    }
    assert!(rule("api.example.test.").trailing_dot());
    assert!(!rule("api.example.test").trailing_dot());
}

#[test]
fn hosts_must_be_dns_names_before_any_rule_is_matched() {
    let policy = FetchPolicy {
        rules: vec![rule("*.cdn.example.test"), rule("*.example.test")],
        ..FetchPolicy::default()
    };
    let label63 = "a".repeat(63);
    let label64 = "a".repeat(64);
    assert!(
        policy
            .check_url(&format!("http://{label63}.cdn.example.test/"))
            .is_ok()
    );
    let err = policy
        .check_url(&format!("http://{label64}.cdn.example.test/"))
        .unwrap_err();
    assert!(matches!(err, FetchDenied::InvalidHost { .. }), "{err}");
    assert!(
        err.to_string().contains("is 64 characters, longer than 63"),
        "{err}"
    );
    // 4 labels of 63 plus `example.test`: over 253 in all.
    let long = format!("{label63}.{label63}.{label63}.{label63}.example.test");
    let err = policy.check_url(&format!("http://{long}/")).unwrap_err();
    assert!(err.to_string().contains("longer than 253"), "{err}");
    let err = policy.check_url("http://*.cdn.example.test/").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid host: *.cdn.example.test: label `*` has `*`: only letters, digits and hyphens are allowed in a host name"
    );
    assert_eq!(check_dns_name("xn--bcher-kva.example"), Ok(()));
    assert!(check_dns_name("a..b").is_err());
    assert!(check_dns_name("").is_err());
}

#[test]
fn urls_over_the_cap_are_refused_first() {
    let policy = FetchPolicy {
        rules: vec![rule("api.example.test")],
        ..FetchPolicy::default()
    };
    assert_eq!(policy.max_url_bytes, 8192);
    let base = "http://api.example.test/?q=";
    let fits = format!("{base}{}", "a".repeat(8192 - base.len()));
    assert!(policy.check_url(&fits).is_ok());
    let over = format!("{fits}a");
    assert_eq!(
        policy.check_url(&over).unwrap_err(),
        FetchDenied::UrlTooLong {
            bytes: 8193,
            limit: 8192
        }
    );
    // Before anything else: even a URL that would not parse.
    let junk = "\\".repeat(9000);
    assert!(matches!(
        policy.check_url(&junk),
        Err(FetchDenied::UrlTooLong { .. })
    ));
    let small = FetchPolicy {
        max_url_bytes: 30,
        ..policy.clone()
    };
    assert!(matches!(
        small.check_url("http://api.example.test/0123456789"),
        Err(FetchDenied::UrlTooLong {
            bytes: 34,
            limit: 30
        })
    ));
}

#[test]
fn messages_quote_long_urls_shortened_and_keep_the_reason() {
    let policy = matrix_policy();
    let url = format!("http://api.example.test:99999/{}", "p".repeat(3000));
    let msg = policy.check_url(&url).unwrap_err().to_string();
    assert!(
        msg.starts_with("invalid URL: invalid port number: http://"),
        "{msg}"
    );
    assert!(msg.ends_with('…') && msg.len() < 300, "{msg}");
    assert_eq!(shorten("short"), "short");
    assert_eq!(
        shorten(&"é".repeat(500)).chars().count(),
        MESSAGE_URL_CHARS + 1
    );
}
