//! What workers do. A workload is a plan (data, drawn from the workload stream or written by
//! hand) plus the code that carries it out through recorded clients.

pub mod kind;
pub mod lease;
mod reference;
pub mod register;
pub mod shape;
#[cfg(test)]
mod testkit;
mod unknown;
pub mod wait;
mod work;

pub use kind::ClientVariant;
pub use lease::{LeaseStatus, RenewFailurePolicy};
pub use reference::ReferenceLibrary;
pub use register::{CyclePlan, RegisterConfig, Worker, WorkerPlan, plan_workers};
pub use shape::CycleShape;
pub use unknown::UnknownName;
pub use wait::{Backoff, POLL_MAX_WORKERS, WaitMode};
