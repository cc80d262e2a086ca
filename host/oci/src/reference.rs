//! `oci://HOST[:PORT]/REPO:TAG` (or `@sha256:...`) references, parsed
//! strictly, and which registries may be reached over plain HTTP.

use oci_client::Reference;
use std::fmt;
use std::net::IpAddr;

use super::*;

/// A parsed `oci://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST)` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `HOST[:PORT]` (IPv6 in brackets).
    pub registry: String,
    /// The repository path, e.g. `tools/slugify`.
    pub repository: String,
    /// The tag, if given.
    pub tag: Option<String>,
    /// The manifest digest (`sha256:...`), if given.
    pub digest: Option<String>,
}

impl OciReference {
    /// Parses `oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]`.
    pub fn parse(text: &str) -> Result<OciReference, OciError> {
        let bad = |reason: &str| OciError::Reference {
            reference: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix("oci://")
            .ok_or_else(|| bad("must start with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected oci://HOST[:PORT]/REPO:TAG"))?;
        validate_registry(registry).map_err(|r| bad(&r))?;
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or_else(|| bad("the digest must be sha256:HEX"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("the digest must be sha256: and 64 hex digits"));
                }
                (p, Some(d.to_ascii_lowercase()))
            }
            None => (path, None),
        };
        let last_slash = path.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (repository, tag) = match path[last_slash..].rfind(':') {
            Some(i) => (
                &path[..last_slash + i],
                Some(path[last_slash + i + 1..].to_string()),
            ),
            None => (path, None),
        };
        if repository.is_empty() {
            return Err(bad("the repository is empty"));
        }
        for component in repository.split('/') {
            let ok = !component.is_empty()
                && component.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && component.as_bytes()[0].is_ascii_alphanumeric()
                && component.as_bytes()[component.len() - 1].is_ascii_alphanumeric();
            if !ok {
                return Err(bad(&format!(
                    "repository component {component:?}: lowercase letters, digits and . _ - between them"
                )));
            }
        }
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && (t.as_bytes()[0].is_ascii_alphanumeric() || t.as_bytes()[0] == b'_')
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(bad(&format!(
                    "tag {t:?}: up to 128 of letters, digits, . _ - (not starting with . or -)"
                )));
            }
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// Whether the registry host is loopback (127.0.0.0/8, `localhost`, `[::1]`).
    pub fn is_loopback(&self) -> bool {
        let host = host_of(&self.registry);
        if host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let ip = host.trim_start_matches('[').trim_end_matches(']');
        ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }

    pub(super) fn to_client_reference(&self) -> Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => {
                Reference::with_digest(self.registry.clone(), self.repository.clone(), d.clone())
            }
            (None, Some(t)) => {
                Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone())
            }
            (None, None) => Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".into(),
            ),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for OciReference {
    type Err = OciError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OciReference::parse(s)
    }
}

/// The host part of `HOST[:PORT]` (IPv6 kept in brackets).
pub(super) fn host_of(registry: &str) -> &str {
    if registry.starts_with('[') {
        match registry.find(']') {
            Some(i) => &registry[..=i],
            None => registry,
        }
    } else {
        registry.split(':').next().unwrap_or(registry)
    }
}

pub(super) fn validate_registry(registry: &str) -> Result<(), String> {
    if registry.is_empty() {
        return Err("the registry host is empty".into());
    }
    if registry.contains('@') {
        return Err(
            "credentials in the reference are not accepted (use the env or an auth file)".into(),
        );
    }
    let host = host_of(registry);
    let port = &registry[host.len()..];
    if !port.is_empty() {
        let p = port
            .strip_prefix(':')
            .ok_or_else(|| format!("bad registry {registry:?}"))?;
        p.parse::<u16>()
            .map_err(|_| format!("bad registry port {p:?}"))?;
    }
    if host.starts_with('[') {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("bad IPv6 registry host {host:?}"))?;
    } else if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
    {
        return Err(format!("bad registry host {host:?}"));
    }
    Ok(())
}
