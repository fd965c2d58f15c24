//! fencer: a Jepsen-style fault-injection harness for distributed locks.
//!
//! Seeded workers race through acquire → write → release while a nemesis pauses them, skews
//! clocks and drops renew replies; every call is recorded as a history, and checkers find the
//! stale-generation writes a store accepted and every other lease anomaly.
//!
//! This crate is the `fencer` command line and the small face a user needs:
//! - to test their own lock service and store from `cargo test`: implement [`LockService`] and
//!   [`FencedStore`] (their replies: [`Acquired`], [`Owned`], [`Written`], [`ReadValue`],
//!   errors: [`CallError`]) and run them with [`Harness`], which gives back a [`Report`];
//! - to run and judge plans directly: [`Settings`] → [`Plan::generate`] → [`simulate`] →
//!   [`check`] → [`Verdict`].
//!
//! Everything else lives in the crates below it, one job each: `fencer-harness` (vocabulary,
//! traits, recorded clients), `fencer-workloads`, `fencer-nemesis`, `fencer-checkers`,
//! `fencer-backends`, `fencer-servers`, `fencer-run` (plans and both tiers' drivers),
//! `fencer-results` (run directories, reports, the viewer) and `fencer-gate` (the CI gate,
//! shrinking, regressions, JUnit). See `docs/adapters.md` and `examples/custom_backend.rs`.

mod cli;

pub use async_trait::async_trait;
/// fencer's own backends: the reference lease service and fenced SQLite store (useful as a
/// stand-in for the half of a system a test does not cover), their mutants, real adapters.
pub use fencer_backends as backends;
pub use fencer_checkers::{CheckOptions, Validity, Verdict, Workload, check, check_with};
pub use fencer_gate::{Harness, Report, SeedRun, TimeMode};
pub use fencer_harness::{
    Acquired, AppliedWrite, CallError, FencedStore, FencingToken, History, LockService, Owned,
    OwnerToken, ReadValue, Written,
};
pub use fencer_nemesis::FaultKind;
pub use fencer_run::settings::{LockBackend, StoreBackend};
pub use fencer_run::{Plan, PlanError, RunError, Settings, simulate};
pub use fencer_workloads::RenewFailurePolicy;

/// Runs the `fencer` command line on this process's arguments and returns its exit code.
pub fn main() -> std::process::ExitCode {
    cli::main()
}
