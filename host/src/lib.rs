//! Temper: a WebAssembly component-model host for forged tools.
//!
//! Agent JavaScript (`function execute(input) { ... }`, sync or async) is
//! built into a component against the WIT world `tool` (see `wit/tool.wit`)
//! and run in a fresh, limited sandbox per call.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = temper::Runtime::builder().build()?;
//! let artifact = runtime
//!     .build("function execute(input) { return { sum: input.a + input.b }; }")
//!     .await?;
//! let tool = runtime.tool(&artifact);
//! let out = runtime.call(&tool, r#"{"a": 2, "b": 3}"#).await?;
//! assert_eq!(out.output, r#"{"sum":5}"#);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod artifact;
mod bindings;
pub mod canonical_json;
pub mod capabilities;
pub mod compose;
pub mod engine;
pub mod error;
pub mod forge;
pub mod fsutil;
pub mod host_state;
pub mod id;
pub mod limits;
pub mod mcp;
pub mod oci;
pub mod policy;
mod pool;
pub mod request;
pub mod runtime;
pub mod shim;
mod snapshot;
pub mod static_check;
pub mod store;
pub mod testcase;
pub mod verify;

pub use error::{BuildError, JsLocation, LoadError, RunError};
pub use host_state::LogLine;
pub use id::ArtifactId;
pub use limits::Limits;
pub use runtime::{Artifact, CallFailure, CallOutput, Runtime, RuntimeBuilder, Tool};
