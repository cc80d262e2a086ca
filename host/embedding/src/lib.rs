//! Temper's optional semantic ranking: [`temper_forge::discovery::Embedder`]s
//! that `search_tools` fuses with its lexical ranking by reciprocal rank
//! fusion ([`temper_forge::discovery::fuse_rrf`]).
//!
//! - [`local`] (feature `local`, default): a sentence-embedding model run
//!   in-process (all-MiniLM-L6-v2 through candle; no download, no C build);
//! - [`openai`]: an OpenAI-compatible `POST {base}/embeddings` endpoint, its
//!   key read from an environment variable and never logged;
//! - [`cache`]: a bounded cache of vectors keyed by model id and text, so a
//!   tool's description is embedded once per model;
//! - [`spec`]: the `--embeddings local:PATH` / `openai:URL` configuration;
//! - [`hybrid`]: the fused ranking, and the fallback to the lexical one (with
//!   a warning, never an error) when the embedder fails.

#[cfg(feature = "local")]
pub mod local;

pub mod cache;
pub mod hybrid;
pub mod openai;
pub mod spec;

#[cfg(feature = "local")]
pub use local::LocalEmbedder;

pub use cache::CachedEmbedder;
pub use hybrid::{Fused, hybrid_ranking, tool_text};
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
pub use spec::{EmbeddingsSpec, SpecError};
pub use temper_forge::discovery::{EmbedError, Embedder};
