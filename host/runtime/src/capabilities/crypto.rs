//! The `crypto` capability: hashing and HMAC with RustCrypto crates, and
//! random bytes from the store's random source (fixed while snapshotting).

use hmac::{Hmac, Mac};
use sha2::Digest;

/// Hash algorithms offered to tools.
pub const ALGORITHMS: &[&str] = &["md5", "sha1", "sha256", "sha384", "sha512"];

fn unknown(alg: &str) -> String {
    format!(
        "crypto: unsupported hash algorithm `{alg}` (supported: {})",
        ALGORITHMS.join(", ")
    )
}

/// Digest of `data` with `alg`.
pub fn hash(alg: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    Ok(match alg {
        "md5" => md5::Md5::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        other => return Err(unknown(other)),
    })
}

/// HMAC of `data` under `key` with `alg`.
pub fn hmac(alg: &str, key: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac =
            <M as hmac::digest::KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    Ok(match alg {
        "md5" => run::<Hmac<md5::Md5>>(key, data),
        "sha1" => run::<Hmac<sha1::Sha1>>(key, data),
        "sha256" => run::<Hmac<sha2::Sha256>>(key, data),
        "sha384" => run::<Hmac<sha2::Sha384>>(key, data),
        "sha512" => run::<Hmac<sha2::Sha512>>(key, data),
        other => return Err(unknown(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn nist_vectors() {
        assert_eq!(
            hex(&hash("sha256", b"abc").unwrap()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&hash("sha1", b"abc").unwrap()),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(&hash("md5", b"abc").unwrap()),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert!(
            hex(&hash("sha384", b"abc").unwrap()).starts_with("cb00753f45a35e8bb5a03d699ac65007")
        );
        assert!(
            hex(&hash("sha512", b"abc").unwrap()).starts_with("ddaf35a193617abacc417349ae204131")
        );
        assert!(
            hash("sha3-256", b"abc")
                .unwrap_err()
                .contains("unsupported")
        );
    }

    #[test]
    fn rfc4231_case_2() {
        let mac = hmac("sha256", b"Jefe", b"what do ya want for nothing?").unwrap();
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
