//! The backends a run can use, by the name a user gives on the command line or in a plan:
//! fencer's own (the simulated lease service and SQLite store with their mutants, real servers
//! by URL, servers fencer starts itself, `exec:` children) and any a user's program registers.
//!
//! A registration is a factory, so every run gets a fresh instance: a seed replays alone, and
//! seeds run side by side on their own threads without sharing state. Each backend says how
//! time passes for it: a simulated one keeps time with `tokio::time` and runs in the paused
//! runtime of the simulation tier; a real one talks to something outside the process and runs
//! in real time. A run is simulated when both its backends are.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use fencer_backends::registry::{
    Connected, EXEC_SCHEME, LockBackend, Probe, StoreBackend, check_url_scheme, lock_from_url,
    store_from_url,
};
use fencer_backends::{BackendError, SimLeaseService, SqliteStore, redact_url};
use fencer_harness::{
    FencedStore, LocalClock, LockService, NodeClock, Recorder, Restartable, TrueClock,
};
use fencer_nemesis::{ClusterFaults, ServerFaults};
use fencer_servers::{ClusterKind, PRIVATE_SCHEME, PrivateServer, StartedCluster};
use serde::{Deserialize, Serialize};

use crate::clients::Clients;
use crate::reach::Reach;

/// A backend as named by the user: `sim`, `sqlite-unfenced`, `redis://host:6379`,
/// `private:redis`, `exec:python3 lock.py`, or a name their program registered. Saved in
/// settings with any password hidden.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BackendName(String);

impl BackendName {
    /// The name as given.
    pub fn new(name: impl Into<String>) -> BackendName {
        BackendName(name.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as it may be shown and saved: a URL's password hidden.
    pub fn shown(&self) -> BackendName {
        BackendName(redact_url(&self.0))
    }

    /// True for a server fencer starts itself (`private:`) or runs as a child (`exec:`): the
    /// only servers whose process a fault may stop, restart or cut off.
    pub fn is_fencers_own_server(&self) -> bool {
        self.0.starts_with(PRIVATE_SCHEME) || self.0.starts_with(EXEC_SCHEME)
    }
}

impl fmt::Display for BackendName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<LockBackend> for BackendName {
    fn from(backend: LockBackend) -> BackendName {
        BackendName(kebab_name(&backend))
    }
}

impl From<StoreBackend> for BackendName {
    fn from(backend: StoreBackend) -> BackendName {
        BackendName(kebab_name(&backend))
    }
}

impl From<&str> for BackendName {
    fn from(name: &str) -> BackendName {
        BackendName(name.to_string())
    }
}

/// The kebab-case name of a unit variant, from its serde form.
fn kebab_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

/// How time passes for a backend, and so in which tier a run with it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Time {
    /// Simulated time on fencer's executor (an adapter's `tokio::time` reads it too):
    /// deterministic, a 10 s lease costs nothing.
    Simulated,
    /// The wall clock: the backend talks to a server or a process.
    Real,
}

/// What one run gets from a backend's factory.
pub struct Built<T: ?Sized> {
    /// The adapter the workers call.
    pub adapter: Arc<T>,
    /// The backend's own clock, when fencer keeps it: the plan's clock faults aimed at the
    /// backend's role step and skew it.
    pub clock: Option<LocalClock>,
    /// What a `restart` aimed at the backend's role restarts, when fencer can.
    pub restart: Option<Arc<dyn Restartable>>,
    /// The process behind the backend, when fencer runs it: the target of server faults.
    pub server: Option<Arc<dyn ServerFaults>>,
    /// The members of the cluster behind the backend, when fencer started one, by name
    /// (`n1`, …): each the target of server faults aimed at `ROLE.NAME`.
    pub members: Vec<(String, Arc<dyn ServerFaults>)>,
    /// The links between those members and their leader: the target of net partitions and
    /// what resolves `ROLE.leader`.
    pub cluster: Option<Arc<dyn ClusterFaults>>,
    /// True when the backend records its log into the history as it applies changes, so
    /// nothing is to be appended at the end of the run.
    pub records_log: bool,
    /// A round trip that proves the backend answers, made before a real run starts.
    pub probe: Option<Arc<dyn Probe>>,
    /// Kept alive until the run's history is complete (a private server and its proxy).
    pub guard: Option<Box<dyn std::any::Any + Send>>,
    /// The server's URL as a client connects to it, when it is a server with one (a URL
    /// backend's, a private server's proxy, a private cluster's members' proxies): what an exec
    /// client child is pointed at.
    pub url: Option<String>,
}

impl<T: ?Sized> Built<T> {
    /// Just an adapter: what a user's factory gives.
    pub fn adapter(adapter: Arc<T>) -> Built<T> {
        Built {
            adapter,
            clock: None,
            restart: None,
            server: None,
            members: Vec::new(),
            cluster: None,
            records_log: false,
            probe: None,
            guard: None,
            url: None,
        }
    }

