//! A Temper tool in Rust: exports `temper:tool/run` from `wit/tool.wit`.
//! Input `{"text": "..."}`; output `{"words", "chars", "longest"}`.

wit_bindgen::generate!({
    path: "../../wit",
    world: "tool",
});

use exports::temper::tool::run::Guest;
use temper::tool::types::ToolError;

struct WordStats;

impl Guest for WordStats {
    fn call(input: String) -> Result<String, ToolError> {
        let value: serde_json::Value = serde_json::from_str(&input)
            .map_err(|e| ToolError::BadInput(format!("input is not JSON: {e}")))?;
        let text = value
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or_else(|| ToolError::BadInput("input.text must be a string".into()))?;
        let words: Vec<&str> = text.split_whitespace().collect();
        let longest = words
            .iter()
            .copied()
            .max_by_key(|w| w.chars().count())
            .unwrap_or("");
        Ok(serde_json::json!({
            "words": words.len(),
            "chars": text.chars().count(),
            "longest": longest,
        })
        .to_string())
    }
}

export!(WordStats);
