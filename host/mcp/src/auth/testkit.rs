//! Test tokens, built by hand so that a hostile one can be anything: any
//! header, any claims, signed with a fixture key, an HMAC secret, or not
//! at all. Keys are the files of `testdata/jwt` (see its `gen.py`).

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
use serde_json::{Value, json};

pub(super) const ISSUER: &str = "https://id.test";
pub(super) const AUDIENCE: &str = "https://mcp.test/mcp";

pub(super) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/jwt")
        .join(name)
}

pub(super) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub(super) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// How a token is signed.
#[derive(Clone, Copy)]
pub(super) enum Sig<'a> {
    /// RS256 with `rsa.pk8` (kid rsa-1 in jwks.json).
    Rsa,
    /// ES256 with `ec.pk8` (kid ec-1).
    Ec,
    /// EdDSA with `ed.pk8` (kid ed-1).
    Ed,
    /// RS256 with `stranger.pk8`, in no key set.
    Stranger,
    /// HMAC-SHA256 with these bytes as the secret.
    Hmac(&'a [u8]),
    /// No signature at all.
    Empty,
}

/// Claims that verify against [`ISSUER`] and [`AUDIENCE`] for `sub`.
pub(super) fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now(), "exp": now() + 600})
}

/// The header of a token signed by `sig`, with `kid`.
pub(super) fn header(alg: &str, kid: &str) -> Value {
    json!({"alg": alg, "typ": "JWT", "kid": kid})
}

/// A compact JWT: `header`, `claims`, signed by `sig`.
pub(super) fn token(header: &Value, claims: &Value, sig: Sig) -> String {
    let message = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    format!("{message}.{}", b64(&sign(message.as_bytes(), sig)))
}

/// A good token of `alg` ("RS256", "ES256", "EdDSA") for `sub`.
pub(super) fn good(alg: &str, sub: &str) -> String {
    let (kid, sig) = match alg {
        "RS256" => ("rsa-1", Sig::Rsa),
        "ES256" => ("ec-1", Sig::Ec),
        "EdDSA" => ("ed-1", Sig::Ed),
        other => panic!("no fixture key for {other}"),
    };
    token(&header(alg, kid), &claims(sub), sig)
}

fn key(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

pub(super) fn sign(message: &[u8], sig: Sig) -> Vec<u8> {
    let rng = SystemRandom::new();
    let rsa = |file: &str| {
        let kp = RsaKeyPair::from_pkcs8(&key(file)).unwrap();
        let mut out = vec![0; kp.public().modulus_len()];
        kp.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut out)
            .unwrap();
        out
    };
    match sig {
        Sig::Rsa => rsa("rsa.pk8"),
        Sig::Stranger => rsa("stranger.pk8"),
        Sig::Ec => {
            let kp = EcdsaKeyPair::from_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &key("ec.pk8"),
                &rng,
            )
            .unwrap();
            kp.sign(&rng, message).unwrap().as_ref().to_vec()
        }
        Sig::Ed => Ed25519KeyPair::from_pkcs8_maybe_unchecked(&key("ed.pk8"))
            .unwrap()
            .sign(message)
            .as_ref()
            .to_vec(),
        Sig::Hmac(secret) => {
            let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
            ring::hmac::sign(&k, message).as_ref().to_vec()
        }
        Sig::Empty => Vec::new(),
    }
}
