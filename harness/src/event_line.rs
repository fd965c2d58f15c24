//! A fast reader for event lines in the plain form fencer itself writes: compact JSON, no
//! escapes, no `null`s, no whitespace inside the object.
//!
//! serde_json's generic path builds an [`Event`](crate::event::Event), allocating every string
//! of every line. This reader walks the bytes once, matches field names and enum names
//! directly, and fills a [`Row`] (strings interned, nothing allocated per line).
//!
//! It answers `None` for anything outside that plain form (escapes, whitespace, `null`, unknown
//! or repeated fields, exotic numbers); the caller then parses the line with serde, which
//! accepts every JSON spelling of an event and words the error when the line is not one. So the
//! rule here is: never accept a line serde would reject, and never read one differently.

#[cfg(test)]
use crate::event::Event;
use crate::event::{EventType, Op};
use crate::packed::{Number, Row, Strings, Sym};

/// Reads one event line (trailing JSON whitespace, including the newline, allowed) into
/// `row`, which must be blank, adding its strings to `strings`; false when the line is not in
/// the plain form and must go to serde (`row` is then partly filled: discard it).
pub(crate) fn parse_plain(line: &[u8], row: &mut Row, strings: &mut Strings) -> bool {
    read(line, row, strings).is_some()
}

fn read(line: &[u8], row: &mut Row, strings: &mut Strings) -> Option<()> {
    // One UTF-8 check for the whole line (serde rejects invalid UTF-8 anywhere), so strings
    // are cut from it without checking each again.
    let line = std::str::from_utf8(line).ok()?;
    let mut cursor = Cursor { text: line, at: 0 };
    if !cursor.eat(b'{') {
        return None;
    }
    let mut seen = 0u32;
    if !cursor.eat(b'}') {
        loop {
            let field = cursor.string()?;
            if !cursor.eat(b':') {
                return None;
            }
            let bit = cursor.field(field, row, strings)?;
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
            if cursor.eat(b',') {
                continue;
            }
            if cursor.eat(b'}') {
                break;
            }
            return None;
        }
    }
    let required = (1 << INDEX) | (1 << TIME_NS) | (1 << PROCESS) | (1 << TYPE) | (1 << F);
    let trailing_is_blank = line.as_bytes()[cursor.at..]
        .iter()
        .all(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'));
    (seen & required == required && trailing_is_blank).then_some(())
}

/// Bits of the required fields in the `seen` mask (the others follow, in declaration order).
const INDEX: u32 = 0;
const TIME_NS: u32 = 1;
const PROCESS: u32 = 2;
const TYPE: u32 = 3;
const F: u32 = 4;

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.as_bytes().get(self.at) == Some(&byte);
        self.at += usize::from(next);
        next
    }

    /// Reads the value of `field` into `row`; returns the field's bit, or `None` for an
    /// unknown field or a value outside the plain form.
    fn field(&mut self, field: &str, row: &mut Row, strings: &mut Strings) -> Option<u32> {
        let bit = match field {
            "index" => {
                row.index = self.unsigned()?;
                INDEX
            }
            "time_ns" => {
                row.time_ns = self.unsigned()?;
                TIME_NS
            }
            "process" => {
                row.process = strings.intern(self.string()?);
                PROCESS
            }
            "type" => {
                row.kind = event_type(self.string()?)?;
                TYPE
            }
            "f" => {
                row.f = op(self.string()?)?;
                F
            }
            "local_ns" => return self.signed_into(row, Number::LocalNs, 5),
            "lock" => return self.string_into(&mut row.lock, strings, 6),
            "key" => return self.string_into(&mut row.key, strings, 7),
            "owner" => return self.string_into(&mut row.owner, strings, 8),
            "token" => return self.unsigned_into(row, Number::Token, 9),
            "write_id" => return self.string_into(&mut row.write_id, strings, 10),
            "value" => return self.string_into(&mut row.value, strings, 11),
            "ttl_ns" => return self.unsigned_into(row, Number::TtlNs, 12),
            "holder" => return self.string_into(&mut row.holder, strings, 13),
            "holder_token" => return self.unsigned_into(row, Number::HolderToken, 14),
            "expires_ns" => return self.signed_into(row, Number::ExpiresNs, 15),
            "current_token" => return self.unsigned_into(row, Number::CurrentToken, 16),
            "seq" => return self.unsigned_into(row, Number::Seq, 17),
            "target" => return self.string_into(&mut row.target, strings, 18),
            "duration_ns" => return self.unsigned_into(row, Number::DurationNs, 19),
            "jump_ns" => return self.signed_into(row, Number::JumpNs, 20),
            "drift_ppm" => return self.signed_into(row, Number::DriftPpm, 21),
            "delay_ns" => return self.unsigned_into(row, Number::DelayNs, 22),
            "error" => return self.string_into(&mut row.error, strings, 23),
            _ => return None,
        };
        Some(bit)
    }

    fn string_into(
        &mut self,
        column: &mut Option<Sym>,
        strings: &mut Strings,
        bit: u32,
    ) -> Option<u32> {
        *column = Some(strings.intern(self.string()?));
        Some(bit)
    }

    fn unsigned_into(&mut self, row: &mut Row, column: Number, bit: u32) -> Option<u32> {
        row.set(column, self.unsigned()?);
        Some(bit)
    }

    fn signed_into(&mut self, row: &mut Row, column: Number, bit: u32) -> Option<u32> {
        row.set(column, self.signed()? as u64);
        Some(bit)
    }

    /// A string without escapes or control characters (serde rejects raw control characters;
    /// escapes are left to it).
    fn string(&mut self) -> Option<&'a str> {
        if !self.eat(b'"') {
            return None;
        }
        let rest = &self.text[self.at..];
        let len = first_stop(rest.as_bytes())?;
        if rest.as_bytes()[len] != b'"' {
            return None;
        }
        self.at += len + 1;
        // `len` is at an ASCII quote, so on a character boundary.
        Some(&rest[..len])
    }

    /// Decimal digits with no sign, fraction, exponent or leading zero, within `u64` (what
    /// serde reads as an integer; anything else goes to serde).
    fn unsigned(&mut self) -> Option<u64> {
        let rest = &self.text.as_bytes()[self.at..];
        let len = rest
            .iter()
            .position(|byte| !byte.is_ascii_digit())
            .unwrap_or(rest.len());
        if len == 0 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        let mut value = 0u64;
        for digit in &rest[..len] {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        self.at += len;
        Some(value)
    }

    /// An optional minus sign, then as [`Cursor::unsigned`], within `i64`.
    fn signed(&mut self) -> Option<i64> {
        let negative = self.eat(b'-');
        let magnitude = i64::try_from(self.unsigned()?).ok()?;
        Some(if negative { -magnitude } else { magnitude })
    }
}

