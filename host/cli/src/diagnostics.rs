//! What the `temper` binary prints of the libraries' diagnostics: their
//! `tracing` events, one line each on stderr, as the server printed them
//! before it used `tracing` (`temper mcp: …`, and a tool's console lines as
//! `[NAME console.LEVEL] …`).
//!
//! Which events: by default Temper's own (targets `temper*`) at INFO and
//! above and other crates' at WARN and above, so that an upstream MCP
//! client's INFO lines (rmcp prints a server's whole info, instructions
//! included) never reach the stderr an MCP client shows its user. `--log`
//! or `RUST_LOG` choose otherwise ([`LogSpec`]).

use std::fmt;

use temper::observe::trace::Traces;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
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
pub fn install(runtime: &tokio::runtime::Handle, log: LogSpec) -> Option<Traces> {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .event_format(CliFormat)
        .with_filter(Events(log.0));
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

/// Which events are printed: `RUST_LOG`'s simple directives (`LEVEL`,
/// `TARGET=LEVEL`, comma-separated; a target matches its own and its
/// modules' events), parsed by `tracing-subscriber`'s [`Targets`].
#[derive(Debug, Clone, PartialEq)]
pub struct LogSpec(Targets);

impl LogSpec {
    /// Temper's events at INFO and above, other crates' at WARN and above.
    pub fn default_spec() -> Self {
        Self(
            Targets::new()
                .with_target("temper", Level::INFO)
                .with_default(Level::WARN),
        )
    }

    /// `flag` (`--log`) if given, else `RUST_LOG` if set and not empty,
    /// else [`LogSpec::default_spec`]. A spec that does not parse is an
    /// error naming where it came from.
    pub fn choose(flag: Option<&str>) -> Result<Self, String> {
        let (spec, from) = match flag {
            Some(f) => (f.to_string(), "--log"),
            None => match std::env::var("RUST_LOG") {
                Ok(v) if !v.trim().is_empty() => (v, "RUST_LOG"),
                _ => return Ok(Self::default_spec()),
            },
        };
        spec.parse::<Targets>().map(Self).map_err(|e| {
            format!(
                "{from} {spec:?} is not a log spec (LEVEL or TARGET=LEVEL, comma-separated): {e}"
            )
        })
    }

    /// Whether an event of `target` at `level` is printed.
    #[cfg(test)]
    pub fn prints(&self, target: &str, level: &Level) -> bool {
        self.0.would_enable(target, level)
    }
}

/// The printed layer's filter: the events its [`LogSpec`] selects, never
/// spans (so that spans cost nothing when traces are off: no layer wants
/// them).
struct Events(Targets);

impl<S> Filter<S> for Events {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        meta.is_event() && self.0.would_enable(meta.target(), meta.level())
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_event() && self.0.would_enable(meta.target(), meta.level()) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        <Targets as Filter<S>>::max_level_hint(&self.0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn third_party_info_is_off_by_default_and_a_spec_turns_it_on() {
        let d = LogSpec::default_spec();
        assert!(d.prints("temper_mcp::server", &Level::INFO));
        assert!(d.prints("temper_hub::upstream", &Level::INFO));
        assert!(!d.prints("temper_mcp::server", &Level::DEBUG));
        assert!(
            !d.prints("rmcp::service", &Level::INFO),
            "rmcp's INFO lines"
        );
        assert!(d.prints("rmcp::service", &Level::WARN));
        let on = LogSpec::choose(Some("info,rmcp=debug")).unwrap();
        assert!(on.prints("rmcp::service", &Level::DEBUG));
        assert!(on.prints("hyper", &Level::INFO));
        assert!(!on.prints("hyper", &Level::DEBUG));
        let e = LogSpec::choose(Some("rmcp=loud")).unwrap_err();
        assert!(e.contains("--log") && e.contains("rmcp=loud"), "{e}");
    }
}
