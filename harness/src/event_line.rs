//! A fast reader for event lines in the plain form fencer itself writes: compact JSON, no
//! escapes, no `null`s, no whitespace inside the object.
//!
//! serde_json's generic path builds an [`Event`](crate::event::Event), allocating every string
//! of every line. This reader walks the bytes once, matches field names and enum names
//! directly, and fills a [`Row`] (strings interned, nothing allocated per line). It also finds
//! where the line ends (the newline after its closing brace), so the file needs no separate
//! newline search, and checks UTF-8 only where a line can hold anything but ASCII: every byte
//! outside a string value must be one of the plain form's ASCII bytes, and a string value is
//! either one the table already holds (so valid) or checked once as it is added.
//!
//! It answers `None` for anything outside that plain form (escapes, whitespace, `null`, unknown
//! or repeated fields, exotic numbers, bytes that are not UTF-8); the caller then parses the
//! line with serde, which accepts every JSON spelling of an event and words the error when the
//! line is not one. So the rule here is: never accept a line serde would reject, and never read
//! one differently.

#[cfg(test)]
use crate::event::Event;
use crate::event::{EventType, Op};
use crate::packed::{Number, Row, Strings, Sym};

/// Reads the event line at the start of `text` into `row`, which must be blank, adding its
/// strings to `strings`. Trailing JSON whitespace other than a newline may follow the object,
/// then the newline. Answers the line's length, newline included (all of `text` when no
/// newline follows: the last line of a file), or `None` when the line is not in the plain form
/// and must go to serde (`row` is then partly filled: discard it).
///
/// `text` must end where a line ends (after a newline, or at the end of the input): a line
/// cut short could otherwise be taken whole.
pub(crate) fn parse_plain(
    text: &[u8],
    row: &mut Row,
    strings: &mut Strings,
    recent: &mut LineMemory,
) -> Option<usize> {
    let mut cursor = Cursor { text, at: 0 };
    // Lines of one kind list the same fields in the same order, and fencer writes them in
    // declaration order: the next label is looked for first where the last line went on
    // from the same field, then from the field after it.
    let (mut seen, mut previous);
    // Every line fencer writes starts with the five required fields in declaration order:
    // read as one run, their labels matched where they must be, not looked for.
    let more = if cursor.required_run(row, &mut Interner { strings, recent }) {
        (seen, previous) = (REQUIRED, F as usize);
        if cursor.eat(b'}') {
            false
        } else if cursor.eat(b',') {
            true
        } else {
            return None;
        }
    } else {
        // Any other order is read field by field from the start.
        cursor.at = 0;
        (seen, previous) = (0, FIELDS.len());
        if !cursor.eat(b'{') {
            return None;
        }
        !cursor.eat(b'}')
    };
    if more {
        loop {
            let bit = cursor.field_label(usize::from(recent.follows[previous]))?;
            recent.follows[previous] = bit as u8;
            cursor.field(bit, row, &mut Interner { strings, recent })?;
            if seen & (1 << bit) != 0 {
                return None;
            }
            seen |= 1 << bit;
            previous = bit as usize;
            if cursor.eat(b',') {
                continue;
            }
            if cursor.eat(b'}') {
                break;
            }
            return None;
        }
    }
    if seen & REQUIRED != REQUIRED {
        return None;
    }
    // The object read holds no newline (a string stops at any control character), so the
    // first newline after it ends the line.
    for (at, byte) in text.iter().enumerate().skip(cursor.at) {
        match byte {
            b' ' | b'\t' | b'\r' => {}
            b'\n' => return Some(at + 1),
            _ => return None,
        }
    }
    Some(text.len())
}

/// Bits of the required fields in the `seen` mask (the others follow, in declaration order).
const INDEX: u32 = 0;
const TIME_NS: u32 = 1;
const PROCESS: u32 = 2;
const TYPE: u32 = 3;
const F: u32 = 4;
/// Every required field's bit.
const REQUIRED: u32 = (1 << INDEX) | (1 << TIME_NS) | (1 << PROCESS) | (1 << TYPE) | (1 << F);

/// The field names by bit: the five required ones, then the optional columns in
/// declaration order.
const FIELDS: [&[u8]; 24] = [
    b"index",
    b"time_ns",
    b"process",
    b"type",
    b"f",
    b"local_ns",
    b"lock",
    b"key",
    b"owner",
    b"token",
    b"write_id",
    b"value",
    b"ttl_ns",
    b"holder",
    b"holder_token",
    b"expires_ns",
    b"current_token",
    b"seq",
    b"target",
    b"duration_ns",
    b"jump_ns",
    b"drift_ppm",
    b"delay_ns",
    b"error",
];

/// What a field holds, and where it goes in a row.
#[derive(Clone, Copy)]
enum Value {
    Index,
    TimeNs,
    Process,
    Type,
    F,
    /// A string column ([`text_column`]).
    Text,
    Unsigned(Number),
    Signed(Number),
}

