//! A whole run's events in order, and its JSONL form (one event per line).
//!
//! The JSONL bytes are the artifact: replay compares them byte for byte, so serialisation must be
//! a pure function of the events (serde's declaration order, no maps). Reading validates the
//! history's invariants so a checker never works on a history it would misread.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::event::{Event, EventType};
use crate::event_line;

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
        for event in &self.events {
            serde_json::to_writer(&mut *out, event)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The JSONL bytes in memory.
    pub fn to_jsonl(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.events.len() * 160);
        self.write_jsonl(&mut bytes)
            .expect("writing to a Vec cannot fail");
        bytes
    }

    /// SHA-256 of the JSONL bytes, hex: the identity replay and determinism checks compare.
    pub fn sha256_hex(&self) -> String {
        sha256_hex(&self.to_jsonl())
    }

    /// Reads a JSONL history file; `path` appears in every error message.
    ///
    /// Two streaming passes: the first counts lines so the event vector is sized once (growing
    /// it by doubling copied every event several times and doubled peak memory), the second
    /// parses each line from a reused byte buffer (no per-line `String`, and the file is never
    /// held in memory whole), fencer's own plain lines by a fast reader, any other spelling by
    /// serde.
    pub fn read_jsonl_file(path: &Path) -> Result<History, HistoryError> {
        let origin = path.display().to_string();
        let io = |source| HistoryError::Io {
            path: origin.clone(),
            source,
        };
        let open = || {
            std::fs::File::open(path)
                .map(|file| std::io::BufReader::with_capacity(1 << 20, file))
                .map_err(io)
        };
        let mut lines = 1usize;
        let mut counting = open()?;
        loop {
            let chunk = counting.fill_buf().map_err(io)?;
            if chunk.is_empty() {
                break;
            }
            lines += chunk.iter().filter(|&&byte| byte == b'\n').count();
            let consumed = chunk.len();
            counting.consume(consumed);
        }
        Self::parse_lines(open()?, lines, &origin)
    }

    /// Reads JSONL from any reader, naming `origin` in errors, and validates the invariants.
    pub fn read_jsonl(reader: impl BufRead, origin: &str) -> Result<History, HistoryError> {
        Self::parse_lines(reader, 0, origin)
    }

    /// Parses JSONL line by line from `reader` (about `lines` of them), naming `origin` in
    /// errors, and validates the invariants.
    fn parse_lines(
        mut reader: impl BufRead,
        lines: usize,
        origin: &str,
    ) -> Result<History, HistoryError> {
        let mut events = Vec::with_capacity(lines);
        let mut line_numbers = Vec::with_capacity(lines);
        let mut line = Vec::with_capacity(512);
        let mut line_no = 0usize;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|source| HistoryError::Io {
                    path: origin.to_string(),
                    source,
                })?;
            if read == 0 {
                break;
            }
            line_no += 1;
            if line.trim_ascii().is_empty() {
                continue;
            }
            let event = match event_line::parse_plain(&line) {
                Some(event) => event,
                None => serde_json::from_slice(&line).map_err(|err| HistoryError::Malformed {
                    path: origin.to_string(),
                    line: line_no,
                    message: format!("expected one history event as a JSON object: {err}"),
                })?,
            };
            events.push(event);
            line_numbers.push(line_no);
        }
        validate(&events, &line_numbers, origin)?;
        Ok(History { events })
    }
}

/// Hex SHA-256 of arbitrary bytes (stored histories are hashed as they lie on disk).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Checks what every producer promises: contiguous indexes, time never going back, and each
/// completion closing an open invoke of the same process and operation.
fn validate(events: &[Event], line_numbers: &[usize], origin: &str) -> Result<(), HistoryError> {
    let malformed = |line: usize, message: String| HistoryError::Malformed {
        path: origin.to_string(),
        line,
        message,
    };
    let mut open: BTreeMap<&str, &Event> = BTreeMap::new();
    let mut last_time_ns = 0;
    for (position, (event, line)) in events.iter().zip(line_numbers).enumerate() {
        if event.index != position as u64 {
            return Err(malformed(
                *line,
                format!("expected index {position}, found {}", event.index),
            ));
        }
        if event.time_ns < last_time_ns {
            return Err(malformed(
                *line,
                format!(
                    "expected time_ns >= {last_time_ns} (time never goes back), found {}",
                    event.time_ns
                ),
            ));
        }
        last_time_ns = event.time_ns;
        match event.kind {
            EventType::Invoke => {
                if !event.f.is_client_op() {
                    return Err(malformed(
                        *line,
                        format!(
                            "expected a client operation for an invoke, found {:?}",
                            event.f
                        ),
                    ));
                }
                if let Some(previous) = open.insert(&event.process, event) {
                    return Err(malformed(
                        *line,
                        format!(
                            "expected process {} to finish its call at index {} before invoking again",
                            event.process, previous.index
                        ),
                    ));
                }
            }
            kind if kind.is_completion() => match open.remove(event.process.as_str()) {
                Some(invoke) if invoke.f == event.f => {}
                Some(invoke) => {
                    return Err(malformed(
                        *line,
                        format!(
                            "expected a completion of {:?} (invoked at index {}), found {:?}",
                            invoke.f, invoke.index, event.f
                        ),
                    ));
                }
                None => {
                    return Err(malformed(
                        *line,
                        format!(
                            "expected an invoke by {} before this completion",
                            event.process
                        ),
                    ));
                }
            },
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Op;

    fn event(index: u64, time_ns: u64, kind: EventType, f: Op) -> Event {
        Event {
            index,
            time_ns,
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
}
