//! all-MiniLM-L6-v2 in-process (scripts/embedding-model.sh fetches it):
//! the vectors are right, and fused with a lexical ranking it finds tools
//! that lexical search alone misses.

mod support;

use std::time::Instant;

use serde::Deserialize;
use temper_embedding::{Embedder, LocalEmbedder, hybrid_ranking, tool_text};
use temper_forge::discovery::cosine;

use support::bm25::Bm25;
use support::{model_dir, recall_at};

#[derive(Deserialize)]
struct Set {
    tools: Vec<Tool>,
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Tool {
    name: String,
    description: String,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    tool: String,
}

#[test]
fn vectors_are_unit_length_384_dimensional_and_related_sentences_are_closer() {
    let Some(dir) = model_dir() else { return };
    let model = LocalEmbedder::load(&dir).unwrap();
    assert_eq!(model.dimension(), 384);
    assert_eq!(model.model_id(), "local:all-minilm-l6-v2");
    let texts = [
        "How do I convert text to a URL slug?",
        "slugify: turns text into a URL slug",
        "fetch the weather",
        "What is the temperature in Paris today?",
    ];
    let v = model.embed(&texts).unwrap();
    assert_eq!(v.len(), 4);
    for (text, vector) in texts.iter().zip(&v) {
        assert_eq!(vector.len(), 384, "{text}");
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text}: norm {norm}");
    }
    let slug = cosine(&v[0], &v[1]);
    let weather = cosine(&v[0], &v[2]);
    assert!(slug > weather + 0.2, "slug {slug} vs weather {weather}");
    assert!(
        cosine(&v[2], &v[3]) > cosine(&v[2], &v[1]),
        "weather is closer to temperature than to slugs"
    );

    // A text embedded alone equals the same text embedded in a padded batch.
    let alone = model.embed(&texts[2..3]).unwrap();
    assert!(cosine(&alone[0], &v[2]) > 0.9999);

    // Longer than the 256-token window: truncated, not refused.
    let long = "word ".repeat(2000);
    assert_eq!(model.embed(&[long.as_str()]).unwrap()[0].len(), 384);
}

/// The similarity matrix sentence-transformers' documentation prints for
/// all-MiniLM-L6-v2 (sbert.net, "Usage": `model.similarity(embeddings,
/// embeddings)` of these three sentences).
#[test]
fn cosine_similarities_match_the_sentence_transformers_reference() {
    let Some(dir) = model_dir() else { return };
    let model = LocalEmbedder::load(&dir).unwrap();
    let v = model
        .embed(&[
            "The weather is lovely today.",
            "It's so sunny outside!",
            "He drove to the stadium.",
        ])
        .unwrap();
    for ((i, j), want) in [((0, 1), 0.6660f32), ((0, 2), 0.1046), ((1, 2), 0.1411)] {
        let got = cosine(&v[i], &v[j]);
        assert!(
            (got - want).abs() < 0.002,
            "similarity({i}, {j}) = {got:.4}, reference {want:.4}"
        );
    }
}

#[test]
fn hybrid_ranking_beats_lexical_ranking_on_paraphrased_queries() {
    let Some(dir) = model_dir() else { return };
    let model = LocalEmbedder::load(&dir).unwrap();
    let set: Set = serde_json::from_str(include_str!("fixtures/paraphrase.json")).unwrap();
    let docs: Vec<(String, String)> = set
        .tools
        .iter()
        .map(|t| (t.name.clone(), tool_text(&t.name, &t.description)))
        .collect();
    let bm25 = Bm25::new(&docs);

    let started = Instant::now();
    let mut lexical = Vec::new();
    let mut hybrid = Vec::new();
    for q in &set.queries {
        let lex = bm25.rank(&q.query);
        let fused = hybrid_ranking(Some(&model), &q.query, &docs, &lex);
        assert!(
            fused.semantic && fused.warnings.is_empty(),
            "{:?}",
            fused.warnings
        );
        lexical.push((lex, q.tool.clone()));
        hybrid.push((fused.ranking, q.tool.clone()));
    }
    let per_query = started.elapsed() / set.queries.len() as u32;
    for k in [1, 3, 5] {
        eprintln!(
            "recall@{k}: lexical {:.3}, hybrid {:.3}",
            recall_at(k, &lexical),
            recall_at(k, &hybrid)
        );
    }
    eprintln!(
        "{} tools, {per_query:?} per query (query + every tool embedded)",
        docs.len()
    );
    for k in [1, 3, 5] {
        assert!(
            recall_at(k, &hybrid) > recall_at(k, &lexical),
            "recall@{k}: hybrid {} must beat lexical {}",
            recall_at(k, &hybrid),
            recall_at(k, &lexical)
        );
    }
}