/// The value of each of [`FIELDS`], by bit.
const VALUES: [Value; 24] = [
    Value::Index,
    Value::TimeNs,
    Value::Process,
    Value::Type,
    Value::F,
    Value::Signed(Number::LocalNs),
    Value::Text,
    Value::Text,
    Value::Text,
    Value::Unsigned(Number::Token),
    Value::Text,
    Value::Text,
    Value::Unsigned(Number::TtlNs),
    Value::Text,
    Value::Unsigned(Number::HolderToken),
    Value::Signed(Number::ExpiresNs),
    Value::Unsigned(Number::CurrentToken),
    Value::Unsigned(Number::Seq),
    Value::Text,
    Value::Unsigned(Number::DurationNs),
    Value::Signed(Number::JumpNs),
    Value::Signed(Number::DriftPpm),
    Value::Unsigned(Number::DelayNs),
    Value::Text,
];

/// The string column of `row` that the field of `bit` fills (a [`Value::Text`] field's).
fn text_column(row: &mut Row, bit: u32) -> &mut Option<Sym> {
    match bit {
        6 => &mut row.lock,
        7 => &mut row.key,
        8 => &mut row.owner,
        10 => &mut row.write_id,
        11 => &mut row.value,
        13 => &mut row.holder,
        18 => &mut row.target,
        23 => &mut row.error,
        _ => unreachable!("bit {bit} is no string column"),
    }
}

/// The first eight bytes of `name` as a little-endian word, zero past its end: how labels,
/// names and a string's first bytes are compared with a line a word at a time.
const fn key(name: &[u8]) -> u64 {
    let mut key = 0;
    let mut at = 0;
    while at < name.len() && at < 8 {
        key |= (name[at] as u64) << (8 * at);
        at += 1;
    }
    key
}

/// A field's label as a line spells it (`"lock":`), as two words and the masks of the bytes it
/// takes in each: at most sixteen bytes, so a label is matched with two comparisons.
#[derive(Clone, Copy)]
struct Label {
    first: u64,
    first_mask: u64,
    second: u64,
    second_mask: u64,
    len: usize,
}

impl Label {
    const fn of(name: &[u8]) -> Label {
        let len = name.len() + 3;
        assert!(len <= 16, "a label fits two words");
        let mut bytes = [0u8; 16];
        bytes[0] = b'"';
        let mut at = 0;
        while at < name.len() {
            bytes[1 + at] = name[at];
            at += 1;
        }
        bytes[len - 2] = b'"';
        bytes[len - 1] = b':';
        let (first, second) = bytes.split_at(8);
        Label {
            first: key(first),
            first_mask: low_bytes(if len < 8 { len } else { 8 }),
            second: key(second),
            second_mask: low_bytes(len.saturating_sub(8)),
            len,
        }
    }
}

/// The label of each of [`FIELDS`], by bit.
const LABELS: [Label; 24] = {
    let mut labels = [Label::of(b""); 24];
    let mut bit = 0;
    while bit < FIELDS.len() {
        labels[bit] = Label::of(FIELDS[bit]);
        bit += 1;
    }
    labels
};

/// The first eight bytes of `bytes` as a little-endian word, zero past its end.
fn word_at(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(word) => u64::from_le_bytes(*word),
        None => key(bytes),
    }
}

struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let next = self.text.get(self.at) == Some(&byte);
        self.at += usize::from(next);
        next
    }

    /// Reads `{` and the required fields in declaration order, each label where it must be
    /// (`{"index":…,"time_ns":…,"process":…,"type":…,"f":…`), into `row`; `false`, with the
    /// cursor anywhere, when the line does not start that way.
    #[inline(always)]
    fn required_run(&mut self, row: &mut Row, interner: &mut Interner<'_>) -> bool {
        (|| {
            self.eat(b'{').then_some(())?;
            self.label(INDEX)?;
            row.index = self.unsigned()?;
            self.eat(b',').then_some(())?;
            self.label(TIME_NS)?;
            row.time_ns = self.unsigned()?;
            self.eat(b',').then_some(())?;
            self.label(PROCESS)?;
            row.process = self.symbol(interner)?;
            self.eat(b',').then_some(())?;
            self.label(TYPE)?;
            row.kind = self.name_of(&TYPE_NAMES, event_type)?;
            self.eat(b',').then_some(())?;
            self.label(F)?;
            row.f = self.name_of(&CLIENT_OP_NAMES, op)?;
            Some(())
        })()
        .is_some()
    }

    /// Reads the label of the field of `bit` if it comes next.
    #[inline(always)]
    fn label(&mut self, bit: u32) -> Option<()> {
        let label = &LABELS[bit as usize];
        let (first, second) = self.label_words();
        let spelled =
            first & label.first_mask == label.first && second & label.second_mask == label.second;
        self.at += if spelled { label.len } else { 0 };
        spelled.then_some(())
    }

    /// The sixteen bytes a label may take at the cursor, as two words; near the end of the
    /// input the line's last bytes, zero past them (no label holds a zero byte, so none
    /// matches into the padding).
    #[inline(always)]
    fn label_words(&self) -> (u64, u64) {
        let rest = &self.text[self.at..];
        let padded;
        let words = match rest.first_chunk::<16>() {
            Some(words) => words,
            None => {
                let mut bytes = [0u8; 16];
                bytes[..rest.len()].copy_from_slice(rest);
                padded = bytes;
                &padded
            }
        };
        let (first, second) = words.split_at(8);
        (
            u64::from_le_bytes(first.try_into().expect("8 of 16 bytes")),
            u64::from_le_bytes(second.try_into().expect("8 of 16 bytes")),
        )
    }

    /// Reads a field's label (its quoted name and the colon) and answers its bit, looking
    /// first among the fields from bit `next` on (none when `next` is past the last); `None`
    /// for a label that is not a field's in the plain form. Labels are compared whole with
    /// the line, two words at a time.
    #[inline(always)]
    fn field_label(&mut self, next: usize) -> Option<u32> {
        let (first, second) = self.label_words();
        let spelled = |label: &Label| {
            first & label.first_mask == label.first && second & label.second_mask == label.second
        };
        // The field expected next nearly always comes: one comparison, no search.
        if let Some(label) = LABELS.get(next)
            && spelled(label)
        {
            self.at += label.len;
            return Some(next as u32);
        }
        let bit = match LABELS[next.min(LABELS.len())..].iter().position(spelled) {
            Some(at) => next + at,
            None => LABELS.iter().position(spelled)?,
        };
        self.at += LABELS[bit].len;
        Some(bit as u32)
    }

    /// Reads the value of the field of `bit` into `row`; `None` for a value outside the plain
    /// form. Each kind of value is read at one place (strings, unsigned and signed numbers
    /// each by one inlined reader), whichever column it goes to.
    fn field(&mut self, bit: u32, row: &mut Row, interner: &mut Interner<'_>) -> Option<()> {
        match VALUES[bit as usize] {
            Value::Index => row.index = self.unsigned()?,
            Value::TimeNs => row.time_ns = self.unsigned()?,
            Value::Process => row.process = self.symbol(interner)?,
            Value::Type => row.kind = self.name_of(&TYPE_NAMES, event_type)?,
            Value::F => row.f = self.name_of(&CLIENT_OP_NAMES, op)?,
            Value::Text => {
                let sym = self.symbol(interner)?;
                *text_column(row, bit) = Some(sym);
            }
            Value::Unsigned(column) => row.set(column, self.unsigned()?),
            Value::Signed(column) => row.set(column, self.signed()? as u64),
        }
        Some(())
    }

    /// Reads a string value and answers its sym. A string read lately is recognised by
    /// comparing the bytes in place with its text, with no scan for the closing quote and no
    /// hashing: process names, locks, keys and errors repeat on nearly every line, and an
    /// owner token or write id on the few lines after its first.
    #[inline(always)]
    fn symbol(&mut self, interner: &mut Interner<'_>) -> Option<Sym> {
        if !self.eat(b'"') {
            return None;
        }
        let rest = &self.text[self.at..];
        let slot = LineMemory::slot_of(rest);
        let seen = interner.recent.slots[slot];
        // The held text has no quote, backslash or control character (it was cached only
        // after such a scan), so bytes equal to it followed by a quote are exactly that string.
        // A short one (a process, a lock, an error) is compared with its quote as one word.
        let hit = match rest.first_chunk::<8>() {
            Some(word) if seen.len < 8 => {
                u64::from_le_bytes(*word) & (u64::MAX >> (8 * (7 - seen.len))) == seen.quoted
            }
            _ => {
                rest.get(seen.len) == Some(&b'"')
                    && starts_with_held(rest, interner.strings.bytes(), seen.start, seen.len)
            }
        };
        if hit {
            self.at += seen.len + 1;
            return Some(seen.sym);
        }
        let (sym, len) = interner.intern_new(rest, slot)?;
        self.at += len + 1;
        Some(sym)
    }

    /// Reads a string value that names one of a fixed set: the common names are matched as
    /// one word (`names`, each with its closing quote), any other is read whole and looked up
    /// by `lookup`.
    #[inline(always)]
    fn name_of<T: Copy>(
        &mut self,
        names: &[(u64, usize, T)],
        lookup: fn(&[u8]) -> Option<T>,
    ) -> Option<T> {
        if !self.eat(b'"') {
            return None;
        }
        let word = word_at(&self.text[self.at..]);
        for &(key, len, value) in names {
            if word & low_bytes(len) == key {
                self.at += len;
                return Some(value);
            }
        }
        self.at -= 1;
        lookup(self.string()?)
    }

    /// The bytes of a string without escapes or control characters (serde rejects raw control
    /// characters; escapes are left to it), not yet checked for UTF-8.
    fn string(&mut self) -> Option<&'a [u8]> {
        if !self.eat(b'"') {
            return None;
        }
        let rest = &self.text[self.at..];
        let len = quoted_len(rest)?;
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// Decimal digits with no sign, fraction, exponent or leading zero, within `u64` (what
    /// serde reads as an integer; anything else goes to serde).
    // Inlined into each numeric field's arm: a call's frame costs a fifth of reading a number.
    #[inline(always)]
    fn unsigned(&mut self) -> Option<u64> {
        let rest = &self.text[self.at..];
        // Fewer than sixteen digits with a byte after them (a timestamp has ten to thirteen,
        // most numbers fewer than eight): both words' digits at once, no loop.
        let Some(words) = rest.first_chunk::<16>() else {
            return self.unsigned_slowly();
        };
        let (high_word, low_word) = words.split_at(8);
        let (high, high_count) = leading_digits(u64::from_le_bytes(high_word.try_into().ok()?));
        let (value, len) = if high_count < 8 {
            (high, high_count)
        } else {
            let (low, low_count) = leading_digits(u64::from_le_bytes(low_word.try_into().ok()?));
            if low_count == 8 {
                return self.unsigned_slowly();
            }
            (high * POWERS_OF_TEN[low_count] + low, 8 + low_count)
        };
        if len == 0 || (len > 1 && words[0] == b'0') {
            return None;
        }
        self.at += len;
        Some(value)
    }

    /// As [`Cursor::unsigned`], a digit at a time: for sixteen digits or more, and the last
    /// bytes of the input.
    #[cold]
    #[inline(never)]
    fn unsigned_slowly(&mut self) -> Option<u64> {
        let rest = &self.text[self.at..];
        let mut value = 0u64;
        let mut len = 0;
        while let Some(&byte) = rest.get(len) {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
            len += 1;
        }
        if len == 0 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        self.at += len;
        Some(value)
    }

    /// An optional minus sign, then as [`Cursor::unsigned`], within `i64`.
    #[inline(always)]
    fn signed(&mut self) -> Option<i64> {
        let negative = self.eat(b'-');
        let magnitude = i64::try_from(self.unsigned()?).ok()?;
        Some(if negative { -magnitude } else { magnitude })
    }
}

