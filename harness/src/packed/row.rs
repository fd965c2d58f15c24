//! One event in checking form ([`Row`]) and the part of it a history stores ([`RowHead`]).

use std::ops::{Deref, DerefMut};

use super::{Strings, Sym};
use crate::event::{Event, EventType, EventView, Op};

/// The numeric columns of an event, in declaration order: the order their values are kept in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Number {
    LocalNs,
    Token,
    TtlNs,
    HolderToken,
    ExpiresNs,
    CurrentToken,
    Seq,
    DurationNs,
    JumpNs,
    DriftPpm,
    DelayNs,
}

/// How many numeric columns an event has.
pub(super) const NUMBERS: usize = 11;

/// How many numeric values a [`RowHead`] holds: as many as a client call's rows set (local
/// time, token and TTL), which are nearly all of a history. A lock log's grant sets a fourth
/// (its expiry) and is stored wide, one row in a few hundred.
pub(super) const HEAD_NUMBERS: usize = 3;

/// For every set of numeric columns (a bit each), how many there are: the slot of a column's
/// value is the count of the columns set before it. A table, since counting bits takes a
/// dozen instructions on the x86-64 baseline, which has no `popcnt`.
static COUNT_OF: [u8; 1 << NUMBERS] = {
    let mut counts = [0u8; 1 << NUMBERS];
    let mut set = 1;
    while set < counts.len() {
        counts[set] = counts[set >> 1] + (set & 1) as u8;
        set += 1;
    }
    counts
};

/// The numeric columns by name, and the type test, for a type with `get(Number)` (the row's
/// numbers as an `Option<u64>`): written once for [`Row`] and [`RowRef`].
macro_rules! read_columns {
    () => {
        /// The acting node's local clock reading, in nanoseconds.
        pub fn local_ns(&self) -> Option<i64> {
            self.get_signed(Number::LocalNs)
        }

        /// Fencing token carried by the call, granted, or applied.
        pub fn token(&self) -> Option<u64> {
            self.get(Number::Token)
        }

        /// Lease TTL requested, in nanoseconds.
        pub fn ttl_ns(&self) -> Option<u64> {
            self.get(Number::TtlNs)
        }

        /// Lock log: the fencing token of the lease the entry affected.
        pub fn holder_token(&self) -> Option<u64> {
            self.get(Number::HolderToken)
        }

        /// Lock log: lease expiry on the lock server's clock after this entry, in nanoseconds.
        pub fn expires_ns(&self) -> Option<i64> {
            self.get_signed(Number::ExpiresNs)
        }

        /// Store: the fence the store held when it rejected a write.
        pub fn current_token(&self) -> Option<u64> {
            self.get(Number::CurrentToken)
        }

        /// Store log: position of an applied write in the store's own order, from 1.
        pub fn seq(&self) -> Option<u64> {
            self.get(Number::Seq)
        }

        /// Nemesis: how long a fault lasts, in nanoseconds.
        pub fn duration_ns(&self) -> Option<u64> {
            self.get(Number::DurationNs)
        }

        /// Nemesis: clock jump, in nanoseconds.
        pub fn jump_ns(&self) -> Option<i64> {
            self.get_signed(Number::JumpNs)
        }

        /// Nemesis: clock drift, in parts per million.
        pub fn drift_ppm(&self) -> Option<i64> {
            self.get_signed(Number::DriftPpm)
        }

        /// Nemesis: how long each reply is held by a `delay-replies` fault, in nanoseconds.
        pub fn delay_ns(&self) -> Option<u64> {
            self.get(Number::DelayNs)
        }

        /// True if this is an event of the given type and operation.
        pub fn is(&self, kind: EventType, f: Op) -> bool {
            self.kind == kind && self.f == f
        }

        fn get_signed(&self, column: Number) -> Option<i64> {
            self.get(column).map(|bits| bits as i64)
        }
    };
}

/// Every column of a [`Row`] but its index, with the first three numeric values:
/// the part a history stores for a row ([`super::Rows`]), 72 bytes. A row reads and writes
/// these fields as its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHead {
    /// True time since the start of the run, in nanoseconds.
    pub time_ns: u64,
    /// Who acted.
    pub process: Sym,
    /// Invoke, completion, nemesis action or server log entry.
    pub kind: EventType,
    /// The operation.
    pub f: Op,
    /// Which numeric columns are set, a bit per [`Number`].
    pub(super) present: u16,
    /// Lock name.
    pub lock: Option<Sym>,
    /// Store key.
    pub key: Option<Sym>,
    /// Owner token of the caller.
    pub owner: Option<Sym>,
    /// Unique id of a write, or the id a read saw.
    pub write_id: Option<Sym>,
    /// The value written or read.
    pub value: Option<Sym>,
    /// Lock log: the owner of the lease the entry affected.
    pub holder: Option<Sym>,
    /// Nemesis: the process or node a fault targets.
    pub target: Option<Sym>,
    /// Why a call failed or is unknown.
    pub error: Option<Sym>,
    /// The values of the first numeric columns set, in column order, zero after them.
    pub(super) numbers: [u64; HEAD_NUMBERS],
}

