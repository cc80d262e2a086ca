//! The key set: parsing and bounds, HTTPS from a local TLS server (a
//! self-signed rcgen certificate trusted through `ca_file`), caching,
//! refetch on an unknown `kid` at a bounded rate, key rotation, failures
//! that fail closed and name the URL without secrets.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jsonwebtoken::Algorithm;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::jwks::{self, JwksError, KeySet};
use super::super::jwt::JwtVerifier;
use super::super::testkit::*;
use super::super::{AuthError, Reason, load_jwt};
use super::{config_text, refused, write_config};

#[test]
fn key_sets_keep_only_usable_signature_keys() {
    let bytes = std::fs::read(fixture("jwks.json")).unwrap();
    let set = KeySet::parse(&bytes, "jwks.json").unwrap();
    assert_eq!(set.len(), 3);
    assert!(set.get("rsa-1").unwrap().fits(Algorithm::RS256));
    assert!(!set.get("rsa-1").unwrap().fits(Algorithm::ES256));
    assert!(set.get("ec-1").unwrap().fits(Algorithm::ES256));
    assert!(set.get("ed-1").unwrap().fits(Algorithm::EdDSA));
    assert!(set.get("hmac-1").is_none() && set.get("enc-1").is_none());
    // A key whose declared alg differs from the token's does not fit.
    let mut doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    doc["keys"][0]["alg"] = json!("PS256");
    let set = KeySet::parse(doc.to_string().as_bytes(), "x").unwrap();
    assert!(!set.get("rsa-1").unwrap().fits(Algorithm::RS256));
    // Bounds and shape.
    let dup = json!({"keys": [doc["keys"][1], doc["keys"][1]]});
    let e = KeySet::parse(dup.to_string().as_bytes(), "dup.json").unwrap_err();
    assert!(e.to_string().contains("\"ec-1\" appears twice"), "{e}");
    let many = json!({"keys": vec![doc["keys"][2].clone(); jwks::MAX_KEYS + 1]});
    let e = KeySet::parse(many.to_string().as_bytes(), "many").unwrap_err();
    assert!(e.to_string().contains("more than 100"), "{e}");
    let big = vec![b' '; jwks::MAX_BYTES + 1];
    assert!(KeySet::parse(&big, "big").is_err());
    let e = KeySet::parse(b"[1, 2]", "list.json").unwrap_err();
    assert!(matches!(e, JwksError::Parse { .. }) && e.to_string().contains("list.json"));
}

/// A local HTTPS server of one key set (swappable), counting requests.
struct KeyServer {
    port: u16,
    ca_pem: String,
    hits: Arc<AtomicUsize>,
    body: Arc<Mutex<(u16, Vec<u8>)>>,
    task: tokio::task::JoinHandle<()>,
}

