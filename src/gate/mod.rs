//! The CI regression gate as a library: which seeds to run ([`seeds`]), running them on every
//! core with job-count-independent results ([`runner`]), pinning non-determinism
//! ([`divergence`]), the machine-readable summary shards are merged from ([`summary`]), JUnit
//! ([`junit`]) and the committed regressions folder ([`regressions`]). The `fencer gate`
//! command wires them to the terminal.

pub mod divergence;
pub mod junit;
pub mod regressions;
pub mod runner;
pub mod seeds;
pub mod summary;
