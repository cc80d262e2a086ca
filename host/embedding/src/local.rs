//! [`LocalEmbedder`]: a sentence-embedding model run in-process.
//!
//! A BERT encoder (candle-transformers) read from a directory holding
//! `model.safetensors`, `tokenizer.json` and `config.json` — the layout of
//! sentence-transformers' all-MiniLM-L6-v2 (`scripts/embedding-model.sh`
//! puts it in `target/models/all-minilm-l6-v2/`). Texts are truncated to
//! [`MAX_SEQUENCE_TOKENS`] tokens, the token vectors are mean-pooled over
//! the attention mask and the result is normalised to unit length, which is
//! what sentence-transformers does for that model. Nothing is downloaded.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Encoding, PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use temper_forge::discovery::{EmbedError, Embedder};

/// Longest input in tokens (special tokens included); longer texts are cut.
/// all-MiniLM-L6-v2 was trained with 256 (its `max_seq_length`).
pub const MAX_SEQUENCE_TOKENS: usize = 256;

/// Texts run through the model together (bounds the padded batch's memory).
const BATCH: usize = 32;

/// A sentence-embedding model read from files and run on the CPU.
pub struct LocalEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    model_id: String,
    dimension: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir` (`model.safetensors`, `tokenizer.json`,
    /// `config.json`). Its id is `local:` and the directory's name (e.g.
    /// `local:all-minilm-l6-v2`): stored vectors are keyed by it.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        let model_id = format!("local:{name}");
        let load_err = |what: &Path, detail: String| EmbedError::Load {
            model: model_id.clone(),
            detail: format!("{}: {detail}", what.display()),
        };

        let config_path = dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path).map_err(|e| {
            load_err(
                &config_path,
                format!("{e} (run scripts/embedding-model.sh to fetch all-MiniLM-L6-v2)"),
            )
        })?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|e| load_err(&config_path, format!("not a BERT config: {e}")))?;

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| load_err(&tokenizer_path, e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_SEQUENCE_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| load_err(&tokenizer_path, e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));

        let weights_path: PathBuf = dir.join("model.safetensors");
        let weights =
            std::fs::read(&weights_path).map_err(|e| load_err(&weights_path, e.to_string()))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| load_err(&weights_path, e.to_string()))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| load_err(&weights_path, e.to_string()))?;
        Ok(Self {
            model,
            tokenizer,
            model_id,
            dimension: config.hidden_size,
        })
    }

    /// The length of every vector (384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    fn inference(&self, detail: impl std::fmt::Display) -> EmbedError {
        EmbedError::Inference {
            model: self.model_id.clone(),
            detail: detail.to_string(),
        }
    }

    /// One batch: tokenize (padded to the longest), encode, mean-pool over
    /// the attention mask, normalise.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| self.inference(format!("tokenizer: {e}")))?;
        let rows = encodings.len();
        let width = encodings.first().map_or(0, |e| e.get_ids().len());
        let tensor = |column: fn(&Encoding) -> &[u32]| {
            let data: Vec<u32> = encodings
                .iter()
                .flat_map(|e| column(e).iter().copied())
                .collect();
            Tensor::from_vec(data, (rows, width), &Device::Cpu)
        };
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = tensor(Encoding::get_ids)?;
            let types = tensor(Encoding::get_type_ids)?;
            let mask = tensor(Encoding::get_attention_mask)?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (rows, width, dim)
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, width, 1)
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (rows, dim)
            let counts = mask.sum(1)?.maximum(1e-9)?; // (rows, 1)
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(|e| self.inference(e))
    }
}

impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk)?);
        }
        Ok(out)
    }
}
