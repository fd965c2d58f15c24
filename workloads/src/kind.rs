//! Which workload runs, and which worker: the reference worker or one with a known bug.

use serde::{Deserialize, Serialize};

/// What workers do while they hold the lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Overwrite one protected value under the fencing token: exposes stale writes.
    #[default]
    FencedRegister,
    /// Read a counter, think, write counter + 1 under the fencing token: exposes lost and
    /// duplicated increments, as Jepsen's lock-set workload exposes lost writes.
    LockCounter,
    /// The lock service alone (acquire, renew, release; no store calls), for backends that
    /// have no store.
    Mutex,
}

impl WorkloadKind {
    /// Every workload, in CLI order.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::FencedRegister,
        WorkloadKind::LockCounter,
        WorkloadKind::Mutex,
    ];

    /// The CLI and `Settings.workload` name.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::FencedRegister => "fenced-register",
            WorkloadKind::LockCounter => "lock-counter",
            WorkloadKind::Mutex => "mutex",
        }
    }

    /// The store key the workload's lock protects (none for `mutex`).
    pub fn key(self) -> &'static str {
        match self {
            WorkloadKind::FencedRegister => "register-1",
            WorkloadKind::LockCounter => "counter-1",
            WorkloadKind::Mutex => "",
        }
    }
}

impl std::str::FromStr for WorkloadKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        WorkloadKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| {
                format!(
                    "unknown workload `{text}`: expected one of fenced-register, lock-counter, mutex"
                )
            })
    }
}

/// The worker's code: the reference, or a worker mutant with one real-world bug put back in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerVariant {
    /// Stops protected work once a renewal fails or goes unanswered, stops its renewal task
    /// before releasing, never resends a write.
    #[default]
    Reference,
    /// Keeps writing after a renewal failed or went unanswered (the renew-failure policy
    /// forced to `continue`): the client that logs "could not extend lock" and carries on.
    IgnoreRenewFailure,
    /// The renewal task is not cancelled by release and keeps renewing with the released
    /// owner token until the service refuses it (a watchdog timer nobody cancels on unlock).
    ZombieRenewal,
    /// A write that was rejected or timed out is sent again, once, with the same write id,
    /// value and (stale) fencing token: the generic retry wrapper that makes a rejected write
    /// a duplicate.
    BlindRetry,
}

impl WorkerVariant {
    /// Every variant, reference first.
    pub const ALL: [WorkerVariant; 4] = [
        WorkerVariant::Reference,
        WorkerVariant::IgnoreRenewFailure,
        WorkerVariant::ZombieRenewal,
        WorkerVariant::BlindRetry,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            WorkerVariant::Reference => "reference",
            WorkerVariant::IgnoreRenewFailure => "ignore-renew-failure",
            WorkerVariant::ZombieRenewal => "zombie-renewal",
            WorkerVariant::BlindRetry => "blind-retry",
        }
    }
}

impl std::str::FromStr for WorkerVariant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        WorkerVariant::ALL
            .into_iter()
            .find(|variant| variant.name() == text)
            .ok_or_else(|| {
                format!(
                    "unknown worker `{text}`: expected one of reference, ignore-renew-failure, \
                     zombie-renewal, blind-retry"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_list_the_choices() {
        for kind in WorkloadKind::ALL {
            assert_eq!(kind.name().parse::<WorkloadKind>(), Ok(kind));
        }
        for variant in WorkerVariant::ALL {
            assert_eq!(variant.name().parse::<WorkerVariant>(), Ok(variant));
        }
        assert!(
            "queue"
                .parse::<WorkloadKind>()
                .unwrap_err()
                .contains("expected one of fenced-register, lock-counter, mutex")
        );
        assert!("retry".parse::<WorkerVariant>().is_err());
    }
}
