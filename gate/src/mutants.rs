//! The zoo: every deliberately broken lock service, store and worker fencer ships, each with
//! the settings under which it is detectable, and the hunt that measures how fast fencer
//! catches it.
//!
//! Each mutant is the reference with one real-world bug put back in. Its settings pick the
//! workload and faults that expose that bug (and, for one, fewer cycles); everything else is
//! [`Settings::default`]. A mutant whose class is a warning is judged strictly. The same
//! settings with the mutant swapped back for the reference ([`Mutant::healed`]) must stay
//! clean under the same judgement, so a detection is the mutant's doing, not the scenario's.
//!
//! [`detect`] measures how fast a mutant is caught from every start seed of a range, each
//! seed simulated once however many hunts' windows contain it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use fencer_checkers::{Validity, Verdict};
use fencer_harness::Workload;
use fencer_nemesis::FaultKind;
use fencer_workloads::{ClientVariant, WaitMode};

use fencer_run::plan::Plan;
use fencer_run::settings::{LockBackend, Settings, StoreBackend};
use fencer_run::{RunError, simulate_packed};

use crate::jobs::{job_count, named_thread, spawn_jobs};

/// A broken variant of the reference, and how to expose it.
#[derive(Clone, Copy, Debug)]
pub struct Mutant {
    /// The zoo name (`fencer mutants` prints it).
    pub name: &'static str,
    /// The real-world bug it models.
    pub models: &'static str,
    /// The anomaly class fencer must report for it.
    pub expected_class: &'static str,
    /// Warnings fail the verdict: the expected class is a warning (`stuck-lock`,
    /// `expired-lease-renewed`), reported as a failure only by a strict check.
    pub strict: bool,
    workload: Workload,
    nemesis: &'static [FaultKind],
    /// Mean gap between faults: restarts keep the lock down for 0.5–2 TTLs, so they are
    /// spaced out further than the default or the lock is down most of the run.
    mean_fault_gap_ns: u64,
    /// Cycles per worker when not the default: a scenario whose every handover waits out a
    /// TTL shows the bug at the first one and needs no more.
    ops_per_worker: Option<usize>,
    lock: LockBackend,
    store: StoreBackend,
    client: ClientVariant,
}

const DEFAULT_GAP_NS: u64 = 10_000_000_000;
/// Cycles per worker for `eternal-watchdog`.
const ETERNAL_CYCLES: usize = 5;
const RESTART_GAP_NS: u64 = 60_000_000_000;
/// Faults this close together often overlap: pauses on one worker freeze it for several
/// TTLs, and clock steps land inside many leases.
const FREQUENT_GAP_NS: u64 = 2_000_000_000;

