//! From server URLs to adapters: one table of schemes ([`SCHEMES`]), each naming how to build
//! its lock service and its store, in any mix, with an optional `?variant=` naming a
//! deliberately broken variant.
//!
//! `redlock://HOST:PORT,HOST:PORT,…` is a lock on several independent Redis masters (Redlock,
//! no store); its own parameters are in [`crate::redlock::RedlockOptions`].
//!
//! Variants: lock `?variant=unsafe-release` (Redis, PostgreSQL, etcd, ZooKeeper); store `?variant=unfenced`
//! (Redis, PostgreSQL, etcd, ZooKeeper, SQLite). A store may be a SQLite file several processes
//! share, `sqlite://PATH`. A PostgreSQL URL may name the schema to work in with `?schema=NAME`
//! (default `fencer`). Both parameters are removed before the URL reaches the client library.
//! Every message shows URLs with their password hidden.
//!
//! `exec:COMMAND` is no URL: the rest is a command line fencer runs as a child speaking the exec
//! protocol (docs/exec-protocol.md); a lock and a store naming the same command share one
//! child, which is also a target of the plan's pauses and restarts ([`Connected::server`]).

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{FencedStore, LockService};
use fencer_nemesis::{Fault, ServerFaults};

use crate::error::BackendError;
use crate::url::{redact_url, scheme_of};

/// What names a lock service or store fencer runs as a child process (`exec:python3 x.py`).
pub const EXEC_SCHEME: &str = "exec:";

/// Why an exec child cannot take `fault` (aimed at it), or `None` if it can.
pub fn exec_refusal(fault: &Fault) -> Option<String> {
    match fault {
        Fault::ServerPause { .. } | Fault::Restart { .. } => None,
        _ => Some(
            "an exec child takes only server-pause and restart (its pipes have no proxy to \
             fault, and its clock is the machine's)"
                .into(),
        ),
    }
}

/// A lock service or store built from a URL, with what is needed to check it is reachable.
pub struct Connected<T: ?Sized> {
    /// The adapter.
    pub adapter: Arc<T>,
    /// The URL as shown (password hidden).
    pub shown_url: String,
    probe: Option<Arc<dyn Probe>>,
    server: Option<Arc<dyn ServerFaults>>,
}

impl<T: ?Sized> Connected<T> {
    /// Connects and round-trips one request, so an unreachable server or a refused login is a
    /// clear error before the run starts, not a run full of failed calls.
    pub async fn ping(&self) -> Result<(), BackendError> {
        match &self.probe {
            Some(probe) => probe.ping().await,
            None => Ok(()),
        }
    }

    /// The round trip [`Connected::ping`] makes, to make it later (`None`: nothing to check).
    pub fn probe(&self) -> Option<Arc<dyn Probe>> {
        self.probe.clone()
    }

    /// The process behind the backend as a target of the plan's server faults, when fencer
    /// runs it (an `exec:` child); `None` for a server fencer does not run.
    pub fn server(&self) -> Option<Arc<dyn ServerFaults>> {
        self.server.clone()
    }
}

/// A connection that can be asked whether its server answers.
#[async_trait]
pub trait Probe: Send + Sync {
    /// Round-trips one request; an error says what is wrong (unreachable, login refused).
    async fn ping(&self) -> Result<(), BackendError>;
}

/// Implements [`Probe`] for connection types with an inherent `async fn ping`.
#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "postgres",
        feature = "etcd",
        feature = "zookeeper"
    )),
    allow(unused_macros)
)]
macro_rules! probe_by_ping {
    ($($connection:ty),* $(,)?) => {$(
        #[async_trait]
        impl Probe for $connection {
            async fn ping(&self) -> Result<(), BackendError> {
                <$connection>::ping(self).await
            }
        }
    )*};
}

#[cfg(feature = "redis")]
probe_by_ping!(crate::RedisConnection, crate::RedlockLock);
#[cfg(feature = "postgres")]
probe_by_ping!(crate::PostgresConnection);
#[cfg(feature = "etcd")]
probe_by_ping!(crate::EtcdConnection);
#[cfg(feature = "zookeeper")]
probe_by_ping!(crate::ZookeeperConnection);

/// A URL taken apart: what the client library sees, and fencer's own parameters.
struct Target<'a> {
    /// The URL as given (for messages; may carry a password).
    url: &'a str,
    /// The URL without fencer's parameters.
    client_url: String,
    /// `?variant=`.
    variant: Option<String>,
    /// `?schema=` (PostgreSQL only).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    schema: Option<String>,
}

