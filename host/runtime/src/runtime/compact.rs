//! The compact form of an artifact this host built: its QuickJS bytecode
//! and its manifest section, about a kilobyte, instead of the ~1.1 MB
//! component. The component is the shim's Wizer snapshot after loading the
//! bytecode, which is deterministic (`tests/artifacts.rs` pins it byte for
//! byte), so the record rebuilds the artifact exactly; the store checks the
//! rebuilt bytes against the artifact's id on every read.
//!
//! Record layout (all integers little-endian):
//!
//! ```text
//! "temper-compact-v1\0"
//! shim id       32 bytes: blake3 of the shim that built the component
//! bytecode len  u32, then the bytecode
//! tail          the rest: the artifact's bytes after the component (its
//!               manifest section), copied as they are
//! ```
//!
//! A record names its shim: a host with another shim cannot rebuild the
//! component and says so ([`CompactError::OtherShim`]); export the tools
//! (or store full artifacts, `ForgeConfig::compact_artifacts = false`)
//! before changing Temper versions.

use std::sync::Arc;

use crate::id::ArtifactId;
use crate::shim;

use super::{Runtime, Tool};

const MAGIC: &[u8] = b"temper-compact-v1\0";

/// Why a compact record cannot be expanded.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The bytes are not a compact record (wrong magic, truncated).
    #[error("not a compact artifact record: {0}")]
    Malformed(&'static str),
    /// The record was made by a host with another shim.
    #[error(
        "built by shim {found}, and this host runs shim {ours}: rebuild or import the tool's exported artifact"
    )]
    OtherShim {
        /// The record's shim id (hex).
        found: String,
        /// This host's shim id (hex).
        ours: String,
    },
    /// Rebuilding the component from the bytecode failed.
    #[error("rebuilding the component failed: {0}")]
    Build(String),
    /// The rebuilt artifact is not the one the record is stored as: the
    /// record was altered (or the rebuild is not reproducible).
    #[error("the rebuilt artifact hashes to {actual}, not to {expected}")]
    Mismatch {
        /// The artifact id the record is stored under.
        expected: String,
        /// blake3 of what it rebuilt to.
        actual: String,
    },
    /// The rebuilt artifact does not load.
    #[error(transparent)]
    Load(#[from] crate::error::LoadError),
}

struct Record<'a> {
    shim: &'a [u8],
    bytecode: &'a [u8],
    tail: &'a [u8],
}