    /// This backend, as a server clients reach at `url`.
    fn at(self, url: String) -> Built<T> {
        Built {
            url: Some(url),
            ..self
        }
    }

    fn connected(connected: Connected<T>) -> Built<T> {
        Built {
            server: connected.server(),
            probe: connected.probe(),
            ..Built::adapter(Arc::clone(&connected.adapter))
        }
    }
}

/// Where notes for the person running fencer go (the command line prints them).
pub type Note = Arc<dyn Fn(&str) + Send + Sync>;

/// What a factory may use while building for one run: the run's true clock and recorder (for
/// a backend that records its own log, as fencer's simulated ones do), and a place to say what
/// it did (a server started) for the person watching.
pub struct RunContext<'a> {
    /// The run's true clock.
    pub truth: TrueClock,
    /// The run's recorder.
    pub recorder: &'a Arc<Recorder>,
    /// Prints a note for the person running fencer.
    pub note: &'a Note,
    /// How many workers the run has: a client with something per worker builds that many.
    pub workers: usize,
    /// The run's lock server as a client connects to it, once the lock is built and is a
    /// server with an address (a URL's, a private server's proxy); for a client that talks to
    /// the server itself.
    pub lock_url: Option<&'a str>,
}

type Factory<T> = Arc<dyn Fn(&RunContext<'_>) -> Result<Built<T>, BackendError> + Send + Sync>;

/// One registered backend: how it keeps time, what it is, and how to build one for a run.
struct Registered<T: ?Sized> {
    time: Time,
    about: String,
    factory: Factory<T>,
}

impl<T: ?Sized> Clone for Registered<T> {
    fn clone(&self) -> Self {
        Registered {
            time: self.time,
            about: self.about.clone(),
            factory: Arc::clone(&self.factory),
        }
    }
}

/// Every backend a run can name: fencer's own, plus those registered by name.
#[derive(Clone, Default)]
pub struct Backends {
    locks: BTreeMap<String, Registered<dyn LockService>>,
    stores: BTreeMap<String, Registered<dyn FencedStore>>,
    /// Server URLs by the name they are saved under (their password hidden).
    secrets: BTreeMap<String, String>,
    /// The lock clients a run can name besides fencer's own.
    clients: Clients,
}

impl fmt::Debug for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backends")
            .field("locks", &self.locks.keys().collect::<Vec<_>>())
            .field("stores", &self.stores.keys().collect::<Vec<_>>())
            .field("clients", &self.clients)
            .finish()
    }
}

impl Backends {
    /// fencer's own backends only.
    pub fn new() -> Backends {
        Backends::default()
    }