/// `0x01` in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The top bit of every byte of a word.
const TOPS: u64 = 0x8080_8080_8080_8080;

/// Where a string's content stops: the first `"`, `\\` or control character in `bytes`.
///
/// Strings are most of a line's bytes, so they are tested eight at a time (the classic "has a
/// zero byte" trick: the lowest flagged byte is exact, later ones may be false alarms).
fn first_stop(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("8-byte chunk"));
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        let flags = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (word.wrapping_sub(ONES * 0x20) & !word);
        let flags = flags & TOPS;
        if flags != 0 {
            return Some(offset + flags.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    let tail = words.remainder();
    let at = tail
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)?;
    Some(offset + at)
}

fn event_type(name: &str) -> Option<EventType> {
    Some(match name {
        "invoke" => EventType::Invoke,
        "ok" => EventType::Ok,
        "fail" => EventType::Fail,
        "info" => EventType::Info,
        "nemesis" => EventType::Nemesis,
        "log" => EventType::Log,
        _ => return None,
    })
}

fn op(name: &str) -> Option<Op> {
    Some(match name {
        "acquire" => Op::Acquire,
        "renew" => Op::Renew,
        "release" => Op::Release,
        "write" => Op::Write,
        "read" => Op::Read,
        "pause" => Op::Pause,
        "resume" => Op::Resume,
        "clock-jump" => Op::ClockJump,
        "clock-drift" => Op::ClockDrift,
        "drop-renew" => Op::DropRenew,
        "heal-renew" => Op::HealRenew,
        "delay-write" => Op::DelayWrite,
        "heal-write" => Op::HealWrite,
        "restart" => Op::Restart,
        "recover" => Op::Recover,
        "drop-acquire-reply" => Op::DropAcquireReply,
        "heal-acquire-reply" => Op::HealAcquireReply,
        "drop-write-reply" => Op::DropWriteReply,
        "heal-write-reply" => Op::HealWriteReply,
        "server-pause" => Op::ServerPause,
        "server-resume" => Op::ServerResume,
        "partition" => Op::Partition,
        "heal-partition" => Op::HealPartition,
        "delay-replies" => Op::DelayReplies,
        "heal-delay-replies" => Op::HealDelayReplies,
        "drop-replies" => Op::DropReplies,
        "heal-drop-replies" => Op::HealDropReplies,
        "cut" => Op::Cut,
        "delay-acquire" => Op::DelayAcquire,
        "heal-delay-acquire" => Op::HealDelayAcquire,
        "delay-renew" => Op::DelayRenew,
        "heal-delay-renew" => Op::HealDelayRenew,
        "delay-release" => Op::DelayRelease,
        "heal-delay-release" => Op::HealDelayRelease,
        "lease-edge" => Op::LeaseEdge,
        "heal-lease-edge" => Op::HealLeaseEdge,
        "net-partition" => Op::NetPartition,
        "heal-net-partition" => Op::HealNetPartition,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the fast path reads from `line`; `None` when it leaves the line to serde, which is
    /// exactly the reader's decision ([`parse_plain`] is its only test of a line).
    fn fast(line: &[u8]) -> Option<Event> {
        let mut strings = Strings::new();
        let mut row = Row::blank(strings.intern(""));
        parse_plain(line, &mut row, &mut strings).then(|| row.unpack(&strings))
    }

    /// Every op and type, with no optional column and with all of them, written as fencer
    /// writes events: each line is taken by the fast path, never left to serde, and read as
    /// serde reads it. A variant missing from the reader's tables fails here, since the tests
    /// of [`Op::ALL`] and [`EventType::ALL`] keep those lists whole.
    #[test]
    fn every_op_and_type_fencer_writes_is_read_by_the_fast_path_as_serde_reads_it() {
        for kind in EventType::ALL {
            for f in Op::ALL {
                let bare = Event::new("w0", kind, f);
                let full = Event {
                    kind,
                    f,
                    ..crate::event::every_column()
                };
                for event in [bare, full] {
                    let mut line = serde_json::to_vec(&event).unwrap();
                    assert_eq!(fast(&line).as_ref(), Some(&event), "{event:?}");
                    line.extend_from_slice(b"\r\n");
                    assert_eq!(fast(&line), Some(event));
                }
            }
        }
    }

    #[test]
    fn a_string_stops_at_the_first_quote_backslash_or_control_character() {
        let slow = |bytes: &[u8]| {
            bytes
                .iter()
                .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        };
        let stops = [b'"', b'\\', 0x00, 0x1f, b'\n'];
        let passes = [b' ', b'!', b'#', b'[', b']', 0x7f, 0x80, 0xc3, 0xff];
        for len in 0..20 {
            for at in 0..=len {
                for &stop in &stops {
                    for &pass in &passes {
                        let mut bytes = vec![pass; len];
                        if at < len {
                            bytes[at] = stop;
                            // A second stop later must not hide the first.
                            if at + 1 < len {
                                bytes[at + 1] = b'"';
                            }
                        }
                        assert_eq!(first_stop(&bytes), slow(&bytes), "{bytes:?}");
                    }
                }
            }
        }
    }

    /// Lines outside the plain form (some valid events, some not) are all left to serde, which
    /// accepts or words an error; this reader must not decide them.
    #[test]
    fn anything_else_is_left_to_serde() {
        let base = r#""index":0,"time_ns":1,"process":"w0","type":"invoke","f":"read""#;
        let lines = [
            format!("{{{base},\"lock\":null}}"),
            format!("{{{base},\"lock\":\"L\\u0041\"}}"),
            format!("{{{base},\"lock\":\"a\tb\"}}"),
            format!("{{{base},\"unknown\":1}}"),
            format!("{{{base},\"token\":1,\"token\":2}}"),
            format!("{{{base},\"token\":-1}}"),
            format!("{{{base},\"token\":01}}"),
            format!("{{{base},\"token\":1.0}}"),
            format!("{{{base},\"token\":1e3}}"),
            format!("{{{base},\"token\":18446744073709551616}}"),
            format!("{{{base},\"local_ns\":9223372036854775808}}"),
            format!("{{{base},\"local_ns\":-9223372036854775808}}"),
            format!("{{ {base}}}"),
            format!("{{{base}}}x"),
            format!("{{{base}}}\x0c"),
            format!("{{{base},}}"),
            format!("{{{base}"),
            r#"{"index":0,"process":"w0","type":"invoke","f":"read"}"#.to_string(),
            format!("{{{}}}", base.replace("read", "Read")),
            "{}".to_string(),
            String::new(),
        ];
        for line in lines {
            assert_eq!(fast(line.as_bytes()), None, "{line}");
        }
        let mut invalid_utf8 = format!("{{{base},\"lock\":\"").into_bytes();
        invalid_utf8.push(0xff);
        invalid_utf8.extend_from_slice(b"\"}");
        assert_eq!(fast(&invalid_utf8), None);
        assert!(serde_json::from_slice::<Event>(&invalid_utf8).is_err());
    }
}
