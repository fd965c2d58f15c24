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
//! - to test their own lock client library (its watchdog, its ownership check, what it tells
//!   its caller when the lease is lost): implement [`LockLibrary`] over the recorded
//!   [`LockClient`] a [`LibraryContext`] gives, and run it with [`Harness::client`];
//! - to run and judge plans directly: [`Settings`] → [`Plan::generate`] → [`simulate()`] →
//!   [`check`] → [`Verdict`].
//!
//! A lock service written against the trait, checked over three seeds (fencer's own fenced
//! SQLite store stands in for the user's store):
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Mutex;
//! use std::time::Duration;
//! use fencer::backends::{SqliteStore, StoreRules};
//! use fencer::{Acquired, CallError, Harness, LockService, Owned, OwnerToken};
//! use tokio::time::Instant;
//!
//! /// Per lock name (every run uses its own): the lease (owner, expiry) and the last token.
//! /// Correct, so fencer finds nothing.
//! #[derive(Default)]
//! struct Leases(Mutex<BTreeMap<String, (Option<(OwnerToken, Instant)>, u64)>>);
//!
//! #[fencer::async_trait]
//! impl LockService for Leases {
//!     async fn acquire(&self, lock: &str, owner: OwnerToken, ttl: Duration) -> Result<Acquired, CallError> {
//!         let mut locks = self.0.lock().unwrap();
//!         let (lease, last_token) = locks.entry(lock.to_string()).or_default();
//!         if lease.is_some_and(|(_, expires)| expires > Instant::now()) {
//!             return Ok(Acquired::Busy);
//!         }
//!         *last_token += 1;
//!         *lease = Some((owner, Instant::now() + ttl));
//!         Ok(Acquired::Granted { fencing_token: *last_token })
//!     }
//!     async fn renew(&self, lock: &str, owner: OwnerToken, ttl: Duration) -> Result<Owned, CallError> {
//!         let mut locks = self.0.lock().unwrap();
//!         match locks.get_mut(lock).and_then(|(lease, _)| lease.as_mut()) {
//!             Some((holder, expires)) if *holder == owner && *expires > Instant::now() => {
//!                 *expires = Instant::now() + ttl;
//!                 Ok(Owned::Done)
//!             }
//!             _ => Ok(Owned::NotOwner),
//!         }
//!     }
//!     async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
//!         let mut locks = self.0.lock().unwrap();
//!         let Some((lease, _)) = locks.get_mut(lock) else {
//!             return Ok(Owned::NotOwner);
//!         };
//!         match *lease {
//!             Some((holder, expires)) if holder == owner && expires > Instant::now() => {
//!                 *lease = None;
//!                 Ok(Owned::Done)
//!             }
//!             _ => Ok(Owned::NotOwner),
//!         }
//!     }
//! }
//!
//! // fencer's own fenced SQLite store stands in for the user's store.
//! let store = SqliteStore::in_memory(StoreRules::Fenced, None).unwrap();
//! let report = Harness::new(Leases::default(), store)
//!     .name("one_lock_is_safe")
//!     .workers(3)
//!     .ops(10)
//!     .seeds(0..3)
//!     .run();
//! report.assert_valid();
//! ```
//!
//! Everything else lives in the crates below it, one job each: `fencer-harness` (vocabulary,
//! traits, recorded clients), `fencer-workloads`, `fencer-nemesis`, `fencer-checkers`,
//! `fencer-backends`, `fencer-servers`, `fencer-run` (plans and both tiers' drivers),
//! `fencer-results` (run directories, reports, the viewer) and `fencer-gate` (the CI gate,
//! shrinking, regressions, JUnit). See `docs/adapters.md` and `examples/custom_backend.rs`.

mod cli;

pub use async_trait::async_trait;
pub use cli::Cli;
/// fencer's own backends: the reference lease service and fenced SQLite store (useful as a
/// stand-in for the half of a system a test does not cover), their mutants, real adapters.
pub use fencer_backends as backends;
pub use fencer_checkers::{CheckOptions, Validity, Verdict, Workload, check, check_with};
pub use fencer_gate::{Harness, Report, SeedRun, SeedRunError, TimeMode};
/// Tasks on the simulation's executor, or tokio's in real time: a lock client library's
/// background work is spawned with [`LibraryContext::spawn`], which hands back their handles.
pub use fencer_harness::task;
/// Sleeps, deadlines and the instant now on the simulation's clock, or tokio's in real time:
/// what fencer's own code uses, and a backend may too (`tokio::time` works as well).
pub use fencer_harness::time;
pub use fencer_harness::{
    Acquired, AppliedWrite, CallError, ExpiryRule, FencedStore, FencingToken, History, Lease,
    LibraryContext, LibrarySettings, LocalClock, LockChange, LockClient, LockLibrary, LockLogEntry,
    LockService, Owned, OwnerToken, ReadValue, RestartError, Written, caller_clock, caller_process,
};
pub use fencer_nemesis::FaultKind;
pub use fencer_run::settings::{BackendName, ClientName, LockBackend, StoreBackend};
pub use fencer_run::{Backends, LeftOut, Plan, PlanError, RunError, Settings, Time, simulate};
pub use fencer_workloads::{ClientVariant, RenewFailurePolicy};

/// Runs the `fencer` command line, over fencer's own backends, on this process's arguments
/// and returns its exit code ([`Cli`] adds a program's own backends).
pub fn main() -> std::process::ExitCode {
    cli::main()
}