impl Target<'_> {
    fn parse(url: &str) -> Target<'_> {
        let (client_url, variant, schema) = split_params(url);
        Target {
            url,
            client_url,
            variant,
            schema,
        }
    }

    /// The rules its `?variant=` names: `reference` without one, `broken` for the one variant
    /// the backend ships (`unsafe-release`, `unfenced`), and a clear error for any other name.
    fn rules<R>(
        &self,
        what: &str,
        reference: R,
        (name, broken): (&str, R),
    ) -> Result<R, BackendError> {
        match self.variant.as_deref() {
            None => Ok(reference),
            Some(variant) if variant == name => Ok(broken),
            Some(other) => Err(unknown_variant(what, other, name, self.url)),
        }
    }

    fn connected<T: ?Sized>(&self, adapter: Arc<T>, probe: Option<Arc<dyn Probe>>) -> Connected<T> {
        Connected {
            adapter,
            shown_url: redact_url(self.url),
            probe,
            server: None,
        }
    }
}

type BuildLock = fn(&Target<'_>) -> Result<Connected<dyn LockService>, BackendError>;
type BuildStore = fn(&Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError>;

/// One real backend: the schemes that name it and how to build each of its adapters.
struct Scheme {
    /// Scheme names; the first is the one listed in messages.
    names: &'static [&'static str],
    /// Its lock service, if it offers one.
    lock: Option<BuildLock>,
    /// Its fenced store, if it offers one.
    store: Option<BuildStore>,
}

/// Every scheme this build knows, each behind the feature of its client crate.
const SCHEMES: &[Scheme] = &[
    #[cfg(feature = "redis")]
    Scheme {
        names: &["redis", "redis-sentinel"],
        lock: Some(redis::lock),
        store: Some(redis::store),
    },
    #[cfg(feature = "redis")]
    Scheme {
        names: &[crate::redlock::REDLOCK_SCHEME],
        lock: Some(redis::redlock),
        store: None,
    },
    #[cfg(feature = "postgres")]
    Scheme {
        names: &["postgres", "postgresql"],
        lock: Some(postgres::lock),
        store: Some(postgres::store),
    },
    #[cfg(feature = "etcd")]
    Scheme {
        names: &["etcd"],
        lock: Some(etcd::lock),
        store: Some(etcd::store),
    },
    #[cfg(feature = "zookeeper")]
    Scheme {
        names: &["zk", "zookeeper"],
        lock: Some(zookeeper::lock),
        store: Some(zookeeper::store),
    },
    Scheme {
        names: &["sqlite"],
        lock: None,
        store: Some(sqlite_store),
    },
];

fn scheme_for(url: &str) -> Option<&'static Scheme> {
    let scheme = scheme_of(url)?;
    SCHEMES.iter().find(|known| known.names.contains(&scheme))
}

/// A lock service for `url`.
pub fn lock_from_url(url: &str) -> Result<Connected<dyn LockService>, BackendError> {
    #[cfg(feature = "exec")]
    if let Some(command) = url.strip_prefix(EXEC_SCHEME) {
        return exec::lock(command);
    }
    let target = Target::parse(url);
    match scheme_for(&target.client_url).and_then(|scheme| scheme.lock) {
        Some(build) => build(&target),
        None => Err(unsupported_scheme("lock", url, |scheme| {
            scheme.lock.is_some()
        })),
    }
}

/// A fenced store for `url`.
pub fn store_from_url(url: &str) -> Result<Connected<dyn FencedStore>, BackendError> {
    #[cfg(feature = "exec")]
    if let Some(command) = url.strip_prefix(EXEC_SCHEME) {
        return exec::store(command);
    }
    let target = Target::parse(url);
    match scheme_for(&target.client_url).and_then(|scheme| scheme.store) {
        Some(build) => build(&target),
        None => Err(unsupported_scheme("store", url, |scheme| {
            scheme.store.is_some()
        })),
    }
}

#[cfg(feature = "redis")]
mod redis {
    use super::*;
    use crate::{RedisConnection, RedisLock, RedisLockRules, RedisStore, RedisStoreRules};

