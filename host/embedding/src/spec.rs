//! The `--embeddings` configuration: `local:PATH` (a model directory, see
//! [`crate::local`]) or `openai:URL` (an OpenAI-compatible base URL, with a
//! model name from `--embeddings-model`), and [`EmbeddingsSpec::build`].

use std::path::PathBuf;
use std::sync::Arc;

use temper_forge::discovery::{EmbedError, Embedder};

use crate::cache::{CachedEmbedder, DEFAULT_CAPACITY};
use crate::openai::{OpenAiConfigError, OpenAiEmbedder, OpenAiEmbedderConfig};

/// Where embeddings come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbeddingsSpec {
    /// A model directory (`model.safetensors`, `tokenizer.json`, `config.json`).
    Local(PathBuf),
    /// An OpenAI-compatible API base URL (`…/v1`).
    OpenAi(String),
}

/// Why `--embeddings` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Neither `local:` nor `openai:`.
    #[error(
        "--embeddings {0:?}: expected local:PATH (a model directory) or openai:URL (e.g. openai:http://127.0.0.1:8080/v1)"
    )]
    Syntax(String),
    /// `openai:` without a model name.
    #[error("--embeddings openai:… needs --embeddings-model (e.g. text-embedding-3-small)")]
    MissingModel,
    /// `local:` in a build without the `local` feature.
    #[error(
        "--embeddings local:…: this build has no local model support (temper-embedding feature `local`)"
    )]
    LocalUnsupported,
    /// The endpoint configuration is invalid.
    #[error(transparent)]
    OpenAi(#[from] OpenAiConfigError),
    /// The local model could not be loaded.
    #[error(transparent)]
    Load(#[from] EmbedError),
}

impl std::str::FromStr for EmbeddingsSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        if let Some(path) = s.strip_prefix("local:").filter(|p| !p.is_empty()) {
            Ok(Self::Local(PathBuf::from(path)))
        } else if let Some(url) = s.strip_prefix("openai:").filter(|u| !u.is_empty()) {
            Ok(Self::OpenAi(url.to_string()))
        } else {
            Err(SpecError::Syntax(s.to_string()))
        }
    }
}

impl EmbeddingsSpec {
    /// The embedder (behind a bounded vector cache). `model` names the
    /// endpoint's model (required for `openai:`); `api_key_env` names the
    /// variable holding the endpoint's key (default
    /// [`crate::openai::DEFAULT_API_KEY_ENV`]).
    pub fn build(
        &self,
        model: Option<&str>,
        api_key_env: Option<&str>,
    ) -> Result<Arc<dyn Embedder>, SpecError> {
        match self {
            #[cfg(feature = "local")]
            Self::Local(dir) => Ok(Arc::new(CachedEmbedder::new(
                crate::local::LocalEmbedder::load(dir)?,
                DEFAULT_CAPACITY,
            ))),
            #[cfg(not(feature = "local"))]
            Self::Local(_) => Err(SpecError::LocalUnsupported),
            Self::OpenAi(url) => {
                let model = model
                    .filter(|m| !m.is_empty())
                    .ok_or(SpecError::MissingModel)?;
                let mut config = OpenAiEmbedderConfig::new(url.clone(), model);
                if let Some(env) = api_key_env {
                    config.api_key_env = Some(env.to_string());
                }
                Ok(Arc::new(CachedEmbedder::new(
                    OpenAiEmbedder::new(config)?,
                    DEFAULT_CAPACITY,
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_refuses_others() {
        assert_eq!(
            "local:/m".parse::<EmbeddingsSpec>().unwrap(),
            EmbeddingsSpec::Local("/m".into())
        );
        assert_eq!(
            "openai:http://127.0.0.1:8080/v1"
                .parse::<EmbeddingsSpec>()
                .unwrap(),
            EmbeddingsSpec::OpenAi("http://127.0.0.1:8080/v1".into())
        );
        for bad in ["", "local:", "openai:", "hf:minilm", "/path"] {
            assert!(
                matches!(bad.parse::<EmbeddingsSpec>(), Err(SpecError::Syntax(_))),
                "{bad}"
            );
        }
        let err = EmbeddingsSpec::OpenAi("http://127.0.0.1:9/v1".into())
            .build(None, None)
            .err()
            .unwrap();
        assert!(matches!(err, SpecError::MissingModel));
    }
}