    /// Registers a lock service under `name`, built afresh for every run by `factory`.
    /// `about` is one line for `--help`. Refuses a name fencer's own backends already use.
    pub fn lock<L, F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        factory: F,
    ) -> Result<&mut Backends, BackendError>
    where
        L: LockService + 'static,
        F: Fn() -> L + Send + Sync + 'static,
    {
        self.lock_built(name, time, about, move |_| {
            Ok(Built::adapter(Arc::new(factory()) as Arc<dyn LockService>))
        })
    }

    /// Registers a fenced store under `name`, as [`Backends::lock`].
    pub fn store<S, F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        factory: F,
    ) -> Result<&mut Backends, BackendError>
    where
        S: FencedStore + 'static,
        F: Fn() -> S + Send + Sync + 'static,
    {
        self.store_built(name, time, about, move |_| {
            Ok(Built::adapter(Arc::new(factory()) as Arc<dyn FencedStore>))
        })
    }

    /// Registers a lock service whose factory builds everything a run may use of it: its
    /// clock, its restart, its process (what the plan's faults aimed at `lock` may act on; the
    /// rest are left out of its runs).
    pub fn lock_built<F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        factory: F,
    ) -> Result<&mut Backends, BackendError>
    where
        F: Fn(&RunContext<'_>) -> Result<Built<dyn LockService>, BackendError>
            + Send
            + Sync
            + 'static,
    {
        check_free(name, "lock", builtin_lock_time(name).is_some())?;
        register(&mut self.locks, name, time, about, Arc::new(factory));
        Ok(self)
    }

    /// Registers a fenced store whose factory builds everything a run may use of it, as
    /// [`Backends::lock_built`].
    pub fn store_built<F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        factory: F,
    ) -> Result<&mut Backends, BackendError>
    where
        F: Fn(&RunContext<'_>) -> Result<Built<dyn FencedStore>, BackendError>
            + Send
            + Sync
            + 'static,
    {
        check_free(name, "store", builtin_store_time(name).is_some())?;
        register(&mut self.stores, name, time, about, Arc::new(factory));
        Ok(self)
    }

    /// The lock clients a run can name: fencer's own and those registered
    /// ([`Clients::register`]).
    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The lock clients, to register more.
    pub fn clients_mut(&mut self) -> &mut Clients {
        &mut self.clients
    }

    /// Makes `url` the backend its shown name (password hidden) stands for, so a plan that
    /// saved only the shown name reaches the server; returns that name.
    pub fn reveal(&mut self, url: &str) -> BackendName {
        let shown = BackendName::new(url).shown();
        if shown.as_str() != url {
            self.secrets
                .insert(shown.as_str().to_string(), url.to_string());
        }
        shown
    }

    /// The name to build for `name`: the URL it stands for when it was saved hidden.
    fn revealed(&self, name: &BackendName) -> BackendName {
        match self.secrets.get(name.as_str()) {
            Some(url) => BackendName::new(url.as_str()),
            None => name.clone(),
        }
    }

    /// The registered lock services: (name, how time passes, one line about it).
    pub fn registered_locks(&self) -> impl Iterator<Item = (&str, Time, &str)> {
        self.locks
            .iter()
            .map(|(name, entry)| (name.as_str(), entry.time, entry.about.as_str()))
    }

    /// The registered stores: (name, how time passes, one line about it).
    pub fn registered_stores(&self) -> impl Iterator<Item = (&str, Time, &str)> {
        self.stores
            .iter()
            .map(|(name, entry)| (name.as_str(), entry.time, entry.about.as_str()))
    }

    /// How time passes for the lock service `name`, or why no backend has that name (a URL
    /// whose scheme this build serves no lock service for included).
    pub fn lock_time(&self, name: &BackendName) -> Result<Time, BackendError> {
        match self.locks.get(name.as_str()) {
            Some(entry) => Ok(entry.time),
            None => {
                check_server_url("lock", name.as_str())?;
                builtin_lock_time(name.as_str())
                    .ok_or_else(|| self.unknown("lock", name, &lock_names()))
            }
        }
    }

    /// How time passes for the store `name`, or why no backend has that name (a URL whose
    /// scheme this build serves no store for included).
    pub fn store_time(&self, name: &BackendName) -> Result<Time, BackendError> {
        match self.stores.get(name.as_str()) {
            Some(entry) => Ok(entry.time),
            None => {
                check_server_url("store", name.as_str())?;
                builtin_store_time(name.as_str())
                    .ok_or_else(|| self.unknown("store", name, &store_names()))
            }
        }
    }

    /// What fencer can do to the backend `name` (in either role), when its name alone tells:
    /// fencer's own backends, so a plan can be refused before any connection is made. `None`
    /// for a registered backend, whose reach is known once it is built.
    pub fn reach_by_name(&self, name: &BackendName) -> Option<Reach> {
        let registered =
            self.locks.contains_key(name.as_str()) || self.stores.contains_key(name.as_str());
        (!registered).then(|| builtin_reach(name))
    }

    /// Builds the lock service `name` for one run.
    pub fn build_lock(
        &self,
        name: &BackendName,
        cx: &RunContext<'_>,
    ) -> Result<Built<dyn LockService>, BackendError> {
        if let Some(entry) = self.locks.get(name.as_str()) {
            return (entry.factory)(cx);
        }
        let name = &self.revealed(name);
        let text = name.as_str();
        if let Ok(backend) = parse_kebab::<LockBackend>(text) {
            let clock = LocalClock::new(cx.truth, NodeClock::with_offset(0));
            let service = Arc::new(SimLeaseService::new(
                clock.clone(),
                Arc::clone(cx.recorder),
                backend.rules(),
            ));
            return Ok(Built {
                clock: Some(clock),
                restart: Some(Arc::clone(&service) as Arc<dyn Restartable>),
                records_log: true,
                ..Built::adapter(backend.serve(service))
            });
        }
        if let Some((kind, query)) = ClusterKind::parse(text) {
            let (cluster, url) = start_cluster(kind, &query, "lock", cx)?;
            return Ok(cluster
                .built(Built::connected(lock_from_url(&url)?))
                .at(url));
        }
        if text.starts_with(PRIVATE_SCHEME) {
            let (server, url) = start_private(text, "lock", cx)?;
            return Ok(Built {
                server: Some(Arc::clone(&server) as Arc<dyn ServerFaults>),
                guard: Some(Box::new(Stopper::new("lock", server, cx))),
                ..Built::connected(lock_from_url(&url)?)
            }
            .at(url));
        }
        if builtin_lock_time(text).is_some() {
            let built = Built::connected(lock_from_url(text)?);
            return Ok(if text.contains("://") {
                built.at(text.to_string())
            } else {
                built
            });
        }
        Err(self.unknown("lock", name, &lock_names()))
    }

    /// Builds the store `name` for one run.
    pub fn build_store(
        &self,
        name: &BackendName,
        cx: &RunContext<'_>,
    ) -> Result<Built<dyn FencedStore>, BackendError> {
        if let Some(entry) = self.stores.get(name.as_str()) {
            return (entry.factory)(cx);
        }
        let name = &self.revealed(name);
        let text = name.as_str();
        if let Ok(backend) = parse_kebab::<StoreBackend>(text) {
            let store = SqliteStore::in_memory(backend.rules(), Some(Arc::clone(cx.recorder)))
                .map_err(|error| BackendError::Unreachable(error.to_string()))?;
            return Ok(Built {
                records_log: true,
                ..Built::adapter(Arc::new(store) as Arc<dyn FencedStore>)
            });
        }
        if let Some((kind, query)) = ClusterKind::parse(text) {
            let (cluster, url) = start_cluster(kind, &query, "store", cx)?;
            return Ok(cluster.built(Built::connected(store_from_url(&url)?)));
        }
        if text.starts_with(PRIVATE_SCHEME) {
            let (server, url) = start_private(text, "store", cx)?;
            return Ok(Built {
                server: Some(Arc::clone(&server) as Arc<dyn ServerFaults>),
                guard: Some(Box::new(Stopper::new("store", server, cx))),
                ..Built::connected(store_from_url(&url)?)
            });
        }
        if builtin_store_time(text).is_some() {
            return Ok(Built::connected(store_from_url(text)?));
        }
        Err(self.unknown("store", name, &store_names()))
    }

    /// The error for a name no backend has, listing what the user could have meant.
    fn unknown(&self, role: &str, name: &BackendName, builtin: &[String]) -> BackendError {
        let registered: Vec<&String> = match role {
            "lock" => self.locks.keys().collect(),
            _ => self.stores.keys().collect(),
        };
        let mut known: Vec<String> = registered.into_iter().cloned().collect();
        known.extend(builtin.iter().cloned());
        BackendError::BadUrl(format!(
            "unknown {role} `{}`: expected one of {}, or a server URL (redis://…, \
             postgres://…, etcd://…, zk://…, {}) or exec:COMMAND",
            name.shown(),
            known.join(", "),
            fencer_servers::PrivateBackend::URLS
        ))
    }
}

