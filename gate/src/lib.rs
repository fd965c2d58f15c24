//! The CI gate and everything it needs, as a library: which seeds to run ([`seeds`]), running
//! them on every core with job-count-independent results ([`runner`]), pinning
//! non-determinism ([`divergence`]), shrinking a failing plan to a minimal one ([`shrink`]),
//! the machine-readable summary shards are merged from ([`summary`]), JUnit ([`junit`]), the
//! committed regressions folder ([`regressions`]), the hunt for the mutant zoo
//! ([`mutants`]) and how small its counterexamples shrink ([`zoo_shrink`]); [`session`] runs one whole gate with them, and [`Harness`] drives the same
//! gate from a user's `cargo test`.

pub mod divergence;
pub mod harness;
pub mod jobs;
pub mod junit;
pub mod minimize;
pub mod mutants;
pub mod plan_words;
pub mod regressions;
pub mod runner;
pub mod seeds;
pub mod session;
pub mod shrink;
pub mod summary;
pub mod zoo_shrink;

pub use harness::{Harness, Report, SeedRun, SeedRunError, TimeMode};
pub use session::{GateConfig, GateError, Observer, check_places, run_gate};
