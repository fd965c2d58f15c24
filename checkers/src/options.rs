//! What a check is asked to do: which workload produced the history (so only the checkers that
//! apply to it run), whether warnings fail the verdict, and how long the linearizability search
//! may take when the history has no store log.

pub use fencer_harness::{UnknownWorkload, Workload};

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
