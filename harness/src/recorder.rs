//! The single place events are appended: it assigns each event its index and true time, so a
//! history is ordered by construction.
//!
//! Events are kept in checking form ([`PackedHistory`]: a fixed-size row each, every distinct
//! string stored once), the form the checkers read and the JSONL is written from, so a run's
//! history is never held as owned events: a process name, an op's lock and key, an error
//! string are stored once for the whole run instead of once per event.

mod row_strings;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::adapter::LockChange;
use crate::clock::{LocalClock, TrueClock};
use crate::event::{Event, EventType, EventView, Op};
use crate::history::History;
use crate::packed::{Number, PackedHistory, Row, Rows, Sym};

use row_strings::OwnerSyms;
pub(crate) use row_strings::{KnownSym, KnownText, RowStrings, Word};

/// Appends events for one run. Shared by workers, backends and the nemesis.
///
/// A recorder may hold a limited number of events ([`Recorder::with_limit`]): past it, events
/// are dropped and the recorder is [full](Recorder::is_full), so a run that would record
/// without end is stopped by whoever drives it instead of filling the memory.
#[derive(Debug)]
pub struct Recorder {
    truth: TrueClock,
    events: Mutex<Recording>,
    /// The sym of `lock`, the process of a lock service's log entries.
    lock_process: KnownSym,
    limit: usize,
    full: AtomicBool,
    filled: Notify,
    /// When each worker began each of its cycles (true nanoseconds, by worker, in cycle
    /// order). Not part of the history: no checker judges it; a shrinker cuts a plan around
    /// an anomaly's evidence with it.
    cycle_starts: Mutex<Vec<Vec<u64>>>,
}

/// What a recorder holds: the history so far, and which string table its syms point into.
#[derive(Debug)]
struct Recording {
    history: PackedHistory,
    table: Table,
    /// The syms of the [`Word`]s in this table, each once it was first recorded.
    words: [Option<Sym>; Word::ALL.len()],
    /// The syms of the owner tokens recorded lately in this table.
    owners: OwnerSyms,
}

impl Recording {
    fn new(history: PackedHistory, table: Table) -> Recording {
        Recording {
            history,
            table,
            words: [None; Word::ALL.len()],
            owners: OwnerSyms::new(),
        }
    }

    /// The strings a row is built with and the rows it goes after, borrowed apart: a row is
    /// interned into the table while the rows before it stay readable, then pushed.
    fn parts(&mut self) -> (RowStrings<'_>, &mut Rows, Table) {
        let Recording {
            history,
            table,
            words,
            owners,
        } = self;
        let PackedHistory { rows, strings } = history;
        let strings = RowStrings {
            strings,
            words,
            owners,
            table: *table,
        };
        (strings, rows, *table)
    }
}

/// Where a row was recorded: its position in the history of one string table, so the row can
/// be read back while that history is still the recorder's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordedRow {
    position: usize,
    table: Table,
}

/// The rows recorded so far, as a row being recorded may read them.
pub(crate) struct Recorded<'a> {
    rows: &'a Rows,
    table: Table,
}

impl Recorded<'_> {
    /// The row recorded at `at`, unless its history has been taken since.
    pub(crate) fn row(&self, at: RecordedRow) -> Option<Row> {
        (at.table == self.table).then(|| self.rows.get(at.position).to_row())
    }
}

/// Which of a recorder's string tables a row's syms point into: each
/// [`take_packed`](Recorder::take_packed) hands the table over with the rows and starts a new
/// one, so a row kept across it (a call still open) must be packed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Table(u64);

impl Recorder {
    /// An empty recorder stamping events with `truth`, holding as many events as are recorded.
    pub fn new(truth: TrueClock) -> Recorder {
        Recorder::with_limit(truth, usize::MAX)
    }

    /// An empty recorder stamping events with `truth` that holds at most `limit` events.
    pub fn with_limit(truth: TrueClock, limit: usize) -> Recorder {
        Recorder {
            truth,
            lock_process: KnownSym::default(),
            events: Mutex::new(Recording::new(
                PackedHistory {
                    rows: Rows::with_capacity(limit.min(4096)),
                    ..PackedHistory::default()
                },
                Table(0),
            )),
            limit,
            full: AtomicBool::new(false),
            filled: Notify::new(),
            cycle_starts: Mutex::new(Vec::new()),
        }
    }

