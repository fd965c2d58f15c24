//! Which worker runs: the reference worker or one with a known bug.

use serde::{Deserialize, Serialize};

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
    fn worker_names_parse_back_and_unknown_names_are_refused() {
        for variant in WorkerVariant::ALL {
            assert_eq!(variant.name().parse::<WorkerVariant>(), Ok(variant));
        }
        assert!("retry".parse::<WorkerVariant>().is_err());
    }
}