/// One event in checking form: the same columns as [`Event`], strings as [`Sym`]s, numbers
/// without `Option`'s padding (a bit per column says which are set, and the values of those
/// set are kept in column order). What a recorder builds and a checker reads. Its columns are
/// its [`RowHead`]'s fields, read and written through the row (`row.lock`); a history stores
/// only the head ([`super::Rows`]) and gives the row back by value, a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Position in the history, from 0.
    pub index: u64,
    pub(super) head: RowHead,
    /// The values of the numeric columns set after the head's, in column order, zero after;
    /// signed ones hold their two's-complement bits.
    pub(super) more_numbers: [u64; NUMBERS - HEAD_NUMBERS],
}

/// The row's columns are its head's.
impl Deref for Row {
    type Target = RowHead;

    #[inline(always)]
    fn deref(&self) -> &RowHead {
        &self.head
    }
}

impl DerefMut for Row {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut RowHead {
        &mut self.head
    }
}

impl Row {
    /// A row with only its identity set, for the reader to fill.
    pub(crate) fn blank(process: Sym) -> Row {
        Row {
            index: 0,
            head: RowHead {
                time_ns: 0,
                process,
                kind: EventType::Invoke,
                f: Op::Read,
                present: 0,
                lock: None,
                key: None,
                owner: None,
                write_id: None,
                value: None,
                holder: None,
                target: None,
                error: None,
                numbers: [0; HEAD_NUMBERS],
            },
            more_numbers: [0; NUMBERS - HEAD_NUMBERS],
        }
    }

    /// Sets a numeric column (signed values as their bits). Columns are mostly set in order,
    /// each after those before it; one set earlier moves the values of later ones up a slot.
    #[inline]
    pub(crate) fn set(&mut self, column: Number, value: u64) {
        let bit = 1 << column as u16;
        let slot = self.slot_of(bit);
        if self.present & bit == 0 {
            // Later columns' values move up a slot, the last first.
            let mut after = self.number_count();
            while after > slot {
                let moved = self.number_at(after - 1);
                self.set_number_at(after, moved);
                after -= 1;
            }
            self.present |= bit;
        }
        self.set_number_at(slot, value);
    }

    /// How many numeric columns are set.
    #[inline]
    pub(super) fn number_count(&self) -> usize {
        self.slot_of(1 << NUMBERS)
    }

    /// Where the value of the column of `bit` is (or would go): after the columns set before it.
    #[inline]
    fn slot_of(&self, bit: u16) -> usize {
        COUNT_OF[usize::from(self.present & (bit - 1))] as usize
    }

    /// The value in `slot`, the head's or one after them.
    #[inline]
    fn number_at(&self, slot: usize) -> u64 {
        match self.head.numbers.get(slot) {
            Some(&value) => value,
            None => self.more_numbers[slot - HEAD_NUMBERS],
        }
    }

    fn set_number_at(&mut self, slot: usize, value: u64) {
        match self.head.numbers.get_mut(slot) {
            Some(kept) => *kept = value,
            None => self.more_numbers[slot - HEAD_NUMBERS] = value,
        }
    }

    /// Every numeric value set, in column order (the head's, then the others).
    pub(super) fn numbers(&self) -> [u64; NUMBERS] {
        let mut numbers = [0; NUMBERS];
        let (head, more) = numbers.split_at_mut(HEAD_NUMBERS);
        head.copy_from_slice(&self.head.numbers);
        more.copy_from_slice(&self.more_numbers);
        numbers
    }

    /// Sets every numeric value: `numbers` as [`Row::numbers`] gives them.
    pub(super) fn set_numbers(&mut self, numbers: &[u64; NUMBERS]) {
        let (head, more) = numbers.split_at(HEAD_NUMBERS);
        self.head.numbers.copy_from_slice(head);
        self.more_numbers.copy_from_slice(more);
    }

    #[inline]
    fn get(&self, column: Number) -> Option<u64> {
        let bit = 1 << column as u16;
        (self.present & bit != 0).then(|| self.number_at(self.slot_of(bit)))
    }

    read_columns!();

