//! Domain rules and the URL / resolved-address checks of the `fetch`
//! capability.
//!
//! # Rule syntax
//!
//! A rule is `[SCHEME://]HOST[:PORT][/]` where
//!
//! * `SCHEME` is `http` or `https` (any case). Without a scheme the rule
//!   allows both.
//! * `HOST` is one of
//!   * an exact domain name, `api.example.com`, matching only that name;
//!   * a wildcard `*.example.com`, matching every name *below*
//!     `example.com` (`a.example.com`, `a.b.example.com`) but **not**
//!     `example.com` itself. The suffix must have at least two labels
//!     (`*.com` is refused) and no other wildcard form exists (`*`,
//!     `*example.com`, `a.*.com`, `api.*` are all refused);
//!   * an IP literal, `127.0.0.1` or `[::1]` (IPv6 must be bracketed).
//!     Naming an IP is the only way, short of `allow_private`, to reach a
//!     non-public address.
//! * `PORT` restricts the rule to that port. **Without a port, a rule allows
//!   only the default port of the URL's scheme** (80 for `http`, 443 for
//!   `https`); so `api.example.com` does not allow `http://api.example.com:8080/`
//!   and `https://api.example.com` does not allow port 8443. Write one rule
//!   per extra port.
//!
//! Hosts are normalized exactly as URLs are (WHATWG via the `url` crate):
//! lower-cased, IDNA/punycode for Unicode names, IPv4 in any WHATWG
//! encoding turned into dotted quad. A rule written as `bücher.example`
//! therefore matches `http://xn--bcher-kva.example/`. A name must be a valid
//! DNS host name after IDNA: labels of letters, digits and hyphens, 1 to 63
//! characters each, 253 at most in all.
//!
//! A trailing dot (`api.example.com.`, the fully qualified spelling) is
//! refused in URLs, like the other ambiguous spellings, unless a rule is
//! written with the dot: the rule `api.example.com.` allows both
//! `http://api.example.com./` and `http://api.example.com/`; the rule
//! `api.example.com` allows only the latter.
//! A rule that does not fit this grammar is a
//! [`PolicyError::BadDomainRule`] naming it: never a silent allow.
//!
//! # URL checks
//!
//! [`FetchPolicy::check_url`] is run on every request and every redirect hop.
//! It parses with the WHATWG parser (the one browsers and `fetch` use), so
//! numeric hosts such as `http://2130706433/`, `http://0x7f.1/`,
//! `http://0177.0.0.1/` are recognised as `127.0.0.1` and need a rule naming
//! that IP. On top of WHATWG it refuses, as `invalid URL`, inputs that other
//! parsers read differently: backslashes and ASCII control characters
//! anywhere, and percent-encoding in the authority. Before any rule is
//! matched, the URL must be at most [`FetchPolicy::max_url_bytes`] long
//! and its host, when a name, a valid DNS name (so `http://*.cdn.example.com/`
//! is refused, never matched against `*.cdn.example.com`). The fragment is
//! dropped (it is never sent). The runtime must connect
//! to [`CheckedUrl::host`] / [`CheckedUrl::port`] and send
//! [`CheckedUrl::url`], never the raw string the guest passed.
//!
//! [`FetchPolicy::check_resolved`] then checks the addresses a domain name
//! resolved to (DNS rebinding / SSRF into the private network).

use std::fmt;
use std::net::IpAddr;

use url::Url;

use super::PolicyError;
use super::ip::is_public_address;

/// Default for [`FetchPolicy::max_redirects`].
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;
/// Default for [`FetchPolicy::max_request_body`]: 1 MiB.
pub const DEFAULT_MAX_REQUEST_BODY: u64 = 1024 * 1024;
/// Default for [`FetchPolicy::max_response_body`]: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BODY: u64 = 8 * 1024 * 1024;
/// Default for [`FetchPolicy::max_headers`].
pub const DEFAULT_MAX_HEADERS: u32 = 64;
/// Default for [`FetchPolicy::max_header_bytes`]: 16 KiB.
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 16 * 1024;
/// Default for [`FetchPolicy::max_url_bytes`]: 8 KiB.
pub const DEFAULT_MAX_URL_BYTES: usize = 8 * 1024;
/// How much of a URL (or other tool-supplied text) a refusal message quotes;
/// the reason around it is always kept whole.
pub const MESSAGE_URL_CHARS: usize = 200;

