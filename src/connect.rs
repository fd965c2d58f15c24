//! From server URLs to adapters: `redis://…`, `postgres://…`, `etcd://host:port` and
//! `zk://host:port` for the lock service and the store, in any mix, with an optional
//! `?variant=` naming a deliberately broken variant.
//!
//! Variants: lock `?variant=unsafe-release` (Redis, etcd, ZooKeeper); store `?variant=unfenced`
//! (Redis, PostgreSQL, etcd, ZooKeeper); a store may also be a SQLite file several processes
//! share, `sqlite://PATH` (`?variant=unfenced`). A PostgreSQL URL may name the schema to work in
//! with `?schema=NAME` (default `fencer`). Both parameters are removed before the URL reaches
//! the client library. Every message shows URLs with their password hidden.
//!
//! `exec:COMMAND` is no URL: the rest is a command line fencer runs as a child speaking the exec
//! protocol (docs/exec-protocol.md); a lock and a store naming the same command share one
//! child, which is also a target of the plan's pauses and restarts ([`Connected::server_faults`]).

use std::sync::Arc;

use fencer_backends::redact_url;
use fencer_harness::{FencedStore, LockService};

/// A lock service or store built from a URL, with what is needed to check it is reachable.
pub struct Connected<T: ?Sized> {
    /// The adapter.
    pub adapter: Arc<T>,
    /// The URL as shown (password hidden).
    pub shown_url: String,
    probe: Probe,
}

enum Probe {
    /// A local file opened already: nothing more to check.
    Local,
    #[cfg(feature = "redis")]
    Redis(Arc<fencer_backends::RedisConnection>),
    #[cfg(feature = "postgres")]
    Postgres(Arc<fencer_backends::PostgresConnection>),
    #[cfg(feature = "etcd")]
    Etcd(Arc<fencer_backends::EtcdConnection>),
    #[cfg(feature = "zookeeper")]
    Zookeeper(Arc<fencer_backends::ZookeeperConnection>),
    /// A child process, checked for the role it was named for.
    #[cfg(feature = "exec")]
    Exec(
        Arc<fencer_backends::ExecConnection>,
        fencer_backends::exec::Role,
    ),
}

impl<T: ?Sized> Connected<T> {
    /// Connects and round-trips one request, so an unreachable server or a refused login is a
    /// clear error before the run starts, not a run full of failed calls.
    pub async fn ping(&self) -> Result<(), String> {
        match &self.probe {
            Probe::Local => Ok(()),
            #[cfg(feature = "redis")]
            Probe::Redis(connection) => connection.ping().await,
            #[cfg(feature = "postgres")]
            Probe::Postgres(connection) => connection.ping().await,
            #[cfg(feature = "etcd")]
            Probe::Etcd(connection) => connection.ping().await,
            #[cfg(feature = "zookeeper")]
            Probe::Zookeeper(connection) => connection.ping().await,
            #[cfg(feature = "exec")]
            Probe::Exec(connection, role) => connection.ping(*role).await,
        }
    }

    /// The child process behind an `exec:` backend as a target of the plan's server faults
    /// (`role` is `lock` or `store`); `None` for a server fencer does not run.
    #[cfg_attr(not(feature = "exec"), allow(unused_variables))]
    pub fn server_faults(
        &self,
        role: &str,
    ) -> Option<(String, Arc<dyn fencer_nemesis::ServerFaults>)> {
        match &self.probe {
            #[cfg(feature = "exec")]
            Probe::Exec(connection, _) => {
                let target: Arc<dyn fencer_nemesis::ServerFaults> = connection.clone();
                Some((role.to_string(), target))
            }
            _ => None,
        }
    }
}

/// The adapter an `exec:COMMAND` names for `role`, or `None` when `url` is not `exec:`.
#[cfg(feature = "exec")]
fn exec_adapter<T: ?Sized>(
    url: &str,
    role: fencer_backends::exec::Role,
    adapter: fn(Arc<fencer_backends::ExecConnection>) -> Arc<T>,
) -> Option<Result<Connected<T>, String>> {
    let command = url.strip_prefix(crate::settings::EXEC_SCHEME)?;
    Some(
        fencer_backends::ExecConnection::shared(command).map(|connection| Connected {
            adapter: adapter(Arc::clone(&connection)),
            shown_url: connection.shown(),
            probe: Probe::Exec(connection, role),
        }),
    )
}