    /// Appends `event` now; returns its index.
    pub fn record(&self, event: Event) -> u64 {
        self.append(&event.view(), None)
    }

    /// Appends the event `view` describes now, its strings borrowed from the caller: how a
    /// simulated backend logs each change it applies without building an [`Event`]; returns
    /// its index.
    pub fn record_view(&self, view: &EventView<'_>) -> u64 {
        self.append(view, None)
    }

    /// Appends a change a lock service applied to `lock` at service time `at_ns`, as it
    /// applies it: the `lock` `log` event of `change`, with `error` when the service made the
    /// change on its own (a restart that loses a lease); returns its index. What fencer's
    /// simulated lease service logs: the owner tokens it names are remembered from the calls
    /// that carried them, not formatted and looked up again.
    pub fn record_lock_change(
        &self,
        lock: &str,
        at_ns: i64,
        change: &LockChange,
        error: Option<&str>,
    ) -> u64 {
        let mut recording = self.recording();
        let position = recording.history.len();
        if !self.has_room(position) {
            return position as u64;
        }
        let (mut strings, rows, _) = recording.parts();
        let (f, owner, holder) = match *change {
            LockChange::Granted { owner, .. } => (Op::Acquire, owner, None),
            LockChange::Renewed { owner, holder, .. } => (Op::Renew, owner, Some(holder)),
            LockChange::Released { owner, holder, .. } => (Op::Release, owner, Some(holder)),
        };
        // Strings in column order and the process last, as an event's are packed.
        let lock = strings.intern(lock);
        let owner = strings.intern_owner(owner);
        let holder = holder.map(|holder| strings.intern_owner(holder));
        let error = error.map(|error| strings.intern(error));
        let mut row = Row::blank(strings.intern_known(&self.lock_process, "lock"));
        (row.kind, row.f) = (EventType::Log, f);
        (row.lock, row.owner, row.holder, row.error) = (Some(lock), Some(owner), holder, error);
        row.index = position as u64;
        row.time_ns = self.truth.now_ns();
        // Numbers in column order, each after the ones before it.
        row.set(Number::LocalNs, at_ns as u64);
        match *change {
            LockChange::Granted {
                fencing_token,
                ttl,
                expires_ns,
                ..
            } => {
                row.set(Number::Token, fencing_token);
                row.set(Number::TtlNs, ttl.as_nanos() as u64);
                row.set(Number::ExpiresNs, expires_ns as u64);
            }
            LockChange::Renewed {
                holder_token,
                ttl,
                expires_ns,
                ..
            } => {
                row.set(Number::TtlNs, ttl.as_nanos() as u64);
                row.set(Number::HolderToken, holder_token);
                row.set(Number::ExpiresNs, expires_ns as u64);
            }
            LockChange::Released { holder_token, .. } => {
                row.set(Number::HolderToken, holder_token);
            }
        }
        rows.push(&row);
        position as u64
    }

    /// Appends `event` now, with `local_ns` read from `clock` at the same true instant (one
    /// clock read serves both stamps, so they can never disagree).
    pub fn record_on(&self, event: Event, clock: &LocalClock) -> u64 {
        self.append(&event.view(), Some(clock))
    }

    /// Packs the event `view` describes, stamped with its index, the true time and (given
    /// `clock`) the local one, unless the recorder holds its limit already; then drops it and
    /// marks the recorder full.
    fn append(&self, view: &EventView<'_>, clock: Option<&LocalClock>) -> u64 {
        let mut recording = self.recording();
        let index = recording.history.len() as u64;
        if !self.has_room(recording.history.len()) {
            return index;
        }
        let history = &mut recording.history;
        let mut row = Row::pack_view(view, &mut history.strings);
        self.stamp(&mut row, index, clock);
        history.push_row(&row);
        index
    }

