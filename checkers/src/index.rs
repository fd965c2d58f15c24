//! Cheap indexes over many string keys (write ids, owner tokens): a fast non-cryptographic
//! hash map and a position list that does not allocate for the usual single entry.
//!
//! A million-event history has hundreds of thousands of write ids and owner tokens; with the
//! standard SipHash and one `Vec` per key, indexing them dominated checking time. Maps built
//! from these are only ever looked up, never iterated, so output stays deterministic.

pub(crate) use fencer_harness::fxhash::{FastMap, FastSet, FxHasher};

/// Ascending history positions under one key; the first is stored inline because almost every
/// write id and owner token occurs once.
#[derive(Clone, Debug)]
pub(crate) struct Positions {
    first: usize,
    rest: Vec<usize>,
}

impl Positions {
    pub fn new(first: usize) -> Positions {
        Positions {
            first,
            rest: Vec::new(),
        }
    }

    /// Appends `position`, which must be after every position already held.
    pub fn push(&mut self, position: usize) {
        debug_assert!(position > self.rest.last().copied().unwrap_or(self.first));
        self.rest.push(position);
    }

    /// Appends `position` to the list under `key`, creating it if needed.
    pub fn record<K: std::hash::Hash + Eq>(
        map: &mut FastMap<K, Positions>,
        key: K,
        position: usize,
    ) {
        map.entry(key)
            .and_modify(|positions| positions.push(position))
            .or_insert_with(|| Positions::new(position));
    }

    /// How many positions it holds.
    pub fn len(&self) -> usize {
        1 + self.rest.len()
    }

    /// Every position, ascending.
    pub fn all(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.first).chain(self.rest.iter().copied())
    }

    /// The last position strictly before `before`.
    pub fn last_before(&self, before: usize) -> Option<usize> {
        if self.first >= before {
            return None;
        }
        let end = self.rest.partition_point(|&position| position < before);
        Some(
            end.checked_sub(1)
                .map_or(self.first, |last| self.rest[last]),
        )
    }

    /// The first position at or after `from`.
    pub fn first_from(&self, from: usize) -> Option<usize> {
        if self.first >= from {
            return Some(self.first);
        }
        let start = self.rest.partition_point(|&position| position < from);
        self.rest.get(start).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_find_neighbours_on_both_sides() {
        let mut positions = Positions::new(3);
        positions.push(7);
        positions.push(12);
        assert_eq!(positions.last_before(3), None);
        assert_eq!(positions.last_before(4), Some(3));
        assert_eq!(positions.last_before(12), Some(7));
        assert_eq!(positions.last_before(99), Some(12));
        assert_eq!(positions.first_from(0), Some(3));
        assert_eq!(positions.first_from(4), Some(7));
        assert_eq!(positions.first_from(12), Some(12));
        assert_eq!(positions.first_from(13), None);
    }
}