/// Splits `url` into the URL the client sees and the `variant` and `schema` parameters.
fn split_params(url: &str) -> (String, Option<String>, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None, None);
    };
    let (mut variant, mut schema, mut kept) = (None, None, Vec::new());
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("variant", value)) => variant = Some(value.to_string()),
            Some(("schema", value)) => schema = Some(value.to_string()),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, variant, schema)
}

/// The rules a URL's `?variant=` names: `reference` without one, `broken` for the one variant
/// the backend ships (`unsafe-release`, `unfenced`), and a clear error for any other name.
fn variant_rules<R>(
    what: &str,
    variant: Option<&str>,
    reference: R,
    (name, broken): (&str, R),
    url: &str,
) -> Result<R, String> {
    match variant {
        None => Ok(reference),
        Some(variant) if variant == name => Ok(broken),
        Some(other) => Err(unknown_variant(what, other, name, url)),
    }
}

fn unknown_variant(what: &str, variant: &str, known: &str, url: &str) -> String {
    format!(
        "unknown {what} variant `{variant}` in {}: expected {known}",
        redact_url(url)
    )
}

fn unsupported_scheme(what: &str, url: &str) -> String {
    let built: Vec<&str> = [
        cfg!(feature = "redis").then_some("redis://"),
        cfg!(feature = "postgres").then_some("postgres://"),
        cfg!(feature = "etcd").then_some("etcd://"),
        cfg!(feature = "zookeeper").then_some("zk://"),
        (what == "store").then_some("sqlite://"),
        cfg!(feature = "exec").then_some("exec:COMMAND"),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!(
        "unsupported {what} URL {}: expected one of {} (this build's backends)",
        redact_url(url),
        if built.is_empty() {
            "none".to_string()
        } else {
            built.join(", ")
        }
    )
}

/// A lock service for `url`.
// A build without real backends has only the scheme check left to do.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "etcd")),
    allow(unused_variables)
)]
pub fn lock_from_url(url: &str) -> Result<Connected<dyn LockService>, String> {
    #[cfg(feature = "exec")]
    if let Some(connected) = exec_adapter(url, fencer_backends::exec::Role::Lock, |connection| {
        Arc::new(fencer_backends::ExecLock::new(connection)) as Arc<dyn LockService>
    }) {
        return connected;
    }
    let (client_url, variant, schema) = split_params(url);
    let shown_url = redact_url(url);
    match fencer_backends::scheme_of(&client_url) {
        #[cfg(feature = "redis")]
        Some("redis") => {
            use fencer_backends::{RedisConnection, RedisLock, RedisLockRules};
            let rules = variant_rules(
                "lock",
                variant.as_deref(),
                RedisLockRules::Reference,
                ("unsafe-release", RedisLockRules::UnsafeRelease),
                url,
            )?;
            let connection = Arc::new(RedisConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(RedisLock::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Redis(connection),
            })
        }
        #[cfg(feature = "postgres")]
        Some("postgres" | "postgresql") => {
            use fencer_backends::{PostgresConnection, PostgresLock};
            if let Some(other) = variant.as_deref() {
                return Err(unknown_variant("lock", other, "none", url));
            }
            let schema = schema.as_deref().unwrap_or("fencer");
            let connection = Arc::new(PostgresConnection::open(&client_url, schema)?);
            Ok(Connected {
                adapter: Arc::new(PostgresLock::new(Arc::clone(&connection))),
                shown_url,
                probe: Probe::Postgres(connection),
            })
        }
        #[cfg(feature = "etcd")]
        Some("etcd") => {
            use fencer_backends::{EtcdConnection, EtcdLock, EtcdLockRules};
            let rules = variant_rules(
                "lock",
                variant.as_deref(),
                EtcdLockRules::Reference,
                ("unsafe-release", EtcdLockRules::UnsafeRelease),
                url,
            )?;
            let connection = Arc::new(EtcdConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(EtcdLock::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Etcd(connection),
            })
        }
        #[cfg(feature = "zookeeper")]
        Some("zk" | "zookeeper") => {
            use fencer_backends::{ZookeeperConnection, ZookeeperLock, ZookeeperLockRules};
            let rules = variant_rules(
                "lock",
                variant.as_deref(),
                ZookeeperLockRules::Reference,
                ("unsafe-release", ZookeeperLockRules::UnsafeRelease),
                url,
            )?;
            let connection = Arc::new(ZookeeperConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(ZookeeperLock::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Zookeeper(connection),
            })
        }
        _ => Err(unsupported_scheme("lock", url)),
    }
}

