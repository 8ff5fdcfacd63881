//! One rule for what Corral's programs log (the CLI, the tray, the window
//! and the shepherds they start): what `CORRAL_LOG` says, else a default
//! level, to stderr (a shepherd's stderr is its run's log file).

/// Starts logging at `default` (`"warn"`, `"info"`) unless `CORRAL_LOG`
/// says otherwise. A second call does nothing.
pub fn init(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CORRAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Logging for a command at a terminal: `corral: warning: …`, one line each,
/// no timestamps or module paths (unless `CORRAL_LOG` asks for more, when
/// the full format helps).
pub fn init_for_command() {
    if std::env::var_os("CORRAL_LOG").is_some() {
        return init("warn");
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_ansi(false)
        .event_format(CommandFormat)
        .try_init();
}

/// `corral: warning: message`.
struct CommandFormat;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for CommandFormat
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            _ => "note",
        };
        write!(writer, "corral: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
