//! What the `temper` binary prints of the libraries' diagnostics: their
//! `tracing` events at INFO and above, one line each on stderr, as the
//! server printed them before it used `tracing` (`temper mcp: …`, and a
//! tool's console lines as `[NAME console.LEVEL] …`).

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The target under which `temper-mcp` reports a tool's console lines.
const CONSOLE_TARGET: &str = "temper_mcp::console";

/// One line per event: the MCP server's prefixed with `temper mcp: `, a
/// tool's console lines as they are, anything else with its target.
struct CliFormat;

impl<S, N> FormatEvent<S, N> for CliFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let target = event.metadata().target();
        if target == CONSOLE_TARGET {
            // printed as is
        } else if target.starts_with("temper_mcp") {
            write!(writer, "temper mcp: ")?;
        } else {
            write!(writer, "{target}: ")?;
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Installs the binary's subscriber (once, before anything logs).
pub fn install() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(Level::INFO)
        .event_format(CliFormat)
        .init();
}
