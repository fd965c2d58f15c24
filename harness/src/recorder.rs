//! The single place events are appended: it assigns each event its index and true time, so a
//! history is ordered by construction.
//!
//! Events are kept in checking form ([`PackedHistory`]: a fixed-size row each, every distinct
//! string stored once), the form the checkers read and the JSONL is written from, so a run's
//! history is never held as owned events: a process name, an op's lock and key, an error
//! string are stored once for the whole run instead of once per event.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use tokio::sync::Notify;

use crate::adapter::OwnerToken;
use crate::clock::{LocalClock, TrueClock};
use crate::event::{Event, EventView};
use crate::history::History;
use crate::packed::{Number, PackedHistory, Row, Rows, Strings, Sym, same_bytes};

/// Appends events for one run. Shared by workers, backends and the nemesis.
///
/// A recorder may hold a limited number of events ([`Recorder::with_limit`]): past it, events
/// are dropped and the recorder is [full](Recorder::is_full), so a run that would record
/// without end is stopped by whoever drives it instead of filling the memory.
#[derive(Debug)]
pub struct Recorder {
    truth: TrueClock,
    events: Mutex<Recording>,
    limit: usize,
    full: AtomicBool,
    filled: Notify,
}

/// What a recorder holds: the history so far, and which string table its syms point into.
#[derive(Debug)]
struct Recording {
    history: PackedHistory,
    table: Table,
    /// The syms of the [`Word`]s in this table, each once it was first recorded.
    words: [Option<Sym>; Word::ALL.len()],
}

/// The fixed error words client completions record, looked up in a history's string table
/// once instead of at every completion (most calls of a contended lock end `busy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Busy,
    NotOwner,
    Rejected,
    Cancelled,
}

impl Word {
    const ALL: [Word; 4] = [Word::Busy, Word::NotOwner, Word::Rejected, Word::Cancelled];

    fn text(self) -> &'static str {
        match self {
            Word::Busy => "busy",
            Word::NotOwner => "not-owner",
            Word::Rejected => "rejected",
            Word::Cancelled => "cancelled",
        }
    }
}

/// A history's string table as a row being recorded sees it: any text interned, and the
/// [`Word`]s from the recorder's note of their syms.
pub(crate) struct RowStrings<'a> {
    strings: &'a mut Strings,
    words: &'a mut [Option<Sym>; Word::ALL.len()],
    table: Table,
}

/// The sym a string that is recorded again and again (a process's own name) has in one of a
/// recorder's tables, remembered by its owner so it is looked up once per table: the table's
/// number and the sym, in one word (0: none yet).
#[derive(Debug, Default)]
pub(crate) struct KnownSym(AtomicU64);

/// A text a caller names on call after call (its lock, its key) and its sym, so the text is
/// looked up once per table while the caller keeps naming it: the first text named is the one
/// remembered, and any other is looked up each time.
#[derive(Debug, Default)]
pub(crate) struct KnownText {
    text: OnceLock<Box<str>>,
    sym: KnownSym,
}

impl RowStrings<'_> {
    /// The sym of `text`, remembered by `known` if it is the text `known` is for.
    pub(crate) fn intern_named(&mut self, known: &KnownText, text: &str) -> Sym {
        let held = known.text.get_or_init(|| text.into());
        if same_bytes(held.as_bytes(), text.as_bytes()) {
            self.intern_known(&known.sym, text)
        } else {
            self.intern(text)
        }
    }

    /// The sym of `text`, which `known` remembers for this table once it has been interned.
    pub(crate) fn intern_known(&mut self, known: &KnownSym, text: &str) -> Sym {
        let table = (self.table.0 + 1) << 32;
        let noted = known.0.load(Ordering::Relaxed);
        if noted & !0xffff_ffff == table
            && let Some(sym) = Sym::from_number(noted as u32)
        {
            return sym;
        }
        let sym = self.strings.intern(text);
        known
            .0
            .store(table | u64::from(sym.number()), Ordering::Relaxed);
        sym
    }

    /// The sym of `owner`'s 32 hex digits, which are checked as text only when new.
    pub(crate) fn intern_owner(&mut self, owner: OwnerToken) -> Sym {
        self.strings
            .intern_bytes(owner.hex().as_bytes())
            .expect("hex digits are text")
    }

    /// The sym of `text`, adding it if it is new.
    pub(crate) fn intern(&mut self, text: &str) -> Sym {
        self.strings.intern(text)
    }

    /// The sym of `word`, interned the first time it is recorded in this table, so the
    /// table's strings are numbered as if it were interned each time.
    pub(crate) fn word(&mut self, word: Word) -> Sym {
        *self.words[word as usize].get_or_insert_with(|| self.strings.intern(word.text()))
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
            events: Mutex::new(Recording {
                history: PackedHistory {
                    rows: Rows::with_capacity(limit.min(4096)),
                    ..PackedHistory::default()
                },
                table: Table(0),
                words: [None; Word::ALL.len()],
            }),
            limit,
            full: AtomicBool::new(false),
            filled: Notify::new(),
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

    /// Appends the row `build` packs into the recorder's string table (told which
    /// [`Table`] that is), stamped at true time `time_ns` (now, read by the caller who needs
    /// it too) as [`Recorder::record_on`] stamps an event; returns a
    /// copy of the row as recorded and its table, or `None` when the recorder holds its limit
    /// and dropped it (then `build` is not called). A client call records its invoke this way
    /// and derives its completion from the copy, so a call builds no event and copies no
    /// string.
    pub(crate) fn record_row_on(
        &self,
        clock: &LocalClock,
        time_ns: u64,
        build: impl FnOnce(&mut RowStrings<'_>, Table) -> Row,
    ) -> Option<(Row, Table)> {
        let mut recording = self.recording();
        let index = recording.history.len() as u64;
        if !self.has_room(recording.history.len()) {
            return None;
        }
        let Recording {
            history,
            table,
            words,
        } = &mut *recording;
        let mut strings = RowStrings {
            strings: &mut history.strings,
            words,
            table: *table,
        };
        let mut row = build(&mut strings, *table);
        row.index = index;
        row.time_ns = time_ns;
        row.set(Number::LocalNs, clock.read_at(time_ns) as u64);
        history.push_row(&row);
        Some((row, *table))
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
        recording.table = Table(recording.table.0 + 1);
        recording.words = [None; Word::ALL.len()];
        std::mem::take(&mut recording.history)
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
            let (_, table) = recorder
                .record_row_on(&clock, truth.now_ns(), |strings, _| {
                    let process = names.iter().map(|name| strings.intern(name)).last();
                    let mut row = Row::blank(process.expect("a name"));
                    row.kind = EventType::Fail;
                    row.f = Op::Acquire;
                    row.error = Some(strings.word(Word::Busy));
                    row
                })
                .expect("room");
            tables.push(table);
            taken.push(recorder.take_packed());
        }
        assert_ne!(tables[0], tables[1]);
        for history in &taken {
            assert_eq!(history.event(0).error.as_deref(), Some("busy"));
        }
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
