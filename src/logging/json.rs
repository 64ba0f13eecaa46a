//! The JSON log line (`--log-format json`): one object per line, the event's fields at the
//! top level and the current span's under `span`, as tracing-subscriber's own JSON format
//! writes them with `flatten_event`, at a fraction of the CPU.
//!
//! tracing-subscriber keeps a span's fields as the text of a JSON object. Every line parses
//! that text back into a map to write it out again (twice: for `span` and for `spans`), a
//! field recorded later parses and rewrites the whole text, and strings reach the line
//! through `fmt::Write` a few bytes at a time. A review's line took about a tenth of the
//! server's CPU at its maximum rate (BENCHMARKS.md). Here a span's fields are kept as the
//! JSON members they are written as, a field recorded later is appended, and a line is
//! built in one buffer and written once. `spans`, the list of every span the event is in,
//! is left out: graft opens one span (the review's), so it only repeated `span`.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Writes each event as one JSON object on a line.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonLines;

/// Keeps a span's fields as JSON members, each with its leading comma, so a line writes
/// them after the span's name and a field recorded later is appended.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonMembers;

impl<'w> FormatFields<'w> for JsonMembers {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut members = Members::default();
        fields.record(&mut members);
        writer.write_str(members.text()?)
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> fmt::Result {
        let mut added = Members::default();
        fields.record(&mut added);
        let added = added.text()?;
        if added.is_empty() {
            return Ok(());
        }
        // A field recorded again replaces its value, as in tracing-subscriber's format:
        // the members are read back and written again. Rare (graft records each field of
        // its span once), so the common case stays an append.
        let mut recorded = Recorded {
            members: &current.fields,
            again: false,
        };
        fields.record(&mut recorded);
        if recorded.again {
            current.fields = replaced(&current.fields, added).ok_or(fmt::Error)?;
        } else {
            current.fields.push_str(added);
        }
        Ok(())
    }
}

impl<S> FormatEvent<S, JsonMembers> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, JsonMembers>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // A `log` record (rustls, hyper's dependencies) arrives as an event whose real
        // target and place are in `log.*` fields.
        let normalized = event.normalized_metadata();
        let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());

        let mut line = Members::default();
        line.bytes.extend_from_slice(b"{\"timestamp\":\"");
        SystemTime.format_time(&mut Writer::new(&mut line))?;
        line.bytes.extend_from_slice(b"\",\"level\":\"");
        line.bytes
            .extend_from_slice(metadata.level().as_str().as_bytes());
        line.bytes.push(b'"');
        event.record(&mut line);
        line.member_name("target");
        line.string(metadata.target());
        let span = event
            .parent()
            .and_then(|id| context.span(id))
            .or_else(|| context.lookup_current());
        if let Some(span) = span {
            line.member_name("span");
            line.bytes.extend_from_slice(b"{\"name\":");
            line.string(span.name());
            if let Some(fields) = span.extensions().get::<FormattedFields<JsonMembers>>() {
                line.bytes.extend_from_slice(fields.fields.as_bytes());
            }
            line.bytes.push(b'}');
        }
        line.bytes.extend_from_slice(b"}\n");
        writer.write_str(line.text()?)
    }
}

/// JSON members being written: `,"name":value` for each field.
#[derive(Default)]
struct Members {
    bytes: Vec<u8>,
    /// A `Debug` value's text before it is written as a JSON string.
    scratch: String,
}

impl Members {
    fn member_name(&mut self, name: &str) {
        self.bytes.push(b',');
        self.string(name);
        self.bytes.push(b':');
    }

    fn string(&mut self, value: &str) {
        // Writing a `&str` to a `Vec` fails only if the allocation does, which aborts.
        let _ = serde_json::to_writer(&mut self.bytes, value);
    }

    fn value(&mut self, field: &Field, value: impl serde::Serialize) {
        if let Some(name) = member(field) {
            self.member_name(name);
            let _ = serde_json::to_writer(&mut self.bytes, &value);
        }
    }

    fn text(&self) -> Result<&str, fmt::Error> {
        std::str::from_utf8(&self.bytes).map_err(|_| fmt::Error)
    }
}