/// Every mutant, lock service first, then stores, then workers.
pub const ZOO: [Mutant; 26] = [
    Mutant {
        name: "unsafe-release",
        models: "release deletes the lease without comparing the owner (Redis DEL instead of \
                 the compare-and-delete script): a paused holder's late release frees its \
                 successor's lease",
        expected_class: "foreign-release",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimUnsafeRelease,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "unchecked-renew",
        models: "renew extends whatever lease is live without comparing the owner (PEXPIRE \
                 without GET == owner): a stale holder keeps its successor's lease alive",
        expected_class: "foreign-release",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimUncheckedRenew,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "resurrecting-renew",
        models: "renew finds the caller's lease even after it expired and was granted to \
                 someone else, and revives it: two live leases at once",
        expected_class: "overlapping-leases",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimResurrectingRenew,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "clock-tokens",
        models: "the fencing token is the lock server's wall clock in ms: a backward clock \
                 step hands out a token below an earlier grant's",
        expected_class: "token-regression",
        strict: false,
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Skew],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimClockTokens,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "volatile-counter",
        models: "the token counter lives in memory only (INCR without persistence) and \
                 restarts from zero with the server",
        expected_class: "token-regression",
        strict: false,
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Restart],
        mean_fault_gap_ns: RESTART_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimVolatileCounter,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "late-renew",
        models: "renew accepts a lease up to a grace period (a fiftieth of the TTL) after it \
                 expired, even when a rival was granted the lock meanwhile (leases kept per \
                 owner, an 'expires > now - grace' skew tolerance): the late renew revives the \
                 old lease beside its successor",
        expected_class: "overlapping-leases",
        strict: false,
        // A mutex holder is done before its first held renew goes out; a register holder is
        // still waiting for its write at the lease's edge, and so is its renewal.
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::LeaseEdge],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimLateRenew,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "busy-while-free",
        models: "release compares the owner and logs the release but deletes another key than \
                 the lease's (the lock's name built with a different prefix on the release \
                 path): the lease stays until its TTL, and acquires are answered busy while the \
                 service's own log shows the lock free",
        expected_class: "lock-reply-mismatch",
        strict: false,
        // Every handover shows it, and waits out a TTL: no fault and few cycles are needed.
        workload: Workload::Mutex,
        nemesis: &[],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: Some(20),
        lock: LockBackend::SimBusyWhileFree,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "sticky-lock",
        models: "renew sets the lease to never expire (Redis SET key owner without PX, which \
                 drops the key's TTL; a PERSIST by mistake): once renewed, a lease whose holder \
                 stalls keeps every rival out long after its TTL",
        expected_class: "stuck-lock",
        strict: true,
        // Frequent pauses run into each other, freezing a holder for several TTLs.
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimStickyLock,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "revive-expired",
        models: "the lease row outlives its expiry until the next grant, and renew compares \
                 only the owner (UPDATE leases SET expires = now + ttl WHERE name = ? AND \
                 owner = ?, without AND expires > now): a renew arriving after the lease \
                 expired, with nobody granted the lock meanwhile, revives it",
        expected_class: "expired-lease-renewed",
        strict: true,
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimReviveExpired,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "clock-throttled-renew",
        models: "renew answers ok without applying anything when, by the caller's clock, the \
                 lease was granted or renewed less than a quarter of a TTL ago (repeated \
                 renews coalesced on the client's timestamp): a worker whose clock steps back \
                 is told its lease was renewed while it runs out",
        expected_class: "lock-reply-mismatch",
        strict: false,
        // Frequent steps put a backward one inside many leases' renewals.
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Skew],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimClockThrottledRenew,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    // The next three run under the plain defaults: every default fault family, the default
    // workload and fault gap. Their races are a few milliseconds wide, and only lease-edge
    // attacks aimed log-uniformly reach them that often.
    Mutant {
        name: "two-step-release",
        models: "release compares the owner in one round trip and deletes the key in a second \
                 one 1–10 ms later (GET, then DEL from the client): a check that passes just \
                 before the lease expires deletes a rival's lease granted in between",
        expected_class: "foreign-release",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimTwoStepRelease,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "two-step-renew",
        models: "renew compares the owner in one round trip and extends the key in a second \
                 one 1–10 ms later (GET, then PEXPIRE, its answer unread): a check that passes \
                 just before the lease expires answers ok for a lease that ran out, or extends \
                 a rival's lease granted in between",
        expected_class: "lock-reply-mismatch",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimTwoStepRenew,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "expired-renew-ok",
        models: "renew answers ok for the caller's expired lease without extending it (an \
                 UPDATE … WHERE owner = ? AND expires > now whose affected-row count is never \
                 read): the holder is told its lease was renewed while it has run out",
        expected_class: "lock-reply-mismatch",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::SimExpiredRenewOk,
        store: StoreBackend::Sqlite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "check-then-write",
        models: "the store reads the fence, compares in the application, then writes \
                 unconditionally: a newer write can land between the check and the write",
        expected_class: "stale-write-accepted",
        strict: false,
        workload: Workload::FencedRegister,
        // Writes held in flight arrive in bunches, a holder's beside its successor's: the
        // race needs two writes within the check's gap of each other.
        nemesis: &[FaultKind::DelayWrite],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteCheckThenWrite,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "sqlite-unfenced",
        models: "a plain UPDATE that stores the token but never compares it: what most code \
                 does",
        expected_class: "stale-write-accepted",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteUnfenced,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "refuses-newer",
        models: "the store compares the fence as text, not as a number (a TEXT fence column, a \
                 Lua script comparing GET's string with ARGV without tonumber): once tokens \
                 pass 9, \"10\" sorts before \"9\" and the new holder's writes are refused as \
                 stale although no higher token was ever accepted",
        expected_class: "unfounded-rejection",
        strict: false,
        // Tokens gain a digit in every run: no fault is needed.
        workload: Workload::FencedRegister,
        nemesis: &[],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteRefusesNewer,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "phantom-read",
        models: "a write-back cache in front of the fenced store takes each write as it is \
                 sent and serves reads from it, and is not evicted when the store refuses the \
                 write: a write held in flight lands after its successor's, is refused, and is \
                 read back as the register's value",
        expected_class: "phantom-read",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::DelayWrite],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqlitePhantomRead,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "stale-cache",
        models: "a read-through cache in front of the fenced store (memcached beside the \
                 database) is filled on a read miss and invalidated by no write: for a second \
                 after each fill, reads return the value from before writes already \
                 acknowledged",
        expected_class: "stale-read",
        strict: false,
        // Every holder reads before it writes: the next holder's read finds the entry its
        // predecessor's read filled.
        workload: Workload::FencedRegister,
        nemesis: &[],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteStaleCache,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "ignored-rowcount",
        models: "the store runs the fenced UPDATE but answers success without reading its \
                 rowcount (an ORM save() that returns no count, an execute whose result is \
                 dropped): a stale write the fence refused is reported applied",
        expected_class: "ack-mismatch",
        strict: false,
        // The fence refuses a write only when a paused holder writes after its successor.
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: FREQUENT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteIgnoresRowcount,
        client: ClientVariant::Reference,
    },
    Mutant {
        name: "ignore-renew-failure",
        models: "the worker logs a failed or unanswered renewal and keeps writing; shown \
                 against an unfenced store, where only the worker's own policy protects the \
                 data, so a pause past the TTL lets its late write land after its successor's",
        expected_class: "stale-write-accepted",
        strict: false,
        workload: Workload::LockCounter,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteUnfenced,
        client: ClientVariant::IgnoreRenewFailure,
    },
    Mutant {
        name: "zombie-renewal",
        models: "release does not cancel the renewal task, which keeps renewing with the \
                 released owner token (a watchdog timer nobody cancels on unlock)",
        expected_class: "zombie-renewal",
        strict: false,
        workload: Workload::Mutex,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::ZombieRenewal,
    },
    Mutant {
        name: "blind-retry",
        models: "a generic retry wrapper resends a rejected or timed-out write with the same \
                 write id, value and stale token: a delayed original and its retry both apply",
        expected_class: "duplicate-effect",
        strict: false,
        workload: Workload::LockCounter,
        nemesis: &[FaultKind::DelayWrite],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::BlindRetry,
    },
    Mutant {
        name: "cached-check",
        models: "the library's ownership check answers from a flag set at the grant instead of \
                 asking the service (`isAcquired`): after a pause past the TTL it still says \
                 held while another owner holds the lock",
        expected_class: "stale-ownership-check",
        strict: false,
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::CachedCheck,
    },
    Mutant {
        name: "silent-watchdog",
        models: "the watchdog logs a refused renewal and carries on, never telling its worker \
                 the lease is lost",
        expected_class: "silent-lease-loss",
        strict: true,
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::SilentWatchdog,
    },
    Mutant {
        name: "sparse-renewal",
        models: "the watchdog renews every 0.6 TTLs: one lost reply and the next renewal comes \
                 after the lease may have expired",
        expected_class: "fragile-renewal",
        strict: true,
        workload: Workload::Mutex,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        ops_per_worker: None,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::SparseRenewal,
    },
    Mutant {
        name: "eternal-watchdog",
        models: "the watchdog renews on its timer until release, whatever its caller is doing: \
                 work cancelled without a release keeps its lease alive for nobody",
        expected_class: "abandoned-lease",
        strict: true,
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Cancel],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        // The first cancelled lease is renewed for nobody from then on, and every other
        // worker waits for the lock to the end of the run: a few cycles show it.
        ops_per_worker: Some(ETERNAL_CYCLES),
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        client: ClientVariant::EternalWatchdog,
    },
];

