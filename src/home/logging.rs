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
    let _ = tracing::subscriber::set_global_default(for_command(std::io::stderr));
}

/// What a command logs, written by `writer`.
fn for_command<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(writer)
        .without_time()
        .with_target(false)
        .with_level(false)
        .with_ansi(false)
        .event_format(CommandFormat)
        .finish()
}

/// Runs `f` with what it logs kept as a command at a terminal would print
/// it (`corral: warning: …`), and returns that text with `f`'s value: for
/// a launch carried out by a template's spare, whose launcher prints it.
pub fn said_by<T>(f: impl FnOnce() -> T) -> (T, String) {
    let kept = Kept::default();
    let writer = kept.clone();
    let value = tracing::subscriber::with_default(for_command(move || writer.clone()), f);
    let text = String::from_utf8_lossy(&kept.0.lock().map(|k| k.clone()).unwrap_or_default()).into_owned();
    (value, text)
}

/// Log lines kept in memory.
#[derive(Clone, Default)]
struct Kept(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Kept {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut kept) = self.0.lock() {
            kept.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
