//! The checking form of a history: every event as one fixed-size, `Copy` [`Row`] whose strings
//! are numbers into one table of distinct strings ([`Strings`]).
//!
//! An [`Event`] is about 400 bytes plus a heap allocation per string (about 540 bytes per
//! event in all), so a big history read as events spends its time allocating and faulting in
//! pages. A row allocates nothing: process names, locks, keys, errors repeat on almost every
//! line and are stored once, owner tokens and write ids once per acquisition or write, and a
//! history keeps its rows in 72 bytes each ([`Rows`]). Checkers compare [`Sym`]s (one `u32`
//! comparison) instead of strings, and turn a row back into an [`Event`] only to explain an
//! anomaly.
//!
//! Packing is lossless: [`PackedHistory::event`] gives back exactly the event that was packed,
//! so the JSONL form, replay hashes and explanations never see the difference.

mod row;
mod rows;

use std::hash::Hasher;
use std::io::BufRead;
use std::num::NonZeroU32;
use std::path::Path;

use hashbrown::HashTable;

use crate::event::{Event, EventView};
use crate::fxhash::FxHasher;
use crate::history::{History, HistoryError, parse_lines};
pub(crate) use row::Number;
pub use row::{Row, RowHead, RowRef};
pub use rows::Rows;

/// One distinct string of a packed history, by number.
///
/// Deliberately not `Ord`: numbers follow first appearance, not text, so anything whose order
/// reaches output must sort by [`Strings::text`]. Equality is exact: two syms of one table are
/// equal exactly when their texts are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sym(NonZeroU32);

impl Sym {
    /// A dense number from 0, for tables indexed by sym ([`Strings::len`] entries).
    pub fn slot(self) -> usize {
        self.0.get() as usize - 1
    }

    /// The sym's number, never 0, for packing it into a word.
    pub(crate) fn number(self) -> u32 {
        self.0.get()
    }

    /// The sym numbered `number` ([`Sym::number`]); `None` for 0.
    pub(crate) fn from_number(number: u32) -> Option<Sym> {
        NonZeroU32::new(number).map(Sym)
    }
}

/// The distinct strings of a history, each stored once in one buffer.
pub struct Strings {
    /// Every string, end to end.
    text: String,
    /// Where each string ends in `text`; sym `n` is `ends[n - 1]`, starting where `n - 1` ends.
    ends: Vec<usize>,
    /// Syms by the hash of their text, each with 32 bits of that hash ([`Hash32`]), so growing
    /// the table never reads or hashes the texts again. Eight bytes an entry: a big history
    /// holds hundreds of thousands of distinct owner tokens, and each new one is a probe at a
    /// random place in this table, so its size is what the cache misses cost.
    table: HashTable<(Hash32, Sym)>,
}

impl Default for Strings {
    fn default() -> Strings {
        Strings::new()
    }
}

impl Strings {
    /// A table holding only the empty string (the process of a row not yet read).
    pub fn new() -> Strings {
        let mut strings = Strings {
            text: String::new(),
            ends: Vec::new(),
            table: HashTable::new(),
        };
        strings.intern("");
        strings
    }

    /// Room for `strings` more distinct strings of `bytes` bytes in all, so a table whose
    /// size can be foreseen is not grown (and rehashed) step by step.
    pub(crate) fn reserve(&mut self, strings: usize, bytes: usize) {
        self.text.reserve(bytes);
        self.ends.reserve(strings);
        self.table.reserve(strings, |&(hash, _)| hash.spread());
    }

    /// The sym of `text`, adding it if it is new.
    pub fn intern(&mut self, text: &str) -> Sym {
        self.intern_as(text.as_bytes(), Some(text))
            .expect("a str is UTF-8")
    }

