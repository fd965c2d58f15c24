//! The view of a history that all checkers share: which ground truth it contains, and (built
//! only when some checker found something to explain) indexes for finding the events around an
//! anomaly.
//!
//! Internally everything refers to events by *position* in `History::events`, never by trusting
//! `index` to equal position; anomalies report `index` values. Detection passes are single
//! linear scans in the checker modules; the explanation index is one more linear pass, built at
//! most once per `check`, so checking stays O(n log n) however many anomalies there are.

use std::cell::OnceCell;
use std::collections::BTreeMap;

use fencer_harness::{Event, EventType, History, Op};

use crate::index::{FastMap, Positions};
use crate::options::CheckOptions;

/// True when some client call completes after a store log entry: the log was recorded as the
/// store applied writes, not appended once the run was over (where every entry follows every
/// call, since an applied write always precedes its own reply).
fn store_log_is_timed(events: &[Event]) -> bool {
    let Some(first_log) = events.iter().position(is_store_log) else {
        return false;
    };
    events[first_log..]
        .iter()
        .any(|event| event.f.is_client_op() && event.kind.is_completion())
}

/// A history plus what checkers need to know about it before they start.
pub(crate) struct Context<'h> {
    /// The events, in history order.
    pub events: &'h [Event],
    /// The store recorded which writes it applied (`log`/`write` entries exist).
    pub has_store_log: bool,
    /// The store log was recorded as writes were applied, interleaved with the calls. A log
    /// read back from a real store after the run (`applied_log()`) gives the store's order but
    /// not *when*: checkers that compare log positions with call times must not use it.
    pub store_log_timed: bool,
    /// The lock service recorded grants, renewals and releases (`log` entries exist).
    pub has_lock_log: bool,
    /// What the check was asked to do.
    pub options: CheckOptions,
    lookup: OnceCell<Lookup<'h>>,
}

impl<'h> Context<'h> {
    /// Scans `history` once for the kinds of ground truth it carries (default options).
    #[cfg(test)]
    pub fn new(history: &'h History) -> Context<'h> {
        Context::with_options(history, CheckOptions::default())
    }

    /// Scans `history` once for the kinds of ground truth it carries, for a check with
    /// `options`.
    pub fn with_options(history: &'h History, options: CheckOptions) -> Context<'h> {
        let events = history.events.as_slice();
        let has_store_log = events.iter().any(is_store_log);
        let has_lock_log = events.iter().any(is_lock_log);
        let store_log_timed = store_log_is_timed(events);
        Context {
            events,
            has_store_log,
            store_log_timed,
            has_lock_log,
            options,
            lookup: OnceCell::new(),
        }
    }

    /// The explanation index, built on first use.
    pub fn lookup(&self) -> &Lookup<'h> {
        self.lookup.get_or_init(|| Lookup::build(self.events))
    }

    /// The event at `position`.
    pub fn at(&self, position: usize) -> &'h Event {
        &self.events[position]
    }

    /// History indexes of `positions`, ascending and without repeats.
    pub fn indexes(&self, positions: impl IntoIterator<Item = usize>) -> Vec<u64> {
        let mut indexes: Vec<u64> = positions
            .into_iter()
            .map(|position| self.events[position].index)
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        indexes
    }
}

/// A store log entry: the store applied a write.
pub(crate) fn is_store_log(event: &Event) -> bool {
    event.kind == EventType::Log && event.f == Op::Write
}

/// A lock log entry: the lock service applied a grant, renewal or release.
pub(crate) fn is_lock_log(event: &Event) -> bool {
    event.kind == EventType::Log && matches!(event.f, Op::Acquire | Op::Renew | Op::Release)
}

/// The worker a process belongs to: `w0:renew` acts for `w0`, and faults target `w0`.
pub(crate) fn worker_of(process: &str) -> &str {
    process
        .split_once(':')
        .map_or(process, |(worker, _)| worker)
}

/// No partner recorded (an invoke never completed, or a server or nemesis event).
const NO_PARTNER: u32 = u32::MAX;

