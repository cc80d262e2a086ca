//! The `fetch` capability's transport: HTTP(S) done by the host, policed by
//! [`FetchPolicy`]. Policy stays in the policy
//! module; this file only moves bytes.
//!
//! - Every request and every redirect hop is checked with `check_url`.
//! - Names are resolved by our resolver, which checks the addresses with
//!   `check_resolved` and hands reqwest only the addresses that passed, so
//!   the connection goes to a checked address (no second lookup).
//! - Redirects are followed here, not by reqwest, up to the policy's limit.
//! - Request body, response body, header count and header bytes are capped.
//! - HTTPS via rustls with the webpki roots (plus roots a test adds).
//! - With a [`Cassette`]: recording stores every exchange that passed the
//!   policy (each redirect hop too); replaying serves exchanges from the
//!   cassette only, never touching the network, under the same checks.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::bindings::temper::tool::fetch::{Request, Response};
use crate::capabilities::cassette::{Cassette, CassetteMode, RecordedResponse};
use temper_policy::{CheckedUrl, FetchDenied, FetchPolicy, HostKind, shorten};

/// Transport settings that are not policy: test hooks and extra TLS roots.
#[derive(Debug, Clone, Default)]
pub struct TransportOptions {
    /// Names resolved to these addresses instead of DNS (the addresses are
    /// still checked against the policy). For tests.
    pub resolve_overrides: HashMap<String, Vec<IpAddr>>,
    /// Extra trusted root certificates, PEM. For tests with self-signed TLS.
    pub extra_roots_pem: Vec<Vec<u8>>,
}

/// The host side of `temper:tool/fetch`, one per runtime (the TLS config and
/// connection pool are built once, never per call).
pub struct FetchTransport {
    client: reqwest::Client,
    policy: Arc<FetchPolicy>,
    cassette: Option<Cassette>,
}

/// One hop's response: from the network, or from a cassette.
enum Hop {
    Live(reqwest::Response),
    Replayed(RecordedResponse),
}

impl Hop {
    fn status(&self) -> reqwest::StatusCode {
        match self {
            Hop::Live(r) => r.status(),
            Hop::Replayed(r) => reqwest::StatusCode::from_u16(r.status)
                .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
        }
    }
    fn location(&self) -> Option<String> {
        match self {
            Hop::Live(r) => r
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            Hop::Replayed(r) => r
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("location"))
                .map(|(_, v)| v.clone()),
        }
    }
}

fn header_pairs(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

struct PolicyResolver {
    policy: Arc<FetchPolicy>,
    /// Names answered without DNS; a port other than 0 replaces the URL's
    /// default port (a URL that names its port keeps it).
    overrides: Arc<HashMap<String, Vec<SocketAddr>>>,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let overrides = self.overrides.clone();
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = match overrides.get(&host) {
                Some(addrs) => addrs.clone(),
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            // The URL itself passed `check_url` before reqwest asked us to
            // resolve its host; here only the addresses are judged.
            let checked = CheckedUrl {
                url: url::Url::parse(&format!("http://{host}/"))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?,
                host: HostKind::Domain(host.clone()),
                port: 0,
            };
            let allowed = policy
                .check_resolved(&checked, &ips)
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            // The addresses that passed, each once, with its port.
            let mut out: Vec<SocketAddr> = Vec::with_capacity(allowed.len());
            for sa in addrs {
                if allowed.contains(&sa.ip()) && !out.contains(&sa) {
                    out.push(sa);
                }
            }
            let addrs: Addrs = Box::new(out.into_iter());
            Ok(addrs)
        })
    }
}

impl FetchTransport {
    /// Builds the client (TLS config, pool, resolver) for `policy`.
    pub fn new(policy: FetchPolicy, options: &TransportOptions) -> Result<Self, String> {
        Self::with_addresses(policy, options, &HashMap::new())
    }