/// The length of a string's content when its closing quote is the first byte of `rest` that
/// may not stand in a plain string; `None` when an escape or control character comes first.
fn quoted_len(rest: &[u8]) -> Option<usize> {
    let len = first_stop(rest)?;
    (rest[len] == b'"').then_some(len)
}

/// Whether `rest` starts with the `len` bytes of `held` from `start`, compared a word at a
/// time: the last word overlapping the one before it rather than a byte loop for the rest,
/// and a string shorter than a word as one masked word wherever eight bytes can be read.
fn starts_with_held(rest: &[u8], held: &[u8], start: usize, len: usize) -> bool {
    let word = |bytes: &[u8], at: usize| {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("an 8-byte range"))
    };
    if len >= 8 {
        let (a, b) = (&rest[..len], &held[start..start + len]);
        let mut at = 0;
        while at + 8 < len {
            if word(a, at) != word(b, at) {
                return false;
            }
            at += 8;
        }
        return word(a, len - 8) == word(b, len - 8);
    }
    if rest.len() >= 8 && held.len() >= start + 8 {
        return (word(rest, 0) ^ word(held, start)) & low_bytes(len) == 0;
    }
    rest[..len] == held[start..start + len]
}

/// A mask of the lowest `count` bytes of a word (`count` at most 8).
const fn low_bytes(count: usize) -> u64 {
    if count >= 8 {
        u64::MAX
    } else {
        (1 << (8 * count)) - 1
    }
}

/// A name with its closing quote as a word, the length that takes, and what it names: names of
/// up to seven bytes, compared with a line in one step.
const fn quoted_name<T: Copy>(name: &[u8], value: T) -> (u64, usize, T) {
    assert!(name.len() < 8, "a name and its quote fit a word");
    (
        key(name) | (b'"' as u64) << (8 * name.len()),
        name.len() + 1,
        value,
    )
}

/// Every event type, as [`Cursor::name_of`] matches them.
const TYPE_NAMES: [(u64, usize, EventType); 6] = [
    quoted_name(b"invoke", EventType::Invoke),
    quoted_name(b"ok", EventType::Ok),
    quoted_name(b"fail", EventType::Fail),
    quoted_name(b"info", EventType::Info),
    quoted_name(b"nemesis", EventType::Nemesis),
    quoted_name(b"log", EventType::Log),
];

