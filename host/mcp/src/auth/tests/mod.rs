//! Hostile tests of JWT verification, the config and the metadata; the key
//! set (file and HTTPS) in [`jwks`].

mod jwks;

use std::path::{Path, PathBuf};

use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::json;

use super::config::{ConfigError, JwtConfig};
use super::testkit::*;
use super::*;

/// A config file in `dir` over `jwks` (the `[jwks]` table's body), with
/// `extra` top-level lines and `tables` after.
pub(super) fn config_text(jwks: &str, extra: &str, tables: &str) -> String {
    format!("issuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n{extra}\n[jwks]\n{jwks}\n{tables}\n")
}

pub(super) fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("auth.toml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn verifier_with(extra: &str, tables: &str) -> JwtVerifier {
    let dir = tempfile::tempdir().unwrap();
    let jwks = format!("file = {:?}", fixture("jwks.json").display().to_string());
    let path = write_config(dir.path(), &config_text(&jwks, extra, tables));
    load_jwt(&path).await.unwrap()
}

async fn verifier() -> JwtVerifier {
    verifier_with("", "").await
}

pub(super) fn refused(r: Result<Grant, Refusal>) -> Reason {
    match r {
        Err(Refusal::Invalid(reason)) => reason,
        other => panic!("expected an invalid-token refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn accepts_a_good_token_of_each_algorithm() {
    let v = verifier().await;
    for alg in ["RS256", "ES256", "EdDSA"] {
        let g = v.verify(&good(alg, "alice")).await.unwrap();
        assert_eq!(g.agent, "alice", "{alg}");
        assert_eq!(g.key, "jwt:alice", "{alg}");
        assert_eq!(g.access, Access::ALL);
        assert_eq!(g.tools, None);
    }
    // An `aud` list holding the audience is accepted too.
    let mut c = claims("bob");
    c["aud"] = json!(["https://elsewhere.test", AUDIENCE]);
    let g = v
        .verify(&token(&header("RS256", "rsa-1"), &c, Sig::Rsa))
        .await
        .unwrap();
    assert_eq!(g.agent, "bob");
}

#[tokio::test]
async fn time_claims_are_checked_within_the_skew() {
    let v = verifier().await;
    let with = |patch: serde_json::Value| {
        let mut c = claims("alice");
        for (k, val) in patch.as_object().unwrap() {
            c[k] = val.clone();
        }
        token(&header("ES256", "ec-1"), &c, Sig::Ec)
    };
    // Expired beyond the 60 s skew; within it still accepted.
    assert_eq!(
        refused(v.verify(&with(json!({"exp": now() - 120}))).await),
        Reason::Expired
    );
    assert!(v.verify(&with(json!({"exp": now() - 30}))).await.is_ok());
    // Not yet valid beyond the skew; within it accepted.
    assert_eq!(
        refused(v.verify(&with(json!({"nbf": now() + 120}))).await),
        Reason::NotYetValid
    );
    assert!(v.verify(&with(json!({"nbf": now() + 30}))).await.is_ok());
    // A time claim of the wrong type is no way around the check
    // (CVE-2026-25537 in jsonwebtoken < 10.3).
    assert!(
        v.verify(&with(json!({"nbf": (now() + 100_000).to_string()})))
            .await
            .is_err()
    );
    assert!(v.verify(&with(json!({"exp": "never"}))).await.is_err());
    // exp is required.
    let mut c = claims("alice");
    c.as_object_mut().unwrap().remove("exp");
    assert_eq!(
        refused(
            v.verify(&token(&header("ES256", "ec-1"), &c, Sig::Ec))
                .await
        ),
        Reason::MissingClaim
    );
    // A tighter skew from the config.
    let strict = verifier_with("clock_skew_secs = 5", "").await;
    assert_eq!(
        refused(strict.verify(&with(json!({"exp": now() - 30}))).await),
        Reason::Expired
    );
}

#[tokio::test]
async fn issuer_and_audience_must_match() {
    let v = verifier().await;
    let with = |k: &str, val: serde_json::Value| {
        let mut c = claims("alice");
        c[k] = val;
        token(&header("EdDSA", "ed-1"), &c, Sig::Ed)
    };
    assert_eq!(
        refused(
            v.verify(&with("aud", json!("https://other.test/mcp")))
                .await
        ),
        Reason::WrongAudience
    );
    // A prefix or another path of the same host is another audience.
    assert_eq!(
        refused(v.verify(&with("aud", json!("https://mcp.test/"))).await),
        Reason::WrongAudience
    );
    assert_eq!(
        refused(v.verify(&with("iss", json!("https://evil.test"))).await),
        Reason::WrongIssuer
    );
    let mut c = claims("alice");
    c.as_object_mut().unwrap().remove("aud");
    assert_eq!(
        refused(
            v.verify(&token(&header("EdDSA", "ed-1"), &c, Sig::Ed))
                .await
        ),
        Reason::MissingClaim
    );
    let mut c = claims("alice");
    c.as_object_mut().unwrap().remove("iss");
    assert_eq!(
        refused(
            v.verify(&token(&header("EdDSA", "ed-1"), &c, Sig::Ed))
                .await
        ),
        Reason::MissingClaim
    );
}

#[tokio::test]
async fn tampering_is_caught() {
    let v = verifier().await;
    let t = good("RS256", "alice");
    let parts: Vec<&str> = t.split('.').collect();
    // Payload swapped for another agent's, signature kept.
    let forged_claims = b64(claims("mallory").to_string().as_bytes());
    let forged = format!("{}.{}.{}", parts[0], forged_claims, parts[2]);
    assert_eq!(refused(v.verify(&forged).await), Reason::BadSignature);
    // One signature byte changed.
    let mut sig = base64_decode(parts[2]);
    sig[10] ^= 0x01;
    let forged = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
    assert_eq!(refused(v.verify(&forged).await), Reason::BadSignature);
    // Signed by a key in no set, under a known kid.
    let stranger = token(&header("RS256", "rsa-1"), &claims("alice"), Sig::Stranger);
    assert_eq!(refused(v.verify(&stranger).await), Reason::BadSignature);
    // The same for ES256 and EdDSA.
    for alg in ["ES256", "EdDSA"] {
        let t = good(alg, "alice");
        let parts: Vec<&str> = t.split('.').collect();
        let forged = format!("{}.{}.{}", parts[0], forged_claims, parts[2]);
        assert_eq!(
            refused(v.verify(&forged).await),
            Reason::BadSignature,
            "{alg}"
        );
    }
    // Garbage.
    for junk in ["", "a.b", "a.b.c.d", "not a token", "..", "e30.e30."] {
        assert_eq!(refused(v.verify(junk).await), Reason::Malformed, "{junk:?}");
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap()
}

#[tokio::test]
async fn alg_none_and_hmac_confusion_are_refused() {
    let v = verifier().await;
    for alg in ["none", "None", "NONE", "nOnE"] {
        let t = token(&header(alg, "rsa-1"), &claims("alice"), Sig::Empty);
        assert_eq!(refused(v.verify(&t).await), Reason::Malformed, "{alg}");
    }
    // The classic confusion: HS256 keyed with the RSA public key's bytes.
    let pem = std::fs::read(fixture("rsa_pub.pem")).unwrap();
    for alg in ["HS256", "HS384", "HS512"] {
        let t = token(&header(alg, "rsa-1"), &claims("alice"), Sig::Hmac(&pem));
        assert_eq!(refused(v.verify(&t).await), Reason::Algorithm, "{alg}");
    }
    // HS256 under the set's symmetric key: dropped at load, refused anyway.
    let t = token(
        &header("HS256", "hmac-1"),
        &claims("alice"),
        Sig::Hmac(b"a shared secret the verifier must never accept"),
    );
    assert_eq!(refused(v.verify(&t).await), Reason::Algorithm);
    // An algorithm the config leaves out is refused like HMAC.
    let rsa_only = verifier_with("algorithms = [\"RS256\"]", "").await;
    assert_eq!(
        refused(rsa_only.verify(&good("ES256", "alice")).await),
        Reason::Algorithm
    );
    assert!(rsa_only.verify(&good("RS256", "alice")).await.is_ok());
    // The crypto provider itself refuses HMAC, whatever the caller allows.
    provider::install();
    let key = DecodingKey::from_secret(&pem);
    assert!((provider::RING_PROVIDER.verifier_factory)(&Algorithm::HS256, &key).is_err());
    let mut validation = jsonwebtoken::Validation::new(Algorithm::HS256);
    validation.validate_aud = false;
    let t = token(&header("HS256", "rsa-1"), &claims("alice"), Sig::Hmac(&pem));
    let e = jsonwebtoken::decode::<serde_json::Value>(&t, &key, &validation).unwrap_err();
    assert_eq!(e.kind(), &jsonwebtoken::errors::ErrorKind::InvalidAlgorithm);
}

#[tokio::test]
async fn kid_must_name_a_fitting_key() {
    let v = verifier().await;
    let c = claims("alice");
    assert_eq!(
        refused(
            v.verify(&token(&header("RS256", "rsa-9"), &c, Sig::Rsa))
                .await
        ),
        Reason::UnknownKid
    );
    // The encryption key of the set is not a verification key.
    assert_eq!(
        refused(
            v.verify(&token(&header("RS256", "enc-1"), &c, Sig::Rsa))
                .await
        ),
        Reason::UnknownKid
    );
    let no_kid = json!({"alg": "RS256", "typ": "JWT"});
    assert_eq!(
        refused(v.verify(&token(&no_kid, &c, Sig::Rsa)).await),
        Reason::NoKid
    );
    // Key type / alg mismatches, each signed by the key its alg needs.
    for (alg, kid, sig) in [
        ("ES256", "rsa-1", Sig::Ec),
        ("RS256", "ec-1", Sig::Rsa),
        ("EdDSA", "rsa-1", Sig::Ed),
        ("ES256", "ed-1", Sig::Ec),
        ("EdDSA", "ec-1", Sig::Ed),
    ] {
        assert_eq!(
            refused(v.verify(&token(&header(alg, kid), &c, sig)).await),
            Reason::KeyMismatch,
            "{alg} with {kid}"
        );
    }
    // A key embedded in the header is never used.
    let stranger_jwk = json!({"kty": "oct", "k": b64(b"k")});
    let mut h = header("RS256", "rsa-1");
    h["jwk"] = stranger_jwk;
    h["jku"] = json!("https://evil.test/jwks.json");
    assert_eq!(
        refused(v.verify(&token(&h, &c, Sig::Stranger)).await),
        Reason::BadSignature
    );
}

#[tokio::test]
async fn the_agent_claim_is_an_agent_id() {
    let v = verifier().await;
    let with_sub = |sub: serde_json::Value| {
        let mut c = claims("x");
        c["sub"] = sub;
        token(&header("RS256", "rsa-1"), &c, Sig::Rsa)
    };
    for bad in [
        json!(""),
        json!("   "),
        json!("a\u{7}b"),
        json!("x".repeat(129)),
    ] {
        assert_eq!(
            refused(v.verify(&with_sub(bad.clone())).await),
            Reason::BadAgent,
            "{bad}"
        );
    }
    // `sub` of another type is refused by the claim parser already.
    for bad in [json!(42), json!(["alice"]), json!({"name": "alice"})] {
        assert!(v.verify(&with_sub(bad.clone())).await.is_err(), "{bad}");
    }
    let mut c = claims("x");
    c.as_object_mut().unwrap().remove("sub");
    assert_eq!(
        refused(
            v.verify(&token(&header("RS256", "rsa-1"), &c, Sig::Rsa))
                .await
        ),
        Reason::BadAgent
    );
    // Another claim may name the agent.
    let by_client = verifier_with("agent_claim = \"client_id\"", "").await;
    let mut c = claims("user-1");
    c["client_id"] = json!("ci-bot");
    let g = by_client
        .verify(&token(&header("RS256", "rsa-1"), &c, Sig::Rsa))
        .await
        .unwrap();
    assert_eq!((g.agent.as_str(), g.key.as_str()), ("ci-bot", "jwt:ci-bot"));
}

#[tokio::test]
async fn scopes_map_to_tiers_and_tools() {
    let tables = "[scopes.\"mcp:call\"]\ntiers = [\"shared\"]\ntools = [\"web_*\"]\n\
                  [scopes.\"mcp:forge\"]\ntiers = [\"session\"]\ntools = [\"github.*\"]\n\
                  [scopes.\"mcp:all\"]\ntiers = [\"session\", \"agent\", \"shared\"]\n";
    let v = verifier_with("calls_per_minute = 10\nmax_concurrent = 2", tables).await;
    let with_scope = |scope: serde_json::Value| {
        let mut c = claims("alice");
        c["scope"] = scope;
        token(&header("RS256", "rsa-1"), &c, Sig::Rsa)
    };
    let g = v
        .verify(&with_scope(json!("openid mcp:call mcp:forge")))
        .await
        .unwrap();
    assert_eq!(
        g.access,
        Access {
            session: true,
            agent: false,
            shared: true
        }
    );
    let tools = g.tools.unwrap();
    assert!(tools.allows("web_search") && tools.allows("github.search_issues"));
    assert!(!tools.allows("slack.post"));
    assert_eq!((g.calls_per_minute, g.max_concurrent), (Some(10), Some(2)));
    // A scope without tools lifts the narrowing; a list works as `scp` does.
    let g = v
        .verify(&with_scope(json!(["mcp:call", "mcp:all"])))
        .await
        .unwrap();
    assert_eq!((g.access, g.tools), (Access::ALL, None));
    // No mapped scope: a valid token, but forbidden.
    for scope in [json!("openid profile"), json!(""), json!(7)] {
        assert_eq!(
            v.verify(&with_scope(scope)).await.unwrap_err(),
            Refusal::InsufficientScope
        );
    }
    let doc = metadata::document(v.config());
    assert_eq!(
        doc["scopes_supported"],
        json!(["mcp:all", "mcp:call", "mcp:forge"])
    );
    assert!(
        metadata::insufficient_scope(v.config())
            .contains("error=\"insufficient_scope\", scope=\"mcp:all mcp:call mcp:forge\"")
    );
}

#[test]
fn config_errors_name_the_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = "file = \"jwks.json\"";
    let err = |text: String| {
        let path = write_config(dir.path(), &text);
        let e = JwtConfig::load(&path).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        (e, shown)
    };
    let (e, shown) = err(config_text(file, "audiences = \"x\"", ""));
    assert!(
        matches!(e, ConfigError::Syntax { .. }) && shown.contains("audiences"),
        "{shown}"
    );
    let (_, shown) = err(config_text("file = \"j\"\nttl = 3", "", ""));
    assert!(shown.contains("ttl"), "{shown}");
    let (_, shown) = err(config_text(
        file,
        "",
        "[scopes.s]\ntiers = [\"session\"]\nextra = 1\n",
    ));
    assert!(shown.contains("extra"), "{shown}");
    let invalid = |text: String, key: &str, says: &str| {
        let (e, shown) = err(text);
        match &e {
            ConfigError::Invalid { key: k, reason, .. } => {
                assert_eq!(k, key, "{shown}");
                assert!(reason.contains(says), "{shown}");
            }
            other => panic!("{other}"),
        }
    };
    invalid(
        config_text(file, "clock_skew_secs = 301", ""),
        "clock_skew_secs",
        "cap of 300",
    );
    invalid(
        config_text(file, "algorithms = [\"HS256\"]", ""),
        "algorithms",
        "\"HS256\"",
    );
    invalid(
        config_text(file, "algorithms = [\"none\"]", ""),
        "algorithms",
        "\"none\"",
    );
    invalid(
        config_text(file, "algorithms = []", ""),
        "algorithms",
        "empty",
    );
    invalid(
        config_text(file, "agent_claim = \"\"", ""),
        "agent_claim",
        "empty",
    );
    invalid(
        config_text(file, "max_concurrent = 0", ""),
        "max_concurrent",
        "at least 1",
    );
    invalid(
        config_text("url = \"http://id.test/jwks\"", "", ""),
        "jwks.url",
        "https",
    );
    invalid(
        config_text("url = \"https://u:p@id.test/jwks\"", "", ""),
        "jwks.url",
        "credentials",
    );
    invalid(
        config_text("file = \"a\"\nurl = \"https://id.test/j\"", "", ""),
        "jwks",
        "not both",
    );
    invalid(config_text("cache_secs = 5", "", ""), "jwks", "file or url");
    invalid(
        config_text("file = \"a\"\nca_file = \"ca.pem\"", "", ""),
        "jwks.ca_file",
        "only with jwks.url",
    );
    invalid(
        config_text(file, "", "[scopes.\"mcp:x\"]\ntiers = [\"global\"]\n"),
        "scopes.\"mcp:x\".tiers",
        "\"global\"",
    );
    invalid(
        config_text(
            file,
            "",
            "[scopes.\"mcp:x\"]\ntiers = [\"session\"]\ntools = [\"\"]\n",
        ),
        "scopes.\"mcp:x\".tools",
        "",
    );
    invalid(
        config_text(file, "", "[scopes.\"a b\"]\ntiers = [\"session\"]\n"),
        "scopes.\"a b\"",
        "scope token",
    );
    let text = "issuer = \"i\"\naudience = \"mcp\"\n[jwks]\nfile = \"j\"\n".to_string();
    invalid(text, "audience", "not a URL");
    let text = "issuer = \"i\"\naudience = \"ftp://x/mcp\"\n[jwks]\nfile = \"j\"\n".to_string();
    invalid(text, "audience", "http(s) URL");
    // A missing key is a syntax error naming it.
    let (_, shown) = err("audience = \"https://x/mcp\"\n[jwks]\nfile = \"j\"\n".into());
    assert!(shown.contains("issuer"), "{shown}");
    // Relative files are the config's directory's.
    let path = write_config(dir.path(), &config_text(file, "", ""));
    let c = JwtConfig::load(&path).unwrap();
    assert_eq!(
        c.jwks.source,
        config::JwksSource::File(dir.path().join("jwks.json"))
    );
    assert_eq!((c.agent_claim.as_str(), c.clock_skew_secs), ("sub", 60));
    assert_eq!(c.authorization_servers, vec![ISSUER.to_string()]);
}

#[tokio::test]
async fn a_bare_origin_audience_is_compared_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = format!("file = {:?}", fixture("jwks.json").display().to_string());
    let text = config_text(&jwks, "", "").replace(AUDIENCE, "https://mcp.test");
    let v = load_jwt(&write_config(dir.path(), &text)).await.unwrap();
    let mut c = claims("alice");
    c["aud"] = json!("https://mcp.test");
    let t = token(&header("RS256", "rsa-1"), &c, Sig::Rsa);
    assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    c["aud"] = json!("https://mcp.test/");
    let t = token(&header("RS256", "rsa-1"), &c, Sig::Rsa);
    assert_eq!(refused(v.verify(&t).await), Reason::WrongAudience);
    assert_eq!(
        metadata::document(v.config())["resource"],
        "https://mcp.test"
    );
    assert!(
        metadata::challenge(v.config(), false)
            .contains("\"https://mcp.test/.well-known/oauth-protected-resource\"")
    );
}

#[test]
fn metadata_urls_follow_rfc_9728() {
    let url = |s: &str| url::Url::parse(s).unwrap();
    assert_eq!(
        metadata::metadata_url(&url("https://mcp.example/mcp")),
        "https://mcp.example/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        metadata::metadata_url(&url("https://mcp.example:8443/")),
        "https://mcp.example:8443/.well-known/oauth-protected-resource"
    );
    assert_eq!(
        metadata::metadata_url(&url("https://h/a/mcp?x=1")),
        "https://h/.well-known/oauth-protected-resource/a/mcp"
    );
}

#[tokio::test]
async fn metadata_document_and_challenges() {
    let v = verifier().await;
    let c = v.config();
    let doc = metadata::document(c);
    assert_eq!(doc["resource"], AUDIENCE);
    assert_eq!(doc["authorization_servers"], json!([ISSUER]));
    assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    assert!(doc.get("scopes_supported").is_none());
    let meta = "https://mcp.test/.well-known/oauth-protected-resource/mcp";
    assert_eq!(
        metadata::challenge(c, false),
        format!("Bearer resource_metadata=\"{meta}\"")
    );
    assert_eq!(
        metadata::challenge(c, true),
        format!("Bearer resource_metadata=\"{meta}\", error=\"invalid_token\"")
    );
    for p in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        assert!(metadata::serves(p, c, "/mcp"), "{p}");
    }
    for p in [
        "/.well-known/oauth-protected-resourcex",
        "/.well-known/oauth-protected-resource/other",
        "/mcp",
    ] {
        assert!(!metadata::serves(p, c, "/mcp"), "{p}");
    }
}