/// Indexes for explaining anomalies: who sent a write, who holds an owner token, which faults
/// hit a process. Lookups only (never iterated), so hash maps keep output deterministic.
pub(crate) struct Lookup<'h> {
    /// For an invoke, the position of its completion; for a completion, its invoke's.
    partner: Vec<u32>,
    /// Write invokes by write id.
    write_invokes: FastMap<&'h str, Positions>,
    /// Renew and release invokes by owner token and operation.
    lock_calls: FastMap<(&'h str, Op), Positions>,
    /// The acquire `ok` that handed out each owner token.
    client_grant: FastMap<&'h str, usize>,
    /// The lock log grant for each owner token.
    log_grant: FastMap<&'h str, usize>,
    /// Acquire `ok`s by worker and token.
    grants_by_worker: FastMap<(&'h str, u64), Positions>,
    /// Nemesis events by target, ascending.
    faults: BTreeMap<&'h str, Vec<usize>>,
}

impl<'h> Lookup<'h> {
    fn build(events: &'h [Event]) -> Lookup<'h> {
        assert!(
            events.len() < NO_PARTNER as usize,
            "a history of {} events is beyond the checkers' u32 positions",
            events.len()
        );
        let mut lookup = Lookup {
            partner: vec![NO_PARTNER; events.len()],
            write_invokes: FastMap::default(),
            lock_calls: FastMap::default(),
            client_grant: FastMap::default(),
            log_grant: FastMap::default(),
            grants_by_worker: FastMap::default(),
            faults: BTreeMap::new(),
        };
        let mut open: FastMap<&'h str, usize> = FastMap::default();
        for (position, event) in events.iter().enumerate() {
            match event.kind {
                EventType::Invoke => {
                    open.insert(&event.process, position);
                    match (event.f, event.write_id.as_deref(), event.owner.as_deref()) {
                        (Op::Write, Some(write_id), _) => {
                            Positions::record(&mut lookup.write_invokes, write_id, position);
                        }
                        (Op::Renew | Op::Release, _, Some(owner)) => {
                            lookup
                                .lock_calls
                                .entry((owner, event.f))
                                .and_modify(|positions| positions.push(position))
                                .or_insert_with(|| Positions::new(position));
                        }
                        _ => {}
                    }
                }
                EventType::Ok | EventType::Fail | EventType::Info => {
                    if let Some(invoke) = open.remove(event.process.as_str()) {
                        lookup.partner[invoke] = position as u32;
                        lookup.partner[position] = invoke as u32;
                    }
                    if event.is(EventType::Ok, Op::Acquire) {
                        if let Some(owner) = event.owner.as_deref() {
                            lookup.client_grant.insert(owner, position);
                        }
                        if let Some(token) = event.token {
                            lookup
                                .grants_by_worker
                                .entry((worker_of(&event.process), token))
                                .and_modify(|positions| positions.push(position))
                                .or_insert_with(|| Positions::new(position));
                        }
                    }
                }
                EventType::Nemesis => {
                    if let Some(target) = event.target.as_deref() {
                        lookup.faults.entry(target).or_default().push(position);
                    }
                }
                EventType::Log => {
                    if event.f == Op::Acquire
                        && let Some(owner) = event.owner.as_deref()
                    {
                        lookup.log_grant.insert(owner, position);
                    }
                }
            }
        }
        lookup
    }

    /// The other half of a client call (invoke ↔ completion), if recorded.
    pub fn partner(&self, position: usize) -> Option<usize> {
        let partner = self.partner[position];
        (partner != NO_PARTNER).then_some(partner as usize)
    }

    /// The latest invoke of write `write_id` before `before`.
    pub fn write_invoke(&self, write_id: &str, before: usize) -> Option<usize> {
        self.write_invokes.get(write_id)?.last_before(before)
    }

    /// The latest renew or release invoke by `owner` before `before`.
    pub fn lock_call(&self, owner: &str, f: Op, before: usize) -> Option<usize> {
        self.lock_calls.get(&(owner, f))?.last_before(before)
    }

    /// The acquire `ok` that granted `owner`.
    pub fn client_grant(&self, owner: &str) -> Option<usize> {
        self.client_grant.get(owner).copied()
    }

    /// The lock log grant to `owner`.
    pub fn log_grant(&self, owner: &str) -> Option<usize> {
        self.log_grant.get(owner).copied()
    }

    /// The latest acquire `ok` to `worker` carrying `token` before `before`.
    pub fn grant_to_worker(&self, worker: &str, token: u64, before: usize) -> Option<usize> {
        self.grants_by_worker
            .get(&(worker, token))?
            .last_before(before)
    }

    /// The process name behind an owner token, if a client acquire carried it.
    pub fn process_of_owner(&self, events: &'h [Event], owner: &str) -> Option<&'h str> {
        let position = self.client_grant(owner)?;
        Some(events[position].process.as_str())
    }

    /// Nemesis events targeting `process` (or the worker it belongs to) at positions within
    /// `from..=to`, ascending; none when `from > to` (an explanation's two ends can come in
    /// either order when a mutant repeats tokens).
    pub fn faults_on(&self, process: &str, from: usize, to: usize) -> Vec<usize> {
        if from > to {
            return Vec::new();
        }
        let worker = worker_of(process);
        let mut targets = vec![worker];
        if process != worker {
            targets.push(process);
        }
        let mut found = Vec::new();
        for target in targets {
            if let Some(positions) = self.faults.get(target) {
                let start = positions.partition_point(|&position| position < from);
                let end = positions.partition_point(|&position| position <= to);
                found.extend_from_slice(&positions[start..end]);
            }
        }
        found.sort_unstable();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_task_belongs_to_its_worker() {
        assert_eq!(worker_of("w3:renew"), "w3");
        assert_eq!(worker_of("w3"), "w3");
        assert_eq!(worker_of("lock"), "lock");
    }

    #[test]
    fn faults_are_found_inside_a_window_and_none_in_a_reversed_one() {
        let pause = Event {
            target: Some("w1".into()),
            ..Event::new("nemesis", EventType::Nemesis, Op::Pause)
        };
        let events = vec![pause.clone(), pause.clone(), pause];
        let lookup = Lookup::build(&events);
        assert_eq!(lookup.faults_on("w1:renew", 1, 2), vec![1, 2]);
        assert_eq!(lookup.faults_on("w1", 2, 1), Vec::<usize>::new());
    }

    #[test]
    fn a_store_log_read_back_after_the_run_is_known_to_carry_no_times() {
        let invoke = Event::new("w0", EventType::Invoke, Op::Write);
        let ok = Event::new("w0", EventType::Ok, Op::Write);
        let log = Event::new("store", EventType::Log, Op::Write);
        assert!(store_log_is_timed(&[
            invoke.clone(),
            log.clone(),
            ok.clone()
        ]));
        assert!(!store_log_is_timed(&[
            invoke.clone(),
            ok.clone(),
            log.clone()
        ]));
        assert!(!store_log_is_timed(&[invoke, ok]));
    }
}
