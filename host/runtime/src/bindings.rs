//! Host bindings generated from `wit/tool.wit` (world `js-shim`, which
//! includes the `tool` world's imports and its `run` export).

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "js-shim",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use self::exports::temper::tool::run::GuestIndices as RunIndices;
pub use self::exports::temper::tool::shim::GuestIndices as ShimIndices;
pub use self::temper::tool::types::{JsError, ToolError};