    /// Packs `event`, adding its strings to `strings`.
    pub fn pack(event: &Event, strings: &mut Strings) -> Row {
        Row::pack_view(&event.view(), strings)
    }

    /// The row of the event `view` borrows, its strings interned into `strings`: how a
    /// backend's log entry is recorded without building an [`Event`].
    pub fn pack_view(view: &EventView<'_>, strings: &mut Strings) -> Row {
        let text = |column: Option<&str>| column.map(|text| strings.intern(text));
        // The process last, as a recorded call interns it.
        let texts = [
            view.lock,
            view.key,
            view.owner,
            view.write_id,
            view.value,
            view.holder,
            view.target,
            view.error,
        ]
        .map(text);
        let mut row = Row::blank(strings.intern(view.process));
        row.index = view.index;
        row.time_ns = view.time_ns;
        row.kind = view.kind;
        row.f = view.f;
        [
            row.head.lock,
            row.head.key,
            row.head.owner,
            row.head.write_id,
            row.head.value,
            row.head.holder,
            row.head.target,
            row.head.error,
        ] = texts;
        let signed = |value: Option<i64>| value.map(|value| value as u64);
        for (column, value) in [
            (Number::LocalNs, signed(view.local_ns)),
            (Number::Token, view.token),
            (Number::TtlNs, view.ttl_ns),
            (Number::HolderToken, view.holder_token),
            (Number::ExpiresNs, signed(view.expires_ns)),
            (Number::CurrentToken, view.current_token),
            (Number::Seq, view.seq),
            (Number::DurationNs, view.duration_ns),
            (Number::JumpNs, signed(view.jump_ns)),
            (Number::DriftPpm, signed(view.drift_ppm)),
            (Number::DelayNs, view.delay_ns),
        ] {
            if let Some(value) = value {
                row.set(column, value);
            }
        }
        row
    }

    /// The event this row packs with its strings borrowed from `strings`: what is written,
    /// and what a reader of a whole history walks without building events.
    pub fn view<'a>(&self, strings: &'a Strings) -> EventView<'a> {
        view_of(
            &self.head,
            self.index,
            self.present,
            &self.numbers(),
            strings,
        )
    }

    /// The event this row packs, its strings read from `strings`.
    pub fn unpack(&self, strings: &Strings) -> Event {
        self.view(strings).to_event()
    }
}

/// A row of a history read where it is stored: its head's columns as its own fields (through
/// `Deref`), its index and numbers by method, as a [`Row`] has them. Nothing is copied, so a
/// pass over every row of a big history reads only the columns it looks at.
#[derive(Clone, Copy, Debug)]
pub struct RowRef<'a> {
    head: &'a RowHead,
    index: u64,
    /// Which numeric columns are set, a bit per [`Number`].
    present: u16,
    /// The values set, in column order: the head's own, or a wide row's from the side table.
    numbers: &'a [u64],
}

/// The row's columns are its head's.
impl Deref for RowRef<'_> {
    type Target = RowHead;

    #[inline(always)]
    fn deref(&self) -> &RowHead {
        self.head
    }
}

impl<'a> RowRef<'a> {
    /// The row whose head is `head`, at `index`, with `present` and `numbers` as
    /// [`RowRef::numbers`] says.
    #[inline(always)]
    pub(super) fn new(
        head: &'a RowHead,
        index: u64,
        present: u16,
        numbers: &'a [u64],
    ) -> RowRef<'a> {
        RowRef {
            head,
            index,
            present,
            numbers,
        }
    }

    /// Position in the history, from 0.
    #[inline(always)]
    pub fn index(&self) -> u64 {
        self.index
    }

    #[inline]
    fn get(&self, column: Number) -> Option<u64> {
        let bit = 1 << column as u16;
        (self.present & bit != 0)
            .then(|| self.numbers[COUNT_OF[usize::from(self.present & (bit - 1))] as usize])
    }

    read_columns!();

    /// The row, copied out.
    pub fn to_row(&self) -> Row {
        let mut row = Row {
            index: self.index,
            head: *self.head,
            more_numbers: [0; NUMBERS - HEAD_NUMBERS],
        };
        row.present = self.present;
        // A row stored in place has its numbers in the head copied above; a wide one's come
        // from the side table.
        if !std::ptr::eq(self.numbers, &self.head.numbers[..]) {
            let mut numbers = [0; NUMBERS];
            numbers[..self.numbers.len()].copy_from_slice(self.numbers);
            row.set_numbers(&numbers);
        }
        row
    }

    /// The event this row packs with its strings borrowed from `strings` (see [`Row::view`]),
    /// read where it is stored: what writing a history does for every row.
    pub fn view<'s>(&self, strings: &'s Strings) -> EventView<'s> {
        view_of(self.head, self.index, self.present, self.numbers, strings)
    }

    /// The event this row packs, its strings read from `strings`.
    pub fn unpack(&self, strings: &Strings) -> Event {
        self.to_row().unpack(strings)
    }
}

