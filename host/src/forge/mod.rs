//! The forge pipeline: validate → build → test → judge → register, and the
//! engine ([`Forge`]) that drives it, calls registered tools and moves them
//! between tiers.
//!
//! One module per stage: [`validate`] (VALIDATE), the runtime's build
//! (BUILD), [`crate::testcase`] (TEST, with [`schema`] for the JSON Schema
//! checks), [`judge`] (JUDGE), and [`session`] plus [`crate::store`]
//! (REGISTER). Errors are typed per stage ([`error`]).

pub mod config;
pub mod engine;
pub mod error;
pub mod judge;
pub mod manifest;
pub mod native;
pub mod schema;
pub mod session;
pub mod validate;

pub use config::{ForgeConfig, PromotionThreshold};
pub use engine::{Exported, Forge, ForgeBuilder, ForgeContext, ForgeResult, Forged, Invocation};
pub use error::{
    ExportError, ForgeError, ImportError, InvokeError, PromoteError, Stage, ValidateError,
};
pub use manifest::{ToolInfo, ToolManifest};
pub use native::{NativeTool, NativeToolSpec};