/// What fencer can do to one of its own backends, known by name before it is built: the
/// simulated lease service's clock and restart, the process of a server it runs; nothing to
/// a server behind a URL, or to a name it does not know.
pub fn builtin_reach(name: &BackendName) -> Reach {
    let simulated_lock = parse_kebab::<LockBackend>(name.as_str()).is_ok();
    Reach {
        clock: simulated_lock,
        restart: simulated_lock,
        server: name.is_fencers_own_server(),
    }
}

/// Adds one registration to the lock services' or the stores' table.
fn register<T: ?Sized>(
    table: &mut BTreeMap<String, Registered<T>>,
    name: &str,
    time: Time,
    about: &str,
    factory: Factory<T>,
) {
    let entry = Registered {
        time,
        about: about.to_string(),
        factory,
    };
    table.insert(name.to_string(), entry);
}

/// Refuses to register a name one of fencer's own backends answers to.
fn check_free(name: &str, role: &str, taken: bool) -> Result<(), BackendError> {
    if taken || name.is_empty() {
        return Err(BackendError::BadUrl(format!(
            "cannot register the {role} `{name}`: fencer's own backends use that name"
        )));
    }
    Ok(())
}

fn parse_kebab<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_value(serde_json::Value::String(text.to_string()))
}

/// Refuses a server URL (`scheme://…`; `private:` and `exec:` names are no URLs) whose scheme
/// this build has no `role` for, naming the schemes it has and fencer's own servers.
fn check_server_url(role: &str, text: &str) -> Result<(), BackendError> {
    if text.starts_with(PRIVATE_SCHEME) || text.starts_with(EXEC_SCHEME) || !text.contains("://") {
        return Ok(());
    }
    check_url_scheme(role, text).map_err(|error| {
        BackendError::BadUrl(format!(
            "{error}; or a server fencer starts itself: {}",
            fencer_servers::PrivateBackend::URLS
        ))
    })
}

