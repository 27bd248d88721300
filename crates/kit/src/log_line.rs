//! The JSON log line, written straight into the line buffer.
//!
//! The shape is tracing-subscriber's flattened JSON (`timestamp`, `level`, the
//! event's fields, `target`, and `span` with the innermost span's fields and
//! its `name`), which every reader of the logs already parses. What differs is
//! the cost (issue 33): tracing-subscriber's formatter renders the timestamp
//! into a fresh `String`, a `message` into another, and reads the span's
//! fields back from their JSON text into a map of values on every line. Here
//! every value is written once, escaped on the way, with no allocation of its
//! own; a span's fields are kept as a JSON fragment when the span is made and
//! copied as they are.
//!
//! A request whose span was not made (no trace exported: see
//! [`crate::http::request_span`]) still names its request id: the line of a
//! task serving one, outside any span, carries `"span": {"request_id": ..,
//! "name": "http"}`, as the request's span would have.

use std::fmt::{self, Write as _};
use tracing::{
    field::{Field, Visit},
    Event, Subscriber,
};
use tracing_log::NormalizeEvent;
use tracing_subscriber::{
    field::RecordFields,
    fmt::{format::Writer, FmtContext, FormatEvent, FormatFields, FormattedFields},
    registry::LookupSpan,
};

tokio::task_local! {
    /// The id of the request the current task serves (set by
    /// [`crate::http::request_span`]; read by [`crate::http::current_request_id`]).
    pub(crate) static CURRENT_REQUEST_ID: String;
}

/// `f` of the id of the request served on this task, if any, without a copy.
pub(crate) fn with_request_id<R>(f: impl FnOnce(&str) -> R) -> Option<R> {
    CURRENT_REQUEST_ID.try_with(|id| f(id)).ok()
}

/// The event format (see the module).
pub struct JsonLine;

/// A span's fields as a JSON fragment: `"a":1,"b":"x"`, without braces.
pub struct JsonFields;

/// Writes `s` as the inside of a JSON string.
fn escape(w: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let mut start = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        // `b` is ASCII: `i` is a character boundary.
        w.write_str(&s[start..i])?;
        if short.is_empty() {
            write!(w, "\\u{:04x}", b)?;
        } else {
            w.write_str(short)?;
        }
        start = i + 1;
    }
    w.write_str(&s[start..])
}

/// A `fmt::Write` that escapes what goes through it (a `Debug` or `Display`
/// value written inside a JSON string, with no `String` of its own).
struct Escaping<'a, W: fmt::Write>(&'a mut W);

impl<W: fmt::Write> fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape(self.0, s)
    }
}

/// Writes each field as `"name":value`, separated by commas.
struct Fields<'a, W: fmt::Write> {
    w: &'a mut W,
    /// Whether a field has been written (the next one needs a comma).
    any: bool,
    result: fmt::Result,
}

impl<'a, W: fmt::Write> Fields<'a, W> {
    fn new(w: &'a mut W, any: bool) -> Self {
        Fields {
            w,
            any,
            result: Ok(()),
        }
    }

