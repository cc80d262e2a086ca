//! Reading an artifact to import under `maxArtifactBytes`
//! ([`ForgeConfig::max_artifact_bytes`](super::ForgeConfig::max_artifact_bytes)):
//! a file over the cap is refused from its metadata, before a byte is
//! read, and the read itself stops one byte past the cap (a file that grew,
//! a pipe), so an import never holds more than the cap in memory.

use std::io::Read;
use std::path::Path;

use super::Forge;
use super::error::ImportError;

/// The bytes of the artifact at `path`, refused with
/// [`ImportError::TooLarge`] when over `limit` bytes (from its metadata
/// first, then while reading).
pub fn read_artifact_file(path: &Path, limit: u64) -> Result<Vec<u8>, ImportError> {
    let io = |e: std::io::Error| ImportError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(ImportError::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    check_size(bytes.len() as u64, limit)?;
    Ok(bytes)
}

/// [`ImportError::TooLarge`] when `size` is over `limit`.
pub fn check_size(size: u64, limit: u64) -> Result<(), ImportError> {
    if size > limit {
        return Err(ImportError::TooLarge { size, limit });
    }
    Ok(())
}

impl Forge {
    /// `maxArtifactBytes`: the largest artifact this forge imports.
    pub fn max_artifact_bytes(&self) -> u64 {
        self.inner.config.max_artifact_bytes
    }

    /// The artifact at `path`, read under this forge's `maxArtifactBytes`
    /// ([`read_artifact_file`]).
    pub fn read_artifact(&self, path: &Path) -> Result<Vec<u8>, ImportError> {
        read_artifact_file(path, self.max_artifact_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_cap_is_refused_naming_size_cap_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.wasm");
        std::fs::write(&path, vec![0u8; 2048]).unwrap();
        let err = read_artifact_file(&path, 1024).unwrap_err();
        assert_eq!(
            err.to_string(),
            "import: the artifact is 2048 bytes, over the 1024-byte cap (maxArtifactBytes in --forge-config)"
        );
        assert_eq!(read_artifact_file(&path, 2048).unwrap().len(), 2048);
        let missing = read_artifact_file(&dir.path().join("none.wasm"), 10).unwrap_err();
        assert!(
            missing.to_string().starts_with("import: cannot read "),
            "{missing}"
        );
    }
}
