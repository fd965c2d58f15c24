//! A whole run's events in order, and its JSONL form (one event per line).
//!
//! The JSONL bytes are the artifact: replay compares them byte for byte, so serialisation must be
//! a pure function of the events (serde's declaration order, no maps). Reading validates the
//! history's invariants so a checker never works on a history it would misread.

use std::io::{BufRead, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::call_columns::CallColumns;
use crate::event::{Event, EventType, Op};
use crate::event_line::{self, LineMemory};
use crate::identities::Identities;
use crate::packed::{PackedHistory, Row, Strings, Sym};

/// Events in the order they happened (`index` 0, 1, 2, ...; `time_ns` never decreases).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The events, ordered by `index`.
    pub events: Vec<Event>,
}

/// Why a stored history could not be read: where, and what was expected there.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A line is not a valid event or breaks a history invariant.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What was expected and what was found.
        message: String,
    },
}

impl History {
    /// Serialises to JSONL: one compact JSON object per line, `\n` after each.
    pub fn write_jsonl(&self, out: &mut impl Write) -> std::io::Result<()> {
        crate::event_writer::write_lines(self.events.iter().map(Event::view), out)
    }

    /// The JSONL bytes in memory.
    pub fn to_jsonl(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.events.len() * 160);
        self.write_jsonl(&mut bytes)
            .expect("writing to a Vec cannot fail");
        bytes
    }

    /// SHA-256 of the JSONL bytes, hex: the identity replay and determinism checks compare.
    /// Hashed as written, so the bytes are never held whole.
    pub fn sha256_hex(&self) -> String {
        sha256_of_written(|out| self.write_jsonl(out))
    }

    /// Reads a JSONL history file; `path` appears in every error message.
    ///
    /// The file is read into checking form first ([`PackedHistory::read_jsonl_file`]: one
    /// streaming pass, fencer's own lines by a fast reader, any other spelling by serde), then
    /// unpacked, so both forms accept, reject and word errors alike.
    pub fn read_jsonl_file(path: &Path) -> Result<History, HistoryError> {
        Ok(PackedHistory::read_jsonl_file(path)?.unpack())
    }

    /// Reads JSONL from any reader, naming `origin` in errors, and validates the invariants.
    pub fn read_jsonl(reader: impl BufRead, origin: &str) -> Result<History, HistoryError> {
        Ok(parse_lines(reader, origin, None)?.unpack())
    }
}

/// Parses JSONL line by line from `reader` into checking form, naming `origin` in errors, and
/// validates the invariants. `file_bytes`, the file's size where known, foresees how many rows
/// and strings it holds (see [`Foreseen`]).
///
/// One streaming pass: each line is parsed where it lies in a reused chunk buffer (no per-line
/// copy, and the file is never held in memory whole). The row vector simply grows: a big
/// vector is moved by remapping its pages, not copied, and a counting pass would read the whole
/// file twice.
pub(crate) fn parse_lines(
    reader: impl Read,
    origin: &str,
    file_bytes: Option<u64>,
) -> Result<PackedHistory, HistoryError> {
    let mut packed = PackedHistory::default();
    if let Some(file_bytes) = file_bytes {
        let foreseen = Foreseen::of(file_bytes);
        packed.rows.reserve(foreseen.rows);
        packed
            .strings
            .reserve(foreseen.strings, foreseen.string_bytes);
    }
    let mut rules = Rules::default();
    let mut line_no = 0usize;
    let empty = packed.strings.intern("");
    let mut recent = LineMemory::new(&packed.strings);
    for_each_line(reader, |text| {
        line_no += 1;
        let mut row = Row::blank(empty);
        if let Some(len) = event_line::parse_plain(text, &mut row, &mut packed.strings, &mut recent)
        {
            rules.check(&row, &packed.strings, line_no);
            packed.push_row(&row);
            return Ok(len);
        }
        let line = first_line(text);
        if line.trim_ascii().is_empty() {
            return Ok(line.len());
        }
        let event: Event = serde_json::from_slice(line).map_err(|err| HistoryError::Malformed {
            path: origin.to_string(),
            line: line_no,
            message: format!("expected one history event as a JSON object: {err}"),
        })?;
        let row = Row::pack(&event, &mut packed.strings);
        rules.check(&row, &packed.strings, line_no);
        packed.push_row(&row);
        Ok(line.len())
    })
    .map_err(|error| match error {
        LineError::Io(source) => HistoryError::Io {
            path: origin.to_string(),
            source,
        },
        LineError::TooLong => HistoryError::Malformed {
            path: origin.to_string(),
            line: line_no + 1,
            message: format!(
                "expected one history event per line, found a line longer than \
                 {MAX_LINE_BYTES} bytes"
            ),
        },
        LineError::Stop(error) => error,
    })?;
    match rules.first_broken {
        Some((line, message)) => Err(HistoryError::Malformed {
            path: origin.to_string(),
            line,
            message,
        }),
        None => Ok(packed),
    }
}