fn parse(record: &[u8]) -> Result<Record<'_>, CompactError> {
    let rest = record
        .strip_prefix(MAGIC)
        .ok_or(CompactError::Malformed("missing magic"))?;
    let (shim, rest) = rest
        .split_at_checked(32)
        .ok_or(CompactError::Malformed("truncated shim id"))?;
    let (len, rest) = rest
        .split_at_checked(4)
        .ok_or(CompactError::Malformed("truncated bytecode length"))?;
    let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
    let (bytecode, tail) = rest
        .split_at_checked(len)
        .ok_or(CompactError::Malformed("truncated bytecode"))?;
    Ok(Record {
        shim,
        bytecode,
        tail,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn shim_hash() -> [u8; 32] {
    static HASH: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    *HASH.get_or_init(|| *blake3::hash(shim::SHIM_WASM).as_bytes())
}

impl Runtime {
    /// The compact record of `artifact`, if this host built its component
    /// (it knows the bytecode the component is the snapshot of); `None` for
    /// any other artifact (compose adapters, other languages, components
    /// built elsewhere). `id` must be the artifact's id (the store hashed
    /// it already): the record is remembered as that artifact's, and loads
    /// without a rebuild in this process.
    pub(crate) fn compact_artifact(&self, id: &str, artifact: &[u8]) -> Option<Vec<u8>> {
        // A record keeps no signature section: a signed artifact is stored
        // whole, so its signatures travel with it.
        if crate::id::is_signed(artifact) {
            return None;
        }
        let component = crate::artifact::split(artifact).ok()?.1;
        let bytecode = self.recorded_bytecode_of(component)?;
        let tail = &artifact[component.len()..];
        let len = u32::try_from(bytecode.len()).ok()?;
        let mut record = Vec::with_capacity(MAGIC.len() + 36 + bytecode.len() + tail.len());
        record.extend_from_slice(MAGIC);
        record.extend_from_slice(&shim_hash());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&bytecode);
        record.extend_from_slice(tail);
        super::lock(&self.inner.compacted).insert(*blake3::hash(&record).as_bytes(), id.into());
        Some(record)
    }

    /// The tool a compact record stands for, stored as artifact `id`. A
    /// record this process made (or checked before) runs at once from its
    /// bytecode; any other is rebuilt first and must hash to `id`
    /// ([`CompactError::Mismatch`]), which is how a host checks a tool
    /// another host forged.
    pub async fn load_compact(&self, record: &[u8], id: &str) -> Result<Tool, CompactError> {
        let key = *blake3::hash(record).as_bytes();
        let known = super::lock(&self.inner.compacted)
            .get(&key)
            .is_some_and(|known| &**known == id);
        if known {
            let r = parse(record)?;
            if r.shim == shim_hash() {
                return Ok(self.engine_tool(id, Arc::new(r.bytecode.to_vec())));
            }
        }
        let bytes = self.expand_compact(record).await?;
        let actual = crate::id::ArtifactId::of(&bytes);
        if actual.as_str() != id {
            return Err(CompactError::Mismatch {
                expected: id.to_owned(),
                actual: actual.to_string(),
            });
        }
        super::lock(&self.inner.compacted).insert(key, id.into());
        Ok(self.load_admitted(bytes).await?)
    }

    /// The artifact a compact record stands for: the component rebuilt from
    /// its bytecode on this host's shim, followed by the record's tail. The
    /// caller checks the result against the artifact id.
    pub async fn expand_compact(&self, record: &[u8]) -> Result<Vec<u8>, CompactError> {
        let r = parse(record)?;
        let ours = shim_hash();
        if r.shim != ours {
            return Err(CompactError::OtherShim {
                found: hex(r.shim),
                ours: hex(&ours),
            });
        }
        let component = self
            .artifact_from_bytecode(r.bytecode.to_vec())
            .await
            .map_err(|e| CompactError::Build(e.to_string()))?;
        let mut bytes = Vec::with_capacity(component.bytes.len() + r.tail.len());
        bytes.extend_from_slice(&component.bytes);
        bytes.extend_from_slice(r.tail);
        Ok(bytes)
    }

    /// This runtime as the store's [`ArtifactCodec`].
    pub fn artifact_codec(&self) -> Arc<dyn ArtifactCodec> {
        Arc::new(RuntimeCodec {
            runtime: self.clone(),
        })
    }
}

/// [`Runtime::compact_artifact`] and [`Runtime::expand_compact`] for the
/// store's synchronous API.
struct RuntimeCodec {
    runtime: Runtime,
}

impl std::fmt::Debug for RuntimeCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RuntimeCodec")
    }
}

/// Turns a component into a compact record and back, byte for byte. The
/// forge attaches its runtime's codec (`temper_store::Registry::attach_codec`) so that
/// tools this host built are stored as bytecode + manifest.
pub trait ArtifactCodec: Send + Sync + std::fmt::Debug {
    /// A compact record of `artifact` (whose id is `id`) from which
    /// [`ArtifactCodec::expand`] rebuilds exactly `artifact`, or `None` if
    /// this codec cannot (the component was not built by it).
    fn compact(&self, id: &ArtifactId, artifact: &[u8]) -> Option<Vec<u8>>;

    /// The component a compact record stands for.
    fn expand(&self, compact: &[u8]) -> Result<Vec<u8>, String>;
}

impl ArtifactCodec for RuntimeCodec {
    fn compact(&self, id: &ArtifactId, artifact: &[u8]) -> Option<Vec<u8>> {
        self.runtime.compact_artifact(id.as_str(), artifact)
    }

    /// Runs the async rebuild on a thread of its own with its own
    /// current-thread runtime, so it can be called from sync code and from
    /// inside any tokio runtime without blocking that runtime's tasks on
    /// themselves. (The forge expands through [`Runtime::expand_compact`]
    /// directly.)
    fn expand(&self, compact: &[u8]) -> Result<Vec<u8>, String> {
        let runtime = self.runtime.clone();
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime to expand it: {e}"))?;
                rt.block_on(runtime.expand_compact(compact))
                    .map_err(|e| e.to_string())
            })
            .join()
            .unwrap_or_else(|_| Err("the expanding thread panicked".into()))
        })
    }
}
