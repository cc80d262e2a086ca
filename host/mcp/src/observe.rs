//! `temper_mcp_requests_total{method,transport}`: each transport counts the
//! messages it received (requests and notifications) here, when the
//! forge's metrics are on.

use crate::jsonrpc::Incoming;
use temper_forge::Forge;

/// Counts `message` received on `transport` (`stdio`, `http`).
pub(crate) fn count(forge: &Forge, message: &Incoming, transport: &'static str) {
    let Some(metrics) = forge.metrics() else {
        return;
    };
    match message {
        Incoming::Request { method, .. } | Incoming::Notification { method, .. } => {
            metrics.mcp_request(method, transport)
        }
        Incoming::Response { .. } => {}
    }
}
