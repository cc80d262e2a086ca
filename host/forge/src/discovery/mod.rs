//! Discovery: finding the tools a caller may use without listing them all.
//!
//! - `search` (lexical, the default): the store's full-text index (SQLite
//!   FTS5 / PostgreSQL `tsvector`) over the caller's visible tiers, and an
//!   in-process BM25 over its visible hub tools, with the same field
//!   weighting (name words, description, parameters);
//! - the [`Embedder`] seam: when one is configured
//!   ([`crate::ForgeBuilder::embedder`]), the lexical ranking is fused with
//!   a semantic one by reciprocal rank fusion ([`fuse_rrf`]).

pub mod reuse;
pub mod search;
pub mod typescript;
mod working;

pub use search::{FoundTier, FoundTool, SEMANTIC_SCAN_MAX, SearchRequest, SearchScope, Searched};

use thiserror::Error;

/// Why an [`Embedder`] could not embed.
#[derive(Debug, Error)]
pub enum EmbedError {
    /// The model could not be loaded (its files, its configuration).
    #[error("embed: cannot load model {model}: {detail}")]
    Load {
        /// The model id.
        model: String,
        /// What failed.
        detail: String,
    },
    /// The upstream (an OpenAI-compatible endpoint) failed or answered
    /// something else than embeddings.
    #[error("embed: upstream {upstream}: {detail}")]
    Upstream {
        /// The endpoint, without credentials.
        upstream: String,
        /// What failed.
        detail: String,
    },
    /// Running the model failed.
    #[error("embed: inference with {model} failed: {detail}")]
    Inference {
        /// The model id.
        model: String,
        /// What failed.
        detail: String,
    },
}

/// Turns texts into vectors for semantic ranking: a local model or an
/// endpoint. Vectors of one embedder have one dimension; they need not be
/// normalised (ranking uses cosine similarity).
pub trait Embedder: Send + Sync {
    /// The model's id (recorded with stored vectors, so a change of model
    /// re-embeds).
    fn model_id(&self) -> &str;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The `k` of reciprocal rank fusion: a found tool's fused score is
/// Σ 1 / (k + rank), rank from 1, over the rankings it appears in.
pub const RRF_K: f64 = 60.0;

/// Fuses rankings (names, best first) by reciprocal rank fusion: names
/// with their fused score, best first; ties by name (deterministic).
pub fn fuse_rrf(rankings: &[&[String]]) -> Vec<(String, f64)> {
    let mut scores: std::collections::BTreeMap<&str, f64> = Default::default();
    for ranking in rankings {
        for (i, name) in ranking.iter().enumerate() {
            *scores.entry(name.as_str()).or_default() += 1.0 / (RRF_K + i as f64 + 1.0);
        }
    }
    let mut fused: Vec<(String, f64)> =
        scores.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    fused
}

/// Cosine similarity of two vectors (0 when either is zero or their
/// lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The semantic ranking hook: `docs` (name, text) ranked by the cosine of
/// their embedding with `query`'s, best first. The search calls it with
/// the lexical candidates and the caller's visible tools when an embedder
/// is configured, and fuses the result with [`fuse_rrf`]; an embedder that
/// fails leaves the lexical ranking alone (the error is returned for the
/// caller to log).
pub fn semantic_ranking(
    embedder: &dyn Embedder,
    query: &str,
    docs: &[(String, String)],
) -> Result<Vec<String>, EmbedError> {
    if docs.is_empty() {
        return Ok(Vec::new());
    }
    let mut texts: Vec<&str> = Vec::with_capacity(docs.len() + 1);
    texts.push(query);
    texts.extend(docs.iter().map(|(_, t)| t.as_str()));
    let vectors = embedder.embed(&texts)?;
    let Some((q, rest)) = vectors.split_first() else {
        return Ok(Vec::new());
    };
    let mut scored: Vec<(&str, f32)> = docs
        .iter()
        .zip(rest)
        .map(|((name, _), v)| (name.as_str(), cosine(q, v)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    Ok(scored.into_iter().map(|(n, _)| n.to_owned()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_prefers_names_ranked_high_in_both() {
        // b is second in both; a and d are first in one only.
        let lexical = vec!["a".to_string(), "b".into(), "c".into()];
        let semantic = vec!["d".to_string(), "b".into(), "e".into()];
        let fused = fuse_rrf(&[lexical.as_slice(), semantic.as_slice()]);
        assert_eq!(fused[0].0, "b");
        assert!((fused[0].1 - 2.0 / (RRF_K + 2.0)).abs() < 1e-12);
        // a and d tie: by name.
        assert_eq!((fused[1].0.as_str(), fused[2].0.as_str()), ("a", "d"));
        assert_eq!(fused.len(), 5);
    }

    struct Letters;
    impl Embedder for Letters {
        fn model_id(&self) -> &str {
            "letters"
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0; 26];
                    for c in t.bytes().filter(u8::is_ascii_lowercase) {
                        v[(c - b'a') as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    #[test]
    fn semantic_ranking_orders_by_cosine() {
        let docs = vec![
            ("zzz".to_string(), "zzz zzz".to_string()),
            ("abc".to_string(), "abc cab".to_string()),
        ];
        let ranked = semantic_ranking(&Letters, "abc", &docs).unwrap();
        assert_eq!(ranked, vec!["abc".to_string(), "zzz".to_string()]);
    }
}