#[tokio::test]
async fn an_accepted_token_is_checked_in_full_once_and_a_tampered_copy_never_rides_on_it() {
    let v = verifier().await;
    let t = good("ES256", "alice");
    assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    assert_eq!(v.full_checks(), 1);
    for _ in 0..5 {
        assert_eq!(v.verify(&t).await.unwrap().agent, "alice");
    }
    assert_eq!(v.full_checks(), 1, "the same token again: from the cache");
    // The same token with its signature altered, or its claims: a
    // different token, checked in full and refused.
    let mut sig_altered = t.clone();
    let last = sig_altered.pop().unwrap();
    sig_altered.push(if last == 'A' { 'B' } else { 'A' });
    assert!(v.verify(&sig_altered).await.is_err());
    let parts: Vec<&str> = t.split('.').collect();
    let mut c = claims("mallory");
    c["exp"] = json!(now() + 600);
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        b64(c.to_string().as_bytes()),
        parts[2]
    );
    assert_eq!(refused(v.verify(&forged).await), Reason::BadSignature);
    assert_eq!(v.full_checks(), 3);
    // Refused tokens are not kept; the accepted one is.
    assert_eq!(v.held_tokens(), 1);
}

#[tokio::test]
async fn a_cached_token_is_refused_once_its_exp_passes() {
    let v = verifier_with("clock_skew_secs = 0", "").await;
    let mut c = claims("alice");
    c["exp"] = json!(now() + 1);
    let t = token(&header("ES256", "ec-1"), &c, Sig::Ec);
    assert!(v.verify(&t).await.is_ok());
    assert!(v.verify(&t).await.is_ok());
    assert_eq!(v.full_checks(), 1);
    // Past `exp` (no skew): refused with its reason, as a full check
    // refuses it.
    while now() <= c["exp"].as_i64().unwrap() {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(refused(v.verify(&t).await), Reason::Expired);
    assert_eq!(refused(v.verify(&t).await), Reason::Expired);
}
