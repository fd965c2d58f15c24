//! Interleaving coverage: which narrow race windows a history reached, by kind and width.
//!
//! A run that passes says nothing about the races it never came near. Coverage counts, for
//! each kind of race a lease can lose ([`Window`]), the moments the history shows the race's
//! two sides within a given width of each other ([`Width`]), so a gate can say "release in
//! flight across expiry, ≤ 1 ms: reached in 37 of 1,000 seeds", and say so of the windows it
//! never reached.
//!
//! Only what the history holds is counted. A lease's end is the expiry the lock service's log
//! gave its grant or last renew, on the lock server's clock; it is placed on the true clock
//! by that log entry's own reading (its true time plus the TTL it had left), so a step or a
//! drift of the lock clock afterwards moves the real end (a step across an expiry is a window
//! of its own). A call is in flight from its invoke to its completion, as recorded; a call
//! never completed is not counted. A grant crosses a call in flight only before the servers'
//! log shows the call applied: a grant after a release was applied is the release's doing. Without a lock log, nothing that needs a lease's end is
//! counted.

use std::collections::BTreeMap;

use fencer_harness::{EventType, Op, PackedHistory, RowRef, Sym, roles};
use serde::{Deserialize, Serialize};

/// A kind of race window between a lease's end and a call, a grant or a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Window {
    /// A rival granted the lock within the width after the previous lease expired (on the lock
    /// server's clock): a late call of the old holder races the new lease.
    GrantAfterExpiry,
    /// A holder's release sent within the width before its lease expired and answered after.
    ReleaseAcrossExpiry,
    /// A holder's renew sent within the width before its lease expired and answered after.
    RenewAcrossExpiry,
    /// A holder's write sent within the width before its lease expired and answered after.
    WriteAcrossExpiry,
    /// A release in flight when another owner was granted the lock, sent within the width
    /// before that grant.
    ReleaseAcrossGrant,
    /// A renew in flight when another owner was granted the lock, sent within the width
    /// before that grant.
    RenewAcrossGrant,
    /// A write in flight when another owner was granted the lock, sent within the width
    /// before that grant.
    WriteAcrossGrant,
    /// A pause of a holder that began within the width before its lease expired and lasted
    /// past it.
    PauseAcrossExpiry,
    /// A step of the lock server's clock across a lease's expiry, the lease within the width
    /// of its end when the clock stepped.
    ClockStepAcrossExpiry,
    /// A renew whose reply was lost, followed within the width by its holder's write.
    LostRenewThenWrite,
}

impl Window {
    /// Every kind, in report order.
    pub const ALL: [Window; 10] = [
        Window::GrantAfterExpiry,
        Window::ReleaseAcrossExpiry,
        Window::RenewAcrossExpiry,
        Window::WriteAcrossExpiry,
        Window::ReleaseAcrossGrant,
        Window::RenewAcrossGrant,
        Window::WriteAcrossGrant,
        Window::PauseAcrossExpiry,
        Window::ClockStepAcrossExpiry,
        Window::LostRenewThenWrite,
    ];

    /// Whether counting it needs the lock service's log (a lease's end, or a grant): every
    /// kind but a lost renew reply followed by a write, which the workers' own calls show.
    pub fn needs_lock_log(self) -> bool {
        self != Window::LostRenewThenWrite
    }

    /// What the window is, in words, for summaries.
    pub fn describe(self) -> &'static str {
        match self {
            Window::GrantAfterExpiry => "rival's grant after the previous lease's expiry",
            Window::ReleaseAcrossExpiry => "release in flight across expiry",
            Window::RenewAcrossExpiry => "renew in flight across expiry",
            Window::WriteAcrossExpiry => "write in flight across expiry",
            Window::ReleaseAcrossGrant => "release in flight across another owner's grant",
            Window::RenewAcrossGrant => "renew in flight across another owner's grant",
            Window::WriteAcrossGrant => "write in flight across another owner's grant",
            Window::PauseAcrossExpiry => "pause spanning the holder's expiry",
            Window::ClockStepAcrossExpiry => "lock clock step across an expiry",
            Window::LostRenewThenWrite => "lost renew reply followed by the holder's write",
        }
    }
}

