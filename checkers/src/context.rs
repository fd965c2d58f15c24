//! The view of a history that all checkers share: which ground truth it contains, and (built
//! only when some checker found something to explain) indexes for finding the events around an
//! anomaly.
//!
//! Internally everything refers to events by *position* in `PackedHistory::rows`, never by
//! trusting `index` to equal position; anomalies report `index` values. Detection passes are
//! single linear scans over the rows in the checker modules; the explanation index is one more
//! linear pass, built at most once per `check`, so checking stays O(n log n) however many
//! anomalies there are.

use std::cell::OnceCell;
use std::collections::BTreeMap;

pub(crate) use fencer_harness::roles::worker_of;
use fencer_harness::words::LogTiming;
use fencer_harness::{Event, EventType, Op, PackedHistory, RowRef, Rows, Strings, Sym};

use crate::index::{FastMap, Positions};
use crate::lock_pass::LockPass;
use crate::numbering::{Numbering, SymTable};
use crate::options::CheckOptions;
use crate::versions::StoreVersions;

/// The lock server's process and clock name in nemesis events: its restarts and clock faults
/// are recorded against it.
pub(crate) const LOCK_SERVER: &str = "lock";

/// A history plus what checkers need to know about it before they start.
///
/// Detection passes read [`Row`]s (compact, strings as [`Sym`]s, see
/// [`fencer_harness::packed`]); explanations unpack the few events they cite with
/// [`Context::at`].
pub(crate) struct Context<'h> {
    /// The events in checking form, in history order.
    pub rows: &'h Rows,
    /// The positions of the rows that are not [acquire attempts](is_acquire_attempt), for
    /// the passes that skip those ([`Context::rows_where`]): a million-event history is mostly
    /// busy acquires that most checkers skip, so such a pass reads a few rows in a hundred
    /// instead of every row.
    other_rows: Vec<usize>,
    /// Every row's process, numbered for [`Context::per_process`] tables.
    processes: Numbering,
    /// Per process number: the position of its last client call, if it made one.
    last_client_calls: Vec<Option<usize>>,
    /// Every row's lock, numbered for [`Context::per_lock`] tables.
    locks: Numbering,
    /// The texts of the rows' syms.
    strings: &'h Strings,
    /// The store recorded which writes it applied (`log`/`write` entries exist).
    pub has_store_log: bool,
    /// The store log was recorded as writes were applied, interleaved with the calls. A log
    /// read back from a real store after the run (`applied_log()`) gives the store's order but
    /// not *when*: checkers that compare log positions with call times must not use it.
    pub store_log_timed: bool,
    /// The lock service recorded grants, renewals and releases (`log` entries exist).
    pub has_lock_log: bool,
    /// The lock log was recorded as the service applied its changes, interleaved with the
    /// calls. A log read back from a real service after the run gives the service's order and
    /// clock but not where its entries fall among the calls: checkers that compare log
    /// positions with call positions must not use it.
    pub lock_log_timed: bool,
    /// Which logs carry true times, for explanations: an entry of a log read back after the
    /// run is told by its order or its server's clock, never by a time it does not have.
    pub timing: LogTiming,
    /// What the check was asked to do.
    pub options: CheckOptions,
    lookup: OnceCell<Lookup>,
    versions: OnceCell<StoreVersions>,
    lock_pass: OnceCell<LockPass>,
}