/// True for what fencer's URL table or its own servers answer to.
fn is_server_name(text: &str) -> bool {
    text.contains("://") || text.starts_with(PRIVATE_SCHEME) || text.starts_with(EXEC_SCHEME)
}

fn builtin_lock_time(text: &str) -> Option<Time> {
    if parse_kebab::<LockBackend>(text).is_ok() {
        Some(Time::Simulated)
    } else {
        is_server_name(text).then_some(Time::Real)
    }
}

fn builtin_store_time(text: &str) -> Option<Time> {
    if parse_kebab::<StoreBackend>(text).is_ok() {
        Some(Time::Simulated)
    } else {
        is_server_name(text).then_some(Time::Real)
    }
}

fn lock_names() -> Vec<String> {
    LockBackend::ALL.iter().map(kebab_name).collect()
}

fn store_names() -> Vec<String> {
    StoreBackend::ALL.iter().map(kebab_name).collect()
}

/// Starts the private server a `private:` name asks for and returns it with the URL the
/// role's adapter uses (the name's query, e.g. `?variant=unfenced`, carried over).
fn start_private(
    name: &str,
    role: &str,
    cx: &RunContext<'_>,
) -> Result<(Arc<PrivateServer>, String), BackendError> {
    let server = PrivateServer::start(name).map_err(|error| match error {
        fencer_servers::ServerError::BadUrl(message) => BackendError::BadUrl(message),
        other => BackendError::Unreachable(other.to_string()),
    })?;
    (cx.note)(&format!("started the {role} server: {}", server.describe()));
    let url = server.url();
    Ok((Arc::new(server), url))
}

/// Starts the cluster a `private:` name asks for and returns it with the URL the role's
/// adapter uses.
fn start_cluster(
    kind: ClusterKind,
    query: &str,
    role: &'static str,
    cx: &RunContext<'_>,
) -> Result<(ClusterStopper, String), BackendError> {
    let cluster = kind.start(query).map_err(|error| match error {
        fencer_servers::ServerError::BadUrl(message) => BackendError::BadUrl(message),
        other => BackendError::Unreachable(format!(
            "cannot start a private {} cluster ({other}); install the Debian package {}",
            kind.name(),
            kind.debian_package()
        )),
    })?;
    (cx.note)(&format!(
        "started the {role} cluster {}: {}",
        kind.name(),
        cluster.describe()
    ));
    let url = cluster.client_url();
    let stopper = ClusterStopper {
        role,
        kind,
        cluster: Some(cluster),
        note: Arc::clone(cx.note),
    };
    Ok((stopper, url))
}

/// Stops a cluster fencer started when the run is done with it (on every path: the run's
/// end, an error, a panic unwinding), and says so.
struct ClusterStopper {
    role: &'static str,
    kind: ClusterKind,
    cluster: Option<Box<dyn StartedCluster>>,
    note: Note,
}

impl ClusterStopper {
    /// `connected` (the role's adapter) with the cluster's members and links as the targets
    /// of the plan's faults, and the cluster kept until the run is done with it.
    fn built<T: ?Sized>(self, connected: Built<T>) -> Built<T> {
        let cluster = self.cluster.as_ref().expect("started above");
        Built {
            members: cluster
                .nodes()
                .into_iter()
                .map(|node| (node.name, node.faults))
                .collect(),
            cluster: Some(cluster.cluster_faults()),
            guard: Some(Box::new(self)),
            ..connected
        }
    }
}

