//! Content ids: [`ArtifactId`], the blake3 of an artifact's bytes, the one
//! name every layer (runtime, forge, registry, CLI) uses for an artifact;
//! and [`blake3_hex`] for the other digests recorded in manifests (source,
//! pipeline).

use serde::{Deserialize, Serialize};

/// Extension of artifact files (`<blake3-hex>.wasm`).
pub const EXT: &str = ".wasm";

/// blake3 of `bytes` as 64 lowercase hex characters.
pub fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// A string that is not an artifact id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid artifact id {0:?}: expected 64 lowercase hex characters")]
pub struct InvalidArtifactId(pub String);

/// The id of an artifact: the blake3 of its bytes, as 64 lowercase hex
/// characters. Serializes as that string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactId(String);

impl ArtifactId {
    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> ArtifactId {
        ArtifactId(blake3_hex(bytes))
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
}
