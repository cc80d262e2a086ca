//! Shared by the integration tests of temper-embedding.
#![allow(dead_code)]

pub mod bm25;

use std::path::PathBuf;

/// The all-MiniLM-L6-v2 directory (`scripts/embedding-model.sh`), or
/// `$TEMPER_EMBEDDING_MODEL_DIR`; `None` (with a message) when absent,
/// unless `TEMPER_REQUIRE_EMBEDDING_MODEL=1` makes that a failure.
pub fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TEMPER_EMBEDDING_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/models/all-minilm-l6-v2")
        });
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "all-MiniLM-L6-v2 not found in {} (run scripts/embedding-model.sh)",
        dir.display()
    );
    if std::env::var("TEMPER_REQUIRE_EMBEDDING_MODEL").as_deref() == Ok("1") {
        panic!("{msg}; TEMPER_REQUIRE_EMBEDDING_MODEL=1");
    }
    eprintln!("skipped: {msg}");
    None
}

/// Recall@k: the share of `(ranking, expected)` pairs whose expected name is
/// in the ranking's first k.
pub fn recall_at(k: usize, results: &[(Vec<String>, String)]) -> f64 {
    let hits = results
        .iter()
        .filter(|(r, want)| r.iter().take(k).any(|n| n == want))
        .count();
    hits as f64 / results.len().max(1) as f64
}
