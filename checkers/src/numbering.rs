//! Dense numbers for the few distinct processes and locks of a history, so that state kept per
//! process or per lock lives in a `Vec` indexed by number instead of a hash map.
//!
//! A million-event history is mostly acquire calls, each touching per-process and per-lock
//! state in several checkers; a hash lookup per touch cost more than the checking itself.
//! Syms are dense already ([`Sym::slot`]) but number every distinct string (hundreds of
//! thousands of owner tokens), so a table by slot for a hundred processes would be almost all
//! empty. A [`Numbering`] maps slots to numbers once per check; each [`SymTable`] built on it
//! holds one entry per process (or lock). Tables are iterated, if at all, in numbering order
//! (first appearance in the history), so output stays deterministic.

use std::ops::{Index, IndexMut};

use fencer_harness::Sym;

/// Numbers from 0, in order of first [`Numbering::add`], for some of a history's syms.
pub(crate) struct Numbering {
    /// The number of each sym by [`Sym::slot`], plus one; 0 before it is numbered, so a new
    /// table is zeroed memory, which the allocator hands out untouched: of a million-event
    /// history's half a million slots, only the pages holding processes or locks are written.
    by_slot: Vec<u32>,
    count: u32,
}

impl Numbering {
    /// A numbering with no sym numbered yet, for a history of `sym_count` distinct strings.
    pub fn new(sym_count: usize) -> Numbering {
        Numbering {
            by_slot: vec![0; sym_count],
            count: 0,
        }
    }

    /// Numbers `sym` if it is not numbered yet; its number.
    pub fn add(&mut self, sym: Sym) -> usize {
        let number = &mut self.by_slot[sym.slot()];
        if *number == 0 {
            self.count += 1;
            *number = self.count;
        }
        *number as usize - 1
    }

    /// The number of `sym`, if it was added.
    pub fn number(&self, sym: Sym) -> Option<usize> {
        let number = *self.by_slot.get(sym.slot())?;
        (number as usize).checked_sub(1)
    }

    /// How many syms are numbered.
    pub fn len(&self) -> usize {
        self.count as usize
    }
}

/// A value for each sym a [`Numbering`] holds, all `initial` to begin with. Indexing by a sym
/// the numbering lacks panics.
pub(crate) struct SymTable<'n, V> {
    numbering: &'n Numbering,
    values: Vec<V>,
}

impl<'n, V: Clone> SymTable<'n, V> {
    /// A table holding `initial` for every numbered sym.
    pub fn new(numbering: &'n Numbering, initial: V) -> SymTable<'n, V> {
        SymTable {
            numbering,
            values: vec![initial; numbering.len()],
        }
    }
}

impl<V> SymTable<'_, V> {
    /// Every value, in numbering order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.values.iter_mut()
    }

    /// Every value, in numbering order.
    pub fn into_values(self) -> impl Iterator<Item = V> {
        self.values.into_iter()
    }

    /// The place of `sym`'s value; past the end for a sym never numbered (0 wraps), so
    /// indexing by it panics.
    fn position(&self, sym: Sym) -> usize {
        (self.numbering.by_slot[sym.slot()] as usize).wrapping_sub(1)
    }
}

impl<V> Index<Sym> for SymTable<'_, V> {
    type Output = V;

    fn index(&self, sym: Sym) -> &V {
        &self.values[self.position(sym)]
    }
}

impl<V> IndexMut<Sym> for SymTable<'_, V> {
    fn index_mut(&mut self, sym: Sym) -> &mut V {
        let position = self.position(sym);
        &mut self.values[position]
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::Strings;

    use super::*;

    #[test]
    fn syms_are_numbered_in_order_of_first_addition_and_others_are_absent() {
        let mut strings = Strings::new();
        let [a, b, c] = ["a", "b", "c"].map(|text| strings.intern(text));
        let mut numbering = Numbering::new(strings.len());
        for sym in [b, a, b] {
            numbering.add(sym);
        }
        assert_eq!(numbering.len(), 2);
        assert_eq!(numbering.number(b), Some(0));
        assert_eq!(numbering.number(a), Some(1));
        assert_eq!(numbering.number(c), None);

        let mut table = SymTable::new(&numbering, 0);
        table[a] += 5;
        assert_eq!(table[a], 5);
        assert_eq!(table[b], 0);
        assert_eq!(table.into_values().collect::<Vec<_>>(), vec![0, 5]);
    }
}