/// The scheme a [`DomainRule`] is restricted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleScheme {
    /// `http://` only.
    Http,
    /// `https://` only.
    Https,
}

impl RuleScheme {
    /// The scheme as written in a URL, without `://`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleScheme::Http => "http",
            RuleScheme::Https => "https",
        }
    }
}

/// The host part of a [`DomainRule`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleHost {
    /// Exactly this (normalized, ASCII) domain name.
    Exact(String),
    /// Any name strictly below this (normalized, ASCII) suffix; written
    /// `*.suffix`. The suffix itself is not matched.
    Wildcard(String),
    /// Exactly this IP address (IPv4-mapped IPv6 compares equal to its IPv4).
    Ip(IpAddr),
}

/// One entry of the fetch allowlist; see the [module docs](self) for the
/// syntax. Built only through [`DomainRule::parse`], so every rule is valid
/// and normalized.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DomainRule {
    scheme: Option<RuleScheme>,
    host: RuleHost,
    port: Option<u16>,
    /// Written with a trailing dot: also allows the trailing-dot spelling.
    trailing_dot: bool,
}

fn bad(rule: &str, reason: impl Into<String>) -> PolicyError {
    PolicyError::BadDomainRule {
        rule: rule.to_string(),
        reason: reason.into(),
    }
}

impl DomainRule {
    /// Parses one rule such as `api.example.com`, `*.cdn.example.com`,
    /// `https://api.example.com`, `api.example.com:8443`,
    /// `http://127.0.0.1:8080` or `[::1]`.
    ///
    /// Errors with [`PolicyError::BadDomainRule`] naming the rule and the
    /// reason for anything else (empty rule, other schemes, paths, userinfo,
    /// other wildcard forms, bad ports, unbracketed IPv6, ...).
    pub fn parse(rule: &str) -> Result<Self, PolicyError> {
        if rule.is_empty() {
            return Err(bad(rule, "empty rule"));
        }
        if rule
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        {
            return Err(bad(
                rule,
                "whitespace, control characters and backslashes are not allowed",
            ));
        }
        let (scheme, rest) = match rule.find("://") {
            Some(i) => {
                let scheme = match rule[..i].to_ascii_lowercase().as_str() {
                    "http" => RuleScheme::Http,
                    "https" => RuleScheme::Https,
                    other => {
                        return Err(bad(
                            rule,
                            format!("scheme `{other}` is not allowed (only http and https)"),
                        ));
                    }
                };
                (Some(scheme), &rule[i + 3..])
            }
            None => (None, rule),
        };
        // Accept one trailing slash ("https://api.example.com/"), no path.
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#']) {
            return Err(bad(
                rule,
                "paths, queries and fragments are not allowed; a rule names a host",
            ));
        }
        if authority.contains('@') {
            return Err(bad(rule, "userinfo (`user@`) is not allowed in a rule"));
        }
        if authority.contains('%') {
            return Err(bad(rule, "percent-encoding is not allowed in a rule"));
        }
        let (host_text, port_text) = split_host_port(rule, authority)?;
        let port = match port_text {
            None => None,
            Some(p) => Some(parse_port(rule, p)?),
        };
        let host = parse_rule_host(rule, host_text)?;
        let trailing_dot =
            matches!(host, RuleHost::Exact(_) | RuleHost::Wildcard(_)) && host_text.ends_with('.');
        Ok(DomainRule {
            scheme,
            host,
            port,
            trailing_dot,
        })
    }

    /// The scheme the rule is restricted to; `None` allows http and https.
    pub fn scheme(&self) -> Option<RuleScheme> {
        self.scheme
    }

    /// The host part of the rule.
    pub fn host(&self) -> &RuleHost {
        &self.host
    }

    /// The port the rule is restricted to; `None` allows only the scheme's
    /// default port (80 for http, 443 for https).
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether the rule was written with a trailing dot (it then also
    /// allows URLs spelling the host with one).
    pub fn trailing_dot(&self) -> bool {
        self.trailing_dot
    }

    /// Matches `host` (without its trailing dot); `dotted`: the URL spelled
    /// it with one, which only a rule written with the dot allows.
    fn matches_spelling(&self, host: &HostKind, dotted: bool) -> bool {
        (!dotted || self.trailing_dot) && self.matches_host(host)
    }

    fn matches_host(&self, host: &HostKind) -> bool {
        match (&self.host, host) {
            (RuleHost::Exact(name), HostKind::Domain(h)) => name == h,
            (RuleHost::Wildcard(suffix), HostKind::Domain(h)) => h
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
            (RuleHost::Ip(a), HostKind::Ip(b)) => a.to_canonical() == b.to_canonical(),
            _ => false,
        }
    }

    fn matches_scheme(&self, scheme: &str) -> bool {
        match self.scheme {
            None => scheme == "http" || scheme == "https",
            Some(s) => s.as_str() == scheme,
        }
    }

    fn matches_port(&self, scheme: &str, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => default_port(scheme) == Some(port),
        }
    }

    fn names_ip(&self, ip: IpAddr) -> bool {
        matches!(self.host, RuleHost::Ip(a) if a.to_canonical() == ip.to_canonical())
    }
}