/// How narrow a window is: its two sides at most this far apart. The classes nest (a window
/// within 1 ms is also within 10 ms), so each count includes the narrower ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Width {
    /// At most a millisecond.
    #[serde(rename = "1ms")]
    Ms1,
    /// At most ten milliseconds.
    #[serde(rename = "10ms")]
    Ms10,
    /// At most a hundred milliseconds.
    #[serde(rename = "100ms")]
    Ms100,
    /// At most the lease's TTL.
    #[serde(rename = "ttl")]
    Ttl,
}

impl Width {
    /// Every width, narrowest first.
    pub const ALL: [Width; 4] = [Width::Ms1, Width::Ms10, Width::Ms100, Width::Ttl];

    /// The widest gap in the class, for a lease TTL of `ttl_ns`.
    pub fn bound_ns(self, ttl_ns: u64) -> u64 {
        match self {
            Width::Ms1 => 1_000_000,
            Width::Ms10 => 10_000_000,
            Width::Ms100 => 100_000_000,
            Width::Ttl => ttl_ns,
        }
    }

    /// The class as summaries print it.
    pub fn label(self) -> &'static str {
        match self {
            Width::Ms1 => "≤ 1 ms",
            Width::Ms10 => "≤ 10 ms",
            Width::Ms100 => "≤ 100 ms",
            Width::Ttl => "≤ TTL",
        }
    }
}

/// How many windows of one kind and width a history reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowCount {
    /// The kind.
    pub window: Window,
    /// The width class.
    pub width: Width,
    /// Windows of that kind at most that wide.
    pub count: u64,
}

/// The windows one history reached: a count for every kind and width, zeros included, so a
/// window never reached is there to be reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Every kind and width, in [`Window::ALL`] then [`Width::ALL`] order.
    pub windows: Vec<WindowCount>,
    /// The history holds no entry of the lock service's log (a lock service fencer cannot
    /// see into, or a client library talking to its own server): the kinds that
    /// [need it](Window::needs_lock_log) were not measured, and their zeros mean nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_lock_log: bool,
}

impl Coverage {
    fn tally(counts: &BTreeMap<Window, [u64; 4]>, without_lock_log: bool) -> Coverage {
        let windows = Window::ALL
            .iter()
            .flat_map(|&window| {
                let counts = counts.get(&window).copied().unwrap_or_default();
                Width::ALL
                    .iter()
                    .zip(counts)
                    .map(move |(&width, count)| WindowCount {
                        window,
                        width,
                        count,
                    })
            })
            .collect();
        Coverage {
            windows,
            without_lock_log,
        }
    }

    /// How many windows of `window` at most `width` wide the history reached.
    pub fn count(&self, window: Window, width: Width) -> u64 {
        self.windows
            .iter()
            .find(|entry| entry.window == window && entry.width == width)
            .map_or(0, |entry| entry.count)
    }
}

/// The windows a history reached, for leases of `ttl_ns` (the widest class).
pub fn coverage(history: &PackedHistory, ttl_ns: u64) -> Coverage {
    let mut pass = Pass::new(history, ttl_ns);
    for row in history.rows().iter() {
        pass.row(&row);
    }
    Coverage::tally(&pass.counts, !pass.lock_logged)
}

/// A lease as the lock log last left it.
#[derive(Clone, Copy)]
struct Lease {
    owner: Sym,
    /// Its expiry on the lock server's clock.
    expires_lock_ns: i64,
    /// Its expiry placed on the true clock by the log entry that set it.
    expires_true_ns: u64,
    released: bool,
}

