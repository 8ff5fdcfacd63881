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
