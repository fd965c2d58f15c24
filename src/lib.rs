//! fencer: a Jepsen-style fault-injection harness for distributed locks.
//!
//! Seeded workers race through acquire → write → release while a nemesis pauses them, skews
//! clocks and drops renew replies; every call is recorded as a history, and checkers find the
//! stale-generation writes a store accepted and every other lease anomaly.
//!
//! This crate is the CLI and a small facade: [`Settings`] → [`Plan`] → [`simulate`] →
//! [`fencer_checkers::check`].

pub mod demo;
pub mod mutants;
pub mod plan;
pub mod save;
pub mod settings;
pub mod simulate;

pub use fencer_checkers::{Validity, Verdict, check};
pub use fencer_harness::History;
pub use plan::{Plan, PlanError};
pub use settings::{LockBackend, Settings, StoreBackend};
pub use simulate::{SimError, simulate};