    /// The sym of the string whose bytes are `bytes`, adding it if it is new; `None` (nothing
    /// added) when `bytes` are not UTF-8. Bytes equal to a held string are valid, so only a
    /// new string is checked: the line reader hands over raw bytes, and most of them are
    /// strings the table already holds.
    pub(crate) fn intern_bytes(&mut self, bytes: &[u8]) -> Option<Sym> {
        self.intern_as(bytes, None)
    }

    /// The sym of `bytes`, adding them if they are new: as `text` when the caller has them as
    /// text already, else checked for UTF-8 (`None`: not text, nothing added).
    fn intern_as(&mut self, bytes: &[u8], text: Option<&str>) -> Option<Sym> {
        let hash = Hash32::of(bytes);
        let Strings {
            text: all,
            ends,
            table,
        } = self;
        let same = |&(entry_hash, sym): &(Hash32, Sym)| {
            entry_hash == hash && same_bytes(&all.as_bytes()[span_of(ends, sym)], bytes)
        };
        if let Some(&(_, sym)) = table.find(hash.spread(), same) {
            return Some(sym);
        }
        let mut aligned = Aligned([0; Aligned::BYTES]);
        let text = match text {
            Some(text) => text,
            None => aligned.checked_text(bytes)?,
        };
        let number = u32::try_from(ends.len() + 1)
            .ok()
            .and_then(NonZeroU32::new)
            .expect("a history with more than 4 billion distinct strings");
        let sym = Sym(number);
        all.push_str(text);
        ends.push(all.len());
        table.insert_unique(hash.spread(), (hash, sym), |&(entry_hash, _)| {
            entry_hash.spread()
        });
        Some(sym)
    }

    /// The sym of `text` if the table holds it (never adds).
    pub fn find(&self, text: &str) -> Option<Sym> {
        let hash = Hash32::of(text.as_bytes());
        self.table
            .find(hash.spread(), |&(entry_hash, sym)| {
                entry_hash == hash && self.text(sym) == text
            })
            .map(|&(_, sym)| sym)
    }

    /// The text of `sym`.
    pub fn text(&self, sym: Sym) -> &str {
        &self.text[span_of(&self.ends, sym)]
    }

    /// Where the text of `sym` lies in [`Strings::bytes`].
    pub(crate) fn span(&self, sym: Sym) -> std::ops::Range<usize> {
        span_of(&self.ends, sym)
    }

    /// Every string's bytes, end to end: a string once found stays where it is, so a reader
    /// can keep its place ([`Strings::span`]) and compare bytes with it.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// How many distinct strings the table holds (syms' [`Sym::slot`]s are below this).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Never true: the empty string is always held.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Heap bytes the table holds, by capacity (text, ends and the hash table's allocation):
    /// what it costs in memory, used or not.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.table.allocation_size()
    }
}

/// Byte equality, eight bytes at a time. The strings compared are short (names, 32-byte owner
/// tokens) and nearly always equal (a hash match), where a call to `memcmp` costs more than
/// the comparison itself.
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut a_words = a.chunks_exact(8);
    let mut b_words = b.chunks_exact(8);
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
    (&mut a_words)
        .zip(&mut b_words)
        .all(|(x, y)| word(x) == word(y))
        && a_words
            .remainder()
            .iter()
            .zip(b_words.remainder())
            .all(|(x, y)| x == y)
}

/// Room for a short string at a word-aligned address: the standard library checks UTF-8 a
/// word at a time only from such an address and a byte at a time before it, so a new string
/// (an owner token, mostly) is checked in under half the instructions once copied here.
#[repr(C, align(16))]
struct Aligned([u8; Aligned::BYTES]);

impl Aligned {
    const BYTES: usize = 64;

    /// `bytes` as text if they are UTF-8, checked from a copy here when they fit.
    fn checked_text<'a>(&'a mut self, bytes: &'a [u8]) -> Option<&'a str> {
        match self.0.get_mut(..bytes.len()) {
            Some(copy) => {
                copy.copy_from_slice(bytes);
                std::str::from_utf8(copy).ok()
            }
            None => std::str::from_utf8(bytes).ok(),
        }
    }
}