impl KeyServer {
    async fn start(body: Vec<u8>) -> Self {
        let cert =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".into()])
                .unwrap();
        let ca_pem = cert.cert.pem();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let body = Arc::new(Mutex::new((200, body)));
        let (h, b) = (hits.clone(), body.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, h, b) = (acceptor.clone(), h.clone(), b.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut req = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    let (status, body) = b.lock().unwrap().clone();
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(head.as_bytes()).await;
                    let _ = tls.write_all(&body).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Self {
            port,
            ca_pem,
            hits,
            body,
            task,
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/jwks.json", self.port)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// A config over this server, trusting its certificate.
    fn config(&self, dir: &Path, jwks_extra: &str) -> PathBuf {
        std::fs::write(dir.join("ca.pem"), &self.ca_pem).unwrap();
        let jwks = format!(
            "url = \"{}\"\nca_file = \"ca.pem\"\n{jwks_extra}",
            self.url()
        );
        write_config(dir, &config_text(&jwks, "", ""))
    }
}

fn fixture_set() -> Vec<u8> {
    std::fs::read(fixture("jwks.json")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_over_https_is_cached_and_refetched_at_a_bounded_rate() {
    let server = KeyServer::start(fixture_set()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = server.config(dir.path(), "min_refetch_secs = 1\ncache_secs = 600");
    let v = load_jwt(&path).await.unwrap();
    assert_eq!(server.hits(), 1);
    for alg in ["RS256", "ES256", "EdDSA"] {
        v.verify(&good(alg, "alice")).await.unwrap();
    }
    // Served from the cache.
    assert_eq!(server.hits(), 1);
    // An unknown kid refetches once the minimum interval has passed, and
    // then not again within it (a flood of made-up kids is one fetch).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let unknown = |kid: &str| token(&header("RS256", kid), &claims("alice"), Sig::Rsa);
    assert_eq!(
        refused(v.verify(&unknown("rsa-2")).await),
        Reason::UnknownKid
    );
    assert_eq!(server.hits(), 2);
    for i in 0..20 {
        let kid = format!("made-up-{i}");
        assert_eq!(refused(v.verify(&unknown(&kid)).await), Reason::UnknownKid);
    }
    assert_eq!(server.hits(), 2);
    // Key rotation: the issuer publishes rsa-2; a token naming it brings
    // the new set in.
    let mut doc: serde_json::Value = serde_json::from_slice(&fixture_set()).unwrap();
    doc["keys"][0]["kid"] = json!("rsa-2");
    server.body.lock().unwrap().1 = doc.to_string().into_bytes();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let g = v.verify(&unknown("rsa-2")).await.unwrap();
    assert_eq!(g.agent, "alice");
    assert_eq!(server.hits(), 3);
    // rsa-1 is gone from the new set.
    assert_eq!(
        refused(v.verify(&good("RS256", "alice")).await),
        Reason::UnknownKid
    );
    assert_eq!(v.keys().fetches(), 3);
    server.task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwks_fetch_failures_fail_closed_and_name_the_url() {
    // Untrusted certificate (no ca_file): refused at load, naming the URL
    // without its query.
    let server = KeyServer::start(fixture_set()).await;
    let dir = tempfile::tempdir().unwrap();
    let jwks = format!("url = \"{}?api_key=s3cret\"", server.url());
    let path = write_config(dir.path(), &config_text(&jwks, "", ""));
    let e = load_jwt(&path).await.err().unwrap().to_string();
    assert!(e.contains(&format!("cannot fetch {}", server.url())), "{e}");
    assert!(!e.contains("s3cret") && !e.contains("api_key"), "{e}");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    // Unreachable: nothing listens on the port.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{closed}/jwks.json");
    let jwks = format!("url = \"{url}?token=s3cret\"");
    let path = write_config(dir.path(), &config_text(&jwks, "", ""));
    let e = load_jwt(&path).await.err().unwrap();
    assert!(matches!(e, AuthError::Jwks(JwksError::Fetch { .. })), "{e}");
    let e = e.to_string();
    assert!(e.contains(&format!("cannot fetch {url}: ")), "{e}");
    assert!(!e.contains("s3cret"), "{e}");
    // Not a 200.
    *server.body.lock().unwrap() = (404, b"{}".to_vec());
    let path = server.config(dir.path(), "");
    let e = load_jwt(&path).await.err().unwrap().to_string();
    assert!(e.contains("HTTP status 404"), "{e}");
    // A set that goes stale while the issuer is unreachable: every token
    // is refused, none is let through on old keys.
    *server.body.lock().unwrap() = (200, fixture_set());
    let path = server.config(dir.path(), "cache_secs = 1\nmin_refetch_secs = 1");
    let v = load_jwt(&path).await.unwrap();
    v.verify(&good("ES256", "alice")).await.unwrap();
    server.task.abort();
    let _ = server.task.await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(
        refused(v.verify(&good("ES256", "alice")).await),
        Reason::KeysUnavailable
    );
}

/// A verifier over a key-set file (`keys.json`, the fixture set) that may
/// be read again one second after the last read; the directory holds the
/// set and `auth.toml`.
async fn file_set_with_refetch() -> (tempfile::TempDir, JwtVerifier) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keys.json"), fixture_set()).unwrap();
    let path = write_config(
        dir.path(),
        &config_text("file = \"keys.json\"\nmin_refetch_secs = 1", "", ""),
    );
    let v = load_jwt(&path).await.unwrap();
    (dir, v)
}

/// The issuer renames the EC key `ec-1` to `ec-2` in the set file `set`;
/// returns once the set may be read again.
async fn rename_ec_key_to_ec_2(set: &Path) {
    let mut doc: serde_json::Value = serde_json::from_slice(&fixture_set()).unwrap();
    doc["keys"][1]["kid"] = json!("ec-2");
    std::fs::write(set, doc.to_string()).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
}

#[tokio::test]
async fn a_jwks_file_is_read_again_for_an_unknown_kid() {
    let (dir, v) = file_set_with_refetch().await;
    let set = dir.path().join("keys.json");
    let path = dir.path().join("auth.toml");
    rename_ec_key_to_ec_2(&set).await;
    let t = token(&header("ES256", "ec-2"), &claims("alice"), Sig::Ec);
    assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    // A missing file at start is an error naming it.
    std::fs::remove_file(&set).unwrap();
    let e = load_jwt(&path).await.err().unwrap().to_string();
    assert!(e.contains("keys.json"), "{e}");
}

#[tokio::test]
async fn a_cached_token_is_refused_once_its_key_leaves_the_set() {
    let (dir, v) = file_set_with_refetch().await;
    let set = dir.path().join("keys.json");
    // One token string throughout (ES256 signatures are randomized).
    let t = good("ES256", "alice");
    assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    // The issuer renames ec-1 to ec-2; a token naming ec-2 brings the new
    // set in, and the cached token's key is gone from it.
    rename_ec_key_to_ec_2(&set).await;
    let renamed = token(&header("ES256", "ec-2"), &claims("alice"), Sig::Ec);
    assert_eq!(v.verify(&renamed).await.unwrap().agent, "alice");
    assert_eq!(refused(v.verify(&t).await), Reason::UnknownKid);
}
