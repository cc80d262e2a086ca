//! `temper mcp --metrics ADDR`: the forge's metrics on their own listener.

use std::sync::Arc;
use temper::observe::{Metrics, MetricsServer, ScrapeToken};

use crate::args::MetricsArgs;

/// The metrics listener, while it runs (aborted on drop).
pub(crate) struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Turns `forge`'s metrics on and serves them, when `--metrics` is given.
pub(crate) async fn serve(
    args: &MetricsArgs,
    forge: &temper::forge::Forge,
) -> Result<Option<Serving>, String> {
    let Some(addr) = &args.addr else {
        return Ok(None);
    };
    let token = match &args.metrics_token_file {
        Some(path) => Some(ScrapeToken::from_file(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let metrics = Metrics::new(
        args.metrics_max_tools,
        env!("CARGO_PKG_VERSION"),
        &temper::shim::shim_id()[..16],
    );
    let server = MetricsServer::bind(addr, Arc::clone(&metrics), token)
        .await
        .map_err(|e| e.to_string())?;
    forge.set_metrics(metrics);
    let local = server.local_addr().map_err(|e| e.to_string())?;
    // Tests and scripts read this line for the port.
    eprintln!("temper mcp: metrics on http://{local}/metrics");
    Ok(Some(Serving(tokio::spawn(server.run()))))
}
