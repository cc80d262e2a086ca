//! [`CachedEmbedder`]: an [`Embedder`] that remembers vectors, bounded.
//!
//! Search embeds the query and every candidate tool's text; without a cache
//! each search would re-embed every description. Vectors are keyed by the
//! model id and the BLAKE3 of the text, so an edited description (or another
//! model) is embedded afresh and a removed tool's entry ages out. The cache
//! holds at most its capacity of vectors (least recently used out first).

use std::sync::Mutex;

use hashlink::LruCache;

use temper_forge::discovery::{EmbedError, Embedder};

/// Vectors kept by default: 4,096 × 384 floats ≈ 6 MiB.
pub const DEFAULT_CAPACITY: usize = 4096;

/// An [`Embedder`] in front of another, with a bounded LRU cache of vectors.
pub struct CachedEmbedder<E> {
    inner: E,
    cache: Mutex<LruCache<[u8; 32], Vec<f32>>>,
}

impl<E: Embedder> CachedEmbedder<E> {
    /// Wraps `inner` with a cache of at most `capacity` vectors (at least 1).
    pub fn new(inner: E, capacity: usize) -> Self {
        Self {
            inner,
            cache: Mutex::new(LruCache::new(capacity.max(1))),
        }
    }

    /// The wrapped embedder.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// How many vectors the cache holds now.
    pub fn len(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.len())
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn key(&self, text: &str) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        h.update(self.inner.model_id().as_bytes());
        h.update(&[0]);
        h.update(text.as_bytes());
        *h.finalize().as_bytes()
    }
}

impl<E: Embedder> Embedder for CachedEmbedder<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| self.key(t)).collect();
        let mut out: Vec<Option<Vec<f32>>> = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            keys.iter().map(|k| cache.get(k).cloned()).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i]).collect();
            let vectors = self.inner.embed(&batch)?;
            if vectors.len() != batch.len() {
                return Err(EmbedError::Inference {
                    model: self.inner.model_id().to_string(),
                    detail: format!("{} vectors for {} texts", vectors.len(), batch.len()),
                });
            }
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (i, v) in missing.into_iter().zip(vectors) {
                cache.insert(keys[i], v.clone());
                out[i] = Some(v);
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);
    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[test]
    fn embeds_each_text_once_and_stays_within_its_bound() {
        let cached = CachedEmbedder::new(Counting(AtomicUsize::new(0)), 2);
        assert_eq!(
            cached.embed(&["a", "bb"]).unwrap(),
            vec![vec![1.0], vec![2.0]]
        );
        assert_eq!(
            cached.embed(&["bb", "a"]).unwrap(),
            vec![vec![2.0], vec![1.0]]
        );
        assert_eq!(
            cached.inner().0.load(Ordering::SeqCst),
            2,
            "hits are not re-embedded"
        );
        cached.embed(&["ccc"]).unwrap();
        assert_eq!(cached.len(), 2, "the cache never exceeds its capacity");
        cached.embed(&["bb"]).unwrap();
        assert_eq!(
            cached.inner().0.load(Ordering::SeqCst),
            4,
            "the evicted text is embedded again"
        );
    }
}
