//! What goes wrong, and when: fault schedules drawn from a seed ([`schedule()`]) and their
//! injection into a running simulation or real-tier run ([`inject()`]), including
//! faults on real servers fencer started ([`ServerFaults`]).
//!
//! A schedule is plain data (it is part of `plan.json`), so a user can pin a scenario by hand
//! and a shrinker can drop faults one by one without reshuffling anything else.

pub mod aim;
pub mod cluster;
pub mod fault;
pub mod inject;
pub mod schedule;
pub mod server;
pub mod words;

pub use cluster::ClusterFaults;
pub use fault::{Aims, Effect, Fault, FaultKind, LEADER, UnknownFault, target_member, target_role};
pub use inject::{TargetError, Targets, inject, validate};
pub use schedule::{ClusterShape, ScheduleConfig, schedule};
pub use server::{FaultFailed, ServerAction, ServerFaults};