/// The client operations, nearly every line's `f`, as [`Cursor::name_of`] matches them; the
/// nemesis's operations are looked up by name.
const CLIENT_OP_NAMES: [(u64, usize, Op); 5] = [
    quoted_name(b"acquire", Op::Acquire),
    quoted_name(b"renew", Op::Renew),
    quoted_name(b"release", Op::Release),
    quoted_name(b"write", Op::Write),
    quoted_name(b"read", Op::Read),
];

/// What a reader remembers of the lines it read: the strings it met lately, each where a
/// hash of its first bytes puts it (a newer one replaces an older one there), a cache in
/// front of one [`Strings`] table, which it must only be used with, since it holds that
/// table's syms and offsets; and which field followed each field last.
pub(crate) struct LineMemory {
    slots: Box<[Recent]>,
    /// By field bit, the bit of the field that came next on the last line that had it; the
    /// last entry is the first field of the last line. Only where a label is looked for
    /// first: a wrong guess costs time, never a wrong reading.
    follows: [u8; FIELDS.len() + 1],
}

/// A string met lately: where its text lies in the table, and its sym.
#[derive(Clone, Copy)]
struct Recent {
    start: usize,
    len: usize,
    sym: Sym,
    /// A string shorter than a word: its bytes and the closing quote, as a word (zero past
    /// them); 0 for a longer one.
    quoted: u64,
}

impl Recent {
    /// The string `sym` of `len` bytes, whose text starts at `start` in `strings`.
    fn new(strings: &Strings, sym: Sym, len: usize) -> Recent {
        let start = strings.span(sym).start;
        let quoted = if len < 8 {
            key(&strings.bytes()[start..start + len]) | u64::from(b'"') << (8 * len)
        } else {
            0
        };
        Recent {
            start,
            len,
            sym,
            quoted,
        }
    }
}

impl LineMemory {
    /// Slots in the cache, as a power of two: room for the process names, locks and keys of
    /// a big run, and for the owner tokens and write ids of the calls under way.
    const SLOT_BITS: u32 = 10;

    /// An empty cache for `strings` (every slot holds the empty string, so a miss is simply a
    /// comparison that fails).
    pub(crate) fn new(strings: &Strings) -> LineMemory {
        let empty = strings.find("").expect("a table holds the empty string");
        let blank = Recent::new(strings, empty, 0);
        // Before any line, declaration order: each field after the one before it.
        let mut follows = [0u8; FIELDS.len() + 1];
        for (bit, next) in follows.iter_mut().enumerate().take(FIELDS.len()) {
            *next = bit as u8 + 1;
        }
        LineMemory {
            slots: vec![blank; 1 << LineMemory::SLOT_BITS].into_boxed_slice(),
            follows,
        }
    }

    /// The slot of the string whose content starts `rest`, from its first four bytes (bytes
    /// past a short string's end are the line's next bytes, the same for the same field).
    fn slot_of(rest: &[u8]) -> usize {
        let head = match rest.first_chunk::<4>() {
            Some(head) => u32::from_le_bytes(*head),
            None => key(rest) as u32,
        };
        (head.wrapping_mul(0x9e37_79b1) >> (32 - LineMemory::SLOT_BITS)) as usize
    }
}

/// Where a line's strings go: the history's table, and the cache in front of it.
struct Interner<'a> {
    strings: &'a mut Strings,
    recent: &'a mut LineMemory,
}