impl std::str::FromStr for DomainRule {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DomainRule::parse(s)
    }
}

/// Writes the normalized rule; the output parses back to the same rule.
impl fmt::Display for DomainRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = self.scheme {
            write!(f, "{}://", s.as_str())?;
        }
        match &self.host {
            RuleHost::Exact(name) => f.write_str(name)?,
            RuleHost::Wildcard(suffix) => write!(f, "*.{suffix}")?,
            RuleHost::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            RuleHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        if self.trailing_dot {
            f.write_str(".")?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

fn split_host_port<'a>(
    rule: &str,
    authority: &'a str,
) -> Result<(&'a str, Option<&'a str>), PolicyError> {
    if authority.starts_with('[') {
        let end = authority
            .find(']')
            .ok_or_else(|| bad(rule, "unterminated `[` in IPv6 literal"))?;
        let (host, after) = authority.split_at(end + 1);
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(bad(rule, "unexpected text after `]`")),
            },
        };
    }
    match authority.matches(':').count() {
        0 => Ok((authority, None)),
        1 => {
            let (host, port) = authority.split_once(':').expect("one colon");
            Ok((host, Some(port)))
        }
        _ => Err(bad(rule, "IPv6 literals must be bracketed, like `[::1]`")),
    }
}

fn parse_port(rule: &str, text: &str) -> Result<u16, PolicyError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(rule, format!("port `{text}` is not a number")));
    }
    match text.parse::<u16>() {
        Ok(0) => Err(bad(rule, "port 0 is not allowed")),
        Ok(p) => Ok(p),
        Err(_) => Err(bad(
            rule,
            format!("port `{text}` is out of range (1-65535)"),
        )),
    }
}

fn parse_rule_host(rule: &str, text: &str) -> Result<RuleHost, PolicyError> {
    if text.is_empty() {
        return Err(bad(rule, "empty host"));
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        if suffix.contains('*') {
            return Err(bad(
                rule,
                "only one leading `*.` wildcard is allowed, like `*.example.com`",
            ));
        }
        if suffix.starts_with('[') {
            return Err(bad(rule, "a wildcard cannot cover an IP address"));
        }
        return match normalize_host(suffix) {
            Ok(HostKind::Domain(d)) => {
                check_domain_syntax(rule, &d)?;
                if !d.contains('.') {
                    return Err(bad(
                        rule,
                        "a wildcard must cover a domain of at least two labels, like `*.example.com`",
                    ));
                }
                Ok(RuleHost::Wildcard(d))
            }
            Ok(HostKind::Ip(_)) => Err(bad(rule, "a wildcard cannot cover an IP address")),
            Err(reason) => Err(bad(rule, reason)),
        };
    }
    if text.contains('*') {
        return Err(bad(
            rule,
            "the only wildcard form is a leading `*.`, like `*.example.com`",
        ));
    }
    match normalize_host(text) {
        Ok(HostKind::Domain(d)) => {
            check_domain_syntax(rule, &d)?;
            Ok(RuleHost::Exact(d))
        }
        Ok(HostKind::Ip(ip)) => Ok(RuleHost::Ip(ip)),
        Err(reason) => Err(bad(rule, reason)),
    }
}