impl Mutant {
    /// Looks a mutant up by its zoo name.
    pub fn named(name: &str) -> Option<&'static Mutant> {
        ZOO.iter().find(|mutant| mutant.name == name)
    }

    /// The default settings with this mutant and the scenario that exposes it, at `seed`.
    pub fn settings(&self, seed: u64) -> Settings {
        let defaults = Settings::default();
        Settings {
            seed,
            ops_per_worker: self.ops_per_worker.unwrap_or(defaults.ops_per_worker),
            workload: self.workload,
            nemesis: self.nemesis.iter().copied().collect(),
            mean_fault_gap_ns: self.mean_fault_gap_ns,
            lock: self.lock.into(),
            store: self.store.into(),
            client: self.client.into(),
            ..defaults
        }
    }

    /// The default settings at `seed` with only this mutant's lock, store and client swapped
    /// in: where a user who runs a gate on the broken component meets it.
    pub fn in_plain_defaults(&self, seed: u64) -> Settings {
        Settings {
            seed,
            lock: self.lock.into(),
            store: self.store.into(),
            client: self.client.into(),
            ..Settings::default()
        }
    }

    /// [`Mutant::settings`] with the workers waiting for the lock as `wait` says.
    pub fn waiting(&self, wait: WaitMode, seed: u64) -> Settings {
        Settings {
            wait,
            ..self.settings(seed)
        }
    }

    /// The same scenario with the reference lock, store and worker: the control.
    pub fn healed(&self, seed: u64) -> Settings {
        Settings {
            lock: LockBackend::Sim.into(),
            store: StoreBackend::Sqlite.into(),
            client: ClientVariant::Reference.into(),
            ..self.settings(seed)
        }
    }
}

