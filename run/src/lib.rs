//! A plan and how it runs.
//!
//! [`Settings`] are every knob of a run, validated once; [`Plan::generate`] expands a seed into
//! each worker's script and the fault schedule; [`simulate()`] runs a plan in the simulation tier
//! (one paused current-thread runtime: the history is a pure function of the plan), and
//! [`real`] runs it in real time against real servers. Both tiers drive the same workers and
//! the same nemesis ([`drive`]); [`checking`] picks the checkers a run's settings call for.

pub mod backends;
pub mod bench_real;
pub mod bounds;
pub mod checking;
pub mod clients;
pub mod demo;
pub mod drive;
mod error;
#[cfg(feature = "exec")]
mod exec_client;
pub mod interrupt;
pub mod launch;
pub mod plan;
mod plan_locate;
pub mod reach;
pub mod real;
pub mod settings;
pub mod simulate;
pub mod swarm;

pub use backends::{BackendName, Backends, Time};
pub use bounds::RunLimits;
pub use clients::{BuiltClient, ClientName, Clients, LibraryBuilder};
pub use error::RunError;
pub use launch::{Launch, Launched, Unfinished};
pub use plan::{InvalidPlan, OLDEST_RUNNABLE_FORMAT, PLAN_FORMAT, Plan, PlanError};
pub use reach::{LeftOut, Reach, Roles};
pub use settings::{DurationError, Settings, SettingsError};
pub use simulate::{simulate, simulate_packed};