/// Normalizes a host exactly as the WHATWG URL parser does for http(s) URLs
/// (lower case, IDNA, numeric IPv4 forms), then strips one trailing dot.
fn normalize_host(text: &str) -> Result<HostKind, String> {
    match url::Host::parse(text) {
        Ok(url::Host::Domain(d)) => Ok(HostKind::Domain(strip_one_dot(&d).to_string())),
        Ok(url::Host::Ipv4(ip)) => Ok(HostKind::Ip(IpAddr::V4(ip))),
        Ok(url::Host::Ipv6(ip)) => Ok(HostKind::Ip(IpAddr::V6(ip))),
        Err(e) => Err(format!("invalid host `{text}`: {e}")),
    }
}

fn strip_one_dot(d: &str) -> &str {
    d.strip_suffix('.').unwrap_or(d)
}

/// Rule host names are held to the same DNS syntax as URL hosts.
fn check_domain_syntax(rule: &str, d: &str) -> Result<(), PolicyError> {
    check_dns_name(d).map_err(|reason| bad(rule, reason))
}

/// Whether `d` (lower case, after IDNA, without a trailing dot) is a valid
/// DNS host name: labels of ASCII letters, digits and hyphens, each 1 to 63
/// characters, at most 253 characters in all. The reason when it is not.
pub fn check_dns_name(d: &str) -> Result<(), String> {
    if d.is_empty() {
        return Err("empty host".into());
    }
    if d.len() > 253 {
        return Err(format!(
            "host name is {} characters, longer than 253",
            d.len()
        ));
    }
    for label in d.split('.') {
        if label.is_empty() {
            return Err("empty label in host name".into());
        }
        if label.len() > 63 {
            return Err(format!(
                "label `{}` is {} characters, longer than 63",
                shorten(label),
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Err(format!(
                "label `{}` has `{c}`: only letters, digits and hyphens are allowed in a host name",
                shorten(label)
            ));
        }
    }
    Ok(())
}

/// `text` cut to [`MESSAGE_URL_CHARS`] characters (with `…` when cut), for
/// quoting tool-supplied URLs and names in messages whose reason must stay
/// whole.
pub fn shorten(text: &str) -> String {
    match text.char_indices().nth(MESSAGE_URL_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

/// The host a checked URL connects to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostKind {
    /// A normalized ASCII domain name (lower case, punycode, no trailing
    /// dot); resolve it, then pass the addresses to
    /// [`FetchPolicy::check_resolved`].
    Domain(String),
    /// An IP literal; connect to it directly (it was named by a rule).
    Ip(IpAddr),
}

impl fmt::Display for HostKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostKind::Domain(d) => f.write_str(d),
            HostKind::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A URL that passed [`FetchPolicy::check_url`], with the normalized parts
/// to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedUrl {
    /// The parsed (WHATWG-serialized) URL to send; never re-parse the raw
    /// guest string.
    pub url: Url,
    /// The host to resolve or connect to.
    pub host: HostKind,
    /// The port to connect to (explicit or the scheme's default).
    pub port: u16,
}

/// Why a URL or a resolved address was refused by the fetch policy. The
/// messages are shown to tools, so they are short and name the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchDenied {
    /// The host matches no rule; `allowed` lists every rule (or `none`).
    #[error("host not allowed: {host} (allowed: {allowed})")]
    HostNotAllowed {
        /// The normalized host of the URL.
        host: String,
        /// All rules, comma-separated, or `none`.
        allowed: String,
    },
    /// A scheme other than http or https.
    #[error("scheme not allowed: {0} (only http and https)")]
    SchemeNotAllowed(String),
    /// The host is allowed, but only with another scheme (e.g. `http` when
    /// the rule says `https://`).
    #[error("scheme not allowed: {scheme} for {host}")]
    SchemeNotAllowedForHost {
        /// The URL's scheme.
        scheme: String,
        /// The normalized host.
        host: String,
    },
    /// The URL carried `user:password@`.
    #[error("userinfo not allowed in URL")]
    UserinfoNotAllowed,
    /// An IP literal that no rule names.
    #[error("IP address not allowed: {0}")]
    IpNotAllowed(IpAddr),
    /// The URL does not parse, has no host, or contains a construct that
    /// parsers disagree on (backslash, control character, percent-encoded
    /// authority).
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// The URL is longer than [`FetchPolicy::max_url_bytes`].
    #[error("URL is {bytes} bytes, over the {limit}-byte limit")]
    UrlTooLong {
        /// The URL's length in bytes.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The host is not a valid DNS name (a `*` or `_` label, a label over
    /// 63 characters, a name over 253).
    #[error("invalid host: {host}: {reason}")]
    InvalidHost {
        /// The host as parsed (shortened when long).
        host: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A trailing-dot host that no rule names with the dot.
    #[error(
        "host not allowed: {host} (a trailing dot is refused unless a rule is written with it, like `{host}`)"
    )]
    TrailingDot {
        /// The host, with its trailing dot.
        host: String,
    },
    /// The host is allowed, but not on this port.
    #[error("port not allowed: {port} for {host}")]
    PortNotAllowed {
        /// The port the URL would connect to.
        port: u16,
        /// The normalized host.
        host: String,
    },
    /// Every address the host resolved to is non-public (this one first).
    #[error("private address not allowed: {host} resolved to {addr}")]
    PrivateAddress {
        /// The normalized host.
        host: String,
        /// The first refused address.
        addr: IpAddr,
    },
    /// Name resolution returned no address at all.
    #[error("no address to connect to: {host} resolved to nothing")]
    NoAddresses {
        /// The normalized host.
        host: String,
    },
}

/// The `fetch` part of a host policy: which hosts, plus transfer limits.
/// The default allows no host at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Allowed hosts; empty means no host (deny by default).
    pub rules: Vec<DomainRule>,
    /// Allow connecting to non-public addresses (loopback, private,
    /// link-local, ...) that names resolve to. IP literals still need a rule.
    pub allow_private: bool,
    /// Redirect hops followed per request (each is re-checked).
    pub max_redirects: u32,
    /// Largest request body in bytes.
    pub max_request_body: u64,
    /// Largest response body in bytes.
    pub max_response_body: u64,
    /// Most request or response headers.
    pub max_headers: u32,
    /// Largest total size of the headers in bytes.
    pub max_header_bytes: u64,
    /// Longest URL in bytes, checked on every request and redirect hop
    /// before anything else.
    pub max_url_bytes: usize,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            rules: Vec::new(),
            allow_private: false,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            max_request_body: DEFAULT_MAX_REQUEST_BODY,
            max_response_body: DEFAULT_MAX_RESPONSE_BODY,
            max_headers: DEFAULT_MAX_HEADERS,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_url_bytes: DEFAULT_MAX_URL_BYTES,
        }
    }
}