impl Interner<'_> {
    /// The sym and length of the string whose content starts `rest`, one the cache did not
    /// hold: interned into the table and put in the cache's `slot`. Kept out of line, so the
    /// cache's hits, most strings of a line, run without the table's code around them.
    #[cold]
    #[inline(never)]
    fn intern_new(&mut self, rest: &[u8], slot: usize) -> Option<(Sym, usize)> {
        let len = quoted_len(rest)?;
        let sym = self.strings.intern_bytes(&rest[..len])?;
        self.recent.slots[slot] = Recent::new(self.strings, sym, len);
        Some((sym, len))
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
pub(crate) fn first_stop(bytes: &[u8]) -> Option<usize> {
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

/// The number written by eight digit values (0 to 9, the first in the lowest byte).
fn eight_digit_values(values: u64) -> u64 {
    let pairs = (values.wrapping_mul(10 * 256 + 1) >> 8) & 0x00ff_00ff_00ff_00ff;
    let fours = (pairs.wrapping_mul(100 * 65_536 + 1) >> 16) & 0x0000_ffff_0000_ffff;
    fours.wrapping_mul(10_000 * (1 << 32) + 1) >> 32
}

/// `10ⁿ` for every count of digits [`leading_digits`] can find.
const POWERS_OF_TEN: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The number the digits at the start of `word` (its lowest bytes) write, and how many there
/// are: a number's last few digits, read without a loop.
fn leading_digits(word: u64) -> (u64, usize) {
    let values = word ^ (ONES * u64::from(b'0'));
    // A byte is a digit when its value is at most 9: adding 0x76 sets its top bit otherwise.
    // A carry out of a flagged byte only reaches later bytes, so the first flag is exact.
    let others = (values.wrapping_add(ONES * 0x76) | values) & TOPS;
    let count = (others.trailing_zeros() / 8) as usize;
    if count == 0 {
        return (0, 0);
    }
    // Moving the digits up to the top bytes leaves zeros before them: leading zeros.
    let digits = values << (8 * (8 - count) as u32);
    (eight_digit_values(digits), count)
}

/// The event type named `name`.
fn event_type(name: &[u8]) -> Option<EventType> {
    EventType::ALL
        .into_iter()
        .find(|kind| kind.name().as_bytes() == name)
}

/// The op named `name`, looked for in [`Op::ALL`] order: the client operations, which are
/// nearly every line, come first.
fn op(name: &[u8]) -> Option<Op> {
    Op::ALL.into_iter().find(|f| f.name().as_bytes() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the fast path reads from `line`; `None` when it leaves the line to serde, which is
    /// exactly the reader's decision ([`parse_plain`] is its only test of a line). A line it
    /// takes is taken whole.
    fn fast(line: &[u8]) -> Option<Event> {
        let mut strings = Strings::new();
        let mut row = Row::blank(strings.intern(""));
        let mut recent = LineMemory::new(&strings);
        let len = parse_plain(line, &mut row, &mut strings, &mut recent)?;
        assert_eq!(len, line.len(), "{line:?}");
        Some(row.unpack(&strings))
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
            format!("{{{}}}", base.replace("read", "reader")),
            format!("{{{}}}", base.replace("invoke", "ok\\u0000")),
            format!("{{{}}}", base.replace("invoke", "okay")),
            format!("{{{}}}", base.replace("\"f\":", "\"f\" :")),
            format!("{{{}}}", base.replace("\"f\":", "\"ff\":")),
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

    /// A line is read up to its newline and no further, whatever follows it, and one whose
    /// object is followed by anything but blanks and the newline is left to serde.
    #[test]
    fn a_line_ends_at_the_newline_after_its_object() {
        let line = r#"{"index":0,"time_ns":1,"process":"w0","type":"invoke","f":"read"}"#;
        for (after, taken) in [
            ("\n", Some(line.len() + 1)),
            (" \t\r\n", Some(line.len() + 4)),
            (" x\n", None),
            ("{}\n", None),
            ("\x0c\n", None),
        ] {
            for next in ["", "{\"index\":1}\n", "not json\n", "\n"] {
                let text = format!("{line}{after}{next}");
                let mut strings = Strings::new();
                let mut row = Row::blank(strings.intern(""));
                let mut recent = LineMemory::new(&strings);
                assert_eq!(
                    parse_plain(text.as_bytes(), &mut row, &mut strings, &mut recent),
                    taken,
                    "{text:?}"
                );
            }
        }
        // The end of the input ends the last line, which may lack its newline.
        let mut strings = Strings::new();
        let mut row = Row::blank(strings.intern(""));
        let mut recent = LineMemory::new(&strings);
        let taken = parse_plain(line.as_bytes(), &mut row, &mut strings, &mut recent);
        assert_eq!(taken, Some(line.len()));
    }

    /// Non-ASCII text is read in place; bytes that are not UTF-8 are left to serde (which
    /// rejects them) both in a string the table holds a prefix of and in a new one, and the
    /// table is left as it was.
    #[test]
    fn strings_are_taken_as_utf8_or_left_to_serde() {
        let line = r#"{"index":0,"time_ns":1,"process":"w0","type":"invoke","f":"write","value":"ünï 😀"}"#;
        assert_eq!(
            fast(line.as_bytes()).unwrap().value.as_deref(),
            Some("ünï 😀")
        );
        let base = r#"{"index":0,"time_ns":1,"process":"w0","type":"invoke","f":"read","lock":""#;
        for bad in [
            &[0xff][..],
            &[0xc3],
            &[b'a', 0xc3, 0x28],
            &[0xed, 0xa0, 0x80],
        ] {
            let mut line = base.as_bytes().to_vec();
            line.extend_from_slice(bad);
            line.extend_from_slice(b"\"}");
            let mut strings = Strings::new();
            strings.intern("a");
            let mut row = Row::blank(strings.intern(""));
            let held = strings.len();
            let mut recent = LineMemory::new(&strings);
            assert_eq!(
                parse_plain(&line, &mut row, &mut strings, &mut recent),
                None,
                "{bad:?}"
            );
            assert_eq!(strings.len(), held + 1, "only \"w0\" was added");
            assert!(serde_json::from_slice::<Event>(&line).is_err());
        }
    }

    /// Each field is found by its label alone (no two share one), and a name that merely
    /// starts like a field's, or is one cut short, is no field.
    #[test]
    fn field_names_are_told_apart_by_their_labels() {
        for (bit, name) in FIELDS.iter().enumerate() {
            let text = [b"\"", *name, b"\":1"].concat();
            for next in [0, bit, bit + 1, FIELDS.len()] {
                let mut cursor = Cursor { text: &text, at: 0 };
                assert_eq!(cursor.field_label(next), Some(bit as u32), "{name:?}");
                assert_eq!(cursor.at, name.len() + 3);
            }
            for wrong in [&name[..name.len() - 1], &[*name, b"x"].concat()[..]] {
                let text = [b"\"", wrong, b"\":1"].concat();
                let mut cursor = Cursor { text: &text, at: 0 };
                assert_eq!(cursor.field_label(0), None, "{wrong:?}");
            }
            // Unclosed at the end of the input, or followed by a zero byte before the quote.
            for text in [[b"\"", *name].concat(), [b"\"", *name, b"\0\":1"].concat()] {
                let mut cursor = Cursor { text: &text, at: 0 };
                assert_eq!(cursor.field_label(0), None, "{text:?}");
            }
        }
    }

    /// A label is found whole, name, quotes and colon, from any starting bit and with the
    /// line's next bytes after it; a name cut short, one longer, a space before the colon or
    /// another byte in its place is no label, near the end of the input (where the line's last
    /// bytes are padded to two words) as elsewhere.
    #[test]
    fn field_labels_are_read_whole_or_not_at_all() {
        for (bit, name) in FIELDS.iter().enumerate() {
            for tail in [&b"1,\"index\":2}\n"[..], b"\"w0\"}", b"1"] {
                let text = [&b"\""[..], *name, b"\":", tail].concat();
                for next in [0, bit, bit + 1, FIELDS.len()] {
                    let mut cursor = Cursor { text: &text, at: 0 };
                    assert_eq!(cursor.field_label(next), Some(bit as u32), "{text:?}");
                    assert_eq!(cursor.at, name.len() + 3);
                }
                let short = &name[..name.len() - 1];
                let long = [*name, b"x"].concat();
                for wrong in [
                    [&b"\""[..], short, b"\":", tail].concat(),
                    [&b"\""[..], &long, b"\":", tail].concat(),
                    [&b"\""[..], *name, b"\" :", tail].concat(),
                    [&b"\""[..], *name, b"\",", tail].concat(),
                    [&b"\""[..], *name, b":", tail].concat(),
                ] {
                    let mut cursor = Cursor {
                        text: &wrong,
                        at: 0,
                    };
                    assert_eq!(cursor.field_label(0), None, "{wrong:?}");
                }
            }
        }
    }

    /// Strings read through the cache get the syms a table built from the events gets, in
    /// the same order: repeated ones, ones that are a prefix of another or share one's first
    /// bytes, ones crowding one slot, and the empty string.
    #[test]
    fn strings_read_through_the_cache_are_the_table_s_own() {
        let mut texts: Vec<String> = ["lock-1", "lock-10", "lock-1", "", "w1", "w10", "w1"]
            .map(String::from)
            .to_vec();
        // Sharing the first four bytes, so one slot, and differing after.
        texts.extend((0..40).map(|n| format!("0123{n}")));
        texts.extend((0..40).rev().map(|n| format!("0123{n}")));
        texts.extend((0..3000).map(|n| format!("{:032x}", n * 7919 % 1000)));
        let events: Vec<Event> = texts
            .iter()
            .enumerate()
            .map(|(index, text)| Event {
                index: index as u64,
                lock: Some(text.clone()),
                owner: Some(texts[texts.len() - 1 - index].clone()),
                ..Event::new(text.as_str(), EventType::Invoke, Op::Read)
            })
            .collect();
        let mut strings = Strings::new();
        let mut recent = LineMemory::new(&strings);
        let mut packed = Strings::new();
        for event in &events {
            let line = serde_json::to_vec(event).unwrap();
            let mut row = Row::blank(strings.intern(""));
            let taken = parse_plain(&line, &mut row, &mut strings, &mut recent);
            assert_eq!(taken, Some(line.len()), "{event:?}");
            assert_eq!(row, Row::pack(event, &mut packed), "{event:?}");
        }
        assert_eq!(strings.len(), packed.len());
    }

    /// Held bytes are found at the start of a line exactly when they are there, at every
    /// length across the word steps, with a difference at any position, and where fewer than
    /// eight bytes remain in the line or after the held text.
    #[test]
    fn held_bytes_are_found_exactly_where_they_start_a_line() {
        for len in 0..40usize {
            let text: Vec<u8> = (0..len as u8).map(|n| b'a' + n % 26).collect();
            for held_after in [0, 1, 8] {
                let mut held = b"xx".to_vec();
                held.extend_from_slice(&text);
                held.extend(std::iter::repeat_n(b'z', held_after));
                for rest_after in [1, 8] {
                    let mut rest = text.clone();
                    rest.extend(std::iter::repeat_n(b'"', rest_after));
                    assert!(starts_with_held(&rest, &held, 2, len), "{len} {held_after}");
                    for at in 0..len {
                        let mut wrong = rest.clone();
                        wrong[at] ^= 0x20;
                        assert!(!starts_with_held(&wrong, &held, 2, len), "{len} {at}");
                    }
                }
            }
        }
    }

    /// Lines in the plain form with their fields in other orders, one after another through
    /// one memory (so each line's order is guessed from the line before and the guess is
    /// sometimes wrong), are read as serde reads them.
    #[test]
    fn fields_in_any_order_are_read_whatever_order_the_line_before_had() {
        let fields = [
            r#""index":0"#,
            r#""time_ns":1"#,
            r#""process":"w0""#,
            r#""type":"invoke""#,
            r#""f":"acquire""#,
            r#""lock":"L""#,
            r#""owner":"0123456789abcdef0123456789abcdef""#,
            r#""ttl_ns":10"#,
            r#""error":"busy""#,
        ];
        let mut strings = Strings::new();
        let mut recent = LineMemory::new(&strings);
        for turn in 0..40usize {
            // Rotated and, every other line, reversed.
            let mut order: Vec<&str> = fields.to_vec();
            order.rotate_left(turn % fields.len());
            if turn % 2 == 1 {
                order.reverse();
            }
            let line = format!("{{{}}}", order.join(","));
            let mut row = Row::blank(strings.intern(""));
            let taken = parse_plain(line.as_bytes(), &mut row, &mut strings, &mut recent);
            assert_eq!(taken, Some(line.len()), "{line}");
            let slow: Event = serde_json::from_str(&line).unwrap();
            assert_eq!(row.unpack(&strings), slow, "{line}");
        }
    }

    /// Lines that begin as fencer writes them and then part from it: each is read as serde
    /// reads it, or left to serde when serde would refuse it (a required field again).
    #[test]
    fn a_line_that_leaves_the_required_run_is_read_field_by_field_or_left_to_serde() {
        let head = r#"{"index":0,"time_ns":1,"process":"w0""#;
        for (rest, taken) in [
            (r#","f":"acquire","type":"invoke","lock":"L"}"#, true),
            (r#","type":"invoke","lock":"L","f":"acquire"}"#, true),
            (r#","type":"invoke","f":"acquire","index":0}"#, false),
            (r#","type":"invoke","f":"acquire","f":"acquire"}"#, false),
            (r#","type":"invoke"}"#, false),
            (r#","type":"invoke","f":"acquire"}"#, true),
        ] {
            let line = format!("{head}{rest}");
            match fast(line.as_bytes()) {
                Some(event) => {
                    assert!(taken, "{line}");
                    let slow: Event = serde_json::from_str(&line).unwrap();
                    assert_eq!(event, slow, "{line}");
                }
                None => assert!(!taken, "{line}"),
            }
        }
    }

    #[test]
    fn leading_digits_read_as_their_number_and_stop_at_the_first_other_byte() {
        for text in [
            *b"7,\"local",
            *b"12345678",
            *b"1234567}",
            *b"00012\"ab",
            *b",1234567",
            *b"98\x00\x00\x00\x00\x00\x00",
            *b"5:999999",
            *b"3/999999",
            *b"4\xb0999999",
            *b"6\xff999999",
        ] {
            let count = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
            let number = std::str::from_utf8(&text[..count])
                .unwrap()
                .parse()
                .unwrap_or(0);
            let read = leading_digits(u64::from_le_bytes(text));
            assert_eq!(
                read,
                (number, count),
                "{:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }

    /// Numbers of every length up to the limits read as serde reads them, across the
    /// eight-digit steps, and one past the limits is left to serde.
    #[test]
    fn numbers_of_every_length_read_as_serde_reads_them() {
        let base = r#""index":0,"time_ns":1,"process":"w0","type":"invoke","f":"read""#;
        let mut numbers: Vec<u64> = (0..20).map(|digits| 10u64.pow(digits)).collect();
        numbers.extend((1..20).map(|digits| 10u64.pow(digits) - 1));
        numbers.extend([
            u64::MAX,
            1_234_567_890_123_456_789,
            12_345_678_901_234_567_890,
        ]);
        for number in numbers {
            for column in ["token", "local_ns"] {
                // Last on its line (fewer than sixteen bytes left: read a digit at a time), and
                // followed by another field (read two words at a time, up to sixteen digits).
                for after in ["", ",\"error\":\"a long enough error\""] {
                    let line = format!("{{{base},\"{column}\":{number}{after}}}");
                    let slow = serde_json::from_str::<Event>(&line).ok();
                    assert_eq!(fast(line.as_bytes()), slow, "{line}");
                }
            }
        }
    }
}
