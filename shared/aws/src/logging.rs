//! Logging for every function: one JSON object per line on stderr, unless `APIARY_LOG_FORMAT=text`; the level
//! from `RUST_LOG`, else `APIARY_LOG_LEVEL` (the stack's `LogLevel`: `debug`, `info`, `warn` or `error`), else
//! `info`. CloudWatch Logs bills each line it ingests: at the stack's default, `warn`, a run that goes well
//! writes none (its metrics, on stdout, are not log lines of this level and are always written).
//!
//! Each line carries, at its top level, the event's own fields and those of every span it happened in: a
//! handler that opens a span with `pool`, `cluster` or `claim` puts them on every line it logs, including the
//! adapters' lines and the Lambda runtime's `requestId`. CloudWatch Logs Insights can then filter on
//! `pool = "ci"` directly.
//!
//! A process's first line, whatever the level, names the function and Apiary's release ([`started`]): one line per
//! cold start says which release a stack runs.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the subscriber once (later calls do nothing) and writes the process's first line for `function`
/// ([`started`]).
pub fn init(function: &str) {
    init_with_copy(function, None);
}

/// As [`init`], and where `copy` is given, every line at `debug` (the most the stack's `LogLevel` allows, whatever
/// `RUST_LOG` says) also written there as a JSON line: the tests keep what their functions logged so, for their
/// scan for leaked secrets (`tests/canary_scan.py`).
pub fn init_with_copy(function: &str, copy: Option<std::fs::File>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    static FIRST: std::sync::Once = std::sync::Once::new();
    let text = std::env::var("APIARY_LOG_FORMAT").as_deref() == Ok("text");
    FIRST.call_once(|| match text {
        true => eprintln!("apiary {} {function} starting", apiary_ports::VERSION),
        false => eprintln!("{}", started(function, apiary_planner::Timestamp::from(std::time::SystemTime::now()))),
    });
    let level = std::env::var("APIARY_LOG_LEVEL").ok();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level_filter(level.as_deref())));
    let stderr = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let stderr = match text {
        true => stderr.with_target(false).with_filter(filter).boxed(),
        false => stderr.fmt_fields(JsonFields::new()).event_format(FlatJson).with_filter(filter).boxed(),
    };
    let copy = copy.map(|file| {
        tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .with_writer(std::sync::Mutex::new(file))
            .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG)
    });
    let _ = tracing_subscriber::registry().with(stderr).with(copy).try_init();
}

/// The first line of `function`'s process, started at `now`: a JSON line (`level` `INFO`, whatever the filter)
/// naming the function and [`apiary_ports::VERSION`], the release it runs.
pub fn started(function: &str, now: apiary_planner::Timestamp) -> String {
    serde_json::json!({
        "timestamp": now.to_rfc3339(),
        "level": "INFO",
        "target": "apiary",
        "message": format!("apiary {} {function} starting", apiary_ports::VERSION),
        "function": function,
        "version": apiary_ports::VERSION,
    })
    .to_string()
}

/// The level `APIARY_LOG_LEVEL` names, as a filter (`info` when it names none, or one that is not a level).
pub fn level_filter(level: Option<&str>) -> &'static str {
    match level.map(str::to_ascii_lowercase).as_deref() {
        Some("trace") => "trace",
        Some("debug") => "debug",
        Some("warn") => "warn",
        Some("error") => "error",
        _ => "info",
    }
}

/// The JSON line format: `timestamp`, `level`, `target`, `message`, then the fields of the spans in scope
/// (outermost first) and of the event, all at the top level; an inner field overrides an outer one of the
/// same name. Span fields must be recorded with [`JsonFields`] (as [`init`] sets up).
#[derive(Debug, Clone, Copy, Default)]
pub struct FlatJson;

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            Value::String(apiary_planner::Timestamp::from(std::time::SystemTime::now()).to_rfc3339()),
        );
        line.insert("level".into(), Value::String(meta.level().to_string()));
        line.insert("target".into(), Value::String(meta.target().to_owned()));
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else { continue };
                if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields) {
                    line.extend(fields);
                }
            }
        }
        event.record(&mut Fields(&mut line));
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Collects an event's fields as JSON values.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines(f: impl FnOnce()) -> Vec<Value> {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().expect("buffer").clone();
        String::from_utf8(bytes)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is one JSON object"))
            .collect()
    }

    #[test]
    fn a_process_first_line_names_its_function_and_release() {
        let line: Value =
            serde_json::from_str(&started("power", apiary_planner::Timestamp::UNIX_EPOCH)).expect("one JSON object");
        assert_eq!(line["function"], "power");
        assert_eq!(line["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], format!("apiary {} power starting", env!("CARGO_PKG_VERSION")));
        assert!(line["timestamp"].as_str().is_some_and(|t| t.starts_with("1970-01-01T")));
    }

    #[test]
    fn span_fields_are_on_every_line_at_the_top_level() {
        let got = lines(|| {
            let span = tracing::info_span!("power", pool = "ci", cluster = "ci-abcde");
            let _g = span.enter();
            tracing::info!(calls = 3u64, "first");
            let inner = tracing::info_span!("claim", claim = "job-1");
            let _i = inner.enter();
            tracing::warn!(ok = false, "second");
        });
        assert_eq!(got.len(), 2);
        assert_eq!(got[0]["pool"], "ci");
        assert_eq!(got[0]["cluster"], "ci-abcde");
        assert_eq!(got[0]["calls"], 3);
        assert_eq!(got[0]["message"], "first");
        assert_eq!(got[0]["level"], "INFO");
        assert!(got[0].get("claim").is_none());
        assert_eq!(got[1]["pool"], "ci");
        assert_eq!(got[1]["claim"], "job-1");
        assert_eq!(got[1]["ok"], false);
        assert_eq!(got[1]["level"], "WARN");
        assert!(got[1]["timestamp"].as_str().is_some_and(|t| t.contains('T')));
    }

    #[test]
    fn the_stacks_log_level_filters_the_lines_and_info_is_the_default() {
        let at = |level: Option<&str>| {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(level_filter(level)))
                .with_writer(move || writer.clone())
                .fmt_fields(JsonFields::new())
                .event_format(FlatJson)
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!("claim assigned");
                tracing::warn!("reconcile failed");
            });
            let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("utf-8");
            text.lines().map(|l| serde_json::from_str::<Value>(l).expect("json")["level"].clone()).collect::<Vec<_>>()
        };
        assert_eq!(at(Some("warn")), ["WARN"]);
        assert_eq!(at(Some("WARN")), ["WARN"]);
        assert!(at(Some("error")).is_empty());
        assert_eq!(at(Some("info")), ["INFO", "WARN"]);
        assert_eq!(at(None), ["INFO", "WARN"]);
        assert_eq!(at(Some("loud")), ["INFO", "WARN"]);
    }

    #[test]
    fn fields_recorded_after_the_span_opened_are_included() {
        let got = lines(|| {
            let span = tracing::info_span!("request", pool = tracing::field::Empty, claim = tracing::field::Empty);
            span.record("pool", "ci");
            let _g = span.enter();
            tracing::error!(error = %"boom", "failed");
        });
        assert_eq!(got[0]["pool"], "ci");
        assert!(got[0].get("claim").is_none());
        assert_eq!(got[0]["error"], "boom");
    }
}