impl FetchPolicy {
    /// Checks one URL (every request and every redirect hop goes through
    /// this). Returns the normalized parts to connect to.
    ///
    /// Order of checks: syntax (`invalid URL`), scheme, userinfo, host
    /// (`IP address not allowed` for IP literals, `host not allowed` for
    /// names), then scheme and port against the rules naming that host.
    pub fn check_url(&self, raw: &str) -> Result<CheckedUrl, FetchDenied> {
        if raw.len() > self.max_url_bytes {
            return Err(FetchDenied::UrlTooLong {
                bytes: raw.len(),
                limit: self.max_url_bytes,
            });
        }
        if raw.contains('\\') {
            return Err(FetchDenied::InvalidUrl(
                "backslash in URL (write `/` or `%5C`)".into(),
            ));
        }
        if raw.chars().any(|c| c.is_ascii_control()) {
            return Err(FetchDenied::InvalidUrl("control character in URL".into()));
        }
        let mut url = Url::parse(raw)
            .map_err(|e| FetchDenied::InvalidUrl(format!("{e}: {}", shorten(raw))))?;
        let scheme = url.scheme().to_string();
        let scheme = scheme.as_str();
        if scheme != "http" && scheme != "https" {
            return Err(FetchDenied::SchemeNotAllowed(shorten(scheme)));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchDenied::UserinfoNotAllowed);
        }
        if raw_authority(raw).is_some_and(|a| a.contains('%')) {
            return Err(FetchDenied::InvalidUrl(
                "percent-encoding in host not allowed".into(),
            ));
        }
        let (host, dotted) = match url.host() {
            Some(url::Host::Domain(d)) => {
                let name = strip_one_dot(d);
                if name.is_empty() {
                    return Err(FetchDenied::InvalidUrl(format!(
                        "empty host: {}",
                        shorten(raw)
                    )));
                }
                check_dns_name(name).map_err(|reason| FetchDenied::InvalidHost {
                    host: shorten(d),
                    reason,
                })?;
                (HostKind::Domain(name.to_string()), name.len() != d.len())
            }
            Some(url::Host::Ipv4(ip)) => (HostKind::Ip(IpAddr::V4(ip)), false),
            Some(url::Host::Ipv6(ip)) => (HostKind::Ip(IpAddr::V6(ip)), false),
            None => {
                return Err(FetchDenied::InvalidUrl(format!(
                    "no host: {}",
                    shorten(raw)
                )));
            }
        };
        if let HostKind::Domain(d) = &host
            && url.host_str() != Some(d.as_str())
        {
            // Drop the trailing dot from the URL too, so the Host header and
            // the name used for TLS agree with `host`.
            url.set_host(Some(d))
                .map_err(|e| FetchDenied::InvalidUrl(format!("{e}: {}", shorten(raw))))?;
        }
        // The fragment is the tool's own business: never sent.
        url.set_fragment(None);
        let port = url
            .port_or_known_default()
            .ok_or_else(|| FetchDenied::InvalidUrl(format!("no port: {}", shorten(raw))))?;