/// A call in flight: what it is and what it may cross.
#[derive(Clone, Copy)]
struct Flight {
    f: Op,
    invoke_ns: u64,
    /// The caller's lease's end when the call went out.
    expiry_ns: Option<u64>,
    /// The caller's owner token.
    owner: Option<Sym>,
    /// Grants logged before the call went out.
    grants_before: usize,
    /// What the servers' logs name the call by: its owner token (a renew or release) or its
    /// write id.
    logged_as: Option<Sym>,
}

/// [`Pass::applied`]'s slot of a write (a renew's is 0, a release's 1).
const APPLIED_WRITE: usize = 2;

fn applied_slot(f: Op) -> Option<usize> {
    match f {
        Op::Renew => Some(0),
        Op::Release => Some(1),
        Op::Write => Some(APPLIED_WRITE),
        _ => None,
    }
}

struct Pass<'h> {
    history: &'h PackedHistory,
    ttl_ns: u64,
    counts: BTreeMap<Window, [u64; 4]>,
    /// The current lease of each lock, by the lock log.
    leases: BTreeMap<usize, Lease>,
    /// Each owner's lease end on the true clock, by the lock log (indexed by the owner's sym).
    expiries: Vec<Option<u64>>,
    /// Every grant logged: its true time and owner.
    grants: Vec<(u64, Sym)>,
    /// Each worker's current owner token, from its confirmed acquires.
    owners: BTreeMap<usize, Sym>,
    /// Calls in flight, by process (indexed by the process's sym).
    flights: Vec<Option<Flight>>,
    /// Each worker's renew whose reply was lost, by its send time, until its next write.
    lost_renews: BTreeMap<usize, u64>,
    /// The worker each process belongs to, once looked up (indexed by the process's sym).
    workers: Vec<Option<Option<Sym>>>,
    /// When the servers last logged a renew or release by each owner, or a write by its id
    /// (indexed by the owner's or the write id's sym, a slot per call).
    applied: Vec<[Option<u64>; 3]>,
    /// Whether any lock log entry was seen.
    lock_logged: bool,
}

