//! A plain Okapi BM25 (k1 = 1.2, b = 0.75) over whole documents: the
//! lexical baseline of the tests and of the retrieval bench. Terms are the
//! lowercase alphanumeric runs of the text (snake_case names split on `_`);
//! no stemming, no stop words, no field weights.

use std::collections::HashMap;

/// The terms of `text`.
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// An index of (name, text) documents.
pub struct Bm25 {
    names: Vec<String>,
    docs: Vec<HashMap<String, f64>>,
    lengths: Vec<f64>,
    df: HashMap<String, f64>,
    avg: f64,
}

impl Bm25 {
    /// Indexes `docs`.
    pub fn new(docs: &[(String, String)]) -> Self {
        let mut df: HashMap<String, f64> = HashMap::new();
        let mut tfs = Vec::new();
        let mut lengths = Vec::new();
        for (_, text) in docs {
            let ts = terms(text);
            lengths.push(ts.len() as f64);
            let mut tf: HashMap<String, f64> = HashMap::new();
            for t in ts {
                *tf.entry(t).or_default() += 1.0;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1.0;
            }
            tfs.push(tf);
        }
        let avg = lengths.iter().sum::<f64>() / lengths.len().max(1) as f64;
        Self {
            names: docs.iter().map(|(n, _)| n.clone()).collect(),
            docs: tfs,
            lengths,
            df,
            avg,
        }
    }

    /// Names of the documents matching at least one query term, best first
    /// (ties by name).
    pub fn rank(&self, query: &str) -> Vec<String> {
        let (k1, b) = (1.2, 0.75);
        let n = self.docs.len() as f64;
        let mut q = terms(query);
        q.sort();
        q.dedup();
        let mut scored: Vec<(f64, &str)> = Vec::new();
        for (i, tf) in self.docs.iter().enumerate() {
            let mut score = 0.0;
            for t in &q {
                let (Some(f), Some(df)) = (tf.get(t), self.df.get(t)) else {
                    continue;
                };
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                score +=
                    idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * self.lengths[i] / self.avg));
            }
            if score > 0.0 {
                scored.push((score, &self.names[i]));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().map(|(_, n)| n.to_string()).collect()
    }
}
