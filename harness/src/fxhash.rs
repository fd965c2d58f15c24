//! A fast non-cryptographic hash for the many short string keys of a history (write ids, owner
//! tokens), shared by the history reader's string interner and the checkers' indexes.
//!
//! The standard SipHash defends against keys crafted to collide, at a price paid on every
//! lookup; a history's keys need no such defence (see [`FxHasher`]).
//! Maps built on it are only ever looked up, never iterated, so output stays deterministic.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (as in rustc): one multiply per word. Keys come from a history, not an attacker who
/// could profit from collisions; a crafted history can at worst slow its own check.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
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
            // The tail as a little-endian word, zero-padded (built bytewise: a copy into a
            // padded array is a `memcpy` call for a few bytes).
            self.add(
                rest.iter()
                    .rev()
                    .fold(0, |word, &byte| word << 8 | u64::from(byte)),
            );
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    // Interned strings (`Sym`) are `u32`s: without this, every key of the checkers' maps would
    // take the byte-slice path above.
    fn write_u32(&mut self, n: u32) {
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
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A hash set with [`FxHasher`], for membership only (never iterate it: order is arbitrary).
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use std::hash::{Hash, Hasher};

    use super::*;

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

    /// A tail shorter than a word hashes as that word zero-padded, little-endian.
    #[test]
    fn a_tail_hashes_as_its_zero_padded_word() {
        for len in 1..8 {
            let bytes: Vec<u8> = (1..=len).map(|byte| byte * 17).collect();
            let mut padded = [0u8; 8];
            padded[..bytes.len()].copy_from_slice(&bytes);
            let mut as_bytes = FxHasher::default();
            as_bytes.write(&bytes);
            let mut as_word = FxHasher::default();
            as_word.write_u64(u64::from_le_bytes(padded));
            assert_eq!(as_bytes.finish(), as_word.finish(), "{len}");
        }
    }

    #[test]
    fn a_u32_hashes_as_one_word() {
        let mut as_u32 = FxHasher::default();
        as_u32.write_u32(7);
        let mut as_word = FxHasher::default();
        as_word.write_u64(7);
        assert_eq!(as_u32.finish(), as_word.finish());
    }
}