impl<'h> Pass<'h> {
    fn new(history: &'h PackedHistory, ttl_ns: u64) -> Pass<'h> {
        Pass {
            history,
            ttl_ns,
            counts: BTreeMap::new(),
            leases: BTreeMap::new(),
            expiries: vec![None; history.strings.len()],
            grants: Vec::new(),
            owners: BTreeMap::new(),
            flights: vec![None; history.strings.len()],
            lost_renews: BTreeMap::new(),
            workers: vec![None; history.strings.len()],
            applied: vec![[None; 3]; history.strings.len()],
            lock_logged: false,
        }
    }

    /// Counts a window whose sides were `gap_ns` apart in every class it fits.
    fn reached(&mut self, window: Window, gap_ns: u64) {
        let ttl_ns = self.ttl_ns;
        let counts = self.counts.entry(window).or_default();
        for (count, width) in counts.iter_mut().zip(Width::ALL) {
            if gap_ns <= width.bound_ns(ttl_ns) {
                *count += 1;
            }
        }
    }

    /// The worker a process belongs to (`w0` for `w0:renew`), as a string of the history.
    fn worker(&mut self, process: Sym) -> Option<Sym> {
        let history = self.history;
        *self.workers[process.slot()].get_or_insert_with(|| {
            let worker = roles::worker_of(history.text(process));
            history.strings.find(worker)
        })
    }

    fn row(&mut self, row: &RowRef<'_>) {
        match row.kind {
            EventType::Log if matches!(row.f, Op::Acquire | Op::Renew | Op::Release) => {
                self.lock_logged = true;
                if let (Some(owner), Some(call)) = (row.owner, applied_slot(row.f)) {
                    self.applied[owner.slot()][call] = Some(row.time_ns);
                }
                self.lock_log(row)
            }
            EventType::Log if row.f == Op::Write => {
                if let Some(write_id) = row.write_id {
                    self.applied[write_id.slot()][APPLIED_WRITE] = Some(row.time_ns);
                }
            }
            EventType::Invoke => self.invoke(row),
            EventType::Ok | EventType::Fail | EventType::Info => self.complete(row),
            EventType::Nemesis => self.fault(row),
            _ => {}
        }
    }

    fn lock_log(&mut self, row: &RowRef<'_>) {
        let (Some(lock), Some(owner)) = (row.lock, row.owner) else {
            return;
        };
        if row.error.is_some() {
            // A lease lost to a restart ended there and then.
            if let Some(lease) = self.leases.get_mut(&lock.slot()) {
                lease.released = true;
            }
            return;
        }
        let placed = |expires_lock_ns: i64| {
            let left_ns = expires_lock_ns.saturating_sub(row.local_ns().unwrap_or(expires_lock_ns));
            row.time_ns.saturating_add_signed(left_ns)
        };
        match row.f {
            Op::Acquire => {
                let Some(expires_lock_ns) = row.expires_ns() else {
                    return;
                };
                if let (Some(previous), Some(granted_lock_ns)) =
                    (self.leases.get(&lock.slot()).copied(), row.local_ns())
                    && !previous.released
                    && previous.owner != owner
                    && granted_lock_ns >= previous.expires_lock_ns
                {
                    let gap = granted_lock_ns.abs_diff(previous.expires_lock_ns);
                    self.reached(Window::GrantAfterExpiry, gap);
                }
                let expires_true_ns = placed(expires_lock_ns);
                self.leases.insert(
                    lock.slot(),
                    Lease {
                        owner,
                        expires_lock_ns,
                        expires_true_ns,
                        released: false,
                    },
                );
                self.expiries[owner.slot()] = Some(expires_true_ns);
                self.grants.push((row.time_ns, owner));
            }
            Op::Renew => {
                let (Some(holder), Some(expires_lock_ns)) = (row.holder, row.expires_ns()) else {
                    return;
                };
                let expires_true_ns = placed(expires_lock_ns);
                if let Some(lease) = self.leases.get_mut(&lock.slot())
                    && lease.owner == holder
                {
                    lease.expires_lock_ns = expires_lock_ns;
                    lease.expires_true_ns = expires_true_ns;
                }
                self.expiries[holder.slot()] = Some(expires_true_ns);
            }
            _ => {
                let holder = row.holder.unwrap_or(owner);
                if let Some(lease) = self.leases.get_mut(&lock.slot())
                    && lease.owner == holder
                {
                    lease.released = true;
                }
            }
        }
    }

    fn invoke(&mut self, row: &RowRef<'_>) {
        if !matches!(row.f, Op::Release | Op::Renew | Op::Write) {
            return;
        }
        let worker = self.worker(row.process);
        let owner = row
            .owner
            .or_else(|| worker.and_then(|worker| self.owners.get(&worker.slot()).copied()));
        if row.f == Op::Write
            && let Some(worker) = worker
            && let Some(renew_ns) = self.lost_renews.remove(&worker.slot())
        {
            self.reached(Window::LostRenewThenWrite, row.time_ns - renew_ns);
        }
        let flight = Flight {
            f: row.f,
            invoke_ns: row.time_ns,
            expiry_ns: owner.and_then(|owner| self.expiries[owner.slot()]),
            owner,
            grants_before: self.grants.len(),
            logged_as: if row.f == Op::Write {
                row.write_id
            } else {
                row.owner
            },
        };
        self.flights[row.process.slot()] = Some(flight);
    }

    fn complete(&mut self, row: &RowRef<'_>) {
        if row.f == Op::Acquire && row.kind == EventType::Ok {
            if let (Some(worker), Some(owner)) = (self.worker(row.process), row.owner) {
                self.owners.insert(worker.slot(), owner);
                self.lost_renews.remove(&worker.slot());
            }
            return;
        }
        if !matches!(row.f, Op::Release | Op::Renew | Op::Write) {
            return;
        }
        let Some(flight) = self.flights[row.process.slot()].take() else {
            return;
        };
        if flight.f != row.f {
            return;
        }
        if flight.f == Op::Renew
            && row.kind == EventType::Info
            && let Some(worker) = self.worker(row.process)
        {
            self.lost_renews.insert(worker.slot(), flight.invoke_ns);
        }
        let (across_expiry, across_grant) = match flight.f {
            Op::Release => (Window::ReleaseAcrossExpiry, Window::ReleaseAcrossGrant),
            Op::Renew => (Window::RenewAcrossExpiry, Window::RenewAcrossGrant),
            _ => (Window::WriteAcrossExpiry, Window::WriteAcrossGrant),
        };
        if let Some(expiry_ns) = flight.expiry_ns
            && (flight.invoke_ns..=row.time_ns).contains(&expiry_ns)
        {
            self.reached(across_expiry, expiry_ns - flight.invoke_ns);
        }
        // A grant after the call was applied is its consequence (a release frees the lock),
        // not a race with it.
        let applied_ns = flight
            .logged_as
            .zip(applied_slot(flight.f))
            .and_then(|(name, call)| self.applied[name.slot()][call])
            .filter(|&applied_ns| applied_ns >= flight.invoke_ns)
            .unwrap_or(row.time_ns);
        let rival_grant = self.grants[flight.grants_before..]
            .iter()
            .find(|(_, owner)| Some(*owner) != flight.owner)
            .map(|(granted_ns, _)| *granted_ns)
            .filter(|&granted_ns| granted_ns <= applied_ns);
        if let Some(granted_ns) = rival_grant {
            self.reached(across_grant, granted_ns.saturating_sub(flight.invoke_ns));
        }
    }

    fn fault(&mut self, row: &RowRef<'_>) {
        let Some(target) = row.target else {
            return;
        };
        match row.f {
            Op::Pause => {
                let Some(duration_ns) = row.duration_ns() else {
                    return;
                };
                let expiry_ns = self
                    .owners
                    .get(&target.slot())
                    .and_then(|owner| self.expiries[owner.slot()]);
                if let Some(expiry_ns) = expiry_ns
                    && (row.time_ns..=row.time_ns.saturating_add(duration_ns)).contains(&expiry_ns)
                {
                    self.reached(Window::PauseAcrossExpiry, expiry_ns - row.time_ns);
                }
            }
            Op::ClockJump if roles::worker_of(self.history.text(target)) == "lock" => {
                let (Some(after_ns), Some(jump_ns)) = (row.local_ns(), row.jump_ns()) else {
                    return;
                };
                let before_ns = after_ns.saturating_sub(jump_ns);
                let (low, high) = (before_ns.min(after_ns), before_ns.max(after_ns));
                let crossed: Vec<u64> = self
                    .leases
                    .values()
                    .filter(|lease| !lease.released)
                    .filter(|lease| low < lease.expires_lock_ns && lease.expires_lock_ns <= high)
                    .map(|lease| lease.expires_lock_ns.abs_diff(before_ns))
                    .collect();
                for gap in crossed {
                    self.reached(Window::ClockStepAcrossExpiry, gap);
                }
            }
            _ => {}
        }
    }
}

/// Coverage over many runs (a gate's seeds): for each kind and width, in how many runs it was
/// reached at least once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageTally {
    /// Runs tallied.
    pub runs: u64,
    /// Runs that reached each kind and width at least once, in [`Window::ALL`] then
    /// [`Width::ALL`] order (a count of runs, not of windows).
    pub reached: Vec<WindowCount>,
    /// Runs whose history held no lock service log: not counted for the kinds that
    /// [need it](Window::needs_lock_log).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runs_without_lock_log: u64,
}

