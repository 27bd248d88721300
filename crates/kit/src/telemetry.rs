//! `tracing` setup: JSON (or pretty) logs, and OpenTelemetry traces over
//! OTLP/HTTP when an endpoint is configured. W3C trace context is the propagator.

use crate::settings::{LogFormat, TelemetrySettings};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider, Resource};
use std::sync::OnceLock;
use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::{
    filter::LevelFilter, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer,
};

/// Keeps the tracer provider and the log writer alive; dropping it flushes
/// pending spans and the log lines still buffered.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    _log_writer: Option<WorkerGuard>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// The process's log writer's count of lines it dropped (its buffer full).
static LOG_LINES_DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// Whether this process exports traces (an OTLP endpoint is configured and
/// its subscriber was installed): set once by [`init`].
static EXPORTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether spans go anywhere but the log: when false, a request's span only
/// gives the log lines written inside it their request id, so it carries
/// nothing else (see [`crate::http::request_span`]).
pub fn exporting_traces() -> bool {
    EXPORTING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Log lines this process dropped because the writer's buffer was full (0
/// before [`init`], or when another subscriber was installed first). Exported
/// as `hub_log_lines_dropped_total` by every service's metrics.
pub fn log_lines_dropped() -> u64 {
    LOG_LINES_DROPPED
        .get()
        .map_or(0, |c| c.dropped_lines() as u64)
}

/// The non-blocking writer of the log: formatted lines go through a bounded
/// queue to a thread of their own that writes them to stdout, so a request
/// never waits for the terminal, the pipe or the container runtime. A full
/// queue drops the line (lossy) and counts it. The thread writes what it
/// drained in one go: tracing-appender flushes once the queue is empty, and
/// stdout is wrapped in a buffer, so a burst of lines costs one `write` (stdout
/// alone is line-buffered: one system call per line).
fn log_writer<W: std::io::Write + Send + 'static>(
    out: W,
    buffer_lines: usize,
) -> (NonBlocking, WorkerGuard) {
    NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(buffer_lines.max(1))
        .thread_name("log-writer")
        .finish(out)
}

/// What is logged: the `level` directives (`RUST_LOG` wins over
/// `telemetry.log_level`; directives that do not parse refuse the start, never
/// a silent `info`), and the access log (target [`ACCESS_LOG_TARGET`]) only
/// when `access_log`.
pub(crate) fn filter(level: &str, access_log: bool) -> anyhow::Result<EnvFilter> {
    // A bare word is a target to tracing ("inof" would log target `inof` at
    // every level and nothing else): a bare word must be a level.
    if let Some(word) = level
        .split(',')
        .map(str::trim)
        .find(|d| !d.is_empty() && !d.contains(['=', '[']) && d.parse::<LevelFilter>().is_err())
    {
        anyhow::bail!(
            "log level {level:?} (RUST_LOG or telemetry.log_level): {word:?} is not one of \
             off, error, warn, info, debug, trace (or target=level)"
        );
    }
    let filter = EnvFilter::builder().parse(level).map_err(|e| {
        anyhow::anyhow!("log level {level:?} (RUST_LOG or telemetry.log_level): {e}")
    })?;
    Ok(if access_log {
        filter
    } else {
        filter.add_directive(format!("{ACCESS_LOG_TARGET}=off").parse()?)
    })
}

/// The JSON log layer: one line per event, the innermost span's fields (a
/// request's id) and not every enclosing span again, each value written once
/// ([`crate::log_line`]).
pub(crate) fn json_layer<S, W>(
    writer: W,
) -> tracing_subscriber::fmt::Layer<S, crate::log_line::JsonFields, crate::log_line::JsonLine, W>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(crate::log_line::JsonFields)
        .event_format(crate::log_line::JsonLine)
        .with_writer(writer)
}

/// Install the global subscriber once per process. A second call (tests, the
/// one-process dev stack) keeps the first subscriber and returns a no-op guard.
pub fn init(service: &str, s: &TelemetrySettings) -> anyhow::Result<TelemetryGuard> {
    crate::tls::install_provider();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let level = std::env::var("RUST_LOG").unwrap_or_else(|_| s.log_level.clone());
    let filter = filter(&level, s.access_log)?;
    let (writer, writer_guard) = log_writer(
        std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
        s.log_buffer_lines,
    );
    let dropped = writer.error_counter();
    let fmt_layer = match s.log_format {
        LogFormat::Pretty => tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_writer(writer)
            .boxed(),
        LogFormat::Json => json_layer(writer).boxed(),
    };

    let mut provider = None;
    let otel_layer = if s.otlp_endpoint.is_empty() {
        None
    } else {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(otlp_client(&s.otlp_ca_file)?)
            .with_endpoint(s.otlp_endpoint.clone())
            .build()?;
        let p = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .build();
        let tracer = p.tracer(service.to_owned());
        opentelemetry::global::set_tracer_provider(p.clone());
        provider = Some(p);
        Some(tracing_opentelemetry::layer().with_tracer(tracer))
    };

    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(fmt_layer)
        .with(otel_layer)
        .try_init()
        .is_ok();
    let mut log_writer = Some(writer_guard);
    if installed {
        let _ = LOG_LINES_DROPPED.set(dropped);
        EXPORTING.store(provider.is_some(), std::sync::atomic::Ordering::Relaxed);
    } else {
        // Someone installed a subscriber first; do not keep a provider nobody
        // feeds, nor a writer thread nobody writes to.
        if let Some(p) = provider.take() {
            let _ = p.shutdown();
        }
        log_writer = None;
    }
    Ok(TelemetryGuard {
        provider,
        _log_writer: log_writer,
    })
}