/// What a file of fencer's own lines holds, by its size: a line is about 200 bytes, and about
/// every second line brings a new owner token (32 bytes), the string that dominates the
/// table. Reserving this up front saves growing the rows and the string table step by step
/// (each growth of the table rehashes every entry); a file of other lines only gets a
/// different amount of untouched room, and past the estimate everything still grows.
struct Foreseen {
    rows: usize,
    strings: usize,
    string_bytes: usize,
}

impl Foreseen {
    /// Bytes per line, rounded down from the ~198 of fencer's own histories.
    const LINE_BYTES: u64 = 160;
    /// At most this many rows are reserved (2.4 GB of them), whatever the file's size.
    const MAX_ROWS: u64 = 1 << 24;

    fn of(file_bytes: u64) -> Foreseen {
        let rows = (file_bytes / Foreseen::LINE_BYTES).min(Foreseen::MAX_ROWS) as usize;
        Foreseen {
            rows,
            strings: rows / 2,
            string_bytes: rows / 2 * 32,
        }
    }
}

/// How much of a history file is read at once; lines are parsed where they lie in it.
const CHUNK_BYTES: usize = 1 << 20;

/// The longest line a history may hold, newline not counted: 4 MiB. fencer writes events of a
/// few hundred bytes; a longer line is not a history (`/dev/zero` has no newline at all), and
/// without a limit reading one would fill the memory.
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Why [`for_each_line`] stopped early.
enum LineError {
    Io(std::io::Error),
    /// The line after the last one handed out is longer than [`MAX_LINE_BYTES`].
    TooLong,
    Stop(HistoryError),
}

/// Calls `each` once per line of `reader`, in order, on the bytes from the start of that line
/// to the end of the last whole line in the buffer (the last line of the input may lack its
/// newline); `each` reads the line at the start and answers its length, newline included
/// (at least one byte). So a line is never cut short, and finding where it ends is left to
/// the line reader, which meets its newline anyway: the buffer is searched only backwards from
/// its end, for the last newline of each read. Lines are read straight from a chunk buffer; a
/// line longer than the buffer grows it, up to [`MAX_LINE_BYTES`].
fn for_each_line(
    mut reader: impl Read,
    mut each: impl FnMut(&[u8]) -> Result<usize, HistoryError>,
) -> Result<(), LineError> {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut filled = 0usize;
    loop {
        // A full buffer holds no newline: it is all one line, so far.
        if filled == buffer.len() {
            if buffer.len() > MAX_LINE_BYTES {
                return Err(LineError::TooLong);
            }
            buffer.resize((buffer.len() * 2).min(MAX_LINE_BYTES + 1), 0);
        }
        let read = match reader.read(&mut buffer[filled..]) {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(LineError::Io(error)),
        };
        let at_end = read == 0;
        let searched = filled;
        filled += read;
        // The bytes kept from the last read hold no newline, so whole lines end at the last
        // newline just read (or at the end of the input).
        let whole = if at_end {
            filled
        } else {
            memchr::memrchr(b'\n', &buffer[searched..filled]).map_or(0, |at| searched + at + 1)
        };
        let mut start = 0;
        while start < whole {
            let len = each(&buffer[start..whole]).map_err(LineError::Stop)?;
            debug_assert!(len > 0 && start + len <= whole, "a line of {len} bytes");
            start += len;
        }
        if at_end {
            return Ok(());
        }
        buffer.copy_within(start..filled, 0);
        filled -= start;
    }
}

