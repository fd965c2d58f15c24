//! Which seeds a gate runs: a range (`0..10000`, open-ended `100..` with `--time`) and a shard
//! of it (`--shard K/N`), listed in ascending order so every job count and every machine agrees
//! on what "the first failing seed" is.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `A..B` (B excluded), `A..=B`, `A..` (open: needs a time budget) or a single seed `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRange {
    /// First seed.
    pub start: u64,
    /// One past the last seed; `None` for an open range.
    pub end: Option<u64>,
}

impl FromStr for SeedRange {
    type Err = BadSeeds;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let number = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| BadSeeds::NotASeed {
                range: text.to_string(),
                part: part.to_string(),
            })
        };
        let Some((start, rest)) = text.split_once("..") else {
            let seed = number(text)?;
            return Ok(SeedRange {
                start: seed,
                end: Some(seed.saturating_add(1)),
            });
        };
        let start = number(start)?;
        let end = if rest.is_empty() {
            None
        } else if let Some(last) = rest.strip_prefix('=') {
            Some(
                number(last)?
                    .checked_add(1)
                    .ok_or_else(|| BadSeeds::TooLarge(text.to_string()))?,
            )
        } else {
            Some(number(rest)?)
        };
        if end.is_some_and(|end| end <= start) {
            return Err(BadSeeds::Empty(text.to_string()));
        }
        Ok(SeedRange { start, end })
    }
}

/// Why text is not a seed range (`--seeds`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadSeeds {
    /// A part that is not a seed.
    #[error("seed range `{range}`: `{part}` is not a seed (expected e.g. 0..10000)")]
    NotASeed {
        /// The range as given.
        range: String,
        /// The part that is no number.
        part: String,
    },
    /// `A..=B` with B the largest seed: its end cannot be told.
    #[error("seed range `{0}`: the last seed is too large")]
    TooLarge(String),
    /// A range that holds no seed.
    #[error("seed range `{0}` is empty: expected A..B with A < B")]
    Empty(String),
}

impl fmt::Display for SeedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.end {
            Some(end) => write!(f, "{}..{end}", self.start),
            None => write!(f, "{}..", self.start),
        }
    }
}

/// Shard `index` (1-based, as CI matrices count) of `count`: the seeds with
/// `seed % count == index - 1`. Interleaving keeps every shard's seeds spread over the whole
/// range, so shards finish at about the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based shard number.
    pub index: u64,
    /// Number of shards.
    pub count: u64,
}

impl Shard {
    /// The whole seed space.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Whether `seed` belongs to this shard.
    pub fn contains(self, seed: u64) -> bool {
        seed % self.count == self.index - 1
    }
}

impl FromStr for Shard {
    type Err = BadShard;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let expected = || BadShard(text.to_string());
        let (index, count) = text.split_once('/').ok_or_else(expected)?;
        let index: u64 = index.trim().parse().map_err(|_| expected())?;
        let count: u64 = count.trim().parse().map_err(|_| expected())?;
        if index == 0 || count == 0 || index > count {
            return Err(expected());
        }
        Ok(Shard { index, count })
    }
}

/// Text that is not a shard (`--shard`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shard `{0}`: expected K/N with 1 <= K <= N, e.g. 1/4")]
pub struct BadShard(pub String);

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The seeds of a range in one shard, ascending, addressable by position so parallel jobs can
/// take "the next one" from a shared counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSeeds {
    first: u64,
    step: u64,
    count: u64,
}

impl ShardSeeds {
    /// The seeds of `range` that belong to `shard`; an open range is capped at `u64::MAX`.
    pub fn new(range: SeedRange, shard: Shard) -> ShardSeeds {
        let end = range.end.unwrap_or(u64::MAX);
        let offset = (shard.index - 1 + shard.count - range.start % shard.count) % shard.count;
        let first = range.start.saturating_add(offset);
        let count = if first >= end {
            0
        } else {
            (end - first).div_ceil(shard.count)
        };
        ShardSeeds {
            first,
            step: shard.count,
            count,
        }
    }

    /// How many seeds (saturating at `usize::MAX` for open ranges).
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The seed at `position`.
    pub fn nth(&self, position: usize) -> Option<u64> {
        let position = position as u64;
        (position < self.count).then(|| self.first + position * self.step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_in_every_form_and_refuse_empty_ones() {
        let range = |text: &str| text.parse::<SeedRange>();
        assert_eq!(
            range("0..10"),
            Ok(SeedRange {
                start: 0,
                end: Some(10)
            })
        );
        assert_eq!(
            range("3..=5"),
            Ok(SeedRange {
                start: 3,
                end: Some(6)
            })
        );
        assert_eq!(
            range("7.."),
            Ok(SeedRange {
                start: 7,
                end: None
            })
        );
        assert_eq!(
            range("9"),
            Ok(SeedRange {
                start: 9,
                end: Some(10)
            })
        );
        assert_eq!(range("5..5"), Err(BadSeeds::Empty("5..5".into())));
        assert!(
            range("a..5")
                .unwrap_err()
                .to_string()
                .contains("`a` is not a seed")
        );
        assert_eq!(range("0..10").unwrap().to_string(), "0..10");
    }

    #[test]
    fn shards_partition_the_seed_space() {
        for text in ["0..100", "7..53", "5..6", "10..=12"] {
            let range: SeedRange = text.parse().unwrap();
            let end = range.end.unwrap();
            for count in 1..=4u64 {
                let mut union = Vec::new();
                for index in 1..=count {
                    let seeds = ShardSeeds::new(range, Shard { index, count });
                    let list: Vec<u64> = (0..seeds.len()).map(|i| seeds.nth(i).unwrap()).collect();
                    assert!(seeds.nth(seeds.len()).is_none());
                    assert!(
                        list.iter().all(|seed| seed % count == index - 1),
                        "{list:?}"
                    );
                    union.extend(list);
                }
                union.sort_unstable();
                assert_eq!(
                    union,
                    (range.start..end).collect::<Vec<_>>(),
                    "{text} / {count}"
                );
            }
        }
        let open = ShardSeeds::new("3..".parse().unwrap(), "1/2".parse().unwrap());
        assert_eq!((open.nth(0), open.nth(1)), (Some(4), Some(6)));
        for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