/// Simulates and checks one run; `strict` makes warnings fail the verdict.
pub fn verdict_of(settings: &Settings, strict: bool) -> Result<Verdict, RunError> {
    let history = simulate_packed(&Plan::generate(settings))?;
    Ok(fencer_run::checking::judge(settings, &history, strict))
}

/// Runs `mutant` at `seed` with its workers waiting as `wait` says and judges it as the mutant
/// asks (strict or not): the anomaly classes found when the verdict is invalid, `None` when
/// it is not.
fn caught_at(mutant: &Mutant, wait: WaitMode, seed: u64) -> Result<Option<Vec<String>>, RunError> {
    let verdict = verdict_of(&mutant.waiting(wait, seed), mutant.strict)?;
    Ok((verdict.validity == Validity::Invalid)
        .then(|| verdict.anomaly_counts.keys().cloned().collect()))
}

/// The first seed that caught a mutant, and what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catch {
    /// The seed.
    pub seed: u64,
    /// Every anomaly class the verdict reported, by name.
    pub classes: Vec<String>,
}

/// How a hunt for one mutant went.
#[derive(Clone, Debug)]
pub struct Hunt {
    /// The mutant hunted.
    pub mutant: &'static Mutant,
    /// The first detection, if any seed below the cap caught it.
    pub caught: Option<Catch>,
    /// Runs simulated (seeds tried).
    pub runs: u64,
    /// Wall time of the hunt, in seconds (simulation and checking).
    pub wall_s: f64,
}

impl Hunt {
    /// Runs per wall second.
    pub fn runs_per_s(&self) -> f64 {
        runs_per_s(self.runs, self.wall_s)
    }
}

fn runs_per_s(runs: u64, wall_s: f64) -> f64 {
    if wall_s > 0.0 {
        runs as f64 / wall_s
    } else {
        0.0
    }
}

/// Runs `mutant` on seeds `0..cap` until a verdict is invalid: [`detect`] from start seed 0.
pub fn hunt(mutant: &'static Mutant, wait: WaitMode, cap: u64) -> Result<Hunt, RunError> {
    let detection = detect(mutant, wait, 0..1, cap)?;
    Ok(Hunt {
        mutant,
        caught: detection.first,
        runs: detection.runs,
        wall_s: detection.wall_s,
    })
}

/// Seeds to detection from every start seed of a range: for start `s`, how many seeds a hunt
/// beginning at `s` tries until the first catch (1 when `s` itself catches the mutant), or
/// `None` when none of `s..s + cap` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distances {
    /// Seeds to detection, one per start seed, in start order.
    pub by_start: Vec<Option<u64>>,
    /// The hunt's cap: seeds tried from one start before it counts as not caught.
    pub cap: u64,
}