/// The first line of `text`, newline included (all of it when it holds no newline).
fn first_line(text: &[u8]) -> &[u8] {
    memchr::memchr(b'\n', text).map_or(text, |at| &text[..=at])
}

/// Hex SHA-256 of arbitrary bytes (stored histories are hashed as they lie on disk).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The hex SHA-256 of what `write` writes, hashed as it is written (the bytes are never held).
pub(crate) fn sha256_of_written(
    write: impl FnOnce(&mut std::io::BufWriter<HashingWriter<std::io::Sink>>) -> std::io::Result<()>,
) -> String {
    let mut out = std::io::BufWriter::new(HashingWriter::new(std::io::sink()));
    write(&mut out)
        .and_then(|()| out.into_inner().map_err(|error| error.into_error()))
        .expect("writing to a sink cannot fail")
        .finish()
        .1
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A writer that hashes (SHA-256) everything written through it to `inner`: a history is
/// hashed as it is written, so its bytes never need to be held whole to name them.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> HashingWriter<W> {
    /// Hashes what is written to `inner`.
    pub fn new(inner: W) -> HashingWriter<W> {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// The inner writer and the hex SHA-256 of every byte written through.
    pub fn finish(self) -> (W, String) {
        (self.inner, hex(&self.hasher.finalize()))
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What every producer promises, checked as each event is read (no second pass over the
/// history): contiguous indexes, time never going back, each client invoke carrying the
/// columns that say what it did, and each completion closing an open invoke of the same
/// process and operation and repeating those columns ([`CallColumns`]); a process is a
/// client or a server, never both, and a write id names one write ([`Identities`]).
///
/// Only the first broken rule is kept, and reported after the whole file has parsed, so a line
/// that is not an event at all is reported first wherever it is, as if every line were parsed
/// before any rule was checked.
#[derive(Default)]
struct Rules {
    /// Events checked so far: the index the next one must carry.
    position: u64,
    last_time_ns: u64,
    /// Per process, its open call: operation, invoke index and identifying columns.
    open: OpenCalls,
    /// Who acts as client or server, and which write each write id names.
    identities: Identities,
    /// Line and message of the first broken rule.
    first_broken: Option<(usize, String)>,
}

/// The call each process has open, found by the process's sym in two array lookups (a
/// process acts on every line, so a hashed lookup per line costs more than the rule).
#[derive(Default)]
struct OpenCalls {
    /// By [`Sym::slot`]: the process's place in `calls`, plus one (0: no call yet).
    places: Vec<u32>,
    /// By place: the process's open call, if any: operation, invoke index and columns.
    calls: Vec<Option<(Op, u64, CallColumns)>>,
}

impl OpenCalls {
    /// The open call of `process`, if it ever invoked anything (none on record otherwise).
    fn get_mut(&mut self, process: Sym) -> Option<&mut Option<(Op, u64, CallColumns)>> {
        let place = *self.places.get(process.slot())?;
        let place = place.checked_sub(1)? as usize;
        Some(&mut self.calls[place])
    }

    /// The open call of `process`, with a place made for it if it had none.
    fn entry(&mut self, process: Sym) -> &mut Option<(Op, u64, CallColumns)> {
        let slot = process.slot();
        if slot >= self.places.len() {
            self.places.resize(slot + 1, 0);
        }
        if self.places[slot] == 0 {
            self.calls.push(None);
            self.places[slot] = u32::try_from(self.calls.len()).expect("fewer processes than syms");
        }
        &mut self.calls[self.places[slot] as usize - 1]
    }
}

impl Rules {
    fn check(&mut self, event: &Row, strings: &Strings, line: usize) {
        if self.first_broken.is_some() {
            return;
        }
        let followed = self.follow(event, strings).and_then(|()| {
            self.identities
                .follow(event, line, strings)
                .map_err(|misnamed| misnamed.to_string())
        });
        if let Err(message) = followed {
            self.first_broken = Some((line, message));
        }
        self.position += 1;
    }

    // The error is the "expected ..., found ..." sentence of a `HistoryError::Malformed`,
    // which adds the file and line: it has no other reader.
    fn follow(&mut self, event: &Row, strings: &Strings) -> Result<(), String> {
        let position = self.position;
        if event.index != position {
            return Err(format!("expected index {position}, found {}", event.index));
        }
        if event.time_ns < self.last_time_ns {
            return Err(format!(
                "expected time_ns >= {} (time never goes back), found {}",
                self.last_time_ns, event.time_ns
            ));
        }
        self.last_time_ns = event.time_ns;
        match event.kind {
            EventType::Invoke => {
                if !event.f.is_client_op() {
                    return Err(format!(
                        "expected a client operation for an invoke, found {:?}",
                        event.f
                    ));
                }
                let call = Some((event.f, event.index, CallColumns::of_invoke(event)?));
                match self.open.entry(event.process) {
                    Some((_, previous, _)) => {
                        return Err(format!(
                            "expected process {} to finish its call at index {previous} before invoking again",
                            strings.text(event.process)
                        ));
                    }
                    slot => *slot = call,
                }
            }
            // A fault the nemesis could not apply (no member led, say) is recorded `info` on
            // its own: faults have no invoke.
            EventType::Info if !event.f.is_client_op() => {}
            kind if kind.is_completion() => {
                match self.open.get_mut(event.process).and_then(Option::take) {
                    Some((f, index, columns)) if f == event.f => {
                        columns.repeated_by(event, f, index, strings)?;
                    }
                    Some((f, index, _)) => {
                        return Err(format!(
                            "expected a completion of {f:?} (invoked at index {index}), found {:?}",
                            event.f
                        ));
                    }
                    None => {
                        return Err(format!(
                            "expected an invoke by {} before this completion",
                            strings.text(event.process)
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event of `w0` about key `k` (all a read needs).
    fn event(index: u64, time_ns: u64, kind: EventType, f: Op) -> Event {
        Event {
            index,
            time_ns,
            key: Some("k".into()),
            ..Event::new("w0", kind, f)
        }
    }

    #[test]
    fn jsonl_round_trips_byte_for_byte() {
        let history = History {
            events: vec![
                event(0, 5, EventType::Invoke, Op::Read),
                event(1, 9, EventType::Ok, Op::Read),
            ],
        };
        let bytes = history.to_jsonl();
        let back = History::read_jsonl(&bytes[..], "mem").unwrap();
        assert_eq!(back, history);
        assert_eq!(back.to_jsonl(), bytes);
        assert_eq!(history.sha256_hex().len(), 64);
    }

    /// A reader that hands out at most `step` bytes per read, to cut lines across reads.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_are_whole_across_reads_and_longer_than_a_chunk() {
        let long = "x".repeat(CHUNK_BYTES * 2 + 3);
        let text = format!("a\n\nbc\n{long}\nlast");
        for step in [1, 3, CHUNK_BYTES] {
            let mut lines = Vec::new();
            let reader = Trickle {
                bytes: text.as_bytes(),
                step,
            };
            let done = for_each_line(reader, |text| {
                // Handed out whole: up to a newline, or the end of the input.
                assert!(text.ends_with(b"\n") || text.ends_with(b"last"), "{text:?}");
                let line = first_line(text);
                lines.push(String::from_utf8(line.to_vec()).unwrap());
                Ok(line.len())
            });
            assert!(done.is_ok());
            let expected = ["a\n", "\n", "bc\n", &format!("{long}\n"), "last"];
            assert_eq!(lines, expected, "step {step}");
        }
    }

    #[test]
    fn a_line_past_the_limit_is_refused_at_its_number_without_reading_on() {
        let first =
            "{\"index\":0,\"time_ns\":1,\"process\":\"w0\",\"type\":\"invoke\",\"f\":\"read\"}\n";
        // Endless zeros, as `/dev/zero` gives them: only the limit ends the read.
        let endless = first.as_bytes().chain(std::io::repeat(0));
        let error = parse_lines(endless, "zeros", None).expect_err("refused");
        assert!(
            error
                .to_string()
                .starts_with("zeros:2: expected one history event per line, found a line longer than 4194304 bytes"),
            "{error}"
        );
        let longest = format!("{}\n", " ".repeat(MAX_LINE_BYTES));
        let mut lines = 0;
        let done = for_each_line(longest.as_bytes(), |text| {
            lines += 1;
            Ok(first_line(text).len())
        });
        assert!(
            done.is_ok() && lines == 1,
            "a line of exactly the limit is read"
        );
    }

    /// Lines another JSON writer may produce for fencer's events (spaces, escapes, other field
    /// orders, `null` for an absent column, non-ASCII text, CRLF) read exactly as serde reads
    /// them, and as the same events in fencer's own spelling, which the fast reader takes.
    #[test]
    fn unusual_but_valid_json_reads_as_serde_and_the_fast_reader_read_it() {
        let lines = [
            r#"{"index":0,"time_ns":1,"process":"w0","type":"invoke","f":"acquire","lock":"L","owner":"o1","ttl_ns":5}"#,
            r#"{ "index" : 1 , "time_ns":2, "process":"w0","type":"ok","f":"acquire","lock":"L","owner":"o1","ttl_ns":5,"token":1 }"#,
            r#"{"f":"write","type":"invoke","process":"w0","time_ns":3,"index":2,"key":"k\u00e9","token":1,"write_id":"w0-\"1\"","value":"ünï 😀"}"#,
            "{\"index\":3,\"time_ns\":3,\"process\":\"w0\",\"type\":\"ok\",\"f\":\"write\",\"key\":\"ké\",\"token\":1,\"write_id\":\"w0-\\\"1\\\"\",\"value\":\"\\u00fcn\\u00ef \\ud83d\\ude00\",\"error\":null}\r",
            "\t{\"index\":4,\"time_ns\":4,\"process\":\"w\\u0030\",\"type\":\"invoke\",\"f\":\"read\",\"key\":\"k\\/x\",\"local_ns\":-7}  ",
            r#"{"index":5,"time_ns":5,"process":"w0","type":"ok","f":"read","key":"k/x","local_ns":-7,"value":"a\nb\\c","write_id":"w0-\"1\""}"#,
        ];
        let expected = History {
            events: lines
                .iter()
                .map(|line| serde_json::from_str(line).expect("valid JSON of an event"))
                .collect(),
        };
        let text = lines.join("\n");
        assert_eq!(
            parse_lines(text.as_bytes(), "mem", None).unwrap().unpack(),
            expected
        );
        assert_eq!(
            PackedHistory::pack(&expected).unpack(),
            expected,
            "packing from events"
        );
        // Only the first line is in fencer's plain form. Written by fencer, every line is but
        // those whose strings need escapes (a quote, a newline), which serde reads.
        let plain = |line: &[u8]| {
            let mut strings = Strings::new();
            let mut row = Row::blank(strings.intern(""));
            let mut recent = LineMemory::new(&strings);
            event_line::parse_plain(line, &mut row, &mut strings, &mut recent) == Some(line.len())
        };
        let taken: Vec<bool> = lines.iter().map(|line| plain(line.as_bytes())).collect();
        assert_eq!(taken, [true, false, false, false, false, false]);
        let rewritten = expected.to_jsonl();
        let taken: Vec<bool> = rewritten
            .split_inclusive(|&byte| byte == b'\n')
            .map(plain)
            .collect();
        assert_eq!(taken, [true, true, false, false, true, false]);
        assert_eq!(
            parse_lines(&rewritten[..], "mem", Some(rewritten.len() as u64))
                .unwrap()
                .unpack(),
            expected
        );
    }

    /// Lines setting every numeric column, more than a stored row keeps in place, are read by
    /// the fast reader, stored wide and given back as serde reads them, between lines stored
    /// in place.
    #[test]
    fn lines_with_every_numeric_column_read_back_as_serde_reads_them() {
        let mut events = Vec::new();
        for index in 0..6 {
            let full = Event {
                index,
                time_ns: 10 + index,
                kind: EventType::Nemesis,
                f: Op::ClockJump,
                ..crate::event::every_column()
            };
            events.push(if index % 2 == 0 {
                full
            } else {
                event(index, 10 + index, EventType::Nemesis, Op::ClockJump)
            });
        }
        let expected = History { events };
        let bytes = expected.to_jsonl();
        let mut strings = Strings::new();
        let mut recent = LineMemory::new(&strings);
        for line in bytes.split_inclusive(|&byte| byte == b'\n') {
            let mut row = Row::blank(strings.intern(""));
            let taken = event_line::parse_plain(line, &mut row, &mut strings, &mut recent);
            assert_eq!(taken, Some(line.len()), "{line:?}");
        }
        let read = parse_lines(&bytes[..], "mem", None).unwrap();
        assert_eq!(read.unpack(), expected);
        let serde_read: Vec<Event> = bytes
            .split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect();
        assert_eq!(serde_read, expected.events);
    }

    #[test]
    fn malformed_line_reports_origin_and_line() {
        let text = "{\"index\":0,\"time_ns\":1,\"process\":\"w0\",\"type\":\"invoke\",\"f\":\"read\"}\nnot json\n";
        let err = History::read_jsonl(text.as_bytes(), "h.jsonl").unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("h.jsonl:2: expected one history event"),
            "{message}"
        );
    }

    #[test]
    fn completion_without_invoke_is_rejected() {
        let text =
            "{\"index\":0,\"time_ns\":1,\"process\":\"w0\",\"type\":\"ok\",\"f\":\"read\"}\n";
        let err = History::read_jsonl(text.as_bytes(), "h.jsonl").unwrap_err();
        assert!(
            err.to_string()
                .contains("h.jsonl:1: expected an invoke by w0"),
            "{err}"
        );
    }

    #[test]
    fn a_fault_the_nemesis_could_not_apply_reads_back_and_a_lone_client_info_does_not() {
        let mut unapplied = Event {
            index: 0,
            time_ns: 1,
            target: Some("lock.leader".into()),
            error: Some("no member leads right now".into()),
            ..Event::new("nemesis", EventType::Info, Op::Restart)
        };
        unapplied.duration_ns = Some(5);
        let history = History {
            events: vec![unapplied],
        };
        let read = History::read_jsonl(&history.to_jsonl()[..], "h").unwrap();
        assert_eq!(read, history);
        let lone = History {
            events: vec![event(0, 1, EventType::Info, Op::Read)],
        };
        let err = History::read_jsonl(&lone.to_jsonl()[..], "h").unwrap_err();
        assert!(
            err.to_string().contains("h:1: expected an invoke by w0"),
            "{err}"
        );
    }

    #[test]
    fn time_going_back_is_rejected() {
        let history = History {
            events: vec![
                event(0, 5, EventType::Invoke, Op::Read),
                event(1, 4, EventType::Ok, Op::Read),
            ],
        };
        let err = History::read_jsonl(&history.to_jsonl()[..], "h").unwrap_err();
        assert!(
            err.to_string().contains("h:2: expected time_ns >= 5"),
            "{err}"
        );
    }

    /// A write by `process` with id `id`, key k, `token` and `value`, as an invoke and its ok.
    fn write(process: &str, id: &str, token: u64, value: &str) -> [Event; 2] {
        let invoke = Event {
            key: Some("k".into()),
            write_id: Some(id.into()),
            token: Some(token),
            value: Some(value.into()),
            ..Event::new(process, EventType::Invoke, Op::Write)
        };
        let ok = Event {
            kind: EventType::Ok,
            ..invoke.clone()
        };
        [invoke, ok]
    }

    /// `events` in order, each at its index in nanoseconds, as JSONL.
    fn jsonl(events: impl IntoIterator<Item = Event>) -> Vec<u8> {
        let mut history = History::default();
        for (index, mut event) in (0u64..).zip(events) {
            (event.index, event.time_ns) = (index, index);
            history.events.push(event);
        }
        history.to_jsonl()
    }

    #[test]
    fn a_write_id_that_names_two_writes_is_refused_at_the_line_that_reuses_it() {
        let [a, a_ok] = write("w0", "x", 1, "1");
        let [b, b_ok] = write("w1", "x", 2, "2");
        let err = History::read_jsonl(&jsonl([a, a_ok, b, b_ok])[..], "h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "h:3: expected write id x to name one write (a retry sends the same write again \
             from the same process), found it on line 1 for w0's write of \"1\" with token 1 \
             to key k and here for w1's write of \"2\" with token 2 to key k"
        );
        // The same value from another process is another write too.
        let [a, a_ok] = write("w0", "x", 1, "1");
        let [b, b_ok] = write("w1", "x", 1, "1");
        let err = History::read_jsonl(&jsonl([a, a_ok, b, b_ok])[..], "h").unwrap_err();
        assert!(
            err.to_string().starts_with("h:3: expected write id x"),
            "{err}"
        );
    }

    #[test]
    fn a_retry_sends_the_same_write_again_and_is_read() {
        let [a, a_ok] = write("w0", "x", 1, "1");
        let [retry, retry_ok] = write("w0", "x", 1, "1");
        let [other, other_ok] = write("w1", "y", 2, "1");
        let history =
            History::read_jsonl(&jsonl([a, a_ok, retry, retry_ok, other, other_ok])[..], "h")
                .unwrap();
        assert_eq!(history.events.len(), 6);
    }

    #[test]
    fn a_process_is_a_client_or_a_server_never_both() {
        let log = |process: &str| Event {
            lock: Some("L".into()),
            owner: Some("00000000000000000000000000000001".into()),
            token: Some(1),
            ..Event::new(process, EventType::Log, Op::Acquire)
        };
        let [a, a_ok] = write("w0", "x", 1, "1");
        let err = History::read_jsonl(&jsonl([a, a_ok, log("w0")])[..], "h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "h:3: expected a server's log entry to come from the server (lock, store), found \
             one from w0, a process that makes client calls"
        );
        let [a, a_ok] = write("lock", "x", 1, "1");
        let err = History::read_jsonl(&jsonl([log("lock"), a, a_ok])[..], "h").unwrap_err();
        assert_eq!(
            err.to_string(),
            "h:2: expected client calls to come from a client (a worker or its renewal task), \
             found an invoke from lock, which recorded a server's log entry on line 1"
        );
        let [a, a_ok] = write("w0", "x", 1, "1");
        assert!(History::read_jsonl(&jsonl([a, a_ok, log("lock")])[..], "h").is_ok());
    }
}
