//! napi-rs's link setup for a Node addon.
fn main() {
    napi_build::setup();
}