    /// The field's key, or false when it is not written: the `log` crate's
    /// metadata (`log.target` and the like) is the line's own target.
    fn key(&mut self, field: &Field) -> bool {
        let name = field.name();
        if self.result.is_err() || name.starts_with("log.") {
            return false;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = (|| {
            if self.any {
                self.w.write_char(',')?;
            }
            self.w.write_char('"')?;
            escape(self.w, name)?;
            self.w.write_str("\":")
        })();
        self.any = true;
        self.result.is_ok()
    }

    fn string(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.key(field) {
            self.result = (|| {
                self.w.write_char('"')?;
                Escaping(self.w).write_fmt(value)?;
                self.w.write_char('"')
            })();
        }
    }

    fn raw(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.key(field) {
            self.result = self.w.write_fmt(value);
        }
    }

    fn integer(&mut self, field: &Field, value: impl itoa::Integer) {
        if self.key(field) {
            self.result = self.w.write_str(itoa::Buffer::new().format(value));
        }
    }
}

impl<W: fmt::Write> Visit for Fields<'_, W> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.key(field) {
            self.result = (|| {
                self.w.write_char('"')?;
                escape(self.w, value)?;
                self.w.write_char('"')
            })();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.string(field, format_args!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.string(field, format_args!("{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.integer(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.integer(field, value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.integer(field, value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.integer(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.raw(field, format_args!("{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // `Debug` keeps a fraction (`3.0`, not `3`) and writes exponents JSON
        // reads; JSON has no NaN or infinity.
        if !value.is_finite() {
            self.raw(field, format_args!("null"));
        } else if value != 0.0 && value.abs() < 1e-4 {
            // `ryu` writes `0.00005` here where `Debug` writes `5e-5`.
            self.raw(field, format_args!("{value:?}"));
        } else if self.key(field) {
            // Elsewhere `ryu` writes what `Debug` does (`3.0`, `1e16`),
            // without `core::fmt`'s machinery.
            self.result = self.w.write_str(ryu::Buffer::new().format_finite(value));
        }
    }
}

impl<'writer> FormatFields<'writer> for JsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut v = Fields::new(&mut writer, false);
        fields.record(&mut v);
        v.result
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let any = !current.fields.is_empty();
        let mut v = Fields::new(&mut current.fields, any);
        fields.record(&mut v);
        v.result
    }
}

/// `2026-11-29T19:04:05.123456Z` (RFC 3339, UTC, microseconds), as
/// tracing-subscriber's default timer writes it.
fn timestamp(w: &mut impl fmt::Write) -> fmt::Result {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    write_timestamp(w, since.as_secs(), since.subsec_micros())
}

thread_local! {
    /// The date and time to the second of this thread's last line, as
    /// written (`2026-11-29T19:04:05`): a busy service writes thousands of
    /// lines a second and works out a calendar date once a second.
    static SECOND: std::cell::RefCell<(u64, String)> =
        const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

fn write_timestamp(w: &mut impl fmt::Write, secs: u64, micros: u32) -> fmt::Result {
    SECOND.with_borrow_mut(|(at, text)| {
        if *at != secs {
            let t = i64::try_from(secs)
                .ok()
                .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            let (y, mo, d) = t.to_calendar_date();
            text.clear();
            write!(
                text,
                "{y:04}-{:02}-{d:02}T{:02}:{:02}:{:02}",
                u8::from(mo),
                t.hour(),
                t.minute(),
                t.second()
            )?;
            *at = secs;
        }
        w.write_str(text)
    })?;
    // Six digits, zero-padded.
    let mut digits = [b'.', b'0', b'0', b'0', b'0', b'0', b'0', b'Z'];
    let mut m = micros.min(999_999);
    for slot in digits[1..7].iter_mut().rev() {
        *slot = b'0' + (m % 10) as u8;
        m /= 10;
    }
    // ASCII digits and punctuation: always UTF-8.
    w.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
}

impl<S> FormatEvent<S, JsonFields> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        w.write_str("{\"timestamp\":\"")?;
        timestamp(&mut w)?;
        w.write_str("\",\"level\":\"")?;
        w.write_str(meta.level().as_str())?;
        w.write_char('"')?;
        let mut fields = Fields::new(&mut w, true);
        event.record(&mut fields);
        fields.result?;
        w.write_str(",\"target\":\"")?;
        escape(&mut w, meta.target())?;
        w.write_char('"')?;
        let span = event
            .parent()
            .and_then(|id| ctx.span(id))
            .or_else(|| ctx.lookup_current());
        if let Some(span) = span {
            w.write_str(",\"span\":{")?;
            let ext = span.extensions();
            if let Some(f) = ext.get::<FormattedFields<JsonFields>>() {
                if !f.fields.is_empty() {
                    w.write_str(&f.fields)?;
                    w.write_char(',')?;
                }
            }
            w.write_str("\"name\":\"")?;
            escape(&mut w, span.name())?;
            w.write_str("\"}")?;
        } else if event.is_contextual() {
            with_request_id(|id| {
                w.write_str(",\"span\":{\"request_id\":\"")?;
                escape(&mut w, id)?;
                w.write_str("\",\"name\":\"http\"}")
            })
            .unwrap_or(Ok(()))?;
        }
        w.write_str("}\n")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// A log writer the test reads back (`.0`).
    #[derive(Clone, Default)]
    pub(crate) struct Sink(pub(crate) Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map(|mut v| v.extend_from_slice(b)).ok();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines `f` logs, each parsed (a line that is not JSON fails).
    fn lines(f: impl FnOnce()) -> Vec<serde_json::Value> {
        text(f)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// What `f` logs, as written.
    fn text(f: impl FnOnce()) -> String {
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(JsonFields)
                .event_format(JsonLine)
                .with_writer(move || writer.clone()),
        );
        tracing::subscriber::with_default(subscriber, f);
        let out = sink.0.lock().map(|v| v.clone()).unwrap_or_default();
        String::from_utf8(out).expect("utf-8")
    }

    #[derive(Debug)]
    struct Odd;

    #[test]
    fn every_kind_of_value_is_json_and_strings_are_escaped() {
        let got = lines(|| {
            let err = std::io::Error::other("disk \"full\"");
            tracing::warn!(
                text = "quote \" backslash \\ newline \n tab \t bell \u{7} é",
                n = -3i64,
                u = 7u64,
                big = -5i128,
                huge = u128::from(u64::MAX),
                yes = true,
                ms = 3.0f64,
                tiny = 1e-9f64,
                small = 5e-5f64,
                smallish = 1.5e-4f64,
                large = 1e16f64,
                nan = f64::NAN,
                debug = ?Odd,
                shown = %"x\"y",
                error = &err as &(dyn std::error::Error + 'static),
                "a \"message\" {}",
                42
            );
        });
        let [line] = got.as_slice() else {
            panic!("{got:?}")
        };
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["message"], "a \"message\" 42");
        assert_eq!(
            line["text"],
            "quote \" backslash \\ newline \n tab \t bell \u{7} é"
        );
        assert_eq!(line["n"], -3);
        assert_eq!(line["u"], 7);
        assert_eq!(line["big"], -5);
        assert_eq!(line["huge"], u64::MAX);
        assert_eq!(line["yes"], true);
        assert!(line["ms"].is_f64() && line["ms"] == 3.0, "{line}");
        assert_eq!(line["tiny"], 1e-9);
        assert_eq!(line["small"], 5e-5);
        assert_eq!(line["smallish"], 1.5e-4);
        assert_eq!(line["large"], 1e16);
        assert!(line["nan"].is_null());
        assert_eq!(line["debug"], "Odd");
        assert_eq!(line["shown"], "x\"y");
        assert_eq!(line["error"], "disk \"full\"");
        assert_eq!(line["target"], module_path!());
        let ts = line["timestamp"].as_str().expect("timestamp");
        assert!(
            time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).is_ok()
                && ts.len() == "2026-11-29T19:04:05.123456Z".len(),
            "{ts}"
        );
        assert!(line.get("span").is_none(), "{line}");
    }

    #[test]
    fn floats_are_written_as_debug_writes_them() {
        let values = [3.0, 1e-9, 5e-5, 1.5e-4, 0.1, 1e16, 123_456.789, -0.0, 0.0];
        for v in values {
            let got = text(|| tracing::info!(v, "x"));
            let want = format!("\"v\":{v:?},");
            assert!(got.contains(&want), "{want} in {got}");
        }
    }

    #[test]
    fn timestamps_are_rfc_3339_to_the_microsecond_across_seconds() {
        let at = |secs: u64, micros: u32| {
            let mut s = String::new();
            write_timestamp(&mut s, secs, micros).expect("written");
            s
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        // The same second twice, then the next (the cached date changes).
        assert_eq!(at(1_796_000_645, 7), "2026-11-30T01:04:05.000007Z");
        assert_eq!(at(1_796_000_645, 999_999), "2026-11-30T01:04:05.999999Z");
        assert_eq!(at(1_796_000_646, 120_000), "2026-11-30T01:04:06.120000Z");
        // A leap day.
        assert_eq!(at(1_709_164_800, 1), "2024-02-29T00:00:00.000001Z");
    }

    #[test]
    fn the_innermost_span_is_carried_with_fields_recorded_later() {
        let got = lines(|| {
            let outer = tracing::info_span!("outer", a = 1);
            let _o = outer.enter();
            let inner = tracing::info_span!(
                "inner",
                id = "r-1",
                status = tracing::field::Empty,
                note = tracing::field::Empty
            );
            let _i = inner.enter();
            tracing::info!("first");
            inner.record("status", 200);
            inner.record("note", "a \"b\"");
            tracing::info!("second");
        });
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            got[0]["span"],
            serde_json::json!({"name": "inner", "id": "r-1"})
        );
        assert_eq!(
            got[1]["span"],
            serde_json::json!({"name": "inner", "id": "r-1", "status": 200, "note": "a \"b\""})
        );
    }
}