impl<'h> Context<'h> {
    /// Scans `history` once for the kinds of ground truth it carries (default options).
    #[cfg(test)]
    pub fn new(history: &'h PackedHistory) -> Context<'h> {
        Context::with_options(history, CheckOptions::default())
    }

    /// Scans `history` once for the kinds of ground truth it carries, for a check with
    /// `options`.
    pub fn with_options(history: &'h PackedHistory, options: CheckOptions) -> Context<'h> {
        let rows = history.rows();
        let mut other_rows = Vec::new();
        let mut processes = Numbering::new(history.strings.len());
        let mut last_client_calls = Vec::new();
        let mut locks = Numbering::new(history.strings.len());
        for (position, row) in rows.iter().enumerate() {
            if !is_acquire_attempt(row.kind, row.f) {
                other_rows.push(position);
            }
            let process = processes.add(row.process);
            if process == last_client_calls.len() {
                last_client_calls.push(None);
            }
            if row.f.is_client_op() {
                last_client_calls[process] = Some(position);
            }
            if let Some(lock) = row.lock {
                locks.add(lock);
            }
        }
        let timing = LogTiming::of(rows.iter().map(|row| (row.kind, row.f)));
        Context {
            rows,
            other_rows,
            processes,
            last_client_calls,
            locks,
            strings: &history.strings,
            has_store_log: rows.iter().any(|row| is_store_log(&row)),
            store_log_timed: timing.store_log_timed,
            has_lock_log: rows.iter().any(|row| is_lock_log(&row)),
            lock_log_timed: timing.lock_log_timed,
            timing,
            options,
            lookup: OnceCell::new(),
            versions: OnceCell::new(),
            lock_pass: OnceCell::new(),
        }
    }

    /// The rows whose type and operation `wanted` accepts, with their positions, in history
    /// order. A pass over every row that leaves the others untouched acts on exactly these,
    /// so it may iterate them instead.
    ///
    /// `wanted` must depend on its arguments alone: when it accepts no acquire attempt, only
    /// the other rows are looked at.
    pub fn rows_where(
        &self,
        wanted: impl Fn(EventType, Op) -> bool,
    ) -> impl Iterator<Item = (usize, RowRef<'h>)> {
        let rows = self.rows;
        let attempts_wanted = ACQUIRE_ATTEMPTS.iter().any(|&(kind, f)| wanted(kind, f));
        let (every, others) = if attempts_wanted {
            (Some(rows.iter().enumerate()), None)
        } else {
            let others = self
                .other_rows
                .iter()
                .map(move |&position| (position, rows.get(position)));
            (None, Some(others))
        };
        every
            .into_iter()
            .flatten()
            .chain(others.into_iter().flatten())
            .filter(move |(_, row)| wanted(row.kind, row.f))
    }

    /// The position of the last client call `process` made, if it acted at all.
    pub fn last_client_call(&self, process: Sym) -> Option<usize> {
        self.last_client_calls[self.processes.number(process)?]
    }

    /// A table holding `initial` for every process that acts in the history.
    pub fn per_process<V: Clone>(&self, initial: V) -> SymTable<'_, V> {
        SymTable::new(&self.processes, initial)
    }

    /// A table holding `initial` for every lock named in the history.
    pub fn per_lock<V: Clone>(&self, initial: V) -> SymTable<'_, V> {
        SymTable::new(&self.locks, initial)
    }

    /// The shared pass of the lock's call and log checks, run on first use.
    pub fn lock_pass(&self) -> &LockPass {
        self.lock_pass.get_or_init(|| LockPass::run(self))
    }

    /// The store log indexed by key and write id, built on first use and shared by the
    /// checkers that read it.
    pub fn versions(&self) -> &StoreVersions {
        self.versions.get_or_init(|| StoreVersions::build(self))
    }

    /// The explanation index, built on first use.
    pub fn lookup(&self) -> &Lookup {
        self.lookup.get_or_init(|| Lookup::build(self))
    }

    /// The event at `position`, unpacked (for explanations, which cite few events).
    pub fn at(&self, position: usize) -> Event {
        self.rows.get(position).unpack(self.strings)
    }

    /// The text of `sym`.
    pub fn text(&self, sym: Sym) -> &'h str {
        self.strings.text(sym)
    }

    /// The text of an optional column.
    pub fn text_of(&self, column: Option<Sym>) -> Option<&'h str> {
        column.map(|sym| self.strings.text(sym))
    }

    /// The sym of `text`, if any row holds it.
    pub fn sym(&self, text: &str) -> Option<Sym> {
        self.strings.find(text)
    }

    /// How many distinct strings the rows hold: the size of a table indexed by
    /// [`Sym::slot`].
    pub fn sym_count(&self) -> usize {
        self.strings.len()
    }

    /// History indexes of `positions`, ascending and without repeats.
    pub fn indexes(&self, positions: impl IntoIterator<Item = usize>) -> Vec<u64> {
        let mut indexes: Vec<u64> = positions
            .into_iter()
            .map(|position| self.rows.get(position).index())
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        indexes
    }
}

