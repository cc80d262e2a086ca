//! Properties of the policy: the TOML parses or is a typed refusal, domain
//! rules round-trip, and the URL check is total.

use proptest::prelude::*;
use temper::policy::{DomainRule, FetchDenied, FetchPolicy, HostKind, HostPolicy, check_dns_name};

use super::{bounded, config, text};

/// Domain-rule-like strings.
fn rule_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        (
            prop::option::of(prop_oneof![
                Just("http://"),
                Just("https://"),
                Just("ftp://"),
                Just("HTTPS://")
            ]),
            prop_oneof![
                "([a-z0-9-]{1,12}\\.){0,3}[a-z]{1,8}\\.?",
                "\\*\\.([a-z0-9-]{1,8}\\.){1,3}[a-z]{2,5}",
                "[0-9]{1,3}(\\.[0-9]{1,3}){3}",
                "\\[[0-9a-f:]{2,20}\\]",
                "[^/:@]{0,12}",
            ],
            prop::option::of((0u32..70000).prop_map(|p| format!(":{p}"))),
            prop::option::of(Just("/")),
        )
            .prop_map(|(s, h, p, slash)| {
                format!(
                    "{}{h}{}{}",
                    s.unwrap_or(""),
                    p.unwrap_or_default(),
                    slash.unwrap_or("")
                )
            }),
    ]
}

/// URL-like strings aimed at the fetch check.
fn url_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        (
            prop_oneof![
                Just("http://"),
                Just("https://"),
                Just("HTTP://"),
                Just("http:"),
                Just("ftp://")
            ],
            prop::option::of("[a-z:%@]{1,8}@"),
            prop_oneof![
                "([a-z0-9*_%!-]{1,12}\\.){0,3}(example\\.test|cdn\\.example\\.test)\\.{0,2}",
                "[0-9]{1,10}(\\.[0-9]{1,3}){0,3}",
                "0x[0-9a-f]{1,8}",
                "\\[[0-9a-f:.%]{2,24}\\]",
                "[^/?#]{0,20}",
                "[a-z]{60,70}\\.example\\.test",
            ],
            prop::option::of((0u32..70000).prop_map(|p| format!(":{p}"))),
            "(/[a-zA-Z0-9%._~?#&=+-]{0,20}){0,3}",
        )
            .prop_map(|(s, user, host, port, path)| {
                format!(
                    "{s}{}{host}{}{path}",
                    user.unwrap_or_default(),
                    port.unwrap_or_default()
                )
            }),
    ]
}

fn fetch_policy() -> FetchPolicy {
    FetchPolicy {
        rules: [
            "api.example.test",
            "*.cdn.example.test",
            "https://secure.example.test",
            "api.example.test:8443",
            "dotted.example.test.",
            "127.0.0.1:8080",
            "[::1]",
        ]
        .iter()
        .map(|r| DomainRule::parse(r).unwrap())
        .collect(),
        max_url_bytes: 200,
        ..FetchPolicy::default()
    }
}

/// TOML-ish policy documents: real keys and sections with generated values.
fn policy_doc() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        text().prop_map(|s| format!("{:?}", s)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        prop::collection::vec(rule_text().prop_map(|s| format!("{s:?}")), 0..4)
            .prop_map(|v| format!("[{}]", v.join(", "))),
        "[ -~]{0,12}",
    ];
    let key = prop_oneof![
        Just("allow"),
        Just("domains"),
        Just("allow_private"),
        Just("max_redirects"),
        Just("max_url_bytes"),
        Just("max_headers"),
        Just("host"),
        Just("guest"),
        Just("timeout_ms"),
        Just("memory_mb"),
        Just("seed"),
        Just("epoch_ms"),
        Just("enabled"),
        Just("bogus"),
    ];
    let section = prop_oneof![
        Just(""),
        Just("[fetch]\n"),
        Just("[[read]]\n"),
        Just("[limits]\n"),
        Just("[determinism]\n"),
        Just("[nope]\n"),
    ];
    prop::collection::vec((section, prop::collection::vec((key, value), 0..4)), 0..4).prop_map(
        |sections| {
            let mut doc = String::new();
            for (header, pairs) in sections {
                doc.push_str(header);
                for (k, v) in pairs {
                    doc.push_str(&format!("{k} = {v}\n"));
                }
            }
            doc
        },
    )
}

// ---- policy: TOML, domain rules, URL check ---------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn policy_toml_parses_or_is_a_typed_refusal(doc in prop_oneof![text(), policy_doc()]) {
        if let Ok(p) = bounded("HostPolicy::from_toml", || HostPolicy::from_toml(&doc)) {
            // What parsed is usable: every rule prints and parses back.
            for r in &p.fetch.rules {
                prop_assert_eq!(&DomainRule::parse(&r.to_string()).unwrap(), r);
            }
            prop_assert!(p.fetch.max_url_bytes > 0);
        }
    }

    /// A rule that parses prints in a normalized form that parses back to
    /// the same rule (and prints the same again).
    #[test]
    fn domain_rules_round_trip(s in rule_text()) {
        match bounded("DomainRule::parse", || DomainRule::parse(&s)) {
            Ok(rule) => {
                let shown = rule.to_string();
                let again = DomainRule::parse(&shown).unwrap_or_else(|e| panic!("{s:?} -> {shown:?}: {e}"));
                prop_assert_eq!(&again, &rule);
                prop_assert_eq!(again.to_string(), shown);
            }
            // A refusal names the rule as written.
            Err(e) => prop_assert!(e.to_string().contains(&format!("\"{s}\"")), "{e}"),
        }
    }

    /// Any URL is allowed or refused with a reason; an allowed one is
    /// short enough, has a DNS-name or IP host, no fragment, a rule for its
    /// host, and passes the check again as sent (the check is a fixed point).
    #[test]
    fn the_url_check_is_total_and_its_output_is_checked(raw in url_text()) {
        let policy = fetch_policy();
        match bounded("check_url", || policy.check_url(&raw)) {
            Ok(c) => {
                prop_assert!(raw.len() <= policy.max_url_bytes);
                prop_assert!(c.url.fragment().is_none(), "{}", c.url);
                prop_assert!(c.url.username().is_empty() && c.url.password().is_none());
                if let HostKind::Domain(d) = &c.host {
                    prop_assert_eq!(check_dns_name(d), Ok(()), "{}", d);
                    prop_assert_eq!(c.url.host_str(), Some(d.as_str()));
                }
                let again = policy.check_url(c.url.as_str()).unwrap_or_else(|e| panic!("{raw:?} -> {}: {e}", c.url));
                prop_assert_eq!(again, c);
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(!message.is_empty());
                // Quoted tool text is shortened; the reason is whole.
                prop_assert!(message.chars().count() < 1200, "{}", message);
                if let FetchDenied::UrlTooLong { bytes, limit } = e {
                    prop_assert_eq!(bytes, raw.len());
                    prop_assert_eq!(limit, policy.max_url_bytes);
                }
            }
        }
    }
}
