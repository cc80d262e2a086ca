//! The fused ranking: a lexical ranking and the embedder's semantic one,
//! merged by reciprocal rank fusion ([`fuse_rrf`], k = 60).
//!
//! The embedder is optional and fallible: when it fails (an endpoint that
//! refuses, answers 500 or times out; a model that cannot run) the lexical
//! ranking is returned unchanged with one warning for the caller's
//! `warnings: [...]` — a search never fails because of its semantic half.

use temper_forge::discovery::{Embedder, fuse_rrf, semantic_ranking};

/// A ranking (tool names, best first) and what the caller should be told.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fused {
    /// Tool names, best first.
    pub ranking: Vec<String>,
    /// Whether the semantic ranking took part.
    pub semantic: bool,
    /// Warnings for the search result (empty when all went well).
    pub warnings: Vec<String>,
}

/// The text a tool is embedded from: its name split into words (forged
/// names are snake_case or camelCase compounds) and its description.
pub fn tool_text(name: &str, description: &str) -> String {
    let mut words = String::with_capacity(name.len() + description.len() + 2);
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c == '/' {
            words.push(' ');
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        words.extend(c.to_lowercase());
    }
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    if description.trim().is_empty() {
        words
    } else {
        format!("{words}: {}", description.trim())
    }
}

/// Fuses `lexical` (names, best first) with the semantic ranking of `docs`
/// (name, [`tool_text`]) for `query`. Without an embedder, or when it fails,
/// the lexical ranking comes back as is (with a warning in the second case);
/// the embedder's error is logged at `warn` (it never holds a key).
pub fn hybrid_ranking(
    embedder: Option<&dyn Embedder>,
    query: &str,
    docs: &[(String, String)],
    lexical: &[String],
) -> Fused {
    let Some(embedder) = embedder else {
        return Fused {
            ranking: lexical.to_vec(),
            ..Fused::default()
        };
    };
    match semantic_ranking(embedder, query, docs) {
        Ok(semantic) => Fused {
            ranking: fuse_rrf(&[lexical, semantic.as_slice()])
                .into_iter()
                .map(|(name, _)| name)
                .collect(),
            semantic: true,
            warnings: Vec::new(),
        },
        Err(error) => {
            tracing::warn!(model = embedder.model_id(), %error, "semantic ranking failed; lexical results only");
            Fused {
                ranking: lexical.to_vec(),
                semantic: false,
                warnings: vec![format!(
                    "semantic ranking unavailable ({error}); these results are lexical only: \
                     search with words a tool's name or description would use"
                )],
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_forge::discovery::EmbedError;

    #[test]
    fn tool_text_splits_compound_names() {
        assert_eq!(
            tool_text("parse_csv_rows", "Parses CSV."),
            "parse csv rows: Parses CSV."
        );
        assert_eq!(tool_text("getWeatherForecast", ""), "get weather forecast");
        assert_eq!(tool_text("fs.read-file", " x "), "fs read file: x");
    }

    struct Down;
    impl Embedder for Down {
        fn model_id(&self) -> &str {
            "down"
        }
        fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError::Upstream {
                upstream: "http://127.0.0.1:9/v1/embeddings".into(),
                detail: "cannot connect".into(),
            })
        }
    }

    #[test]
    fn a_failing_embedder_leaves_the_lexical_ranking_with_a_warning() {
        let docs = vec![
            ("a".to_string(), "a".to_string()),
            ("b".to_string(), "b".to_string()),
        ];
        let lexical = vec!["b".to_string()];
        let fused = hybrid_ranking(Some(&Down), "q", &docs, &lexical);
        assert_eq!(fused.ranking, lexical);
        assert!(!fused.semantic);
        assert_eq!(fused.warnings.len(), 1);
        assert!(
            fused.warnings[0].contains("127.0.0.1:9"),
            "{:?}",
            fused.warnings
        );
        let none = hybrid_ranking(None, "q", &docs, &lexical);
        assert_eq!((none.ranking, none.warnings.len()), (lexical, 0));
    }
}
