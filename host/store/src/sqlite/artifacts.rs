//! Content-addressed artifact files: `artifacts/<blake3-hex>.wasm` (the
//! component) or `artifacts/<blake3-hex>.tjs` (its compact form, see
//! [`ArtifactForm`]).
//!
//! Writes are atomic and durable: the bytes go to a fresh temp file in the
//! same directory (`.tmp-<pid>-<nanos>-<n>.partial`), which is fsynced,
//! renamed onto the final name, and then the directory is fsynced. A reader
//! therefore sees either no file or the complete file under a final name; a
//! crash can leave only temp files behind, whose names never parse as an
//! [`ArtifactId`], so they can never be returned as artifacts.
//! [`Registry::open`](super::Registry::open) removes stale ones.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::backend::ArtifactForm;
use crate::error::StoreError;
use temper_runtime::id::{ArtifactId, EXT};

/// File extension of a compact artifact record.
const COMPACT_EXT: &str = ".tjs";

/// Prefix of in-progress artifact files.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";
const TEMP_SUFFIX: &str = ".partial";

/// The artifact directory of a store.
#[derive(Debug, Clone)]
pub(crate) struct ArtifactDir {
    dir: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl ArtifactDir {
    pub(crate) fn open(dir: PathBuf) -> Result<ArtifactDir, StoreError> {
        fs::create_dir_all(&dir).map_err(StoreError::io("open", &dir))?;
        Ok(ArtifactDir { dir })
    }

    pub(crate) fn path(&self, id: &ArtifactId, form: ArtifactForm) -> PathBuf {
        match form {
            ArtifactForm::Wasm => self.dir.join(id.file_name()),
            ArtifactForm::Compact => self.dir.join(format!("{}{COMPACT_EXT}", id.as_str())),
        }
    }

    /// Fsyncs the directory so that a rename into it is durable.
    fn sync_dir(&self, op: &'static str) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(StoreError::io(op, &self.dir))
    }

    /// Reads the artifact file of `form`; a [`ArtifactForm::Wasm`] file must
    /// hash to `id` (a compact record is checked when the façade expands
    /// it); `Ok(None)` if absent.
    fn read_verified(
        &self,
        op: &'static str,
        id: &ArtifactId,
        form: ArtifactForm,
    ) -> Result<Option<(File, Vec<u8>)>, StoreError> {
        let path = self.path(id, form);
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(op, path)(e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(StoreError::io(op, &path))?;
        let actual = ArtifactId::of(&bytes);
        if form == ArtifactForm::Wasm && &actual != id {
            return Err(StoreError::Corrupt {
                op,
                id: id.clone(),
                actual: actual.to_string(),
            });
        }
        Ok(Some((file, bytes)))
    }

    /// Writes `bytes` atomically and durably as the `form` of `id`.
    /// Idempotent: an existing file with the same content is kept (and
    /// fsynced again, in case its writer died between rename and directory
    /// fsync); an existing file with other content (a corrupt one) is
    /// replaced by these bytes.
    pub(crate) fn put(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        const OP: &str = "put_artifact";
        match self.read_verified(OP, id, form) {
            Ok(Some((file, existing))) if existing == bytes => {
                file.sync_all()
                    .map_err(StoreError::io(OP, self.path(id, form)))?;
                return self.sync_dir(OP);
            }
            Ok(_) | Err(StoreError::Corrupt { .. }) => {}
            Err(e) => return Err(e),
        }
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!(
            "{TEMP_PREFIX}{}-{nanos}-{n}{TEMP_SUFFIX}",
            std::process::id()
        ));
        let result = (|| {
            let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            drop(file);
            fs::rename(&tmp, self.path(id, form))
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(StoreError::io(OP, tmp)(e));
        }
        self.sync_dir(OP)
    }

    /// Reads the `form` of an artifact (a wasm file verified against its id).
    pub(crate) fn get(
        &self,
        id: &ArtifactId,
        form: ArtifactForm,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .read_verified("get_artifact", id, form)?
            .map(|(_, bytes)| bytes))
    }

    /// Checks that the artifact exists (a wasm file with the right hash, else
    /// a compact record) and makes it durable (file and directory fsync)
    /// before a registry row may name it.
    pub(crate) fn ensure_durable(
        &self,
        op: &'static str,
        id: &ArtifactId,
    ) -> Result<(), StoreError> {
        for form in [ArtifactForm::Wasm, ArtifactForm::Compact] {
            if let Some((file, _)) = self.read_verified(op, id, form)? {
                file.sync_all()
                    .map_err(StoreError::io(op, self.path(id, form)))?;
                return self.sync_dir(op);
            }
        }
        Err(StoreError::MissingArtifact { op, id: id.clone() })
    }

    /// The ids of all artifact files (temp files and foreign names excluded).
    pub(crate) fn list(&self) -> Result<Vec<ArtifactId>, StoreError> {
        const OP: &str = "artifact_ids";
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(StoreError::io(OP, &self.dir))? {
            let entry = entry.map_err(StoreError::io(OP, &self.dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(hex) = name
                .strip_suffix(EXT)
                .or_else(|| name.strip_suffix(COMPACT_EXT))
                && let Ok(id) = ArtifactId::from_hex(hex)
            {
                ids.push(id);
            }
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Removes temp files older than `min_age` (left by writers that died);
    /// returns how many were removed. Younger ones may belong to a live
    /// writer in another process and are kept.
    pub(crate) fn remove_stale_temps(&self, min_age: Duration) -> Result<usize, StoreError> {
        const OP: &str = "open";
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in fs::read_dir(&self.dir).map_err(StoreError::io(OP, &self.dir))? {
            let entry = entry.map_err(StoreError::io(OP, &self.dir))?;
            let name = entry.file_name();
            if !name.to_str().is_some_and(|n| n.starts_with(TEMP_PREFIX)) {
                continue;
            }
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or(Duration::ZERO);
            if age >= min_age {
                match fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io(OP, entry.path())(e)),
                }
            }
        }
        Ok(removed)
    }
}
