//! Backends fencer ships: the reference simulated lease service, the SQLite fenced store, and
//! their deliberately broken variants ("mutants") that fencer must catch by itself; and, behind
//! cargo features, adapters for real servers (`redis`, which also brings Redlock over several
//! Redis masters, `postgres`, `etcd`, `zookeeper`) and for a lock service or store in any
//! language run as a child process (`exec`).
//!
//! Each mutant is the reference with one real-world bug put back in, selected by name, so a
//! checker's detection power is measured against bugs people actually ship.

mod error;
#[cfg(feature = "etcd")]
pub mod etcd_conn;
#[cfg(feature = "etcd")]
pub mod etcd_lock;
#[cfg(feature = "etcd")]
pub mod etcd_store;
#[cfg(feature = "exec")]
pub mod exec;
#[cfg(any(feature = "redis", feature = "zookeeper"))]
mod log_entry;
#[cfg(any(feature = "redis", feature = "etcd", feature = "zookeeper"))]
mod per_runtime;
#[cfg(feature = "postgres")]
pub mod postgres_conn;
#[cfg(feature = "postgres")]
pub mod postgres_lock;
#[cfg(feature = "postgres")]
pub mod postgres_store;
#[cfg(feature = "redis")]
pub mod redis_conn;
#[cfg(feature = "redis")]
pub mod redis_lock;
#[cfg(feature = "redis")]
mod redis_lock_log;
#[cfg(feature = "redis")]
mod redis_origin;
#[cfg(feature = "redis")]
pub mod redis_sentinel;
#[cfg(feature = "redis")]
pub mod redis_store;
#[cfg(feature = "redis")]
pub mod redlock;
pub mod registry;
pub mod sim_lease;
pub mod sqlite_store;
pub mod url;
#[cfg(any(
    feature = "redis",
    feature = "postgres",
    feature = "etcd",
    feature = "zookeeper"
))]
mod written_keys;
#[cfg(feature = "zookeeper")]
pub mod zookeeper_conn;
#[cfg(feature = "zookeeper")]
pub mod zookeeper_lock;
#[cfg(feature = "zookeeper")]
pub mod zookeeper_store;

pub use error::BackendError;
#[cfg(feature = "etcd")]
pub use etcd_conn::EtcdConnection;
#[cfg(feature = "etcd")]
pub use etcd_lock::{EtcdLock, EtcdLockRules};
#[cfg(feature = "etcd")]
pub use etcd_store::{EtcdStore, EtcdStoreRules};
#[cfg(feature = "exec")]
pub use exec::{
    ClientSpec, ExecClient, ExecCommand, ExecConnection, ExecLibrary, ExecLock, ExecStore,
};
#[cfg(feature = "postgres")]
pub use postgres_conn::PostgresConnection;
#[cfg(feature = "postgres")]
pub use postgres_lock::{PostgresLock, PostgresLockRules};
#[cfg(feature = "postgres")]
pub use postgres_store::{PostgresStore, PostgresStoreRules};
#[cfg(feature = "redis")]
pub use redis_conn::RedisConnection;
#[cfg(feature = "redis")]
pub use redis_lock::{RedisLock, RedisLockRules};
#[cfg(feature = "redis")]
pub use redis_store::{RedisStore, RedisStoreRules};
#[cfg(feature = "redis")]
pub use redlock::RedlockLock;
pub use sim_lease::{LeaseRules, SimLeaseService};
pub use sqlite_store::{SqliteStore, StoreError, StoreRules};
pub use url::{redact_url, scheme_of};
#[cfg(feature = "zookeeper")]
pub use zookeeper_conn::ZookeeperConnection;
#[cfg(feature = "zookeeper")]
pub use zookeeper_lock::{ZookeeperLock, ZookeeperLockRules};
#[cfg(feature = "zookeeper")]
pub use zookeeper_store::{ZookeeperStore, ZookeeperStoreRules};

/// A TTL in nanoseconds as the services' clocks count them (signed), saturating: a TTL too
/// long to count is one that never ends.
pub(crate) fn ttl_ns(ttl: std::time::Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
}