    /// Like [`Self::new`], with names also answered by `addresses` (host
    /// name, lower case → socket addresses; like curl's `--resolve`): a
    /// request for such a name on its scheme's default port connects to
    /// the given port. The addresses are still checked by the policy
    /// (`check_resolved`), and the URL, its host and every redirect hop by
    /// `check_url`, as for any name. For `http_request` deployments whose
    /// names are not in DNS, and tests.
    pub fn with_addresses(
        policy: FetchPolicy,
        options: &TransportOptions,
        addresses: &HashMap<String, Vec<SocketAddr>>,
    ) -> Result<Self, String> {
        let policy = Arc::new(policy);
        let mut overrides: HashMap<String, Vec<SocketAddr>> = options
            .resolve_overrides
            .iter()
            .map(|(name, ips)| {
                let addrs = ips.iter().map(|ip| SocketAddr::new(*ip, 0)).collect();
                (name.clone(), addrs)
            })
            .collect();
        overrides.extend(addresses.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .use_rustls_tls()
            .dns_resolver(Arc::new(PolicyResolver {
                policy: policy.clone(),
                overrides: Arc::new(overrides),
            }));
        for pem in &options.extra_roots_pem {
            let cert = reqwest::Certificate::from_pem(pem)
                .map_err(|e| format!("fetch: bad root certificate: {e}"))?;
            builder = builder.add_root_certificate(cert);
        }
        let client = builder
            .build()
            .map_err(|e| format!("fetch: cannot build the HTTP client: {e}"))?;
        Ok(Self {
            client,
            policy,
            cassette: None,
        })
    }

    /// Records exchanges into, or serves them from, `cassette` (see the
    /// [`cassette`](crate::capabilities::cassette) module).
    pub fn with_cassette(mut self, cassette: Cassette) -> Self {
        self.cassette = Some(cassette);
        self
    }

    fn replaying(&self) -> Option<&Cassette> {
        self.cassette
            .as_ref()
            .filter(|c| c.mode() == CassetteMode::Replay)
    }

    fn recording(&self) -> Option<&Cassette> {
        self.cassette
            .as_ref()
            .filter(|c| c.mode() == CassetteMode::Record)
    }

    /// Stores one exchange when recording (a no-op otherwise: `response`
    /// is only built, and bodies only copied, when a cassette records).
    fn record(
        &self,
        method: &str,
        url: &str,
        body: Option<&[u8]>,
        response: impl FnOnce() -> RecordedResponse,
    ) -> Result<(), String> {
        match self.recording() {
            Some(cassette) => cassette
                .store(method, url, body, response())
                .map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Performs `req` under the policy, finishing before `deadline`.
    pub async fn fetch(&self, req: Request, deadline: Instant) -> Result<Response, String> {
        let policy = &self.policy;
        let mut method = reqwest::Method::from_bytes(req.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("fetch: invalid method `{}`", shorten(&req.method)))?;
        if !matches!(
            method.as_str(),
            "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS"
        ) {
            return Err(format!("fetch: method not allowed: {method}"));
        }
        let mut body = req.body;
        if let Some(b) = &body
            && b.len() as u64 > policy.max_request_body
        {
            return Err(format!(
                "request body over {} bytes",
                policy.max_request_body
            ));
        }
        if req.headers.len() as u32 > policy.max_headers {
            return Err(format!(
                "too many request headers (limit {})",
                policy.max_headers
            ));
        }
        let mut url = policy.check_url(&req.url).map_err(|e| e.to_string())?.url;
        let mut redirected = false;
        let mut hops = 0u32;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err("fetch: out of time".into());
            }
            // A cassette scoped to this call (a forge's test case) takes
            // the place of the runtime's.
            let scoped = super::cassette::scoped_cassette();
            let hop = match scoped.as_ref().or(self.replaying()) {
                // Replay: the cassette or nothing; no lookup, no socket.
                Some(cassette) => Hop::Replayed(
                    cassette
                        .lookup(method.as_str(), url.as_str(), body.as_deref())
                        .map_err(|e| e.to_string())?,
                ),
                None => {
                    let mut request = self
                        .client
                        .request(method.clone(), url.clone())
                        .timeout(remaining);
                    for (name, value) in &req.headers {
                        request = request.header(name.as_str(), value.as_str());
                    }
                    if let Some(b) = &body {
                        request = request.body(b.clone());
                    }
                    Hop::Live(
                        request
                            .send()
                            .await
                            .map_err(|e| describe_send_error(&url, &e))?,
                    )
                }
            };
            let status = hop.status();
            let location = hop.location();
            if status.is_redirection()
                && req.redirect != "manual"
                && let Some(location) = location
            {
                // A hop is recorded as it came (status and headers; its
                // body is never read), before deciding to follow it.
                if let Hop::Live(response) = &hop {
                    self.record(method.as_str(), url.as_str(), body.as_deref(), || {
                        RecordedResponse {
                            status: status.as_u16(),
                            headers: header_pairs(response.headers()),
                            body: Vec::new(),
                        }
                    })?;
                }
                if req.redirect == "error" {
                    return Err(format!(
                        "redirect to {} refused: redirect mode is 'error'",
                        shorten(&location)
                    ));
                }
                if hops >= policy.max_redirects {
                    return Err(format!(
                        "too many redirects (limit {})",
                        policy.max_redirects
                    ));
                }
                let next = url.join(&location).map_err(|e| {
                    format!(
                        "redirect to {} refused: invalid URL: {e}",
                        shorten(&location)
                    )
                })?;
                let checked = policy.check_url(next.as_str()).map_err(|e| {
                    format!(
                        "redirect to {} refused: {e}",
                        shorten(next.host_str().unwrap_or(next.as_str()))
                    )
                })?;
                // 303, and 301/302 after POST, continue as GET without a body.
                if status == reqwest::StatusCode::SEE_OTHER
                    || ((status == reqwest::StatusCode::MOVED_PERMANENTLY
                        || status == reqwest::StatusCode::FOUND)
                        && method == reqwest::Method::POST)
                {
                    method = reqwest::Method::GET;
                    body = None;
                }
                url = checked.url;
                redirected = true;
                hops += 1;
                continue;
            }
            return match hop {
                Hop::Live(response) => {
                    let out = self
                        .read_response(response, url.to_string(), redirected, deadline)
                        .await?;
                    self.record(method.as_str(), url.as_str(), body.as_deref(), || {
                        RecordedResponse {
                            status: out.status,
                            headers: out.headers.clone(),
                            body: out.body.clone(),
                        }
                    })?;
                    Ok(out)
                }
                Hop::Replayed(recorded) => {
                    self.replayed_response(recorded, url.to_string(), redirected)
                }
            };
        }
    }

    /// A response from the cassette, under the same caps as a live one.
    fn replayed_response(
        &self,
        recorded: RecordedResponse,
        url: String,
        redirected: bool,
    ) -> Result<Response, String> {
        self.check_response_headers(&recorded.headers)?;
        let limit = self.policy.max_response_body;
        if recorded.body.len() as u64 > limit {
            return Err(over_limit(limit));
        }
        let status = reqwest::StatusCode::from_u16(recorded.status)
            .map_err(|_| format!("fetch: recorded status {} is invalid", recorded.status))?;
        Ok(Response {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or("").to_string(),
            url,
            redirected,
            headers: recorded.headers,
            body: recorded.body,
        })
    }

    /// The caps on response header count and bytes.
    fn check_response_headers(&self, headers: &[(String, String)]) -> Result<(), String> {
        let policy = &self.policy;
        if headers.len() as u32 > policy.max_headers {
            return Err(format!(
                "too many response headers (limit {})",
                policy.max_headers
            ));
        }
        let bytes: u64 = headers
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        if bytes > policy.max_header_bytes {
            return Err(format!(
                "response headers over {} bytes",
                policy.max_header_bytes
            ));
        }
        Ok(())
    }

    async fn read_response(
        &self,
        mut response: reqwest::Response,
        url: String,
        redirected: bool,
        deadline: Instant,
    ) -> Result<Response, String> {
        let policy = &self.policy;
        if response.headers().len() as u32 > policy.max_headers {
            return Err(format!(
                "too many response headers (limit {})",
                policy.max_headers
            ));
        }
        let mut header_bytes = 0u64;
        let mut headers = Vec::with_capacity(response.headers().len());
        for (name, value) in response.headers() {
            header_bytes += (name.as_str().len() + value.len()) as u64;
            headers.push((
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ));
        }
        if header_bytes > policy.max_header_bytes {
            return Err(format!(
                "response headers over {} bytes",
                policy.max_header_bytes
            ));
        }
        let status = response.status();
        let limit = policy.max_response_body;
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(over_limit(limit));
        }
        let mut body = Vec::new();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let chunk =
                tokio::time::timeout(remaining.max(Duration::from_millis(1)), response.chunk())
                    .await
                    .map_err(|_| "fetch: out of time reading the response body".to_string())?
                    .map_err(|e| format!("fetch: reading the response body failed: {e}"))?;
            match chunk {
                None => break,
                Some(bytes) => {
                    if body.len() as u64 + bytes.len() as u64 > limit {
                        return Err(over_limit(limit));
                    }
                    body.extend_from_slice(&bytes);
                }
            }
        }
        Ok(Response {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or("").to_string(),
            url,
            redirected,
            headers,
            body,
        })
    }
}

fn over_limit(limit: u64) -> String {
    if limit.is_multiple_of(1 << 20) {
        format!("response body over {} MiB", limit >> 20)
    } else {
        format!("response body over {limit} bytes")
    }
}

/// Finds the policy's own refusal in reqwest's error chain, so the tool sees
/// `private address not allowed: ...` rather than a generic DNS error.
fn describe_send_error(url: &url::Url, err: &reqwest::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(denied) = e.downcast_ref::<FetchDenied>() {
            return denied.to_string();
        }
        source = e.source();
    }
    if err.is_timeout() {
        return format!(
            "fetch: request to {} timed out",
            url.host_str().unwrap_or("")
        );
    }
    // The URL is quoted shortened; the reason after it is kept whole.
    let mut message = format!("fetch: request to {} failed", shorten(url.as_str()));
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(e) = source {
        message.push_str(": ");
        message.push_str(&e.to_string());
        source = e.source();
    }
    message
}