/// The rows a lock's waiters pile up: acquires sent, and acquires refused (busy).
const ACQUIRE_ATTEMPTS: [(EventType, Op); 2] = [
    (EventType::Invoke, Op::Acquire),
    (EventType::Fail, Op::Acquire),
];

/// Whether a row of type `kind` and operation `f` is one of [`ACQUIRE_ATTEMPTS`].
fn is_acquire_attempt(kind: EventType, f: Op) -> bool {
    f == Op::Acquire && matches!(kind, EventType::Invoke | EventType::Fail)
}

/// A store log entry: the store applied a write.
pub(crate) fn is_store_log(row: &RowRef<'_>) -> bool {
    row.kind == EventType::Log && row.f == Op::Write
}

/// A lock log entry: the lock service applied a grant, renewal or release.
pub(crate) fn is_lock_log(row: &RowRef<'_>) -> bool {
    row.kind == EventType::Log && matches!(row.f, Op::Acquire | Op::Renew | Op::Release)
}

/// No partner recorded (an invoke never completed, or a server or nemesis event).
const NO_PARTNER: u32 = u32::MAX;

/// For each client call's invoke the position of its completion, and for each completion its
/// invoke's; [`NO_PARTNER`] for the rest. Positions fit in `u32` ([`Lookup::build`] checks).
fn partners(ctx: &Context<'_>) -> Vec<u32> {
    let mut partner = vec![NO_PARTNER; ctx.rows.len()];
    // Each process's invoke in flight.
    let mut open = ctx.per_process(NO_PARTNER);
    for (position, ref row) in ctx.rows.iter().enumerate() {
        match row.kind {
            EventType::Invoke => open[row.process] = position as u32,
            EventType::Ok | EventType::Fail | EventType::Info => {
                let invoke = std::mem::replace(&mut open[row.process], NO_PARTNER);
                if invoke != NO_PARTNER {
                    partner[invoke as usize] = position as u32;
                    partner[position] = invoke;
                }
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
    partner
}

/// Indexes for explaining anomalies: who sent a write, who holds an owner token, which faults
/// hit a process. Lookups only (never iterated), so hash maps keep output deterministic.
pub(crate) struct Lookup {
    /// For an invoke, the position of its completion; for a completion, its invoke's.
    partner: Vec<u32>,
    /// Write invokes by write id.
    write_invokes: FastMap<Sym, Positions>,
    /// Renew and release invokes by owner token and operation.
    lock_calls: FastMap<(Sym, Op), Positions>,
    /// The acquire `ok` that handed out each owner token.
    client_grant: FastMap<Sym, usize>,
    /// The lock log grant for each owner token.
    log_grant: FastMap<Sym, usize>,
    /// Acquire `ok`s by worker and token.
    grants_by_worker: FastMap<(String, u64), Positions>,
    /// Nemesis events by target, ascending.
    faults: BTreeMap<String, Vec<usize>>,
}

impl Lookup {
    fn build(ctx: &Context<'_>) -> Lookup {
        let (rows, strings) = (ctx.rows, ctx.strings);
        assert!(
            rows.len() < NO_PARTNER as usize,
            "a history of {} events is beyond the checkers' u32 positions",
            rows.len()
        );
        let mut lookup = Lookup {
            partner: partners(ctx),
            write_invokes: FastMap::default(),
            lock_calls: FastMap::default(),
            client_grant: FastMap::default(),
            log_grant: FastMap::default(),
            grants_by_worker: FastMap::default(),
            faults: BTreeMap::new(),
        };
        // Acquire attempts matter only to `partner`.
        for (position, ref row) in ctx.rows_where(|kind, f| !is_acquire_attempt(kind, f)) {
            match row.kind {
                EventType::Invoke => match (row.f, row.write_id, row.owner) {
                    (Op::Write, Some(write_id), _) => {
                        Positions::record(&mut lookup.write_invokes, write_id, position);
                    }
                    (Op::Renew | Op::Release, _, Some(owner)) => {
                        Positions::record(&mut lookup.lock_calls, (owner, row.f), position);
                    }
                    _ => {}
                },
                EventType::Ok | EventType::Fail | EventType::Info => {
                    if row.is(EventType::Ok, Op::Acquire) {
                        let process = strings.text(row.process);
                        if let Some(owner) = row.owner {
                            lookup.client_grant.insert(owner, position);
                        }
                        if let Some(token) = row.token() {
                            Positions::record(
                                &mut lookup.grants_by_worker,
                                (worker_of(process).to_owned(), token),
                                position,
                            );
                        }
                    }
                }
                EventType::Nemesis => {
                    if let Some(target) = row.target {
                        lookup
                            .faults
                            .entry(strings.text(target).to_owned())
                            .or_default()
                            .push(position);
                    }
                }
                EventType::Log => {
                    if row.f == Op::Acquire
                        && let Some(owner) = row.owner
                    {
                        lookup.log_grant.insert(owner, position);
                    }
                }
                EventType::Notice => {}
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
    pub fn write_invoke(&self, write_id: Sym, before: usize) -> Option<usize> {
        self.write_invokes.get(&write_id)?.last_before(before)
    }

    /// Every invoke of write `write_id`, ascending.
    pub fn write_invokes(&self, write_id: Sym) -> Vec<usize> {
        self.write_invokes
            .get(&write_id)
            .map_or_else(Vec::new, |positions| positions.all().collect())
    }

    /// The latest renew or release invoke by `owner` before `before`.
    pub fn lock_call(&self, owner: Sym, f: Op, before: usize) -> Option<usize> {
        self.lock_calls.get(&(owner, f))?.last_before(before)
    }

    /// The acquire `ok` that granted `owner`.
    pub fn client_grant(&self, owner: Sym) -> Option<usize> {
        self.client_grant.get(&owner).copied()
    }

    /// The lock log grant to `owner`.
    pub fn log_grant(&self, owner: Sym) -> Option<usize> {
        self.log_grant.get(&owner).copied()
    }

    /// The process that an acquire `ok` granted `owner` to.
    pub fn process_of_owner<'h>(&self, ctx: &Context<'h>, owner: Sym) -> Option<&'h str> {
        let position = self.client_grant(owner)?;
        Some(ctx.text(ctx.rows.get(position).process))
    }

    /// The latest acquire `ok` to `worker` carrying `token` before `before`.
    pub fn grant_to_worker(&self, worker: &str, token: u64, before: usize) -> Option<usize> {
        self.grants_by_worker
            .get(&(worker.to_owned(), token))?
            .last_before(before)
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
    fn faults_are_found_inside_a_window_and_none_in_a_reversed_one() {
        let pause = Event {
            target: Some("w1".into()),
            ..Event::new("nemesis", EventType::Nemesis, Op::Pause)
        };
        let history = fencer_harness::History {
            events: vec![pause.clone(), pause.clone(), pause],
        };
        let packed = PackedHistory::pack(&history);
        let ctx = Context::new(&packed);
        let lookup = ctx.lookup();
        assert_eq!(lookup.faults_on("w1:renew", 1, 2), vec![1, 2]);
        assert_eq!(lookup.faults_on("w1", 2, 1), Vec::<usize>::new());
    }

    #[test]
    fn rows_where_finds_what_a_filter_over_every_row_finds() {
        let mut b = crate::testkit::Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.busy("w2", "L", "o2");
        b.write("w1", "k", 1, "w1-0", true);
        b.busy("w2", "L", "o3");
        let packed = PackedHistory::pack(&b.build());
        let ctx = Context::new(&packed);
        let wanted: [fn(EventType, Op) -> bool; 3] = [
            |kind, _| kind == EventType::Log,
            |kind, f| kind == EventType::Fail && f == Op::Acquire,
            |_, f| f == Op::Acquire,
        ];
        for wanted in wanted {
            let found: Vec<usize> = ctx
                .rows_where(wanted)
                .map(|(position, _)| position)
                .collect();
            let rows = packed.rows();
            let every: Vec<usize> = (0..rows.len())
                .filter(|&position| wanted(rows.get(position).kind, rows.get(position).f))
                .collect();
            assert!(!every.is_empty());
            assert_eq!(found, every);
        }
    }
}
