//! Serve's logs: the format flag and the subscriber that writes them to
//! stderr (filtered with RUST_LOG, default info).

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with key=value fields.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the log subscriber, unless one is already installed: also
/// `examples/transport_baseline.rs`'s, so that the baseline pays for its
/// spans what serve pays.
pub fn init(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (tests running several servers) keeps the first.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