/// Whether a count is zero: the `skip_serializing_if` test of a count that summaries leave
/// out of their JSON when nothing was counted (here and in a gate's summary).
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CoverageTally {
    /// Adds one run's coverage.
    pub fn add(&mut self, coverage: &Coverage) {
        self.runs += 1;
        self.runs_without_lock_log += u64::from(coverage.without_lock_log);
        self.fill();
        for (tally, run) in self.reached.iter_mut().zip(&coverage.windows) {
            tally.count += u64::from(run.count > 0);
        }
    }

    /// Adds another tally (a shard's).
    pub fn merge(&mut self, other: &CoverageTally) {
        self.runs += other.runs;
        self.runs_without_lock_log += other.runs_without_lock_log;
        self.fill();
        for (tally, theirs) in self.reached.iter_mut().zip(&other.reached) {
            tally.count += theirs.count;
        }
    }

    /// Every kind and width present, with no run counted yet where missing.
    fn fill(&mut self) {
        if self.reached.is_empty() {
            self.reached = Coverage::tally(&BTreeMap::new(), false).windows;
        }
    }

    /// One line per kind and width: "release in flight across expiry, ≤ 1 ms: reached in 37
    /// of 1,000 seeds", or "…: never reached". A kind that needs the lock service's log is
    /// counted over the seeds whose history held one, and said so when some did not; when
    /// none did, one line says those kinds were not measured.
    pub fn lines(&self) -> Vec<String> {
        let mut tally = self.clone();
        tally.fill();
        let logged = self.runs.saturating_sub(self.runs_without_lock_log);
        let mut lines = Vec::new();
        if logged == 0 {
            lines.push(format!(
                "windows at a lease's end or a grant: not measured (no seed's history holds the \
                 lock service's log, so no lease end or grant is known; {} seeds)",
                thousands(self.runs)
            ));
        }
        for entry in &tally.reached {
            let needs_log = entry.window.needs_lock_log();
            if needs_log && logged == 0 {
                continue;
            }
            let (of, with_log) = match (needs_log, self.runs_without_lock_log) {
                (true, 1..) => (logged, " with a lock service log"),
                _ => (self.runs, ""),
            };
            let what = format!("{}, {}", entry.window.describe(), entry.width.label());
            lines.push(if entry.count == 0 {
                if with_log.is_empty() {
                    format!("{what}: never reached")
                } else {
                    format!("{what}: never reached in {} seeds{with_log}", thousands(of))
                }
            } else {
                format!(
                    "{what}: reached in {} of {} seeds{with_log}",
                    thousands(entry.count),
                    thousands(of)
                )
            });
        }
        lines
    }
}

