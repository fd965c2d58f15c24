//! The simulated backends, by name: the reference lease service and fenced SQLite store, and
//! the mutants of each.

use std::sync::Arc;

use fencer_harness::LockService;
use serde::{Deserialize, Serialize};

use crate::{LeaseRules, SimLeaseService, StoreRules};

/// The lock services fencer can run against in the simulation tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockBackend {
    /// The reference lease service.
    Sim,
    /// Mutant: release without the owner compare.
    SimUnsafeRelease,
    /// Mutant: renew without the owner compare.
    SimUncheckedRenew,
    /// Mutant: renew revives an expired, re-granted lease.
    SimResurrectingRenew,
    /// Mutant: fencing token = lock server wall clock in ms.
    SimClockTokens,
    /// Test-only (`test-nondeterministic`): the reference service made non-deterministic on
    /// purpose, to prove `gate --check-determinism` catches it; see
    /// [`crate::registry::NondeterministicLock`]. Deliberately left out of [`LockBackend::ALL`].
    #[cfg(feature = "test-backends")]
    #[doc(hidden)]
    TestNondeterministic,
    /// Mutant: the token counter resets when the lock service restarts.
    SimVolatileCounter,
    /// Mutant: renew accepts a lease a grace period after it expired, beside its successor.
    SimLateRenew,
    /// Mutant: release answers ok and logs the release but leaves the lease until its TTL.
    SimBusyWhileFree,
    /// Mutant: a renewed lease never expires.
    SimStickyLock,
    /// Mutant: renew revives the caller's expired lease when nobody took the lock meanwhile.
    SimReviveExpired,
    /// Mutant: renew answers ok without applying when the caller's clock says the last renew
    /// was too recent.
    SimClockThrottledRenew,
    /// Mutant: release compares the owner and deletes in two round trips 1–10 ms apart.
    SimTwoStepRelease,
    /// Mutant: renew compares the owner and extends in two round trips 1–10 ms apart.
    SimTwoStepRenew,
    /// Mutant: renew answers ok for an expired lease without extending it.
    SimExpiredRenewOk,
}

impl LockBackend {
    /// Every backend, reference first.
    pub const ALL: [LockBackend; 14] = [
        LockBackend::Sim,
        LockBackend::SimUnsafeRelease,
        LockBackend::SimUncheckedRenew,
        LockBackend::SimResurrectingRenew,
        LockBackend::SimClockTokens,
        LockBackend::SimVolatileCounter,
        LockBackend::SimLateRenew,
        LockBackend::SimBusyWhileFree,
        LockBackend::SimStickyLock,
        LockBackend::SimReviveExpired,
        LockBackend::SimClockThrottledRenew,
        LockBackend::SimTwoStepRelease,
        LockBackend::SimTwoStepRenew,
        LockBackend::SimExpiredRenewOk,
    ];

    /// The rules the simulated service follows.
    pub fn rules(self) -> LeaseRules {
        match self {
            LockBackend::Sim => LeaseRules::Reference,
            LockBackend::SimUnsafeRelease => LeaseRules::UnsafeRelease,
            LockBackend::SimUncheckedRenew => LeaseRules::UncheckedRenew,
            LockBackend::SimResurrectingRenew => LeaseRules::ResurrectingRenew,
            LockBackend::SimClockTokens => LeaseRules::ClockTokens,
            #[cfg(feature = "test-backends")]
            LockBackend::TestNondeterministic => LeaseRules::Reference,
            LockBackend::SimVolatileCounter => LeaseRules::VolatileCounter,
            LockBackend::SimLateRenew => LeaseRules::LateRenew,
            LockBackend::SimBusyWhileFree => LeaseRules::BusyWhileFree,
            LockBackend::SimStickyLock => LeaseRules::StickyLock,
            LockBackend::SimReviveExpired => LeaseRules::ReviveExpired,
            LockBackend::SimClockThrottledRenew => LeaseRules::ClockThrottledRenew,
            LockBackend::SimTwoStepRelease => LeaseRules::TwoStepRelease,
            LockBackend::SimTwoStepRenew => LeaseRules::TwoStepRenew,
            LockBackend::SimExpiredRenewOk => LeaseRules::ExpiredRenewOk,
        }
    }

    /// The service workers call: `service` itself, or for the test-only backend, `service`
    /// wrapped so that it is not deterministic.
    pub fn serve(self, service: Arc<SimLeaseService>) -> Arc<dyn LockService> {
        match self {
            #[cfg(feature = "test-backends")]
            LockBackend::TestNondeterministic => {
                Arc::new(super::NondeterministicLock::new(service))
            }
            _ => service,
        }
    }
}

/// The stores fencer can protect in the simulation tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreBackend {
    /// SQLite with the fenced conditional UPDATE.
    Sqlite,
    /// SQLite with a plain UPDATE (no fence check).
    SqliteUnfenced,
    /// SQLite, fence read and compared in the application, then written: a race.
    SqliteCheckThenWrite,
    /// SQLite comparing the fence as text: refuses newer tokens once they gain a digit.
    SqliteRefusesNewer,
    /// SQLite behind a write-back cache that serves refused writes to reads.
    SqlitePhantomRead,
    /// SQLite behind a read-through cache that no write invalidates.
    SqliteStaleCache,
    /// SQLite answering success for a fenced write without reading its rowcount.
    SqliteIgnoresRowcount,
}

impl StoreBackend {
    /// Every backend, reference first.
    pub const ALL: [StoreBackend; 7] = [
        StoreBackend::Sqlite,
        StoreBackend::SqliteUnfenced,
        StoreBackend::SqliteCheckThenWrite,
        StoreBackend::SqliteRefusesNewer,
        StoreBackend::SqlitePhantomRead,
        StoreBackend::SqliteStaleCache,
        StoreBackend::SqliteIgnoresRowcount,
    ];

    /// The rules the SQLite store follows.
    pub fn rules(self) -> StoreRules {
        match self {
            StoreBackend::Sqlite => StoreRules::Fenced,
            StoreBackend::SqliteUnfenced => StoreRules::Unfenced,
            // An application round trip between SELECT and UPDATE on a loaded service.
            StoreBackend::SqliteCheckThenWrite => StoreRules::CheckThenWrite {
                check_gap_ns: 50_000_000,
            },
            StoreBackend::SqliteRefusesNewer => StoreRules::RefusesNewer,
            StoreBackend::SqlitePhantomRead => StoreRules::PhantomRead,
            // A cache entry kept a second, as read-heavy services often configure.
            StoreBackend::SqliteStaleCache => StoreRules::StaleCache {
                entry_ttl_ns: 1_000_000_000,
            },
            StoreBackend::SqliteIgnoresRowcount => StoreRules::IgnoresRowcount,
        }
    }
}
