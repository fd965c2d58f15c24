//! How a packed history keeps its rows: 72 bytes each instead of a [`Row`]'s 144.
//!
//! A big history is read into memory whole before it is checked, and every page of rows the
//! reader fills costs the kernel a page fault: at a million events that is most of the check's
//! time outside the parser. Two parts of a [`Row`] are nearly always redundant:
//!
//! - its eleven numeric columns take 88 bytes, yet a client call's rows, nearly all of a
//!   history, set at most three of them (local time, token, TTL), and a row keeps the values
//!   set first, so a stored row keeps only the first [`HEAD_NUMBERS`] ([`RowHead`]);
//! - its index is its position in a history read or recorded in order, so it is not stored.
//!
//! A row that does not fit (more numbers, as a lock log's grant or a line written elsewhere
//! may hold, or an index other than its position, as a test's hand-made history may) is
//! *wide*: its index and all its numbers go to a side table, and its head says where. So every
//! row is stored and given back exactly; only the rare wide row pays for the second lookup.

use super::Row;
use super::row::{HEAD_NUMBERS, NUMBERS, RowHead, RowRef};

/// In a stored head's `present`: the row is wide, and its head's first number is its place in
/// [`Rows::wide`].
const WIDE: u16 = 1 << 15;

/// The rows of a packed history, in order, each read in place ([`RowRef`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rows {
    /// Each row's head; a wide one's numbers say where the rest is.
    heads: Vec<RowHead>,
    /// The index and numbers of every wide row, in the order they were stored.
    wide: Vec<WideColumns>,
}

/// What a wide row keeps outside its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WideColumns {
    index: u64,
    numbers: [u64; NUMBERS],
}

impl Rows {
    /// No rows, with room for `rows` before the vector grows.
    pub(crate) fn with_capacity(rows: usize) -> Rows {
        Rows {
            heads: Vec::with_capacity(rows),
            wide: Vec::new(),
        }
    }

    /// Room for `rows` more rows (the vector does not grow until they are stored).
    pub(crate) fn reserve(&mut self, rows: usize) {
        self.heads.reserve(rows);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The row at `position`, as it was stored.
    ///
    /// # Panics
    /// When `position` is not below [`Rows::len`], as indexing a slice does.
    #[inline(always)]
    pub fn get(&self, position: usize) -> RowRef<'_> {
        self.read(position, &self.heads[position])
    }

    /// The first row, if any.
    pub fn first(&self) -> Option<RowRef<'_>> {
        (!self.is_empty()).then(|| self.get(0))
    }

    /// The last row, if any.
    pub fn last(&self) -> Option<RowRef<'_>> {
        self.len().checked_sub(1).map(|position| self.get(position))
    }

    /// Every row in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = RowRef<'_>> + ExactSizeIterator + Clone {
        self.heads
            .iter()
            .enumerate()
            .map(|(position, head)| self.read(position, head))
    }

    /// Appends `row`: its head alone when its index is its position and its numbers fit
    /// there, else a wide head and the rest in the side table.
    #[inline]
    pub(crate) fn push(&mut self, row: &Row) {
        if row.number_count() > HEAD_NUMBERS || row.index != self.heads.len() as u64 {
            return self.push_wide(row);
        }
        self.heads.push(row.head);
    }

    #[cold]
    #[inline(never)]
    fn push_wide(&mut self, row: &Row) {
        let mut head = row.head;
        head.present |= WIDE;
        head.numbers = [0; HEAD_NUMBERS];
        head.numbers[0] = self.wide.len() as u64;
        self.wide.push(WideColumns {
            index: row.index,
            numbers: row.numbers(),
        });
        self.heads.push(head);
    }

    /// The row whose head is `head`, at `position`.
    #[inline(always)]
    fn read<'a>(&'a self, position: usize, head: &'a RowHead) -> RowRef<'a> {
        if head.present & WIDE != 0 {
            return self.read_wide(head);
        }
        RowRef::new(head, position as u64, head.present, &head.numbers)
    }

    #[cold]
    #[inline(never)]
    fn read_wide<'a>(&'a self, head: &'a RowHead) -> RowRef<'a> {
        let columns = &self.wide[head.numbers[0] as usize];
        RowRef::new(head, columns.index, head.present & !WIDE, &columns.numbers)
    }

    /// Heap bytes the rows hold, by capacity.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<RowHead>()
            + self.wide.capacity() * std::mem::size_of::<WideColumns>()
    }
}

/// Rows in the order given, each at its position (a row whose index differs is stored wide).
impl FromIterator<Row> for Rows {
    fn from_iter<I: IntoIterator<Item = Row>>(rows: I) -> Rows {
        let mut stored = Rows::default();
        for row in rows {
            stored.push(&row);
        }
        stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::packed::row::NUMBERS;
    use crate::packed::{Number, Strings};

    #[test]
    fn a_stored_row_takes_72_bytes() {
        assert_eq!(std::mem::size_of::<RowHead>(), 72);
    }

    /// Every count of numeric columns, each with values that use all 64 bits, and indexes
    /// that are and are not the row's position: each row is given back exactly, and only
    /// those that do not fit in place go to the side table.
    #[test]
    fn rows_of_any_width_are_given_back_exactly() {
        let mut strings = Strings::new();
        let every = Row::pack(&crate::event::every_column(), &mut strings);
        let columns = [
            Number::LocalNs,
            Number::Token,
            Number::TtlNs,
            Number::HolderToken,
            Number::ExpiresNs,
            Number::CurrentToken,
            Number::Seq,
            Number::DurationNs,
            Number::JumpNs,
            Number::DriftPpm,
            Number::DelayNs,
        ];
        let mut rows = Rows::default();
        let mut expected = Vec::new();
        for count in 0..=NUMBERS {
            for skip in 0..NUMBERS {
                for (index_offset, value) in [(0, u64::MAX), (3, 1 << 63), (0, 0)] {
                    let position = expected.len() as u64;
                    let mut row = Row {
                        index: position + index_offset,
                        ..Row::blank(every.process)
                    };
                    // `count` columns, starting after `skip` of them, wrapping around.
                    for n in 0..count {
                        let column = columns[(skip + n) % NUMBERS];
                        row.set(column, value ^ (n as u64));
                    }
                    row.lock = every.lock;
                    row.error = every.error;
                    rows.push(&row);
                    expected.push(row);
                }
            }
        }
        let back: Vec<Row> = rows.iter().map(|row| row.to_row()).collect();
        assert_eq!(back, expected);
        for (position, row) in expected.iter().enumerate() {
            assert_eq!(rows.get(position).to_row(), *row);
        }
        let wide = expected
            .iter()
            .enumerate()
            .filter(|(position, row)| {
                row.number_count() > HEAD_NUMBERS || row.index != *position as u64
            })
            .count();
        assert_eq!(rows.wide.len(), wide);
        assert!(wide > 0 && wide < expected.len());
        assert_eq!(
            rows.last().map(|row| row.to_row()),
            expected.last().copied()
        );
        assert_eq!(
            rows.first().map(|row| row.to_row()),
            expected.first().copied()
        );
    }

    /// A history from elsewhere whose lines set every numeric column packs and unpacks to
    /// the same events.
    #[test]
    fn events_with_every_column_set_pack_and_unpack_alike() {
        let events: Vec<Event> = (0..5)
            .map(|index| Event {
                index,
                ..crate::event::every_column()
            })
            .collect();
        let history = crate::history::History { events };
        let packed = crate::packed::PackedHistory::pack(&history);
        assert_eq!(packed.rows().wide.len(), 5);
        assert_eq!(packed.unpack(), history);
    }
}