impl Distances {
    /// From which seeds caught the mutant, for the starts `starts`: `caught(seed)` is asked
    /// once per seed, in ascending order, from the first start on, and no further than the
    /// last start's window (`starts.end - 1 + cap - 1`) or the first catch at or after the last
    /// start, so each seed is simulated at most once however many windows contain it.
    pub fn measure<E>(
        starts: Range<u64>,
        cap: u64,
        mut caught: impl FnMut(u64) -> Result<bool, E>,
    ) -> Result<Distances, E> {
        let mut by_start = vec![None; starts.clone().count()];
        let mut pending = starts.start;
        let last_seed = starts
            .end
            .saturating_sub(1)
            .saturating_add(cap.saturating_sub(1));
        let mut seed = starts.start;
        while pending < starts.end && seed <= last_seed {
            // Starts whose window ended before this seed are not caught.
            while pending < starts.end && pending.saturating_add(cap) <= seed {
                pending += 1;
            }
            if pending >= starts.end {
                break;
            }
            if caught(seed)? {
                for start in pending..=seed.min(starts.end - 1) {
                    by_start[(start - starts.start) as usize] = Some(seed - start + 1);
                }
                pending = seed + 1;
            }
            seed += 1;
        }
        Ok(Distances { by_start, cap })
    }

    /// Start seeds from which the mutant was caught within the cap.
    pub fn caught(&self) -> usize {
        self.by_start.iter().flatten().count()
    }

    /// Start seeds tried.
    pub fn starts(&self) -> usize {
        self.by_start.len()
    }

    /// Caught starts as a share of all starts (0 for no starts).
    pub fn rate(&self) -> f64 {
        if self.by_start.is_empty() {
            0.0
        } else {
            self.caught() as f64 / self.starts() as f64
        }
    }

    /// The median seeds to detection over every start, a start not caught counting as more
    /// than any caught one; `None` when that puts the median beyond the cap (or no starts).
    /// An even count takes the mean of the two middle values.
    pub fn median(&self) -> Option<f64> {
        let mut sorted: Vec<u64> = self
            .by_start
            .iter()
            .map(|distance| distance.unwrap_or(u64::MAX))
            .collect();
        sorted.sort_unstable();
        let n = sorted.len();
        if n == 0 {
            return None;
        }
        let (low, high) = (sorted[(n - 1) / 2], sorted[n / 2]);
        (high != u64::MAX).then(|| (low as f64 + high as f64) / 2.0)
    }

    /// The most seeds any start needed; `None` when some start was not caught (or no starts).
    pub fn max(&self) -> Option<u64> {
        self.by_start
            .iter()
            .copied()
            .try_fold(None, |most: Option<u64>, distance| {
                distance.map(|d| Some(most.map_or(d, |m| m.max(d))))
            })
            .flatten()
    }
}

/// How fast one mutant is caught from every start seed of a range.
#[derive(Clone, Debug)]
pub struct Detection {
    /// The mutant hunted.
    pub mutant: &'static Mutant,
    /// The start seeds.
    pub starts: Range<u64>,
    /// Seeds to detection from each start.
    pub distances: Distances,
    /// What the lowest catching seed found, if any seed caught it.
    pub first: Option<Catch>,
    /// Runs simulated (each seed once).
    pub runs: u64,
    /// Wall time, in seconds.
    pub wall_s: f64,
}

impl Detection {
    /// Runs per wall second.
    pub fn runs_per_s(&self) -> f64 {
        runs_per_s(self.runs, self.wall_s)
    }
}