        let by_host: Vec<&DomainRule> = self
            .rules
            .iter()
            .filter(|r| r.matches_spelling(&host, dotted))
            .collect();
        if by_host.is_empty() {
            return Err(match host {
                HostKind::Ip(ip) => FetchDenied::IpNotAllowed(ip),
                HostKind::Domain(d) if dotted => FetchDenied::TrailingDot {
                    host: format!("{d}."),
                },
                HostKind::Domain(d) => FetchDenied::HostNotAllowed {
                    host: d,
                    allowed: self.rules_list(),
                },
            });
        }
        let by_scheme: Vec<&&DomainRule> = by_host
            .iter()
            .filter(|r| r.matches_scheme(scheme))
            .collect();
        if by_scheme.is_empty() {
            return Err(FetchDenied::SchemeNotAllowedForHost {
                scheme: scheme.to_string(),
                host: host.to_string(),
            });
        }
        if !by_scheme.iter().any(|r| r.matches_port(scheme, port)) {
            return Err(FetchDenied::PortNotAllowed {
                port,
                host: host.to_string(),
            });
        }
        Ok(CheckedUrl { url, host, port })
    }

    /// Checks the addresses a host name resolved to: refuses loopback,
    /// private, link-local, unspecified, multicast, broadcast,
    /// documentation, CGNAT, unique-local, IPv4-mapped-private and similar
    /// addresses (see [`is_public_address`])
    /// unless `allow_private`, or unless a rule names that exact IP.
    ///
    /// Returns the addresses allowed to connect to, in the given order
    /// (never empty): refused addresses are dropped, so a name resolving to
    /// both a public and a private address connects only to the public one.
    /// If none is allowed, the error names the first refused address.
    pub fn check_resolved(
        &self,
        url: &CheckedUrl,
        addrs: &[IpAddr],
    ) -> Result<Vec<IpAddr>, FetchDenied> {
        let Some(&first) = addrs.first() else {
            return Err(FetchDenied::NoAddresses {
                host: url.host.to_string(),
            });
        };
        let allowed: Vec<IpAddr> = addrs
            .iter()
            .copied()
            .filter(|&ip| {
                self.allow_private
                    || is_public_address(ip)
                    || self.rules.iter().any(|r| r.names_ip(ip))
            })
            .collect();
        if allowed.is_empty() {
            return Err(FetchDenied::PrivateAddress {
                host: url.host.to_string(),
                addr: first,
            });
        }
        Ok(allowed)
    }

    fn rules_list(&self) -> String {
        if self.rules.is_empty() {
            return "none".to_string();
        }
        self.rules
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The authority part of a raw http(s) URL string (after `scheme:` and any
/// slashes, up to the path, query or fragment).
fn raw_authority(raw: &str) -> Option<&str> {
    let (_, rest) = raw.split_once(':')?;
    let rest = rest.trim_start_matches('/');
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests;
