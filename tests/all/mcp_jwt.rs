//! `temper mcp --http --auth jwt` against a real process on 127.0.0.1:
//! RFC 9728 metadata, the 401 challenge, every hostile token refused with
//! no detail, good RS256/ES256/EdDSA tokens accepted, sessions owned by
//! the token's agent (another agent's token gets 404, a refreshed token of
//! the same agent gets in, a static token never), static tokens alongside,
//! scopes, the key set unreachable at start (fail closed, naming the URL),
//! no token in the server's output, and the official Python SDK (its OAuth
//! discovery helpers on the 401 and the metadata, its client on a JWT).
//!
//! Tokens are built and signed here (ring, base64url) with the fixture
//! keys of `host/mcp/testdata/jwt`, so a hostile one can be anything.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
use serde_json::{Value, json};
use sha2::Digest;

use crate::mcp_http::{Server, python, root};

const ISSUER: &str = "https://id.test";
const AUDIENCE: &str = "https://mcp.test/mcp";
const METADATA: &str = "https://mcp.test/.well-known/oauth-protected-resource/mcp";
const HANG: Duration = Duration::from_secs(600);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp/testdata/jwt")
        .join(name)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[derive(Clone, Copy)]
enum Sig<'a> {
    Rsa,
    Ec,
    Ed,
    Stranger,
    Hmac(&'a [u8]),
    Empty,
}

fn sign(message: &[u8], sig: Sig) -> Vec<u8> {
    let rng = SystemRandom::new();
    let key = |name: &str| std::fs::read(fixture(name)).unwrap();
    let rsa = |name: &str| {
        let kp = RsaKeyPair::from_pkcs8(&key(name)).unwrap();
        let mut out = vec![0; kp.public().modulus_len()];
        kp.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut out)
            .unwrap();
        out
    };
    match sig {
        Sig::Rsa => rsa("rsa.pk8"),
        Sig::Stranger => rsa("stranger.pk8"),
        Sig::Ec => EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &key("ec.pk8"),
            &rng,
        )
        .unwrap()
        .sign(&rng, message)
        .unwrap()
        .as_ref()
        .to_vec(),
        Sig::Ed => Ed25519KeyPair::from_pkcs8_maybe_unchecked(&key("ed.pk8"))
            .unwrap()
            .sign(message)
            .as_ref()
            .to_vec(),
        Sig::Hmac(secret) => ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
            message,
        )
        .as_ref()
        .to_vec(),
        Sig::Empty => Vec::new(),
    }
}

fn token(header: &Value, claims: &Value, sig: Sig) -> String {
    let message = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    format!("{message}.{}", b64(&sign(message.as_bytes(), sig)))
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now(), "exp": now() + 600})
}

fn header(alg: &str, kid: &str) -> Value {
    json!({"alg": alg, "typ": "JWT", "kid": kid})
}

pub(crate) fn good(alg: &str, sub: &str) -> String {
    let (kid, sig) = match alg {
        "RS256" => ("rsa-1", Sig::Rsa),
        "ES256" => ("ec-1", Sig::Ec),
        _ => ("ed-1", Sig::Ed),
    };
    token(&header(alg, kid), &claims(sub), sig)
}

fn with_claims(patch: Value) -> String {
    let mut c = claims("alice");
    for (k, v) in patch.as_object().unwrap() {
        c[k] = v.clone();
    }
    token(&header("RS256", "rsa-1"), &c, Sig::Rsa)
}

/// A good RS256 token of agent `sub` carrying `scope`.
pub(crate) fn jwt_for(sub: &str, scope: &str) -> String {
    let mut c = claims(sub);
    c["scope"] = json!(scope);
    token(&header("RS256", "rsa-1"), &c, Sig::Rsa)
}

/// An auth config over the fixture key set, in `dir`.
pub(crate) fn auth_config(dir: &Path, jwks: &str, tables: &str) -> PathBuf {
    let path = dir.join("auth.toml");
    std::fs::write(
        &path,
        format!("issuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n[jwks]\n{jwks}\n{tables}"),
    )
    .unwrap();
    path
}

