//! Cheap indexes over many string keys (write ids, owner tokens): a fast non-cryptographic
//! hash map and a position list that does not allocate for the usual single entry.
//!
//! A million-event history has hundreds of thousands of write ids and owner tokens; with the
//! standard SipHash and one `Vec` per key, indexing them dominated checking time. Maps built
//! from these are only ever looked up, never iterated, so output stays deterministic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (as in rustc): one multiply per word. Keys come from a history, not an attacker who
/// could profit from collisions; a crafted history can at worst slow its own check.
#[derive(Clone, Copy, Default)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8-byte chunk")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        // The multiply leaves the low bits weak; hashbrown picks buckets from them.
        self.hash.rotate_left(26)
    }
}

/// A hash map with [`FxHasher`], for lookups only (never iterate it: order is arbitrary).
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

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
    pub fn record<'k>(map: &mut FastMap<&'k str, Positions>, key: &'k str, position: usize) {
        map.entry(key)
            .and_modify(|positions| positions.push(position))
            .or_insert_with(|| Positions::new(position));
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
    use std::hash::Hash;

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

    #[test]
    fn fx_hash_tells_similar_keys_apart() {
        let hash = |key: &str| {
            let mut hasher = FxHasher::default();
            key.hash(&mut hasher);
            hasher.finish()
        };
        assert_ne!(hash("w1-10"), hash("w1-01"));
        assert_ne!(hash("abcdefgh"), hash("abcdefgh\0"));
        assert_eq!(hash("w1-10"), hash("w1-10"));
    }
}