/// The event of the row whose head is `head`, at `index`, with the numeric columns `present`
/// holding `numbers` (in column order), its strings borrowed from `strings`.
fn view_of<'a>(
    head: &RowHead,
    index: u64,
    present: u16,
    numbers: &[u64],
    strings: &'a Strings,
) -> EventView<'a> {
    let text = |column: Option<Sym>| column.map(|sym| strings.text(sym));
    let numbers = columns_of(present, numbers);
    let signed = |column: Number| numbers[column as usize].map(|bits| bits as i64);
    EventView {
        index,
        time_ns: head.time_ns,
        process: strings.text(head.process),
        kind: head.kind,
        f: head.f,
        local_ns: signed(Number::LocalNs),
        lock: text(head.lock),
        key: text(head.key),
        owner: text(head.owner),
        token: numbers[Number::Token as usize],
        write_id: text(head.write_id),
        value: text(head.value),
        ttl_ns: numbers[Number::TtlNs as usize],
        holder: text(head.holder),
        holder_token: numbers[Number::HolderToken as usize],
        expires_ns: signed(Number::ExpiresNs),
        current_token: numbers[Number::CurrentToken as usize],
        seq: numbers[Number::Seq as usize],
        target: text(head.target),
        duration_ns: numbers[Number::DurationNs as usize],
        jump_ns: signed(Number::JumpNs),
        drift_ppm: signed(Number::DriftPpm),
        delay_ns: numbers[Number::DelayNs as usize],
        error: text(head.error),
    }
}

/// Every numeric column by [`Number`], `None` where unset: the columns `present` names hold
/// `numbers` in column order, in one walk over the values.
fn columns_of(present: u16, numbers: &[u64]) -> [Option<u64>; NUMBERS] {
    let mut columns = [None; NUMBERS];
    let mut bits = present;
    for &value in numbers {
        if bits == 0 {
            break;
        }
        columns[bits.trailing_zeros() as usize] = Some(value);
        bits &= bits - 1;
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns set in any order, some twice, read back as set, and the row equals the one
    /// with the same columns set in column order (the values are kept in column order).
    #[test]
    fn numbers_set_in_any_order_read_back_as_set() {
        let columns = [
            (Number::LocalNs, Row::local_ns as fn(&Row) -> Option<i64>),
            (Number::ExpiresNs, Row::expires_ns),
            (Number::JumpNs, Row::jump_ns),
            (Number::DriftPpm, Row::drift_ppm),
        ];
        let unsigned = [
            (Number::Token, Row::token as fn(&Row) -> Option<u64>),
            (Number::TtlNs, Row::ttl_ns),
            (Number::HolderToken, Row::holder_token),
            (Number::CurrentToken, Row::current_token),
            (Number::Seq, Row::seq),
            (Number::DurationNs, Row::duration_ns),
            (Number::DelayNs, Row::delay_ns),
        ];
        let every: Vec<Number> = columns
            .iter()
            .map(|&(column, _)| column)
            .chain(unsigned.iter().map(|&(column, _)| column))
            .collect();
        let mut strings = Strings::new();
        let process = strings.intern("w0");
        // Each subset of columns, picked by the bits of `pick`, set forwards and backwards.
        for pick in 0u32..(1 << NUMBERS) {
            let chosen: Vec<Number> = every
                .iter()
                .copied()
                .filter(|&column| pick & (1 << column as u32) != 0)
                .collect();
            let value = |column: Number| (column as u64 + 1) * 0x0101_0101_0101_0101;
            let mut in_order = Row::blank(process);
            for &column in &chosen {
                in_order.set(column, value(column));
            }
            let mut backwards = Row::blank(process);
            for &column in chosen.iter().rev() {
                backwards.set(column, 1);
                backwards.set(column, value(column));
            }
            assert_eq!(backwards, in_order, "{chosen:?}");
            for (column, read) in columns {
                let expected = chosen.contains(&column).then(|| value(column) as i64);
                assert_eq!(read(&in_order), expected, "{column:?} of {chosen:?}");
            }
            for (column, read) in unsigned {
                let expected = chosen.contains(&column).then(|| value(column));
                assert_eq!(read(&in_order), expected, "{column:?} of {chosen:?}");
            }
        }
    }
}