pub(crate) fn file_jwks() -> String {
    format!("file = {:?}", fixture("jwks.json").display().to_string())
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn www(&self) -> &str {
        self.headers
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// POSTs a JSON-RPC message with `token` and `session`.
async fn post(
    server: &Server,
    token: Option<&str>,
    session: Option<&str>,
    message: &Value,
) -> Answer {
    let mut r = reqwest::Client::new()
        .post(server.url_at("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string());
    if let Some(t) = token {
        r = r.header("authorization", format!("Bearer {t}"));
    }
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    let resp = r.send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap(),
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
}

fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
}

/// Opens a session with `token`; its id.
async fn open(server: &Server, token: &str) -> String {
    let a = post(server, Some(token), None, &initialize()).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.headers
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string()
}

fn sha256_hex(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_jwt_bearer_tokens_over_http() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = auth_config(dir.path(), &file_jwks(), "");
    // Static tokens alongside: carol, and a static token for "alice" too.
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        format!(
            "[tokens.\"sha256:{}\"]\nagent = \"carol\"\n\n[tokens.\"sha256:{}\"]\nagent = \"alice\"\n",
            sha256_hex("carol-static-token"),
            sha256_hex("alice-static-token")
        ),
    )
    .unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--auth",
            "jwt",
            "--auth-config",
            config.to_str().unwrap(),
            "--tokens",
            tokens.to_str().unwrap(),
        ],
    );
    let client = reqwest::Client::new();

    // RFC 9728 metadata, on the path-suffixed and the bare well-known URL,
    // without a token.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let resp = client.get(server.url_at(path)).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        let doc: Value = resp.json().await.unwrap();
        assert_eq!(doc["resource"], AUDIENCE, "{doc}");
        assert_eq!(doc["authorization_servers"], json!([ISSUER]), "{doc}");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
    }
    let resp = client
        .post(server.url_at("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    let resp = client
        .get(server.url_at("/.well-known/oauth-protected-resource/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);

    // No token: 401 pointing to the metadata, no error code, no body.
    let a = post(&server, None, None, &initialize()).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.www(), format!("Bearer resource_metadata=\"{METADATA}\""));
    assert!(a.body.is_empty());

    // Every hostile token: 401 invalid_token, all alike, no detail.
    let pem = std::fs::read(fixture("rsa_pub.pem")).unwrap();
    let t = good("RS256", "alice");
    let parts: Vec<&str> = t.split('.').collect();
    let mut flipped = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    flipped[7] ^= 0x40;
    let hostile = [
        ("expired", with_claims(json!({"exp": now() - 3600}))),
        ("not yet valid", with_claims(json!({"nbf": now() + 3600}))),
        (
            "wrong audience",
            with_claims(json!({"aud": "https://other.test/mcp"})),
        ),
        (
            "wrong issuer",
            with_claims(json!({"iss": "https://evil.test"})),
        ),
        (
            "tampered payload",
            format!(
                "{}.{}.{}",
                parts[0],
                b64(claims("mallory").to_string().as_bytes()),
                parts[2]
            ),
        ),
        (
            "tampered signature",
            format!("{}.{}.{}", parts[0], parts[1], b64(&flipped)),
        ),
        (
            "alg none",
            token(&header("none", "rsa-1"), &claims("alice"), Sig::Empty),
        ),
        (
            "HS256 keyed with the RSA public key",
            token(&header("HS256", "rsa-1"), &claims("alice"), Sig::Hmac(&pem)),
        ),
        (
            "unknown kid",
            token(&header("RS256", "rsa-404"), &claims("alice"), Sig::Rsa),
        ),
        (
            "key type / alg mismatch",
            token(&header("ES256", "rsa-1"), &claims("alice"), Sig::Ec),
        ),
        (
            "a key in no set",
            token(&header("RS256", "rsa-1"), &claims("alice"), Sig::Stranger),
        ),
        ("bad agent", with_claims(json!({"sub": ""}))),
    ];
    for (what, t) in &hostile {
        let a = post(&server, Some(t), None, &initialize()).await;
        assert_eq!(a.status, 401, "{what}");
        assert_eq!(
            a.www(),
            format!("Bearer resource_metadata=\"{METADATA}\", error=\"invalid_token\""),
            "{what}"
        );
        assert!(a.body.is_empty(), "{what}: {}", a.body);
    }

    // Good tokens of each algorithm open sessions, as the claim's agent.
    let alice = open(&server, &good("RS256", "alice")).await;
    let bob = open(&server, &good("ES256", "bob")).await;
    let erin = open(&server, &good("EdDSA", "erin")).await;
    let a = post(
        &server,
        Some(&good("EdDSA", "erin")),
        Some(&erin),
        &tools_list(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.json()["result"]["tools"].is_array(), "{}", a.body);

    // Sessions belong to the agent: bob's token on alice's session is
    // answered as an unknown session; so is a static token, even one for
    // an agent named alice.
    for t in [
        good("ES256", "bob"),
        good("RS256", "bob"),
        "carol-static-token".to_string(),
        "alice-static-token".to_string(),
    ] {
        let a = post(&server, Some(&t), Some(&alice), &tools_list()).await;
        assert_eq!(a.status, 404, "{}", a.body);
    }
    let unknown = post(
        &server,
        Some(&good("ES256", "bob")),
        Some("0123456789abcdef0123456789abcdef"),
        &tools_list(),
    )
    .await;
    assert_eq!(unknown.status, 404);
    // A refreshed token of alice's (another alg, another iat) reaches her
    // session; bob's still reaches his.
    let mut later = claims("alice");
    later["iat"] = json!(now() + 1);
    let refreshed = token(&header("EdDSA", "ed-1"), &later, Sig::Ed);
    let a = post(&server, Some(&refreshed), Some(&alice), &tools_list()).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post(
        &server,
        Some(&good("ES256", "bob")),
        Some(&bob),
        &tools_list(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    // Bob cannot end alice's session either.
    let del = client
        .delete(server.url_at("/mcp"))
        .header("authorization", format!("Bearer {}", good("ES256", "bob")))
        .header("mcp-session-id", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status().as_u16(), 404);
    let a = post(&server, Some(&refreshed), Some(&alice), &tools_list()).await;
    assert_eq!(a.status, 200, "{}", a.body);
    // A static token works as before, on its own session.
    let carol = open(&server, "carol-static-token").await;
    let a = post(
        &server,
        Some("carol-static-token"),
        Some(&carol),
        &tools_list(),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post(
        &server,
        Some(&good("RS256", "carol")),
        Some(&carol),
        &tools_list(),
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.body);

    // The reasons are logged; no token, signature or claim ever is.
    for reason in [
        "bearer token refused: expired",
        "bearer token refused: not yet valid",
        "bearer token refused: wrong audience",
        "bearer token refused: wrong issuer",
        "bearer token refused: bad signature",
        "bearer token refused: malformed token",
        "bearer token refused: algorithm not accepted",
        "bearer token refused: unknown kid",
        "bearer token refused: key does not fit the algorithm",
        "bearer token refused: bad agent claim",
    ] {
        // The server's stderr is read by another thread: wait for the line.
        let start = std::time::Instant::now();
        while !server.log().contains(reason) {
            assert!(start.elapsed() < HANG, "{reason} not in:\n{}", server.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let log = server.log();
    for (what, t) in &hostile {
        for part in t.split('.').filter(|p| p.len() > 8) {
            assert!(!log.contains(part), "{what}: a token part in the log");
        }
    }
    assert!(!log.contains(&good("RS256", "alice")[..40]));
    assert!(!log.contains("mallory") && !log.contains("carol-static-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_jwt_scopes_decide_tiers_and_forbid_unmapped_tokens() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = auth_config(
        dir.path(),
        &file_jwks(),
        "[scopes.\"mcp:forge\"]\ntiers = [\"session\"]\n[scopes.\"mcp:all\"]\ntiers = [\"session\", \"agent\", \"shared\"]\n",
    );
    let server = Server::start(
        store.path(),
        &["--auth", "jwt", "--auth-config", config.to_str().unwrap()],
    );
    let doc: Value = reqwest::get(server.url_at("/.well-known/oauth-protected-resource/mcp"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["scopes_supported"], json!(["mcp:all", "mcp:forge"]));
    // A valid token with no mapped scope: 403 insufficient_scope.
    let t = with_claims(json!({"scope": "openid profile"}));
    let a = post(&server, Some(&t), None, &initialize()).await;
    assert_eq!(a.status, 403);
    assert_eq!(
        a.www(),
        format!(
            "Bearer resource_metadata=\"{METADATA}\", error=\"insufficient_scope\", scope=\"mcp:all mcp:forge\""
        )
    );
    assert!(a.body.is_empty());
    // A mapped scope gets in.
    let t = with_claims(json!({"scope": "openid mcp:forge"}));
    let sid = open(&server, &t).await;
    let a = post(&server, Some(&t), Some(&sid), &tools_list()).await;
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn mcp_jwt_refuses_to_start_without_its_key_set() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--store"])
            .arg(store.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // The key set URL is unreachable: the server does not start, and says
    // which URL (without its query) failed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("https://127.0.0.1:{closed}/jwks.json");
    let config = auth_config(dir.path(), &format!("url = \"{url}?key=s3cret\""), "");
    let config = config.to_str().unwrap();
    let (ok, err) = run(&[
        "--http",
        "127.0.0.1:0",
        "--auth",
        "jwt",
        "--auth-config",
        config,
    ]);
    assert!(!ok);
    assert!(
        err.contains(&format!("jwks: cannot fetch {url}: ")),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
    // A bad config names the file and the key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "issuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\nclock_skew_secs = 3600\n[jwks]\n{}\n",
            file_jwks()
        ),
    )
    .unwrap();
    let (ok, err) = run(&[
        "--http",
        "127.0.0.1:0",
        "--auth",
        "jwt",
        "--auth-config",
        bad.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("bad.toml: clock_skew_secs"), "{err}");
    // --auth jwt needs its config; --auth-config needs --auth.
    let (ok, err) = run(&["--http", "127.0.0.1:0", "--auth", "jwt"]);
    assert!(!ok && err.contains("--auth-config"), "{err}");
    let (ok, err) = run(&["--http", "127.0.0.1:0", "--auth-config", config]);
    assert!(!ok && err.contains("--auth"), "{err}");
    // With --auth jwt (and no --tokens) a non-loopback address is not
    // refused for want of tokens: the config is what stops this one.
    let (ok, err) = run(&[
        "--http",
        "0.0.0.0:0",
        "--auth",
        "jwt",
        "--auth-config",
        config,
    ]);
    assert!(!ok);
    assert!(!err.contains("without --tokens"), "{err}");
    assert!(err.contains("cannot fetch"), "{err}");
}

/// The official Python SDK: its OAuth discovery helpers read the 401 and
/// the metadata; its Streamable HTTP client (the whole flow of
/// tests/mcp_client.py: forge, call, end the session) runs on a JWT, and
/// the audit trail names the claim's agent.
#[test]
fn mcp_jwt_official_python_sdk_client() {
    let Some(python) = python() else { return };
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = auth_config(dir.path(), &file_jwks(), "");
    let server = Server::start(
        store.path(),
        &["--auth", "jwt", "--auth-config", config.to_str().unwrap()],
    );
    let status = Command::new(&python)
        .arg(root().join("tests/mcp_jwt_discovery.py"))
        .arg(server.url_at("/mcp"))
        .arg(METADATA)
        .arg(AUDIENCE)
        .status()
        .expect("run tests/mcp_jwt_discovery.py");
    assert!(status.success(), "tests/mcp_jwt_discovery.py: {status}");
    let status = Command::new(&python)
        .arg(root().join("tests/mcp_client.py"))
        .arg("http")
        .arg(server.url_at("/mcp"))
        .arg(good("ES256", "sdk-agent"))
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run tests/mcp_client.py");
    assert!(status.success(), "tests/mcp_client.py http: {status}");
    // The session tier was forged and discarded as the claim's agent.
    let registry = temper::store::Registry::open(store.path()).unwrap();
    let deleted: Vec<(String, String)> = registry
        .audit_entries(0, 100_000)
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.kind == temper::store::AuditKind::Deletion && e.payload["reason"] == "session ended"
        })
        .map(|e| (e.agent.clone().unwrap_or_default(), e.subject))
        .collect();
    assert_eq!(deleted, [("sdk-agent".to_string(), "slugify".to_string())]);
}
