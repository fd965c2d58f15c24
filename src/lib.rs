//! fencer: a Jepsen-style fault-injection harness for distributed locks.
//!
//! Seeded workers race through acquire → write → release while a nemesis pauses them, skews
//! clocks and drops renew replies; every call is recorded as a history, and checkers find the
//! stale-generation writes a store accepted and every other lease anomaly.
//!
//! This crate is the CLI and a small facade: [`Settings`] → [`Plan`] → [`simulate`] →
//! [`fencer_checkers::check`]. A user testing their own lock service and store implements
//! [`LockService`] and [`FencedStore`] and runs them with [`Harness`] from `cargo test`
//! (see `docs/adapters.md` and `examples/custom_backend.rs`).

pub mod bench_real;
pub mod checking;
pub mod connect;
pub mod demo;
pub mod drive;
pub mod explain;
pub mod gate;
pub mod harness;
pub mod mutants;
pub mod plan;
pub mod plan_locate;
pub mod proxy;
pub mod real;
pub mod reports;
pub mod save;
pub mod serve;
pub mod servers;
pub mod settings;
pub mod shrink;
pub mod simulate;
pub mod swarm;
pub mod test_backends;

pub use async_trait::async_trait;
pub use fencer_backends as backends;
pub use fencer_checkers::{
    CheckOptions, Validity, Verdict, Workload, check, check_packed, check_with,
};
pub use fencer_harness::{
    Acquired, AppliedWrite, CallError, FencedStore, FencingToken, LockService, Owned, OwnerToken,
    ReadValue, Written,
};
pub use fencer_harness::{History, PackedHistory};
pub use fencer_nemesis::FaultKind;
pub use fencer_workloads::RenewFailurePolicy;
pub use harness::{Harness, Report, SeedRun, TimeMode};
pub use plan::{Plan, PlanError};
pub use settings::{LockBackend, Settings, StoreBackend};
pub use simulate::{SimError, simulate};