impl Drop for ClusterStopper {
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            drop(cluster);
            (self.note)(&format!(
                "stopped the {} cluster {}",
                self.role,
                self.kind.name()
            ));
        }
    }
}

/// Stops a private server when the run is done with it, and says so.
struct Stopper {
    role: &'static str,
    server: Option<Arc<PrivateServer>>,
    note: Note,
}

impl Stopper {
    fn new(role: &'static str, server: Arc<PrivateServer>, cx: &RunContext<'_>) -> Stopper {
        Stopper {
            role,
            server: Some(server),
            note: Arc::clone(cx.note),
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let port = server.server_port();
            drop(server);
            (self.note)(&format!("stopped the {} server (port {port})", self.role));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencers_own_names_keep_their_time_and_unknown_names_list_the_choices() {
        let backends = Backends::new();
        assert_eq!(backends.lock_time(&"sim".into()), Ok(Time::Simulated));
        assert_eq!(
            backends.store_time(&"sqlite-unfenced".into()),
            Ok(Time::Simulated)
        );
        assert_eq!(
            backends.store_time(&"sqlite:///tmp/register.db".into()),
            Ok(Time::Real)
        );
        let error = backends
            .lock_time(&"mysql://u:pw@h/db".into())
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("unsupported lock URL scheme `mysql` in mysql://u:***@h/db")
                && error.contains("private:redis"),
            "a URL nothing serves is refused by its name alone: {error}"
        );
        assert_eq!(backends.store_time(&"private:redis".into()), Ok(Time::Real));
        assert_eq!(
            backends.lock_time(&"exec:python3 x.py".into()),
            Ok(Time::Real)
        );
        let error = backends.lock_time(&"etcd".into()).unwrap_err().to_string();
        assert!(
            error.starts_with("unknown lock `etcd`: expected one of sim, sim-unsafe-release"),
            "{error}"
        );
        assert!(error.contains("or exec:COMMAND"), "{error}");
    }

    #[test]
    fn registered_names_are_found_listed_and_cannot_shadow_fencers_own() {
        let mut backends = Backends::new();
        backends
            .store("my-store", Time::Simulated, "an in-memory store", || {
                SqliteStore::in_memory(fencer_backends::StoreRules::Fenced, None).unwrap()
            })
            .unwrap();
        assert_eq!(backends.store_time(&"my-store".into()), Ok(Time::Simulated));
        assert_eq!(
            backends.registered_stores().collect::<Vec<_>>(),
            [("my-store", Time::Simulated, "an in-memory store")]
        );
        let error = backends
            .store("sqlite", Time::Simulated, "", || {
                SqliteStore::in_memory(fencer_backends::StoreRules::Fenced, None).unwrap()
            })
            .err()
            .unwrap();
        assert!(
            error.to_string().contains("fencer's own backends use"),
            "{error}"
        );
        let error = backends.lock_time(&"my-store".into()).unwrap_err();
        assert!(
            error.to_string().starts_with("unknown lock `my-store`"),
            "{error}"
        );
        let error = backends.store_time(&"nope".into()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("expected one of my-store, sqlite"),
            "{error}"
        );
    }

    #[test]
    fn a_revealed_url_stands_behind_its_shown_name() {
        let mut backends = Backends::new();
        let shown = backends.reveal("redis://:pw@127.0.0.1:1");
        assert_eq!(shown.as_str(), "redis://:***@127.0.0.1:1");
        assert_eq!(
            backends.revealed(&shown).as_str(),
            "redis://:pw@127.0.0.1:1"
        );
        assert_eq!(backends.reveal("sim").as_str(), "sim");
        assert_eq!(backends.revealed(&"sim".into()).as_str(), "sim");
    }

    #[test]
    fn a_shown_name_hides_the_password() {
        let name = BackendName::new("postgres://u:secret@h/db");
        assert_eq!(name.shown().as_str(), "postgres://u:***@h/db");
        assert!(BackendName::new("private:redis").is_fencers_own_server());
        assert!(!BackendName::new("redis://h:1").is_fencers_own_server());
        assert_eq!(
            BackendName::from(LockBackend::SimClockTokens).as_str(),
            "sim-clock-tokens"
        );
    }
}