    /// Appends the row `build` packs into the recorder's string table, reading the rows
    /// recorded before it as it needs, stamped at true time `time_ns` (now, read by the caller
    /// who needs it too) as [`Recorder::record_on`] stamps an event; returns where the row
    /// was recorded, or `None` when the recorder holds its limit and dropped it (then `build`
    /// is not called). A client call records its invoke this way and derives its completion
    /// from the invoke's row read back, so a call builds no event and copies no string.
    pub(crate) fn record_row_on(
        &self,
        clock: &LocalClock,
        time_ns: u64,
        build: impl FnOnce(&mut RowStrings<'_>, Recorded<'_>) -> Row,
    ) -> Option<RecordedRow> {
        let mut recording = self.recording();
        let position = recording.history.len();
        if !self.has_room(position) {
            return None;
        }
        let (mut strings, rows, table) = recording.parts();
        let mut row = build(&mut strings, Recorded { rows, table });
        row.index = position as u64;
        row.time_ns = time_ns;
        row.set(Number::LocalNs, clock.read_at(time_ns) as u64);
        rows.push(&row);
        Some(RecordedRow { position, table })
    }

    fn recording(&self) -> MutexGuard<'_, Recording> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True if one more event fits beside the `held` ones; if not, marks the recorder full
    /// (waking whoever waits for that).
    fn has_room(&self, held: usize) -> bool {
        if held < self.limit {
            return true;
        }
        if !self.full.swap(true, Ordering::Relaxed) {
            // Waiters now, and one that checked just before the flag was set.
            self.filled.notify_waiters();
            self.filled.notify_one();
        }
        false
    }

    /// Stamps `row` with its index, the true time and (given `clock`) the local one.
    fn stamp(&self, row: &mut Row, index: u64, clock: Option<&LocalClock>) {
        let time_ns = self.truth.now_ns();
        row.index = index;
        row.time_ns = time_ns;
        if let Some(clock) = clock {
            row.set(Number::LocalNs, clock.read_at(time_ns) as u64);
        }
    }

    /// True once an event was dropped because the recorder held its limit: the history is
    /// incomplete and must not be checked.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Waits until the recorder is [full](Recorder::is_full) (for ever, if it never is).
    pub async fn filled(&self) {
        while !self.is_full() {
            self.filled.notified().await;
        }
    }

    /// The true clock events are stamped with.
    pub fn truth(&self) -> TrueClock {
        self.truth
    }

    /// Everything recorded so far in checking form, leaving the recorder empty: what the run
    /// paths check, write and explain.
    pub fn take_packed(&self) -> PackedHistory {
        let mut recording = self.recording();
        let table = Table(recording.table.0 + 1);
        let taken = std::mem::replace(
            &mut *recording,
            Recording::new(PackedHistory::default(), table),
        );
        taken.history
    }

    /// Notes that worker number `worker` begins its next cycle now (its first is cycle 0).
    pub fn record_cycle_start(&self, worker: usize) {
        let now_ns = self.truth.now_ns();
        let mut starts = self.cycle_starts.lock().unwrap_or_else(|p| p.into_inner());
        if starts.len() <= worker {
            starts.resize_with(worker + 1, Vec::new);
        }
        starts[worker].push(now_ns);
    }

