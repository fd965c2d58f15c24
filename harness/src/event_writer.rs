//! Writes an event as its JSONL line: the bytes serde_json's compact form writes for an
//! [`EventView`], byte for byte, written field by field with no serialiser in between.
//!
//! Saving a run writes every event once and hashing a history writes it again, so the line is
//! on the path of every run saved and every replay compared. The fields go in declaration
//! order, a column that is not set is left out, and numbers are written as `itoa` writes them
//! (as serde_json does). A string is copied whole when it holds nothing JSON escapes (a quote,
//! a backslash, a control character), which is nearly every string; the rare one that does (an
//! adapter's error message, say) is written by serde_json itself, so its escapes are serde's by
//! construction. The tests hold the line to serde_json's output for every column, every name
//! and every byte that may need an escape.

use std::io::Write;

use crate::event::EventView;
use crate::event_line::first_stop;

/// How many bytes of lines are gathered before they are handed to the writer: few enough to
/// stay in cache, enough that a writer's per-call cost (a hasher's, a file's) is paid rarely.
const CHUNK_BYTES: usize = 64 * 1024;

/// Writes the JSONL line of every view to `out`, in order.
pub(crate) fn write_lines<'a>(
    views: impl Iterator<Item = EventView<'a>>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 1024);
    for view in views {
        write_line(&view, &mut chunk);
        if chunk.len() >= CHUNK_BYTES {
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    out.write_all(&chunk)
}

/// Appends the JSON object of `view` to `out`, then a newline.
pub(crate) fn write_line(view: &EventView<'_>, out: &mut Vec<u8>) {
    let mut numbers = itoa::Buffer::new();
    let mut line = Line {
        out,
        numbers: &mut numbers,
    };
    line.raw(b"{\"index\":");
    line.unsigned(view.index);
    line.raw(b",\"time_ns\":");
    line.unsigned(view.time_ns);
    line.raw(b",\"process\":");
    line.text(view.process);
    line.raw(b",\"type\":\"");
    line.raw(view.kind.name().as_bytes());
    line.raw(b"\",\"f\":\"");
    line.raw(view.f.name().as_bytes());
    line.raw(b"\"");
    line.optional_signed(b",\"local_ns\":", view.local_ns);
    line.optional_text(b",\"lock\":", view.lock);
    line.optional_text(b",\"key\":", view.key);
    line.optional_text(b",\"owner\":", view.owner);
    line.optional_unsigned(b",\"token\":", view.token);
    line.optional_text(b",\"write_id\":", view.write_id);
    line.optional_text(b",\"value\":", view.value);
    line.optional_unsigned(b",\"ttl_ns\":", view.ttl_ns);
    line.optional_text(b",\"holder\":", view.holder);
    line.optional_unsigned(b",\"holder_token\":", view.holder_token);
    line.optional_signed(b",\"expires_ns\":", view.expires_ns);
    line.optional_unsigned(b",\"current_token\":", view.current_token);
    line.optional_unsigned(b",\"seq\":", view.seq);
    line.optional_text(b",\"target\":", view.target);
    line.optional_unsigned(b",\"duration_ns\":", view.duration_ns);
    line.optional_signed(b",\"jump_ns\":", view.jump_ns);
    line.optional_signed(b",\"drift_ppm\":", view.drift_ppm);
    line.optional_unsigned(b",\"delay_ns\":", view.delay_ns);
    line.optional_text(b",\"error\":", view.error);
    line.raw(b"}\n");
}

/// A line being written, and the buffer its numbers are formatted in.
struct Line<'a> {
    out: &'a mut Vec<u8>,
    numbers: &'a mut itoa::Buffer,
}

impl Line<'_> {
    fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    fn unsigned(&mut self, value: u64) {
        self.out
            .extend_from_slice(self.numbers.format(value).as_bytes());
    }

    fn signed(&mut self, value: i64) {
        self.out
            .extend_from_slice(self.numbers.format(value).as_bytes());
    }

    /// A string value, quoted: copied whole after one word-at-a-time scan when it needs no
    /// escape, written by serde_json when it does.
    fn text(&mut self, value: &str) {
        if first_stop(value.as_bytes()).is_some() {
            serde_json::to_writer(&mut *self.out, value).expect("writing to a Vec cannot fail");
            return;
        }
        self.out.push(b'"');
        self.out.extend_from_slice(value.as_bytes());
        self.out.push(b'"');
    }

    fn optional_unsigned(&mut self, label: &[u8], value: Option<u64>) {
        if let Some(value) = value {
            self.raw(label);
            self.unsigned(value);
        }
    }

    fn optional_signed(&mut self, label: &[u8], value: Option<i64>) {
        if let Some(value) = value {
            self.raw(label);
            self.signed(value);
        }
    }

    fn optional_text(&mut self, label: &[u8], value: Option<&str>) {
        if let Some(value) = value {
            self.raw(label);
            self.text(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventType, Op, every_column};

    /// The line serde_json writes for `event`, newline included.
    fn serde_line(event: &Event) -> Vec<u8> {
        let mut line = serde_json::to_vec(event).expect("an event serialises");
        line.push(b'\n');
        line
    }

    fn written(event: &Event) -> Vec<u8> {
        let mut line = Vec::new();
        write_line(&event.view(), &mut line);
        line
    }

    #[test]
    fn every_column_is_written_as_serde_writes_it() {
        let event = every_column();
        assert_eq!(
            String::from_utf8(written(&event)).unwrap(),
            String::from_utf8(serde_line(&event)).unwrap()
        );
        // Every optional column left out, and the extremes of the numbers.
        let bare = Event::new("w0", EventType::Invoke, Op::Acquire);
        assert_eq!(written(&bare), serde_line(&bare));
        let extremes = Event {
            index: u64::MAX,
            time_ns: 0,
            local_ns: Some(i64::MIN),
            expires_ns: Some(i64::MAX),
            jump_ns: Some(0),
            token: Some(0),
            ..every_column()
        };
        assert_eq!(written(&extremes), serde_line(&extremes));
    }

    #[test]
    fn every_type_and_op_is_written_by_its_json_name() {
        for kind in EventType::ALL {
            for f in Op::ALL {
                let event = Event::new("nemesis", kind, f);
                assert_eq!(written(&event), serde_line(&event), "{kind:?} {f:?}");
            }
        }
    }

    #[test]
    fn every_byte_is_escaped_as_serde_escapes_it() {
        // Each ASCII byte alone, at the start, in the middle and at the end of a string, and
        // in strings long enough to be scanned a word at a time.
        for byte in 0u8..0x80 {
            let byte = char::from(byte);
            for text in [
                format!("{byte}"),
                format!("{byte}owner"),
                format!("0123456789{byte}abcdef"),
                format!("0123456789abcdef0123{byte}"),
                format!("{byte}{byte}\u{7f}é—💥{byte}"),
            ] {
                let event = Event {
                    error: Some(text.clone()),
                    process: text.clone(),
                    ..every_column()
                };
                assert_eq!(written(&event), serde_line(&event), "{text:?}");
            }
        }
    }
}
