//! Logging for every function: JSON lines (one object per event, with its fields: pool, cluster, claim) unless
//! `APIARY_LOG_FORMAT=text`; the level from `RUST_LOG` (default `info`).

/// Installs the subscriber once; later calls do nothing.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if std::env::var("APIARY_LOG_FORMAT").as_deref() == Ok("text") {
        builder.with_target(false).try_init()
    } else {
        builder.json().flatten_event(true).with_current_span(false).try_init()
    };
}