/// The line's buffer as a `fmt::Write`, for the timestamp.
impl fmt::Write for Members {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.bytes.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

impl Visit for Members {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(name) = member(field) {
            self.member_name(name);
            self.string(value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.value(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.value(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.value(field, value);
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.value(field, value);
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.value(field, value);
    }

    /// A float that is not finite is written `null`, as serde_json writes it.
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.value(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(name) = member(field) {
            self.member_name(name);
            let mut text = std::mem::take(&mut self.scratch);
            text.clear();
            let _ = write!(text, "{value:?}");
            self.string(&text);
            self.scratch = text;
        }
    }
}

/// The member's name for a field: none for a `log` record's `log.*` fields (already in
/// the line's target), and a raw identifier's name without its `r#`.
fn member(field: &Field) -> Option<&'static str> {
    let name = field.name();
    if name.starts_with("log.") {
        return None;
    }
    Some(name.strip_prefix("r#").unwrap_or(name))
}

/// The JSON string for `text`.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Whether a record holds a field the members already have.
struct Recorded<'a> {
    members: &'a str,
    again: bool,
}

impl Visit for Recorded<'_> {
    fn record_debug(&mut self, field: &Field, _: &dyn fmt::Debug) {
        let Some(name) = member(field) else {
            return;
        };
        // `"name":` can stand inside a string value only after a backslash, and then
        // the members are merely read back: a false alarm costs time, never a member.
        let plain = !name.contains(|c: char| c == '"' || c == '\\' || c.is_control());
        self.again |= if plain {
            self.members.match_indices(name).any(|(at, _)| {
                self.members[..at].ends_with('"')
                    && self.members[at + name.len()..].starts_with("\":")
            })
        } else {
            self.members.contains(&format!("{}:", json_string(name)))
        };
    }
}

/// `current` members with `added` ones written over them: each name once, at its first
/// place, with its last value.
fn replaced(current: &str, added: &str) -> Option<String> {
    let object = |members: &str| -> Option<serde_json::Map<String, serde_json::Value>> {
        serde_json::from_str(&format!("{{{}}}", members.strip_prefix(',')?)).ok()
    };
    let mut merged = object(current)?;
    merged.extend(object(added)?);
    let mut text = String::new();
    for (name, value) in &merged {
        let _ = write!(text, ",{}:{value}", json_string(name));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};
    use tracing::field::Empty;

    use super::*;

    /// The lines an action logs through graft's JSON format, each parsed.
    fn lines(action: impl FnOnce()) -> Vec<Value> {
        let buffer = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonMembers)
            .event_format(JsonLines)
            .with_writer(move || Sink(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::with_default(subscriber, action);
        let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_event_in_a_span_is_one_object_with_the_spans_fields() {
        let logged = lines(|| {
            let span = tracing::error_span!("review", uid = Empty, kind = "Pod", revision = Empty);
            let _entered = span.enter();
            span.record("uid", "u-1");
            span.record("revision", "sha256:abc");
            let uid = "u-1";
            tracing::info!(
                uid = %uid,
                count = 3_u64,
                delta = -2_i64,
                big = 7_u128,
                ok = true,
                latency_ms = 0.25,
                nan = f64::NAN,
                quoted = "a \"b\"\n\u{1b}[31m",
                r#type = "raw",
                "admission review"
            );
        });
        assert_eq!(logged.len(), 1, "{logged:?}");
        let line = &logged[0];
        let timestamp = line["timestamp"].as_str().unwrap();
        assert!(
            timestamp.len() == "2026-11-24T17:17:31.995186Z".len() && timestamp.ends_with('Z'),
            "{line}"
        );
        let mut expected = json!({
            "level": "INFO",
            "message": "admission review",
            "uid": "u-1",
            "count": 3,
            "delta": -2,
            "big": 7,
            "ok": true,
            "latency_ms": 0.25,
            "nan": null,
            "quoted": "a \"b\"\n\u{1b}[31m",
            "type": "raw",
            "target": "graft::logging::json::tests",
            "span": {"name": "review", "kind": "Pod", "uid": "u-1", "revision": "sha256:abc"},
        });
        expected["timestamp"] = timestamp.into();
        assert_eq!(line, &expected);
    }

    #[test]
    fn a_field_recorded_again_keeps_one_member_with_its_last_value() {
        let logged = lines(|| {
            let span = tracing::info_span!("review", uid = "first", kind = "Pod");
            span.record("uid", "second");
            span.in_scope(|| tracing::warn!(policy = "p", "policy failed"));
        });
        let line = serde_json::to_string(&logged[0]).unwrap();
        assert_eq!(line.matches("\"uid\"").count(), 1, "{line}");
        assert_eq!(
            logged[0]["span"],
            json!({"name": "review", "uid": "second", "kind": "Pod"})
        );
        assert_eq!(logged[0]["level"], "WARN");
    }

    #[test]
    fn outside_a_span_there_is_no_span_member() {
        let logged = lines(|| tracing::error!(reason = "x", "failed"));
        assert_eq!(logged[0]["message"], "failed");
        assert_eq!(logged[0]["level"], "ERROR");
        assert!(logged[0].get("span").is_none(), "{:?}", logged[0]);
    }

    #[test]
    fn a_log_record_is_written_with_its_own_target_and_without_its_log_fields() {
        // Another test may have installed it; either way records reach tracing.
        let _ = tracing_log::LogTracer::init();
        let logged = lines(|| log::warn!(target: "rustls::server", "peer sent {}", "alert"));
        assert_eq!(logged.len(), 1, "{logged:?}");
        let line = &logged[0];
        assert_eq!(line["target"], "rustls::server", "{line}");
        assert_eq!(line["message"], "peer sent alert", "{line}");
        assert_eq!(line["level"], "WARN", "{line}");
        let names: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert_eq!(names, ["timestamp", "level", "message", "target"], "{line}");
    }

    #[test]
    fn members_replaced_keep_the_first_place_and_the_last_value() {
        assert_eq!(
            replaced(r#","a":1,"b":"x""#, r#","b":"y","c":[1]"#).as_deref(),
            Some(r#","a":1,"b":"y","c":[1]"#)
        );
        assert_eq!(replaced("not members", r#","a":1"#), None);
    }
}
