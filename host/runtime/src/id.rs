//! Content ids: [`ArtifactId`], the blake3 of an artifact's bytes without
//! its signature section, the one name every layer (runtime, forge,
//! registry, CLI) uses for an artifact; and [`blake3_hex`] for the other
//! digests recorded in manifests (source, pipeline).
//!
//! Signatures (the WebAssembly tool-conventions format, `temper-sign`) are
//! a custom section named [`SIGNATURE_SECTION`] placed first, right after
//! the 8-byte header. The id leaves that one section out, so signing an
//! artifact, adding a signer or detaching the signatures never changes its
//! id; everything else (code, manifest, any `signature_delimiter`) is in.

use serde::{Deserialize, Serialize};

/// Extension of artifact files (`<blake3-hex>.wasm`).
pub const EXT: &str = ".wasm";

/// blake3 of `bytes` as 64 lowercase hex characters.
pub fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Name of the custom section that carries an artifact's signatures; the
/// format places it first, and [`ArtifactId::of`] leaves it out.
pub const SIGNATURE_SECTION: &str = "signature";

/// `bytes` split around a leading [`SIGNATURE_SECTION`]: (the 8-byte
/// header, the sections after the signature section). `None` when the bytes
/// do not start with a WebAssembly header followed by a well-formed custom
/// section of that name (then the bytes are hashed as they are).
fn around_signature(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    fn leb_u32(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
        let mut value = 0usize;
        for i in 0..5 {
            let byte = *bytes.get(at + i)?;
            value |= usize::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Some((value, at + i + 1));
            }
        }
        None
    }
    if bytes.len() < 9 || &bytes[..4] != b"\0asm" || bytes[8] != 0 {
        return None;
    }
    let (size, body) = leb_u32(bytes, 9)?;
    let end = body.checked_add(size).filter(|&e| e <= bytes.len())?;
    let (name_len, name_at) = leb_u32(bytes, body)?;
    let name_end = name_at.checked_add(name_len).filter(|&e| e <= end)?;
    (&bytes[name_at..name_end] == SIGNATURE_SECTION.as_bytes())
        .then(|| (&bytes[..8], &bytes[end..]))
}

/// Whether `bytes` carry an embedded signature section (first, as the
/// format places it).
pub fn is_signed(bytes: &[u8]) -> bool {
    around_signature(bytes).is_some()
}

/// `bytes` without their leading signature section: what the id hashes and
/// what the signatures cover. Borrowed when there is none.
pub fn unsigned(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match around_signature(bytes) {
        Some((header, rest)) => [header, rest].concat().into(),
        None => bytes.into(),
    }
}

/// A string that is not an artifact id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid artifact id {0:?}: expected 64 lowercase hex characters")]
pub struct InvalidArtifactId(pub String);

/// The id of an artifact: the blake3 of its bytes without a leading
/// signature section (see the module docs), as 64 lowercase hex
/// characters. Serializes as that string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactId(String);

impl ArtifactId {
    /// The id of `bytes`: their blake3, leaving out a leading signature
    /// section, so a signed artifact has its unsigned form's id.
    pub fn of(bytes: &[u8]) -> ArtifactId {
        match around_signature(bytes) {
            Some((header, rest)) => {
                let mut hasher = blake3::Hasher::new();
                hasher.update(header);
                hasher.update(rest);
                ArtifactId(hasher.finalize().to_hex().to_string())
            }
            None => ArtifactId(blake3_hex(bytes)),
        }
    }

    /// Parses a hex id; only 64 lowercase hex characters are accepted, so an
    /// id can never name a path outside the artifact directory or a temp file.
    pub fn from_hex(hex: &str) -> Result<ArtifactId, InvalidArtifactId> {
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(ArtifactId(hex.to_owned()))
        } else {
            Err(InvalidArtifactId(hex.to_owned()))
        }
    }

    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The artifact's file name, `<hex>.wasm`.
    pub fn file_name(&self) -> String {
        format!("{}{EXT}", self.0)
    }
}

impl std::fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ArtifactId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ArtifactId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ArtifactId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ArtifactId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl TryFrom<String> for ArtifactId {
    type Error = InvalidArtifactId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ArtifactId::from_hex(&s)
    }
}

impl From<ArtifactId> for String {
    fn from(id: ArtifactId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_blake3_hex_parses() {
        let id = ArtifactId::of(b"x");
        assert_eq!(id.as_str(), blake3_hex(b"x"));
        assert_eq!(ArtifactId::from_hex(id.as_str()).unwrap(), id);
        for bad in [
            "",
            "../etc/passwd",
            &id.as_str().to_uppercase(),
            &id.as_str()[1..],
            &format!("{}0", id.as_str()),
            ".tmp-1-2-3.partial",
        ] {
            assert_eq!(
                ArtifactId::from_hex(bad),
                Err(InvalidArtifactId(bad.to_string()))
            );
        }
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert!(serde_json::from_str::<ArtifactId>("\"abc\"").is_err());
        assert_eq!(id.file_name(), format!("{id}.wasm"));
    }

    /// A custom section: id 0, size, name, payload.
    fn custom(name: &str, payload: &[u8]) -> Vec<u8> {
        let mut body = vec![u8::try_from(name.len()).unwrap()];
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(payload);
        let mut out = vec![0, u8::try_from(body.len()).unwrap()];
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn the_leading_signature_section_is_not_part_of_the_id() {
        let component = wat::parse_str("(component (core module))").unwrap();
        let (header, rest) = component.split_at(8);
        let signed = [header, &custom(SIGNATURE_SECTION, b"sig bytes"), rest].concat();
        assert!(is_signed(&signed) && !is_signed(&component));
        assert_eq!(ArtifactId::of(&signed), ArtifactId::of(&component));
        assert_eq!(ArtifactId::of(&component).as_str(), blake3_hex(&component));
        assert_eq!(unsigned(&signed).as_ref(), component.as_slice());
        assert!(matches!(
            unsigned(&component),
            std::borrow::Cow::Borrowed(_)
        ));
        // Another signature, same id.
        let resigned = [header, &custom(SIGNATURE_SECTION, b"other"), rest].concat();
        assert_eq!(ArtifactId::of(&resigned), ArtifactId::of(&component));

        // Anything else changes it: another custom section first, a
        // signature section that is not first, a delimiter, a flipped byte.
        let other = [header, &custom("signaturx", b"sig bytes"), rest].concat();
        assert_ne!(ArtifactId::of(&other), ArtifactId::of(&component));
        let late = [&component[..], &custom(SIGNATURE_SECTION, b"sig")].concat();
        assert_ne!(ArtifactId::of(&late), ArtifactId::of(&component));
        let delim = [header, &custom("signature_delimiter", &[7; 16]), rest].concat();
        assert_ne!(ArtifactId::of(&delim), ArtifactId::of(&component));
        let mut flipped = signed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_ne!(ArtifactId::of(&flipped), ArtifactId::of(&component));

        // Malformed: a section size past the end is hashed as it is.
        let mut truncated = signed.clone();
        truncated.truncate(12);
        assert_eq!(ArtifactId::of(&truncated).as_str(), blake3_hex(&truncated));
        // Not WebAssembly at all.
        assert_eq!(ArtifactId::of(b"x").as_str(), blake3_hex(b"x"));
    }
}