    pub(super) fn lock(target: &Target<'_>) -> Result<Connected<dyn LockService>, BackendError> {
        let rules = target.rules(
            "lock",
            RedisLockRules::Reference,
            ("unsafe-release", RedisLockRules::UnsafeRelease),
        )?;
        let connection = Arc::new(RedisConnection::open(&target.client_url)?);
        let adapter = Arc::new(RedisLock::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }

    /// Redlock has no broken variant of its own: it is the known-unsafe case.
    pub(super) fn redlock(target: &Target<'_>) -> Result<Connected<dyn LockService>, BackendError> {
        if let Some(variant) = &target.variant {
            return Err(BackendError::BadUrl(format!(
                "unknown lock variant `{variant}` in {}: a Redlock lock has no variants \
                 (fence=none or fence=redis://HOST:PORT says where its tokens come from)",
                redact_url(target.url)
            )));
        }
        let adapter = Arc::new(crate::RedlockLock::open(&target.client_url)?);
        Ok(target.connected(Arc::clone(&adapter) as Arc<dyn LockService>, Some(adapter)))
    }

    pub(super) fn store(target: &Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError> {
        let rules = target.rules(
            "store",
            RedisStoreRules::Fenced,
            ("unfenced", RedisStoreRules::Unfenced),
        )?;
        let connection = Arc::new(RedisConnection::open(&target.client_url)?);
        let adapter = Arc::new(RedisStore::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use crate::{
        PostgresConnection, PostgresLock, PostgresLockRules, PostgresStore, PostgresStoreRules,
    };

    fn open(target: &Target<'_>) -> Result<Arc<PostgresConnection>, BackendError> {
        let schema = target.schema.as_deref().unwrap_or("fencer");
        Ok(Arc::new(PostgresConnection::open(
            &target.client_url,
            schema,
        )?))
    }

    pub(super) fn lock(target: &Target<'_>) -> Result<Connected<dyn LockService>, BackendError> {
        let rules = target.rules(
            "lock",
            PostgresLockRules::Reference,
            ("unsafe-release", PostgresLockRules::UnsafeRelease),
        )?;
        let connection = open(target)?;
        let adapter = Arc::new(PostgresLock::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }

    pub(super) fn store(target: &Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError> {
        let rules = target.rules(
            "store",
            PostgresStoreRules::Fenced,
            ("unfenced", PostgresStoreRules::Unfenced),
        )?;
        let connection = open(target)?;
        let adapter = Arc::new(PostgresStore::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }
}

#[cfg(feature = "etcd")]
mod etcd {
    use super::*;
    use crate::{EtcdConnection, EtcdLock, EtcdLockRules, EtcdStore, EtcdStoreRules};

    pub(super) fn lock(target: &Target<'_>) -> Result<Connected<dyn LockService>, BackendError> {
        let rules = target.rules(
            "lock",
            EtcdLockRules::Reference,
            ("unsafe-release", EtcdLockRules::UnsafeRelease),
        )?;
        let connection = Arc::new(EtcdConnection::open(&target.client_url)?);
        let adapter = Arc::new(EtcdLock::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }

    pub(super) fn store(target: &Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError> {
        let rules = target.rules(
            "store",
            EtcdStoreRules::Fenced,
            ("unfenced", EtcdStoreRules::Unfenced),
        )?;
        let connection = Arc::new(EtcdConnection::open(&target.client_url)?);
        let adapter = Arc::new(EtcdStore::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }
}

#[cfg(feature = "zookeeper")]
mod zookeeper {
    use super::*;
    use crate::{
        ZookeeperConnection, ZookeeperLock, ZookeeperLockRules, ZookeeperStore, ZookeeperStoreRules,
    };

    pub(super) fn lock(target: &Target<'_>) -> Result<Connected<dyn LockService>, BackendError> {
        let rules = target.rules(
            "lock",
            ZookeeperLockRules::Reference,
            ("unsafe-release", ZookeeperLockRules::UnsafeRelease),
        )?;
        let connection = Arc::new(ZookeeperConnection::open(&target.client_url)?);
        let adapter = Arc::new(ZookeeperLock::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }

    pub(super) fn store(target: &Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError> {
        let rules = target.rules(
            "store",
            ZookeeperStoreRules::Fenced,
            ("unfenced", ZookeeperStoreRules::Unfenced),
        )?;
        let connection = Arc::new(ZookeeperConnection::open(&target.client_url)?);
        let adapter = Arc::new(ZookeeperStore::new(Arc::clone(&connection), rules));
        Ok(target.connected(adapter, Some(connection)))
    }
}

#[cfg(feature = "exec")]
mod exec {
    use super::*;
    use crate::exec::{ExecConnection, ExecLock, ExecStore, Role};

    /// Checks the child serves the role it was named for.
    struct ServesRole(Arc<ExecConnection>, Role);

    #[async_trait]
    impl Probe for ServesRole {
        async fn ping(&self) -> Result<(), BackendError> {
            self.0
                .ping(self.1)
                .await
                .map_err(|error| BackendError::Unreachable(error.to_string()))
        }
    }

    fn connected<T: ?Sized>(
        command: &str,
        role: Role,
        adapter: fn(Arc<ExecConnection>) -> Arc<T>,
    ) -> Result<Connected<T>, BackendError> {
        let connection = ExecConnection::shared(command)
            .map_err(|error| BackendError::BadUrl(error.to_string()))?;
        Ok(Connected {
            adapter: adapter(Arc::clone(&connection)),
            shown_url: connection.shown(),
            probe: Some(Arc::new(ServesRole(Arc::clone(&connection), role))),
            server: Some(connection),
        })
    }

    pub(super) fn lock(command: &str) -> Result<Connected<dyn LockService>, BackendError> {
        connected(command, Role::Lock, |connection| {
            Arc::new(ExecLock::new(connection))
        })
    }

    pub(super) fn store(command: &str) -> Result<Connected<dyn FencedStore>, BackendError> {
        connected(command, Role::Store, |connection| {
            Arc::new(ExecStore::new(connection))
        })
    }
}

fn sqlite_store(target: &Target<'_>) -> Result<Connected<dyn FencedStore>, BackendError> {
    use crate::{SqliteStore, StoreRules};
    let rules = target.rules(
        "store",
        StoreRules::Fenced,
        ("unfenced", StoreRules::Unfenced),
    )?;
    let path = target.client_url.trim_start_matches("sqlite://");
    if path.is_empty() {
        return Err(BackendError::BadUrl(format!(
            "expected sqlite://PATH (e.g. sqlite:///tmp/register.db), found {}",
            redact_url(target.url)
        )));
    }
    let store = SqliteStore::open(std::path::Path::new(path), rules, None)
        .map_err(|error| BackendError::Unreachable(error.to_string()))?;
    Ok(target.connected(Arc::new(store), None))
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

fn unknown_variant(what: &str, variant: &str, known: &str, url: &str) -> BackendError {
    BackendError::BadUrl(format!(
        "unknown {what} variant `{variant}` in {}: expected {known}",
        redact_url(url)
    ))
}

/// Refuses `url` (`scheme://…`) unless a scheme of this build serves it as a lock service
/// (`what` is `lock`) or a store, in the words [`lock_from_url`] and [`store_from_url`] use: so
/// a run naming a URL nothing can serve is refused before it starts.
pub fn check_url_scheme(what: &str, url: &str) -> Result<(), BackendError> {
    let offers = |scheme: &Scheme| match what {
        "lock" => scheme.lock.is_some(),
        _ => scheme.store.is_some(),
    };
    match scheme_for(url) {
        Some(scheme) if offers(scheme) => Ok(()),
        _ => Err(unsupported_scheme(what, url, offers)),
    }
}

/// The error for a URL no scheme of this build serves as a `what`, listing those that do.
fn unsupported_scheme(what: &str, url: &str, offers: impl Fn(&Scheme) -> bool) -> BackendError {
    let built: Vec<String> = SCHEMES
        .iter()
        .filter(|scheme| offers(scheme))
        .map(|scheme| format!("{}://", scheme.names[0]))
        .chain(cfg!(feature = "exec").then(|| format!("{EXEC_SCHEME}COMMAND")))
        .collect();
    BackendError::BadUrl(format!(
        "unsupported {what} URL scheme `{}` in {}: this build's {what} URLs are {}",
        scheme_of(url).unwrap_or_default(),
        redact_url(url),
        if built.is_empty() {
            "none".to_string()
        } else {
            built.join(", ")
        }
    ))
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
            .unwrap()
            .to_string();
        assert!(error.contains("unknown lock variant `unfenced`"), "{error}");
        let error = lock_from_url("zk://u:pw@127.0.0.1:2181")
            .err()
            .unwrap()
            .to_string();
        assert!(!error.contains("pw@"), "{error}");
    }

    #[test]
    fn bad_schemes_and_variants_are_refused_without_the_password() {
        let error = lock_from_url("mysql://root:pw@h/db")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.starts_with("unsupported lock URL scheme `mysql` in mysql://root:***@h/db"),
            "{error}"
        );
        let error = store_from_url("sqlite:///tmp/r.db?variant=sloppy")
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            error,
            "unknown store variant `sloppy` in sqlite:///tmp/r.db?variant=sloppy: expected unfenced"
        );
        let error = lock_from_url("sqlite:///tmp/r.db")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.starts_with("unsupported lock URL scheme `sqlite` in sqlite:///tmp/r.db"),
            "{error}"
        );
    }

    #[cfg(feature = "exec")]
    #[test]
    fn one_exec_command_is_one_child_for_lock_and_store_and_a_fault_target() {
        let lock = lock_from_url("exec:python3  'my lock.py' ?variant=x").unwrap();
        let store = store_from_url("exec:python3 'my lock.py' ?variant=x").unwrap();
        assert_eq!(lock.shown_url, "exec:python3 my lock.py ?variant=x");
        let child = |server: Option<Arc<dyn ServerFaults>>| {
            let server = server.expect("an exec child takes server faults");
            Arc::as_ptr(&server).cast::<()>()
        };
        assert_eq!(
            child(lock.server()),
            child(store.server()),
            "one child serves both"
        );
        let other = store_from_url("exec:python3 other.py").unwrap();
        assert_ne!(child(other.server()), child(lock.server()));
        let error = lock_from_url("exec: ").err().unwrap().to_string();
        assert!(error.contains("exec: needs a command"), "{error}");
        assert!(
            store_from_url("sqlite:///tmp/x.db")
                .unwrap()
                .server()
                .is_none()
        );
    }

    #[cfg(feature = "redis")]
    #[test]
    fn redlock_urls_build_a_lock_only_and_take_no_variant() {
        let lock =
            lock_from_url("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?fence=none").unwrap();
        assert_eq!(
            lock.shown_url,
            "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?fence=none"
        );
        assert!(lock.probe().is_some(), "a run pings every master first");
        assert!(check_url_scheme("lock", "redlock://h:1").is_ok());
        let error = store_from_url("redlock://h:1").err().unwrap().to_string();
        assert!(
            error.starts_with("unsupported store URL scheme `redlock`"),
            "{error}"
        );
        let error = lock_from_url("redlock://h:1?variant=unsafe-release")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("a Redlock lock has no variants"), "{error}");
        let error = lock_from_url("redlock://h:1,h:1")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("named twice"), "{error}");
    }

    #[cfg(feature = "redis")]
    #[test]
    fn a_variant_error_hides_the_password() {
        let error = store_from_url("redis://:pw@h:1?variant=sloppy")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown store variant `sloppy`"), "{error}");
        assert!(!error.contains("pw@"), "{error}");
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn etcd_urls_build_both_adapters_and_are_listed_when_the_scheme_is_wrong() {
        assert!(lock_from_url("etcd://127.0.0.1:2379?variant=unsafe-release").is_ok());
        assert!(store_from_url("etcd://127.0.0.1:2379?variant=unfenced").is_ok());
        let error = lock_from_url("etcd://127.0.0.1:2379?variant=unfenced")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("unknown lock variant `unfenced`"), "{error}");
        let error = store_from_url("etcd://root:pw@127.0.0.1:2379")
            .err()
            .unwrap()
            .to_string();
        assert!(!error.contains("pw@"), "{error}");
        let error = lock_from_url("mysql://h:3306").err().unwrap().to_string();
        assert!(error.contains("etcd://"), "{error}");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn a_postgres_lock_takes_the_unsafe_release_variant_and_no_other() {
        let lock = lock_from_url("postgres://u:pw@h/db?variant=unsafe-release&schema=s1").unwrap();
        assert_eq!(
            lock.shown_url,
            "postgres://u:***@h/db?variant=unsafe-release&schema=s1"
        );
        let error = lock_from_url("postgres://u:pw@h/db?variant=unfenced")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("unknown lock variant `unfenced`") && error.contains("unsafe-release"),
            "{error}"
        );
        assert!(!error.contains("pw@"), "{error}");
    }
}
