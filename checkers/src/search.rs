//! A bounded Wing–Gong/Lowe linearizability search for one register (one key), used when the
//! history has no store log to read the order of writes from.
//!
//! Operations are call and return entries in one list ordered by history position; the search
//! repeatedly linearizes a pending call whose model step succeeds, lifting it out of the list,
//! and backtracks when it reaches a return whose call could not be linearized (Lowe's
//! just-in-time linearization). States already explored — the set of linearized operations
//! plus the register's value — are remembered, so each is expanded once. A write whose outcome
//! is unknown has its return at infinity: it stays concurrent with everything after it, and
//! linearizing it last is the same as it never having happened.
//!
//! The wall-clock budget is the only way time enters: a search that runs out says so and the
//! checker reports `unknown`; it never guesses.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::time::Instant;

use crate::index::FxHasher;

/// The register before any write.
pub(crate) const INITIAL: u32 = u32::MAX;

/// What one operation on the register did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RegisterOp {
    /// Set the register to this write's id.
    Write(u32),
    /// Read the register and saw this id ([`INITIAL`] for the initial value).
    Read(u32),
}

/// One call: when it was sent and answered (history positions; `None` = never answered, or
/// answered `info`), and what it did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    /// Position of the invoke.
    pub invoke: usize,
    /// Position of the `ok`, if the call is known to have taken effect.
    pub reply: Option<usize>,
    /// The operation.
    pub op: RegisterOp,
}

/// How a search ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Search {
    /// A linearization exists.
    Linearizable,
    /// None exists. The deepest attempt linearized `depth` calls and then had to linearize
    /// call `blocked` (its return was reached) while the register held `state`.
    Violation {
        /// Index into the calls of the call that could not be placed.
        blocked: usize,
        /// The register's value (a write id index, or [`INITIAL`]) at that point.
        state: u32,
        /// How many calls the deepest attempt had linearized.
        depth: usize,
    },
    /// The budget ran out first.
    OutOfBudget {
        /// States explored before it did.
        explored: usize,
    },
}

const NONE: usize = usize::MAX;

/// The call/return list, doubly linked so calls can be lifted out and put back.
struct Entries {
    /// For each entry: the call it belongs to, and whether it is the return.
    call: Vec<usize>,
    is_return: Vec<bool>,
    /// For a call entry: its return entry.
    partner: Vec<usize>,
    prev: Vec<usize>,
    next: Vec<usize>,
    /// The sentinel before the first entry.
    head: usize,
}

impl Entries {
    fn new(calls: &[Call]) -> Entries {
        // (time, return after call at equal time, call index); unanswered calls return at
        // infinity.
        let mut order: Vec<(usize, bool, usize)> = Vec::with_capacity(calls.len() * 2);
        for (index, call) in calls.iter().enumerate() {
            order.push((call.invoke, false, index));
            order.push((call.reply.unwrap_or(usize::MAX), true, index));
        }
        order.sort_unstable();
        let count = order.len() + 1;
        let head = order.len();
        let mut entries = Entries {
            call: vec![0; count],
            is_return: vec![false; count],
            partner: vec![NONE; count],
            prev: vec![NONE; count],
            next: vec![NONE; count],
            head,
        };
        let mut call_entry = vec![NONE; calls.len()];
        let mut previous = head;
        for (slot, &(_, is_return, index)) in order.iter().enumerate() {
            entries.call[slot] = index;
            entries.is_return[slot] = is_return;
            if is_return {
                entries.partner[call_entry[index]] = slot;
            } else {
                call_entry[index] = slot;
            }
            entries.next[previous] = slot;
            entries.prev[slot] = previous;
            previous = slot;
        }
        entries
    }

    fn first(&self) -> usize {
        self.next[self.head]
    }

    /// Takes a call entry and its return out of the list.
    fn lift(&mut self, call: usize) {
        for entry in [call, self.partner[call]] {
            let (prev, next) = (self.prev[entry], self.next[entry]);
            self.next[prev] = next;
            if next != NONE {
                self.prev[next] = prev;
            }
        }
    }

    /// Puts back what [`Entries::lift`] took out (in reverse order of lifting).
    fn unlift(&mut self, call: usize) {
        for entry in [self.partner[call], call] {
            let (prev, next) = (self.prev[entry], self.next[entry]);
            self.next[prev] = entry;
            if next != NONE {
                self.prev[next] = entry;
            }
        }
    }
}

type StateSet = HashSet<(u32, Box<[u64]>, u32), BuildHasherDefault<FxHasher>>;

/// The set of linearized calls, with what makes its memo key small: calls are sorted by
/// invoke, so a search state is almost always "every call before `low`, plus a few after".
/// The key is `low` (the first call not linearized) and the words from `low` up to the
/// highest linearized call — an exact encoding of the set, not a hash of it.
struct Linearized {
    words: Vec<u64>,
    low: usize,
    /// The highest linearized call after each push, so pops restore it.
    high: Vec<usize>,
}

impl Linearized {
    fn new(calls: usize) -> Linearized {
        Linearized {
            words: vec![0; calls.div_ceil(64)],
            low: 0,
            high: Vec::new(),
        }
    }

    fn contains(&self, call: usize) -> bool {
        self.words[call / 64] & (1 << (call % 64)) != 0
    }