fn span_of(ends: &[usize], sym: Sym) -> std::ops::Range<usize> {
    let slot = sym.slot();
    let start = if slot == 0 { 0 } else { ends[slot - 1] };
    start..ends[slot]
}

/// 32 bits of a string's hash: what the string table keeps of it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Hash32(u32);

impl Hash32 {
    fn of(bytes: &[u8]) -> Hash32 {
        let mut hasher = FxHasher::default();
        hasher.write(bytes);
        // The top half of a product mixes every bit of the hash into every bit kept (the low
        // bits of FxHash are weak, and weak bits here would make buckets and tags collide).
        let mixed = hasher.finish().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Hash32((mixed >> 32) as u32)
    }

    /// The 32 bits in both halves of a word: hashbrown picks the bucket from a hash's low bits
    /// and its tag byte from the top ones, so both must vary.
    fn spread(self) -> u64 {
        u64::from(self.0) * 0x1_0000_0001
    }
}

/// A history in checking form: its rows in order and the strings they point into.
#[derive(Default)]
pub struct PackedHistory {
    /// The events, in history order.
    pub(crate) rows: Rows,
    /// The distinct strings of all rows.
    pub strings: Strings,
}

/// Its size, not its rows: a history of millions of events is never printed whole.
impl std::fmt::Debug for PackedHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedHistory")
            .field("events", &self.rows.len())
            .field("strings", &self.strings.len())
            .finish()
    }
}

impl PackedHistory {
    /// Packs every event of `history`.
    pub fn pack(history: &History) -> PackedHistory {
        let mut packed = PackedHistory {
            rows: Rows::with_capacity(history.events.len()),
            strings: Strings::new(),
        };
        for event in &history.events {
            packed.push(event);
        }
        packed
    }

    /// The events, in history order.
    pub fn rows(&self) -> &Rows {
        &self.rows
    }

