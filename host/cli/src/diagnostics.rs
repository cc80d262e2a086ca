//! What the `temper` binary prints of the libraries' diagnostics: their
//! `tracing` events at INFO and above, one line each on stderr, as the
//! server printed them before it used `tracing` (`temper mcp: …`, and a
//! tool's console lines as `[NAME console.LEVEL] …`).

use std::fmt;

use temper::observe::trace::Traces;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, Filter, Layer as _, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

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

/// Installs the binary's subscriber (once, before anything logs): the
/// events at INFO and above on stderr, and, when the environment asks for
/// OTLP export (`OTEL_EXPORTER_OTLP_ENDPOINT`, unless `OTEL_SDK_DISABLED`),
/// Temper's spans exported from `runtime`. The returned [`Traces`] flushes
/// the spans still buffered at exit.
pub fn install(runtime: &tokio::runtime::Handle) -> Option<Traces> {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(CliFormat)
        .with_filter(EventsUpTo(Level::INFO));
    let (otel, traces) = match temper::observe::trace::otlp_layer(runtime.clone()) {
        Ok(Some((layer, traces))) => (Some(layer.with_filter(TemperSpans)), Some(traces)),
        Ok(None) => (None, None),
        Err(e) => {
            eprintln!("temper: {e}; traces are off");
            (None, None)
        }
    };
    tracing_subscriber::registry().with(fmt).with(otel).init();
    traces
}

/// The printed layer's filter: events at `.0` and above, never spans (so
/// that spans cost nothing when traces are off: no layer wants them).
struct EventsUpTo(Level);

impl<S> Filter<S> for EventsUpTo {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        meta.is_event() && *meta.level() <= self.0
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_event() && *meta.level() <= self.0 {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::from_level(self.0))
    }
}

/// The exporting layer's filter: Temper's spans, never events (a tool's
/// console lines are events: they must not reach a trace).
struct TemperSpans;

impl TemperSpans {
    fn wants(meta: &Metadata<'_>) -> bool {
        meta.is_span() && meta.target().starts_with("temper")
    }
}

impl<S> Filter<S> for TemperSpans {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        Self::wants(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wants(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}
