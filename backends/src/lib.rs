//! Backends fencer ships: the reference simulated lease service, the SQLite fenced store, and
//! their deliberately broken variants ("mutants") that fencer must catch by itself.
//!
//! Each mutant is the reference with one real-world bug put back in, selected by name, so a
//! checker's detection power is measured against bugs people actually ship.

pub mod sim_lease;
pub mod sqlite_store;

pub use sim_lease::{LeaseRules, SimLeaseService};
pub use sqlite_store::{SqliteStore, StoreError, StoreRules};
