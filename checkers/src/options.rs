//! What a check is asked to do: which workload produced the history (so only the checkers that
//! apply to it run), whether warnings fail the verdict, and how long the linearizability search
//! may take when the history has no store log.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The workload that produced a history; decides which checkers apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Workers overwrite one protected register under the lock.
    #[default]
    FencedRegister,
    /// Workers read a counter and write counter + 1 under the lock.
    LockCounter,
    /// The lock service alone: no store, no protected value.
    Mutex,
}

impl Workload {
    /// Every workload, default first.
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
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload name that names no workload.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a workload (fenced-register, lock-counter or mutex), found {found:?}")]
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

/// How to check a history. `Default` is what `fencer check` does with no flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// The workload that produced the history.
    pub workload: Workload,
    /// Treat warnings (`superseded-write-accepted`) as failures.
    pub strict: bool,
    /// Wall-clock budget of the linearizability search used when the history has no store log;
    /// when it runs out the result is `unknown`, never a guess.
    pub search_budget_ms: u64,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            workload: Workload::FencedRegister,
            strict: false,
            search_budget_ms: 10_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_agree_across_display_fromstr_and_serde() {
        for workload in Workload::ALL {
            assert_eq!(workload.name().parse::<Workload>(), Ok(workload));
            assert_eq!(
                serde_json::to_string(&workload).unwrap(),
                format!("\"{workload}\"")
            );
        }
        let err = "counter".parse::<Workload>().unwrap_err().to_string();
        assert!(
            err.contains("lock-counter") && err.contains("\"counter\""),
            "{err}"
        );
    }
}