    fn insert(&mut self, call: usize) {
        self.words[call / 64] |= 1 << (call % 64);
        let high = self.high.last().map_or(call, |&high| high.max(call));
        self.high.push(high);
        while self.low < self.words.len() * 64 && self.contains(self.low) {
            self.low += 1;
        }
    }

    fn remove(&mut self, call: usize) {
        self.words[call / 64] &= !(1 << (call % 64));
        self.high.pop();
        self.low = self.low.min(call);
    }

    /// The memo key with the register's `state`.
    fn key(&self, state: u32) -> (u32, Box<[u64]>, u32) {
        let from = self.low / 64;
        let to = self
            .high
            .last()
            .map_or(from, |&high| high / 64 + 1)
            .max(from);
        (self.low as u32, self.words[from..to].into(), state)
    }
}

/// Searches for a linearization of `calls` (sorted by invoke, for compact memo keys) on a
/// register, until `deadline`.
pub(crate) fn linearize(calls: &[Call], deadline: Instant) -> Search {
    debug_assert!(calls.is_sorted_by_key(|call| call.invoke));
    let mut entries = Entries::new(calls);
    let mut linearized = Linearized::new(calls.len());
    let mut seen = StateSet::default();
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut state = INITIAL;
    let mut entry = entries.first();
    let mut steps = 0usize;
    let mut deepest: Option<(usize, usize, u32)> = None;
    loop {
        if steps.is_multiple_of(1024) && Instant::now() >= deadline {
            return Search::OutOfBudget {
                explored: seen.len(),
            };
        }
        steps += 1;
        if entry == NONE {
            // Only calls that were never answered can be left; linearize them last.
            return Search::Linearizable;
        }
        let call = entries.call[entry];
        if !entries.is_return[entry] {
            let (fits, next_state) = match calls[call].op {
                RegisterOp::Write(id) => (true, id),
                RegisterOp::Read(id) => (id == state, state),
            };
            if fits {
                linearized.insert(call);
                if seen.insert(linearized.key(next_state)) {
                    stack.push((entry, state));
                    state = next_state;
                    entries.lift(entry);
                    entry = entries.first();
                    continue;
                }
                linearized.remove(call);
            }
            entry = entries.next[entry];
            continue;
        }
        if calls[call].reply.is_none() {
            // Every answered call is linearized; the rest never had to happen.
            return Search::Linearizable;
        }
        if deepest.is_none_or(|(depth, _, _)| stack.len() >= depth) {
            deepest = Some((stack.len(), call, state));
        }
        let Some((undo, previous)) = stack.pop() else {
            let (depth, blocked, state) = deepest.unwrap_or((0, call, state));
            return Search::Violation {
                blocked,
                state,
                depth,
            };
        };
        linearized.remove(entries.call[undo]);
        state = previous;
        entries.unlift(undo);
        entry = entries.next[undo];
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn call(invoke: usize, reply: Option<usize>, op: RegisterOp) -> Call {
        Call { invoke, reply, op }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    use RegisterOp::{Read, Write};

    #[test]
    fn sequential_reads_of_the_latest_write_are_linearizable() {
        let calls = [
            call(0, Some(1), Write(0)),
            call(2, Some(3), Read(0)),
            call(4, Some(5), Write(1)),
            call(6, Some(7), Read(1)),
        ];
        assert_eq!(linearize(&calls, soon()), Search::Linearizable);
    }

    #[test]
    fn a_read_concurrent_with_two_writes_may_see_either_order() {
        // w0 and w1 overlap; reads after both see w0 then... only one final value is allowed.
        let calls = [
            call(0, Some(4), Write(0)),
            call(1, Some(5), Write(1)),
            call(2, Some(3), Read(1)),
            call(6, Some(7), Read(0)),
        ];
        // Read(1) inside both writes, then Read(0) after both: order w1, r1, w0, r0.
        assert_eq!(linearize(&calls, soon()), Search::Linearizable);
        let calls = [
            call(0, Some(1), Write(0)),
            call(2, Some(3), Write(1)),
            call(4, Some(5), Read(0)),
        ];
        assert!(matches!(
            linearize(&calls, soon()),
            Search::Violation {
                blocked: 2,
                state: 1,
                ..
            }
        ));
    }

    #[test]
    fn an_unknown_write_may_take_effect_late_or_never() {
        let late = [
            call(0, None, Write(0)),
            call(1, Some(2), Read(INITIAL)),
            call(3, Some(4), Read(0)),
        ];
        assert_eq!(linearize(&late, soon()), Search::Linearizable);
        let never = [call(0, None, Write(0)), call(1, Some(2), Read(INITIAL))];
        assert_eq!(linearize(&never, soon()), Search::Linearizable);
        // But once seen, it cannot be unseen.
        let flicker = [
            call(0, None, Write(0)),
            call(1, Some(2), Read(0)),
            call(3, Some(4), Read(INITIAL)),
        ];
        assert!(matches!(
            linearize(&flicker, soon()),
            Search::Violation { .. }
        ));
    }

    #[test]
    fn a_spent_budget_is_reported_not_guessed() {
        let calls = [call(0, Some(1), Write(0)), call(2, Some(3), Read(0))];
        assert!(matches!(
            linearize(&calls, Instant::now()),
            Search::OutOfBudget { .. }
        ));
    }
}