/// Measures `mutant`'s seeds to detection from every start seed in `starts`, each hunt capped
/// at `cap` seeds, with its workers waiting as `wait` says; every seed is simulated once,
/// whatever the number of windows it is in.
pub fn detect(
    mutant: &'static Mutant,
    wait: WaitMode,
    starts: Range<u64>,
    cap: u64,
) -> Result<Detection, RunError> {
    let started = Instant::now();
    let mut first = None;
    let mut runs = 0;
    let distances = Distances::measure(starts.clone(), cap, |seed| {
        runs += 1;
        let classes = caught_at(mutant, wait, seed)?;
        if let (None, Some(classes)) = (&first, &classes) {
            first = Some(Catch {
                seed,
                classes: classes.clone(),
            });
        }
        Ok::<_, RunError>(classes.is_some())
    })?;
    Ok(Detection {
        mutant,
        starts,
        distances,
        first,
        runs,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// [`detect`] for every mutant of `mutants` (workers waiting as `wait` says), `jobs` of them at once (each on its own thread,
/// as one seed's simulation uses one core); `report` is called on this thread with each
/// mutant's result in the order of `mutants`, as soon as it and every one before it are done.
/// Each mutant's figures are the same whatever `jobs` is.
pub fn detect_each(
    mutants: &'static [Mutant],
    wait: WaitMode,
    starts: Range<u64>,
    cap: u64,
    jobs: usize,
    mut report: impl FnMut(Result<Detection, RunError>),
) {
    let next = AtomicUsize::new(0);
    let (done_tx, done_rx) = mpsc::channel();
    let work = |done_tx: mpsc::Sender<_>| {
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(mutant) = mutants.get(index) else {
                return;
            };
            if done_tx
                .send((index, detect(mutant, wait, starts.clone(), cap)))
                .is_err()
            {
                return;
            }
        }
    };
    std::thread::scope(|scope| {
        let jobs = job_count(jobs, mutants.len());
        if spawn_jobs(scope, jobs, &named_thread, &done_tx, &work) == 0 {
            work(done_tx.clone());
        }
        drop(done_tx);
        let mut waiting = BTreeMap::new();
        let mut reported = 0;
        for (index, result) in done_rx {
            waiting.insert(index, result);
            while let Some(result) = waiting.remove(&reported) {
                report(result);
                reported += 1;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distances over `starts` when exactly the seeds in `catching` catch the mutant, and the
    /// seeds asked about.
    fn measured(starts: Range<u64>, cap: u64, catching: &[u64]) -> (Distances, Vec<u64>) {
        let mut asked = Vec::new();
        let distances = Distances::measure(starts, cap, |seed| {
            asked.push(seed);
            Ok::<_, ()>(catching.contains(&seed))
        })
        .unwrap();
        (distances, asked)
    }

    #[test]
    fn each_start_counts_the_seeds_up_to_the_next_catch() {
        let (distances, asked) = measured(0..6, 10, &[1, 2, 5]);
        assert_eq!(
            distances.by_start,
            [Some(2), Some(1), Some(1), Some(3), Some(2), Some(1)]
        );
        assert_eq!(
            asked,
            [0, 1, 2, 3, 4, 5],
            "each seed once, none past the last catch"
        );
        assert_eq!((distances.caught(), distances.starts()), (6, 6));
        assert_eq!(distances.rate(), 1.0);
        // Sorted: 1 1 1 2 2 3: the middle two are 1 and 2.
        assert_eq!(distances.median(), Some(1.5));
        assert_eq!(distances.max(), Some(3));
    }

    #[test]
    fn a_start_whose_window_holds_no_catch_is_not_caught() {
        // Cap 3: from 0 the window is 0..3 (no catch), from 1 it is 1..4 (3 catches).
        let (distances, asked) = measured(0..4, 3, &[3]);
        assert_eq!(distances.by_start, [None, Some(3), Some(2), Some(1)]);
        assert_eq!(asked, [0, 1, 2, 3]);
        assert_eq!(distances.rate(), 0.75);
        assert_eq!(distances.median(), Some(2.5));
        assert_eq!(distances.max(), None, "one start escaped");
    }

    #[test]
    fn the_window_of_the_last_start_bounds_the_seeds_tried() {
        let (distances, asked) = measured(10..12, 4, &[]);
        assert_eq!(distances.by_start, [None, None]);
        assert_eq!(
            asked,
            (10..15).collect::<Vec<_>>(),
            "11 + 4 - 1 is the last"
        );
        assert_eq!(distances.rate(), 0.0);
        assert_eq!(distances.median(), None);
        assert_eq!(distances.max(), None);
    }

    #[test]
    fn the_median_is_beyond_the_cap_once_half_the_starts_escape() {
        let (odd, _) = measured(0..3, 1, &[0]);
        assert_eq!(odd.by_start, [Some(1), None, None]);
        assert_eq!(odd.median(), None);
        let (even, _) = measured(0..4, 1, &[0, 1]);
        assert_eq!(even.median(), None, "the upper middle start escaped");
        let (most, _) = measured(0..4, 1, &[0, 1, 2]);
        assert_eq!(most.median(), Some(1.0));
        assert!((most.rate() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn a_catch_past_the_last_start_ends_the_scan() {
        let (distances, asked) = measured(0..2, 50, &[7, 8]);
        assert_eq!(distances.by_start, [Some(8), Some(7)]);
        assert_eq!(asked, (0..=7).collect::<Vec<_>>());
    }

    #[test]
    fn no_starts_measure_nothing() {
        let (distances, asked) = measured(5..5, 10, &[5]);
        assert!(asked.is_empty());
        assert_eq!((distances.starts(), distances.rate()), (0, 0.0));
        assert_eq!((distances.median(), distances.max()), (None, None));
    }
}