/// The exporter's HTTP client: the kit's trust store (so `https://` collectors
/// work, `telemetry.otlp_ca_file` added), the exporter's 10-second timeout.
/// Built on its own thread: a blocking client may not be made on a runtime's.
fn otlp_client(ca_file: &str) -> anyhow::Result<reqwest::blocking::Client> {
    let ca_file = ca_file.to_owned();
    std::thread::spawn(move || {
        Ok(crate::tls::blocking_http_client(&ca_file)?
            .timeout(std::time::Duration::from_secs(10))
            .build()?)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("building the OTLP client panicked"))?
}

/// Logs for tests: quiet unless `TEST_LOG` is set.
pub fn init_for_tests() {
    crate::tls::install_provider();
    if std::env::var("TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
            )
            .with_test_writer()
            .try_init();
    }
}

struct MapCarrier(std::collections::HashMap<String, String>);

impl opentelemetry::propagation::Injector for MapCarrier {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

impl opentelemetry::propagation::Extractor for MapCarrier {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The tracing target of the access log (one line per request at info,
/// written by [`crate::http::request_span`]; off with
/// `telemetry.access_log = false`).
pub const ACCESS_LOG_TARGET: &str = "hub_access";

/// The W3C trace-context header.
pub const TRACEPARENT: &str = "traceparent";

/// The W3C `traceparent` of the current span, when tracing export is on and the
/// span belongs to a trace (events carry it in their NATS headers, calls to
/// other services in their HTTP headers).
pub fn current_traceparent() -> Option<String> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let ctx = tracing::Span::current().context();
    let mut carrier = MapCarrier(Default::default());
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&ctx, &mut carrier));
    carrier.0.remove(TRACEPARENT)
}

/// The headers that carry the current span's trace context on a call this
/// service makes (a peer, identity, an upstream): empty with tracing off.
pub fn trace_headers() -> reqwest::header::HeaderMap {
    let mut h = reqwest::header::HeaderMap::new();
    if let Some(v) =
        current_traceparent().and_then(|tp| reqwest::header::HeaderValue::from_str(&tp).ok())
    {
        h.insert(TRACEPARENT, v);
    }
    h
}

/// A span for handling an event, continuing the trace of `traceparent` if any.
pub fn event_span(subject: &str, traceparent: Option<&str>) -> tracing::Span {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let span = tracing::info_span!("event", subject = %subject);
    if let Some(tp) = traceparent {
        let carrier = MapCarrier([("traceparent".to_owned(), tp.to_owned())].into());
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&carrier));
        let _ = span.set_parent(parent);
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;

    /// Stdout that does not take anything until told to: a terminal, a pipe
    /// or a container runtime that stopped reading.
    struct Stuck {
        release: mpsc::Receiver<()>,
        written: mpsc::Sender<Vec<u8>>,
    }

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.release.recv();
            let _ = self.written.send(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_level_that_does_not_parse_refuses_to_start() {
        for good in [
            "info",
            "warn,hub_access=off",
            "org_billing=debug,info",
            "off",
        ] {
            assert!(filter(good, true).is_ok(), "{good}");
        }
        for bad in ["inof", "info,verbose", "hub=loud"] {
            let e = filter(bad, true).expect_err(bad).to_string();
            assert!(e.contains("log level"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_writer_that_stopped_taking_lines_drops_and_counts_them_instead_of_blocking() {
        let (release, released) = mpsc::channel();
        let (written, lines) = mpsc::channel();
        let (mut writer, guard) = log_writer(
            Stuck {
                release: released,
                written,
            },
            4,
        );
        let dropped = writer.error_counter();
        // The stuck writer holds at most one line and the queue four: of a
        // hundred lines most are dropped. Were a full queue to make the caller
        // wait, this loop would never end (the writer is released only after it).
        for i in 0..100 {
            writer
                .write_all(format!("line {i}\n").as_bytes())
                .expect("a write to the non-blocking writer");
        }
        let lost = dropped.dropped_lines();
        assert!(lost >= 100 - 4 - 1, "dropped {lost} of 100");
        for _ in 0..100 {
            let _ = release.send(());
        }
        // Every line is written or counted: the kept ones arrive once released.
        let mut kept = Vec::new();
        while kept.len() + lost < 100 {
            kept.push(
                lines
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .expect("the lines the queue held, written once released"),
            );
        }
        assert_eq!(kept.first().map(Vec::as_slice), Some(&b"line 0\n"[..]));
        drop(guard);
        assert_eq!(dropped.dropped_lines(), lost, "nothing dropped after");
    }

    #[test]
    fn the_current_trace_is_carried_into_events_and_continued_from_them() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            assert_eq!(current_traceparent(), None, "no span, no trace");
            let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
            let span = event_span("core.v1.test", Some(incoming));
            let _g = span.enter();
            let tp = current_traceparent().expect("a traceparent inside the span");
            // Same trace id, a new span id.
            assert!(
                tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
                "{tp}"
            );
            assert!(!tp.contains("00f067aa0ba902b7"), "{tp}");
        });
    }
}