/// A fenced store for `url`.
// Only PostgreSQL takes a schema.
#[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
pub fn store_from_url(url: &str) -> Result<Connected<dyn FencedStore>, String> {
    #[cfg(feature = "exec")]
    if let Some(connected) = exec_adapter(url, fencer_backends::exec::Role::Store, |connection| {
        Arc::new(fencer_backends::ExecStore::new(connection)) as Arc<dyn FencedStore>
    }) {
        return connected;
    }
    let (client_url, variant, schema) = split_params(url);
    let shown_url = redact_url(url);
    match fencer_backends::scheme_of(&client_url) {
        #[cfg(feature = "redis")]
        Some("redis") => {
            use fencer_backends::{RedisConnection, RedisStore, RedisStoreRules};
            let rules = variant_rules(
                "store",
                variant.as_deref(),
                RedisStoreRules::Fenced,
                ("unfenced", RedisStoreRules::Unfenced),
                url,
            )?;
            let connection = Arc::new(RedisConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(RedisStore::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Redis(connection),
            })
        }
        #[cfg(feature = "postgres")]
        Some("postgres" | "postgresql") => {
            use fencer_backends::{PostgresConnection, PostgresStore, PostgresStoreRules};
            let rules = variant_rules(
                "store",
                variant.as_deref(),
                PostgresStoreRules::Fenced,
                ("unfenced", PostgresStoreRules::Unfenced),
                url,
            )?;
            let schema = schema.as_deref().unwrap_or("fencer");
            let connection = Arc::new(PostgresConnection::open(&client_url, schema)?);
            Ok(Connected {
                adapter: Arc::new(PostgresStore::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Postgres(connection),
            })
        }
        #[cfg(feature = "etcd")]
        Some("etcd") => {
            use fencer_backends::{EtcdConnection, EtcdStore, EtcdStoreRules};
            let rules = variant_rules(
                "store",
                variant.as_deref(),
                EtcdStoreRules::Fenced,
                ("unfenced", EtcdStoreRules::Unfenced),
                url,
            )?;
            let connection = Arc::new(EtcdConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(EtcdStore::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Etcd(connection),
            })
        }
        Some("sqlite") => {
            use fencer_backends::{SqliteStore, StoreRules};
            let rules = variant_rules(
                "store",
                variant.as_deref(),
                StoreRules::Fenced,
                ("unfenced", StoreRules::Unfenced),
                url,
            )?;
            let path = client_url.trim_start_matches("sqlite://");
            if path.is_empty() {
                return Err(format!(
                    "expected sqlite://PATH (e.g. sqlite:///tmp/register.db), found {shown_url}"
                ));
            }
            let store = SqliteStore::open(std::path::Path::new(path), rules, None)
                .map_err(|error| error.to_string())?;
            Ok(Connected {
                adapter: Arc::new(store),
                shown_url,
                probe: Probe::Local,
            })
        }
        #[cfg(feature = "zookeeper")]
        Some("zk" | "zookeeper") => {
            use fencer_backends::{ZookeeperConnection, ZookeeperStore, ZookeeperStoreRules};
            let rules = variant_rules(
                "store",
                variant.as_deref(),
                ZookeeperStoreRules::Fenced,
                ("unfenced", ZookeeperStoreRules::Unfenced),
                url,
            )?;
            let connection = Arc::new(ZookeeperConnection::open(&client_url)?);
            Ok(Connected {
                adapter: Arc::new(ZookeeperStore::new(Arc::clone(&connection), rules)),
                shown_url,
                probe: Probe::Zookeeper(connection),
            })
        }
        _ => Err(unsupported_scheme("store", url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_and_schema_are_taken_out_of_the_url() {
        assert_eq!(
            split_params("postgres://u@h/db?variant=unfenced&sslmode=disable&schema=s1"),
            (
                "postgres://u@h/db?sslmode=disable".to_string(),
                Some("unfenced".to_string()),
                Some("s1".to_string())
            )
        );
        assert_eq!(
            split_params("redis://h:1"),
            ("redis://h:1".to_string(), None, None)
        );
    }

    #[cfg(all(feature = "zookeeper", feature = "redis"))]
    #[test]
    fn zookeeper_urls_build_both_adapters_and_mix_with_others() {
        let lock = lock_from_url("zk://127.0.0.1:2181?variant=unsafe-release").unwrap();
        assert_eq!(lock.shown_url, "zk://127.0.0.1:2181?variant=unsafe-release");
        assert!(store_from_url("zk://127.0.0.1:2181?variant=unfenced").is_ok());
        assert!(store_from_url("redis://127.0.0.1:6379").is_ok());
        let error = lock_from_url("zk://127.0.0.1:2181?variant=unfenced")
            .err()
            .unwrap();
        assert!(error.contains("unknown lock variant `unfenced`"), "{error}");
        let error = lock_from_url("zk://u:pw@127.0.0.1:2181").err().unwrap();
        assert!(!error.contains("pw@"), "{error}");
    }

    #[test]
    fn bad_schemes_and_variants_are_refused_without_the_password() {
        let error = lock_from_url("mysql://root:pw@h/db").err().unwrap();
        assert!(
            error.starts_with("unsupported lock URL mysql://root:***@h/db"),
            "{error}"
        );
        let error = store_from_url("redis://:pw@h:1?variant=sloppy")
            .err()
            .unwrap();
        assert!(error.contains("unknown store variant `sloppy`"), "{error}");
        assert!(!error.contains("pw@"), "{error}");
    }

    #[cfg(feature = "exec")]
    #[test]
    fn one_exec_command_is_one_child_for_lock_and_store_and_a_fault_target() {
        let lock = lock_from_url("exec:python3  'my lock.py' ?variant=x").unwrap();
        let store = store_from_url("exec:python3 'my lock.py' ?variant=x").unwrap();
        assert_eq!(lock.shown_url, "exec:python3 my lock.py ?variant=x");
        let target = |connected: Option<(String, Arc<dyn fencer_nemesis::ServerFaults>)>| {
            let (role, target) = connected.expect("an exec child takes server faults");
            (role, Arc::as_ptr(&target).cast::<()>())
        };
        let (lock_role, lock_child) = target(lock.server_faults("lock"));
        let (store_role, store_child) = target(store.server_faults("store"));
        assert_eq!((lock_role.as_str(), store_role.as_str()), ("lock", "store"));
        assert_eq!(lock_child, store_child, "one child serves both");
        let other = store_from_url("exec:python3 other.py").unwrap();
        assert_ne!(target(other.server_faults("store")).1, lock_child);
        let error = lock_from_url("exec: ").err().unwrap();
        assert!(error.contains("exec: needs a command"), "{error}");
        assert!(
            store_from_url("sqlite:///tmp/x.db")
                .unwrap()
                .server_faults("store")
                .is_none()
        );
        let error = lock_from_url("mysql://h:3306").err().unwrap();
        assert!(error.contains("exec:COMMAND"), "{error}");
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn etcd_urls_build_both_adapters_and_are_listed_when_the_scheme_is_wrong() {
        assert!(lock_from_url("etcd://127.0.0.1:2379?variant=unsafe-release").is_ok());
        assert!(store_from_url("etcd://127.0.0.1:2379?variant=unfenced").is_ok());
        let error = lock_from_url("etcd://127.0.0.1:2379?variant=unfenced")
            .err()
            .unwrap();
        assert!(error.contains("unknown lock variant `unfenced`"), "{error}");
        let error = store_from_url("etcd://root:pw@127.0.0.1:2379")
            .err()
            .unwrap();
        assert!(!error.contains("pw@"), "{error}");
        let error = lock_from_url("mysql://h:3306").err().unwrap();
        assert!(error.contains("etcd://"), "{error}");
    }
}