    /// Reads a JSONL history file straight into checking form, validating the same
    /// invariants as [`History::read_jsonl_file`]; `path` appears in every error message.
    pub fn read_jsonl_file(path: &Path) -> Result<PackedHistory, HistoryError> {
        let origin = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|source| HistoryError::Io {
            path: origin.clone(),
            source,
        })?;
        let file_bytes = file.metadata().ok().map(|metadata| metadata.len());
        parse_lines(file, &origin, file_bytes)
    }

    /// Reads JSONL from any reader, naming `origin` in errors.
    pub fn read_jsonl(reader: impl BufRead, origin: &str) -> Result<PackedHistory, HistoryError> {
        parse_lines(reader, origin, None)
    }

    /// The event at `position`, as it was before packing.
    pub fn event(&self, position: usize) -> Event {
        self.rows.get(position).unpack(&self.strings)
    }

    /// The text of `sym`.
    pub fn text(&self, sym: Sym) -> &str {
        self.strings.text(sym)
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the history holds no event.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Appends `event` as the next row, its strings interned (each distinct one stored once).
    pub fn push(&mut self, event: &Event) {
        let row = Row::pack(event, &mut self.strings);
        self.rows.push(&row);
    }

    /// Appends `row`, whose syms point into this history's strings.
    pub(crate) fn push_row(&mut self, row: &Row) {
        self.rows.push(row);
    }

    /// The event at `position` with its strings borrowed (nothing copied).
    pub fn view(&self, position: usize) -> EventView<'_> {
        self.rows.get(position).view(&self.strings)
    }

    /// Every event in order with its strings borrowed: a walk over the whole history that
    /// builds no event.
    pub fn views(&self) -> impl ExactSizeIterator<Item = EventView<'_>> + '_ {
        self.rows.iter().map(|row| row.view(&self.strings))
    }

    /// Writes the JSONL form, one event at a time straight from its row: the same bytes
    /// [`History::write_jsonl`] writes for the unpacked history (both go through one
    /// serialiser), with no event built on the way.
    pub fn write_jsonl(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        crate::event_writer::write_lines(self.views(), out)
    }

    /// The JSONL bytes in memory (for small histories and tests; a run's are streamed to its
    /// file with [`PackedHistory::write_jsonl`]).
    pub fn to_jsonl(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.write_jsonl(&mut bytes)
            .expect("writing to a Vec cannot fail");
        bytes
    }

    /// The JSONL line of the event at `position`, without its newline.
    pub fn jsonl_line(&self, position: usize) -> String {
        let mut line = Vec::new();
        crate::event_writer::write_line(&self.view(position), &mut line);
        line.pop();
        String::from_utf8(line).expect("a line of strings and ASCII is UTF-8")
    }

    /// SHA-256 of the JSONL form, hex, hashed as it is written (the bytes are never held):
    /// equal to [`History::sha256_hex`] of the unpacked history.
    pub fn sha256_hex(&self) -> String {
        crate::history::sha256_of_written(|out| self.write_jsonl(out))
    }

    /// Heap bytes the history holds, by capacity (rows and strings): what keeping it costs in
    /// memory, whether or not every slot is used.
    pub fn heap_bytes(&self) -> usize {
        self.rows.heap_bytes() + self.strings.heap_bytes()
    }

    /// Every event, as before packing.
    pub fn unpack(&self) -> History {
        History {
            events: self
                .rows
                .iter()
                .map(|row| row.unpack(&self.strings))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventType, Op};

    #[test]
    fn a_row_is_small_and_packing_loses_nothing() {
        assert!(
            std::mem::size_of::<Row>() <= 144,
            "{}",
            std::mem::size_of::<Row>()
        );
        // The owner again as holder, "" as an error, the lowest i64 (whose bits are u64's top).
        let event = Event {
            holder: Some("0123456789abcdef0123456789abcdef".into()),
            error: Some("".into()),
            expires_ns: Some(i64::MIN),
            ..crate::event::every_column()
        };
        let bare = Event::new("w1", EventType::Invoke, Op::Read);
        let history = History {
            events: vec![event, bare],
        };
        let packed = PackedHistory::pack(&history);
        assert_eq!(packed.unpack(), history);
        // The owner token as owner and holder, "w1" as target and process, "" (held from the
        // start) as an error: each stored once.
        let rows = [packed.rows.get(0), packed.rows.get(1)];
        assert_eq!(rows[0].owner, rows[0].holder);
        assert_eq!(rows[0].target, Some(rows[1].process));
        assert_eq!(rows[0].error, packed.strings.find(""));
        assert_eq!(packed.strings.len(), 8);
        assert_eq!(rows[1].token(), None);
    }

    #[test]
    fn bytes_are_the_same_exactly_when_slices_are_equal() {
        let texts: [&[u8]; 9] = [
            b"",
            b"a",
            b"lock-1",
            b"lock-2",
            b"register",
            b"register-1",
            b"0123456789abcdef0123456789abcdef",
            b"0123456789abcdef0123456789abcdeF",
            b"1123456789abcdef0123456789abcdef",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn strings_are_stored_once_and_found_by_text() {
        let mut strings = Strings::new();
        let a = strings.intern("owner-a");
        let b = strings.intern("owner-b");
        assert_ne!(a, b);
        assert_eq!(strings.intern("owner-a"), a);
        assert_eq!(strings.find("owner-b"), Some(b));
        assert_eq!(strings.find("owner-c"), None);
        assert_eq!(strings.text(b), "owner-b");
        assert_eq!((a.slot(), b.slot(), strings.len()), (1, 2, 3));
        for n in 0..10_000 {
            strings.intern(&format!("{n:032x}"));
        }
        assert_eq!(
            strings.text(strings.find(&format!("{:032x}", 4321)).unwrap()),
            format!("{:032x}", 4321)
        );
        assert_eq!(strings.len(), 10_003);
    }
}
