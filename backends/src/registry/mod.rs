//! Every backend fencer can build, by the name a user gives on the command line: simulated
//! ones by name (`sim`, `sqlite`, and their mutants) and real servers by URL scheme
//! (`redis://`, `redlock://`, `postgres://`, `etcd://`, `zk://`, `sqlite://`), and children speaking the exec
//! protocol (`exec:COMMAND`).

#[cfg(feature = "test-backends")]
mod nondeterministic;
mod schemes;
mod simulated;

#[cfg(feature = "test-backends")]
pub use nondeterministic::NondeterministicLock;
pub use schemes::{
    Connected, EXEC_SCHEME, Probe, check_url_scheme, exec_refusal, lock_from_url, store_from_url,
};
pub use simulated::{LockBackend, StoreBackend};
