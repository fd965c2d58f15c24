//! The zoo: every deliberately broken lock service, store and worker fencer ships, each with
//! the settings under which it is detectable, and the hunt that measures how fast fencer
//! catches it.
//!
//! Each mutant is the reference with one real-world bug put back in. Its settings pick the
//! workload and faults that expose that bug; everything else is [`Settings::default`]. The
//! same settings with the mutant swapped back for the reference ([`Mutant::healed`]) must stay
//! clean, so a detection is the mutant's doing, not the scenario's.

use std::time::Instant;

use fencer_checkers::{Validity, Verdict};
use fencer_harness::Workload;
use fencer_nemesis::FaultKind;
use fencer_workloads::WorkerVariant;

use fencer_run::plan::Plan;
use fencer_run::settings::{LockBackend, Settings, StoreBackend};
use fencer_run::{RunError, simulate};

/// A broken variant of the reference, and how to expose it.
#[derive(Clone, Copy, Debug)]
pub struct Mutant {
    /// The zoo name (`fencer mutants` prints it).
    pub name: &'static str,
    /// The real-world bug it models.
    pub models: &'static str,
    /// The anomaly class fencer must report for it.
    pub expected_class: &'static str,
    workload: Workload,
    nemesis: &'static [FaultKind],
    /// Mean gap between faults: restarts keep the lock down for 0.5–2 TTLs, so they are
    /// spaced out further than the default or the lock is down most of the run.
    mean_fault_gap_ns: u64,
    lock: LockBackend,
    store: StoreBackend,
    worker: WorkerVariant,
}

const DEFAULT_GAP_NS: u64 = 10_000_000_000;
const RESTART_GAP_NS: u64 = 60_000_000_000;

/// Every mutant, lock service first, then stores, then workers.
pub const ZOO: [Mutant; 11] = [
    Mutant {
        name: "unsafe-release",
        models: "release deletes the lease without comparing the owner (Redis DEL instead of \
                 the compare-and-delete script): a paused holder's late release frees its \
                 successor's lease",
        expected_class: "foreign-release",
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::SimUnsafeRelease,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "unchecked-renew",
        models: "renew extends whatever lease is live without comparing the owner (PEXPIRE \
                 without GET == owner): a stale holder keeps its successor's lease alive",
        expected_class: "foreign-release",
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::SimUncheckedRenew,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "resurrecting-renew",
        models: "renew finds the caller's lease even after it expired and was granted to \
                 someone else, and revives it: two live leases at once",
        expected_class: "overlapping-leases",
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::SimResurrectingRenew,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "clock-tokens",
        models: "the fencing token is the lock server's wall clock in ms: a backward clock \
                 step hands out a token below an earlier grant's",
        expected_class: "token-regression",
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Skew],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::SimClockTokens,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "volatile-counter",
        models: "the token counter lives in memory only (INCR without persistence) and \
                 restarts from zero with the server",
        expected_class: "token-regression",
        workload: Workload::Mutex,
        nemesis: &[FaultKind::Restart],
        mean_fault_gap_ns: RESTART_GAP_NS,
        lock: LockBackend::SimVolatileCounter,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "late-renew",
        models: "renew accepts a lease up to a grace period (a fiftieth of the TTL) after it \
                 expired, even when a rival was granted the lock meanwhile (leases kept per \
                 owner, an 'expires > now - grace' skew tolerance): the late renew revives the \
                 old lease beside its successor",
        expected_class: "overlapping-leases",
        // A mutex holder is done before its first held renew goes out; a register holder is
        // still waiting for its write at the lease's edge, and so is its renewal.
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::LeaseEdge],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::SimLateRenew,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "check-then-write",
        models: "the store reads the fence, compares in the application, then writes \
                 unconditionally: a newer write can land between the check and the write",
        expected_class: "stale-write-accepted",
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause, FaultKind::DelayWrite],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteCheckThenWrite,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "sqlite-unfenced",
        models: "a plain UPDATE that stores the token but never compares it: what most code \
                 does",
        expected_class: "stale-write-accepted",
        workload: Workload::FencedRegister,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteUnfenced,
        worker: WorkerVariant::Reference,
    },
    Mutant {
        name: "ignore-renew-failure",
        models: "the worker logs a failed or unanswered renewal and keeps writing; shown \
                 against an unfenced store, where only the worker's own policy protects the \
                 data, so a pause past the TTL lets its late write land after its successor's",
        expected_class: "stale-write-accepted",
        workload: Workload::LockCounter,
        nemesis: &[FaultKind::Pause],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::Sim,
        store: StoreBackend::SqliteUnfenced,
        worker: WorkerVariant::IgnoreRenewFailure,
    },
    Mutant {
        name: "zombie-renewal",
        models: "release does not cancel the renewal task, which keeps renewing with the \
                 released owner token (a watchdog timer nobody cancels on unlock)",
        expected_class: "zombie-renewal",
        workload: Workload::Mutex,
        nemesis: &FaultKind::DEFAULT,
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::ZombieRenewal,
    },
    Mutant {
        name: "blind-retry",
        models: "a generic retry wrapper resends a rejected or timed-out write with the same \
                 write id, value and stale token: a delayed original and its retry both apply",
        expected_class: "duplicate-effect",
        workload: Workload::LockCounter,
        nemesis: &[FaultKind::DelayWrite],
        mean_fault_gap_ns: DEFAULT_GAP_NS,
        lock: LockBackend::Sim,
        store: StoreBackend::Sqlite,
        worker: WorkerVariant::BlindRetry,
    },
];

impl Mutant {
    /// Looks a mutant up by its zoo name.
    pub fn named(name: &str) -> Option<&'static Mutant> {
        ZOO.iter().find(|mutant| mutant.name == name)
    }

    /// The default settings with this mutant and the scenario that exposes it, at `seed`.
    pub fn settings(&self, seed: u64) -> Settings {
        Settings {
            seed,
            workload: self.workload,
            nemesis: self.nemesis.iter().copied().collect(),
            mean_fault_gap_ns: self.mean_fault_gap_ns,
            lock: self.lock.into(),
            store: self.store.into(),
            worker: self.worker,
            ..Settings::default()
        }
    }

    /// The same scenario with the reference lock, store and worker: the control.
    pub fn healed(&self, seed: u64) -> Settings {
        Settings {
            lock: LockBackend::Sim.into(),
            store: StoreBackend::Sqlite.into(),
            worker: WorkerVariant::Reference,
            ..self.settings(seed)
        }
    }
}

/// Simulates and checks one run.
pub fn verdict_of(settings: &Settings) -> Result<Verdict, RunError> {
    let history = simulate(&Plan::generate(settings))?;
    Ok(fencer_run::checking::judge(settings, &history, false))
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
        if self.wall_s > 0.0 {
            self.runs as f64 / self.wall_s
        } else {
            0.0
        }
    }
}

/// Runs `mutant` on seeds `0..cap` until a verdict is invalid.
pub fn hunt(mutant: &'static Mutant, cap: u64) -> Result<Hunt, RunError> {
    let started = Instant::now();
    let mut caught = None;
    let mut runs = 0;
    for seed in 0..cap {
        runs += 1;
        let verdict = verdict_of(&mutant.settings(seed))?;
        if verdict.validity == Validity::Invalid {
            caught = Some(Catch {
                seed,
                classes: verdict.anomaly_counts.keys().cloned().collect(),
            });
            break;
        }
    }
    Ok(Hunt {
        mutant,
        caught,
        runs,
        wall_s: started.elapsed().as_secs_f64(),
    })
}