/// `n` with commas between thousands: 1,000.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Builder;

    const TTL_S: f64 = 10.0;
    const TTL: u64 = 10_000_000_000;

    /// A's lease granted at 0 (expiring at the TTL) and a release of it by `w0` sent at
    /// `sent_s` and answered 5 ms later.
    fn release_at(sent_s: f64) -> PackedHistory {
        let mut history = Builder::new();
        history.at(0.0).grant("L", "aa", 1, TTL_S);
        history
            .at(sent_s)
            .invoke_lock_call("w0", Op::Release, "L", "aa");
        history.at(sent_s + 0.005).ok("w0");
        PackedHistory::pack(&history.build())
    }

    #[test]
    fn a_release_sent_a_millisecond_before_the_expiry_reaches_the_narrowest_window() {
        let reached = coverage(&release_at(TTL_S - 0.001), TTL);
        for width in Width::ALL {
            assert_eq!(
                reached.count(Window::ReleaseAcrossExpiry, width),
                1,
                "{width:?}"
            );
        }
        assert_eq!(reached.count(Window::RenewAcrossExpiry, Width::Ttl), 0);
    }

    #[test]
    fn a_release_sent_a_microsecond_earlier_misses_it() {
        let reached = coverage(&release_at(TTL_S - 0.001_001), TTL);
        assert_eq!(reached.count(Window::ReleaseAcrossExpiry, Width::Ms1), 0);
        assert_eq!(reached.count(Window::ReleaseAcrossExpiry, Width::Ms10), 1);
    }

    #[test]
    fn a_release_answered_before_the_expiry_crosses_nothing() {
        let reached = coverage(&release_at(TTL_S - 0.006), TTL);
        assert!(reached.windows.iter().all(|entry| entry.count == 0));
    }

    #[test]
    fn a_rival_s_grant_a_millisecond_after_the_expiry_is_counted_on_the_lock_clock() {
        let grant_at = |after_s: f64| {
            let mut history = Builder::new();
            history.at(0.0).grant("L", "aa", 1, TTL_S);
            history.at(TTL_S + after_s).grant("L", "bb", 2, TTL_S);
            coverage(&PackedHistory::pack(&history.build()), TTL)
        };
        assert_eq!(
            grant_at(0.001).count(Window::GrantAfterExpiry, Width::Ms1),
            1
        );
        assert_eq!(
            grant_at(0.001_001).count(Window::GrantAfterExpiry, Width::Ms1),
            0
        );
        assert_eq!(
            grant_at(0.001_001).count(Window::GrantAfterExpiry, Width::Ms10),
            1
        );
    }

    #[test]
    fn a_tally_counts_runs_and_names_the_windows_never_reached() {
        let mut tally = CoverageTally::default();
        tally.add(&coverage(&release_at(TTL_S - 0.001), TTL));
        for _ in 0..999 {
            tally.add(&coverage(&release_at(TTL_S - 0.006), TTL));
        }
        let lines = tally.lines();
        assert!(lines.contains(
            &"release in flight across expiry, ≤ 1 ms: reached in 1 of 1,000 seeds".to_string()
        ));
        assert!(
            lines.contains(&"renew in flight across expiry, ≤ 1 ms: never reached".to_string())
        );
        let mut merged = CoverageTally::default();
        merged.merge(&tally);
        merged.merge(&tally);
        assert_eq!(merged.runs, 2_000);
        assert_eq!(
            merged.reached.iter().map(|entry| entry.count).max(),
            Some(2)
        );
    }

    /// A worker's renew whose reply was lost, then its write, and a release in flight: what a
    /// client library talking to its own server leaves, with no lock service log.
    fn without_lock_log() -> PackedHistory {
        let mut history = Builder::new();
        history
            .at(1.0)
            .invoke_lock_call("w0:renew", Op::Renew, "L", "aa");
        history.at(2.0).info("w0:renew");
        // The builder moves each event a step past the one before.
        history.invoke_write("w0", "k", 0, "w0-0");
        history.at(2.01).ok("w0");
        history
            .at(TTL_S - 0.001)
            .invoke_lock_call("w0", Op::Release, "L", "aa");
        history.at(TTL_S + 0.004).ok("w0");
        PackedHistory::pack(&history.build())
    }

    #[test]
    fn without_a_lock_log_the_windows_at_a_lease_s_end_are_not_measured_and_not_called_unreached() {
        let reached = coverage(&without_lock_log(), TTL);
        assert!(reached.without_lock_log);
        // The write went 1 s after the lost renew was sent: within a TTL.
        assert_eq!(reached.count(Window::LostRenewThenWrite, Width::Ttl), 1);
        assert_eq!(reached.count(Window::LostRenewThenWrite, Width::Ms100), 0);
        assert!(!coverage(&release_at(TTL_S - 0.001), TTL).without_lock_log);

        let mut none_logged = CoverageTally::default();
        none_logged.add(&reached);
        let lines = none_logged.lines();
        assert!(lines[0].starts_with("windows at a lease's end or a grant: not measured"));
        assert!(
            lines.iter().all(|line| !line.contains("across expiry")),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|line| line.starts_with("lost renew reply")
                && line.ends_with("reached in 1 of 1 seeds")),
            "{lines:#?}"
        );

        let mut some_logged = none_logged.clone();
        some_logged.add(&coverage(&release_at(TTL_S - 0.006), TTL));
        let lines = some_logged.lines();
        assert!(
            lines.contains(
                &"release in flight across expiry, ≤ 1 ms: never reached in 1 seeds with a lock \
              service log"
                    .to_string()
            )
        );
        let json = serde_json::to_string(&some_logged).unwrap();
        let back: CoverageTally = serde_json::from_str(&json).unwrap();
        assert_eq!(back, some_logged);
    }
}
