//! fencer: a Jepsen-style fault-injection harness for distributed locks.
//!
//! Seeded workers race through acquire → write → release while a nemesis pauses them, skews
//! clocks and drops renew replies; every call is recorded as a history, and checkers find the
//! stale-generation writes a store accepted and every other lease anomaly.
//!
//! This crate is the CLI and a small facade: [`Settings`] → [`Plan`] → [`simulate`] →
//! [`fencer_checkers::check`].

pub mod checking;
pub mod demo;
pub mod explain;
pub mod gate;
pub mod mutants;
pub mod plan;
pub mod plan_locate;
pub mod reports;
pub mod save;
pub mod serve;
pub mod settings;
pub mod shrink;
pub mod simulate;
pub mod swarm;
pub mod test_backends;

pub use fencer_checkers::{CheckOptions, Validity, Verdict, Workload, check, check_with};
pub use fencer_harness::History;
pub use plan::{Plan, PlanError};
pub use settings::{LockBackend, Settings, StoreBackend};
pub use simulate::{SimError, simulate};
