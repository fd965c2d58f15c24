//! Which workload a run does: one name used by the plan (what workers do), the checkers (which
//! checks apply) and the command line, parsed once at the edge.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What workers do while they hold the lock.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
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

impl Workload {
    /// Every workload, default first, in CLI order.
    pub const ALL: [Workload; 3] = [
        Workload::FencedRegister,
        Workload::LockCounter,
        Workload::Mutex,
    ];

    /// The kebab-case name, identical to the serde form.
    pub fn name(self) -> &'static str {
        match self {
            Workload::FencedRegister => "fenced-register",
            Workload::LockCounter => "lock-counter",
            Workload::Mutex => "mutex",
        }
    }

    /// The store key the workload's lock protects (none for `mutex`).
    pub fn key(self) -> &'static str {
        match self {
            Workload::FencedRegister => "register-1",
            Workload::LockCounter => "counter-1",
            Workload::Mutex => "",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload name that names no workload.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown workload `{found}`: expected one of fenced-register, lock-counter, mutex")]
pub struct UnknownWorkload {
    /// The name that was given.
    pub found: String,
}

impl FromStr for Workload {
    type Err = UnknownWorkload;

    fn from_str(name: &str) -> Result<Workload, UnknownWorkload> {
        Workload::ALL
            .into_iter()
            .find(|workload| workload.name() == name)
            .ok_or_else(|| UnknownWorkload {
                found: name.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_match_the_serde_form() {
        for workload in Workload::ALL {
            assert_eq!(workload.name().parse::<Workload>(), Ok(workload));
            assert_eq!(workload.to_string(), workload.name());
            assert_eq!(
                serde_json::to_value(workload).unwrap(),
                serde_json::Value::String(workload.name().into())
            );
        }
        let error = "queue".parse::<Workload>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown workload `queue`: expected one of fenced-register, lock-counter, mutex"
        );
    }
}