    /// When each worker began each of its cycles, in true nanoseconds (by worker number, then
    /// cycle number), leaving none behind; a worker that began none has an empty list.
    pub fn take_cycle_starts(&self) -> Vec<Vec<u64>> {
        std::mem::take(&mut *self.cycle_starts.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Everything recorded so far as events, leaving the recorder empty: the unpacked view,
    /// for callers that want owned events.
    pub fn take_history(&self) -> History {
        self.take_packed().unpack()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::OwnerToken;
    use crate::event::{EventType, Op};
    use crate::runtime::simulation_runtime;

    #[test]
    fn a_word_is_looked_up_again_in_the_table_a_taken_history_leaves_behind() {
        let truth = TrueClock::start();
        let recorder = Recorder::new(truth);
        let clock = LocalClock::new(truth, crate::clock::NodeClock::with_offset(0));
        let mut taken = Vec::new();
        let mut tables = Vec::new();
        // The second table holds one string more before the word, so its sym differs there.
        for names in [&["w0"][..], &["w1", "w1:renew"]] {
            let recorded = recorder
                .record_row_on(&clock, truth.now_ns(), |strings, _| {
                    let process = names.iter().map(|name| strings.intern(name)).last();
                    let mut row = Row::blank(process.expect("a name"));
                    row.kind = EventType::Fail;
                    row.f = Op::Acquire;
                    row.error = Some(strings.word(Word::Busy));
                    row
                })
                .expect("room");
            tables.push(recorded.table);
            taken.push(recorder.take_packed());
        }
        assert_ne!(tables[0], tables[1]);
        for history in &taken {
            assert_eq!(history.event(0).error.as_deref(), Some("busy"));
        }
    }

    /// Each kind of lock change, recorded as a change and as the event a service would log
    /// for it: the same event, its owner tokens named by calls before it or not.
    #[test]
    fn a_lock_change_records_the_event_a_lease_service_logs_for_it() {
        let (a, b) = (OwnerToken(0xa), OwnerToken(u128::MAX - 1));
        let ttl = std::time::Duration::from_secs(10);
        let changes = [
            (
                LockChange::Granted {
                    owner: a,
                    fencing_token: 7,
                    ttl,
                    expires_ns: -5,
                },
                None,
            ),
            (
                LockChange::Renewed {
                    owner: b,
                    holder: a,
                    holder_token: 7,
                    ttl,
                    expires_ns: i64::MAX,
                },
                None,
            ),
            (
                LockChange::Released {
                    owner: a,
                    holder: a,
                    holder_token: 7,
                },
                Some("restart"),
            ),
        ];
        // In the paused simulation, so both are stamped at the same true time.
        simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let (as_changes, as_views) = (Recorder::new(truth), Recorder::new(truth));
            for (change, error) in &changes {
                as_changes.record_lock_change("L", 42, change, *error);
                let (a_hex, b_hex) = (a.hex(), b.hex());
                let text = |owner: OwnerToken| {
                    if owner == a {
                        a_hex.as_str()
                    } else {
                        b_hex.as_str()
                    }
                };
                let mut view = EventView {
                    lock: Some("L"),
                    local_ns: Some(42),
                    error: *error,
                    ..EventView::new("lock", EventType::Log, Op::Acquire)
                };
                match *change {
                    LockChange::Granted {
                        owner,
                        fencing_token,
                        expires_ns,
                        ..
                    } => {
                        view.owner = Some(text(owner));
                        (view.token, view.ttl_ns) = (Some(fencing_token), Some(10_000_000_000));
                        view.expires_ns = Some(expires_ns);
                    }
                    LockChange::Renewed {
                        owner,
                        holder,
                        holder_token,
                        expires_ns,
                        ..
                    } => {
                        view.f = Op::Renew;
                        (view.owner, view.holder) = (Some(text(owner)), Some(text(holder)));
                        (view.holder_token, view.ttl_ns) =
                            (Some(holder_token), Some(10_000_000_000));
                        view.expires_ns = Some(expires_ns);
                    }
                    LockChange::Released {
                        owner,
                        holder,
                        holder_token,
                    } => {
                        view.f = Op::Release;
                        (view.owner, view.holder) = (Some(text(owner)), Some(text(holder)));
                        view.holder_token = Some(holder_token);
                    }
                }
                as_views.record_view(&view);
            }
            let (changed, viewed) = (as_changes.take_history(), as_views.take_history());
            assert_eq!(changed.events.len(), 3);
            assert_eq!(changed.events, viewed.events);
        });
    }

    #[test]
    fn a_limited_recorder_keeps_its_limit_drops_the_rest_and_says_it_is_full() {
        let (kept, full, woke) = simulation_runtime().block_on(async {
            let recorder = std::sync::Arc::new(Recorder::with_limit(TrueClock::start(), 2));
            let waiter = {
                let recorder = std::sync::Arc::clone(&recorder);
                crate::task::spawn(async move { recorder.filled().await })
            };
            crate::task::yield_now().await;
            for _ in 0..2 {
                recorder.record(Event::new("w0", EventType::Invoke, Op::Read));
            }
            assert!(!recorder.is_full(), "at the limit, nothing was dropped yet");
            assert_eq!(
                recorder.record(Event::new("w0", EventType::Ok, Op::Read)),
                2
            );
            recorder.record(Event::new("w0", EventType::Ok, Op::Read));
            let woke = crate::time::timeout(std::time::Duration::from_secs(1), waiter)
                .await
                .is_ok();
            (
                recorder.take_history().events.len(),
                recorder.is_full(),
                woke,
            )
        });
        assert_eq!((kept, full, woke), (2, true, true));
    }
}
