//! `jsonwebtoken`'s crypto, on `ring`: verification of RS256, ES256 and
//! EdDSA only.
//!
//! Hand-written on purpose (the crate's own backends are aws-lc-rs, a C
//! build, and RustCrypto, a dozen crates new to the tree with `rsa` and its
//! RUSTSEC-2023-0071): `ring` is already here through rustls and reqwest,
//! and its verification API is the one the crate's aws-lc-rs provider is
//! written against, so this is that provider's verifying half with `ring`
//! paths. Every other algorithm, HMAC included, is refused here too
//! (besides the verifier's own allow-list): a key set's public key can
//! never become an HMAC secret. It never signs.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind, Result};
use jsonwebtoken::jwk::{EllipticCurve, ThumbprintHash};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ED25519, RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents,
    UnparsedPublicKey,
};

/// The algorithms this provider verifies.
pub const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// The provider: [`install`] makes it the process default.
pub static RING_PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: new_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(unsupported()),
        rsa_pub_components_from_public_key: |_| Err(unsupported()),
        ec_pub_components_from_private_key: |_, _| Err(unsupported()),
        ed_pub_components_from_private_key: |_, _: &EllipticCurve| Err(unsupported()),
        compute_digest,
    },
};

/// Installs [`RING_PROVIDER`] as `jsonwebtoken`'s process default (once;
/// when another crate of the process installed one first, that one stays:
/// the verifier's allow-list and key checks do not depend on it).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if RING_PROVIDER.install_default().is_err() {
            tracing::warn!("jsonwebtoken: another crypto provider was installed first");
        }
    });
}

fn unsupported() -> Error {
    ErrorKind::Provider("temper verifies RS256, ES256 and EdDSA tokens and nothing else".into())
        .into()
}

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(unsupported())
}

fn compute_digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(unsupported()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

fn new_verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    let family = match algorithm {
        Algorithm::RS256 => AlgorithmFamily::Rsa,
        Algorithm::ES256 => AlgorithmFamily::Ec,
        Algorithm::EdDSA => AlgorithmFamily::Ed,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        key: key.clone(),
    }))
}

struct RingVerifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> std::result::Result<(), signature::Error> {
        let ok = match (self.algorithm, self.key.kind()) {
            (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }
                    .verify(&RSA_PKCS1_2048_8192_SHA256, msg, sig)
                    .is_ok()
            }
            (Algorithm::RS256, DecodingKeyKind::SecretOrDer(der)) => {
                UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der)
                    .verify(msg, sig)
                    .is_ok()
            }
            // An uncompressed point (0x04 || x || y), as `from_ec_components`
            // builds it.
            (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(msg, sig)
                    .is_ok()
            }
            (Algorithm::EdDSA, DecodingKeyKind::SecretOrDer(x)) => {
                UnparsedPublicKey::new(&ED25519, x).verify(msg, sig).is_ok()
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(signature::Error::new())
        }
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
