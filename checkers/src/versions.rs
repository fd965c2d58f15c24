//! Which write a read saw: the register's versions as the store applied them, and how a read's
//! reply names one.
//!
//! A read names the write it saw by write id (the fenced register), or only by value (a
//! counter whose store does not return ids); a read of nothing (no id, no value, or a counter's
//! 0 before any write of 0) saw the initial version.

use fencer_harness::{EventType, RowRef, Sym};

use crate::context::{Context, is_store_log};
use crate::index::{FastMap, Positions};

/// A version of a key: the initial one, or the store log entry that applied a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Version {
    /// Before any write.
    Initial,
    /// Applied at this history position.
    Applied(usize),
}

/// The store log, indexed by key and by write id (as syms: looked up only, never iterated).
#[derive(Default)]
pub(crate) struct StoreVersions {
    /// Per key: positions of applied writes, ascending, with their values.
    by_key: FastMap<Sym, Vec<(usize, Option<Sym>)>>,
    /// Per (key, write id): positions where the store applied it.
    by_id: FastMap<(Sym, Sym), Positions>,
}

impl StoreVersions {
    /// Indexes every store log entry of `ctx`'s rows.
    pub fn build(ctx: &Context<'_>) -> StoreVersions {
        let mut versions = StoreVersions::default();
        for (position, ref row) in ctx.rows_where(|kind, _| kind == EventType::Log) {
            if !is_store_log(row) {
                continue;
            }
            let Some(key) = row.key else {
                continue;
            };
            versions
                .by_key
                .entry(key)
                .or_default()
                .push((position, row.value));
            if let Some(write_id) = row.write_id {
                versions
                    .by_id
                    .entry((key, write_id))
                    .and_modify(|positions| positions.push(position))
                    .or_insert_with(|| Positions::new(position));
            }
        }
        versions
    }

    /// The version `read` (an `ok` at position `reply` of `ctx`) returned: the latest
    /// application before the reply of the write it names. `None` when the read names a write
    /// the store never applied before replying.
    pub fn seen_by(&self, ctx: &Context<'_>, read: &RowRef<'_>, reply: usize) -> Option<Version> {
        let key = read.key?;
        if let Some(write_id) = read.write_id {
            return self
                .by_id
                .get(&(key, write_id))?
                .last_before(reply)
                .map(Version::Applied);
        }
        let Some(value) = read.value else {
            return Some(Version::Initial);
        };
        let applied = self.by_key.get(&key).map(Vec::as_slice).unwrap_or_default();
        let end = applied.partition_point(|&(position, _)| position < reply);
        match applied[..end]
            .iter()
            .rev()
            .find(|(_, seen)| *seen == Some(value))
        {
            Some(&(position, _)) => Some(Version::Applied(position)),
            None if ctx.text(value) == "0" => Some(Version::Initial),
            None => None,
        }
    }

    /// The first version of `key` applied after `version`, if any.
    pub fn next_after(&self, key: Sym, version: Version) -> Option<usize> {
        let applied = self.by_key.get(&key)?;
        let start = match version {
            Version::Initial => 0,
            Version::Applied(position) => {
                applied.partition_point(|&(applied, _)| applied <= position)
            }
        };
        applied.get(start).map(|&(position, _)| position)
    }

    /// How many times the store applied `write_id` to `key`.
    pub fn applications(&self, key: Sym, write_id: Sym) -> usize {
        self.by_id.get(&(key, write_id)).map_or(0, Positions::len)
    }

    /// The latest application of `write_id` to `key` before `before`.
    pub fn applied_before(&self, key: Sym, write_id: Sym, before: usize) -> Option<usize> {
        self.by_id.get(&(key, write_id))?.last_before(before)
    }
}
