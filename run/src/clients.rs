//! The lock clients a run can use, by the name a user gives on the command line or in a plan:
//! fencer's own (the reference client and its mutants), an `exec:` child per worker, and any a
//! user's program registers.
//!
//! A registration is a factory of factories: for every run it gives what builds each worker's
//! library ([`LockLibrary`]) from that worker's [`LibraryContext`], so workers and seeds never
//! share a library's state. Like a backend, a client says how time passes for it: fencer's own
//! and a user's library over the recorded lock service keep simulated time; a child process
//! keeps real time, and makes its run real time.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use fencer_backends::BackendError;
use fencer_backends::registry::Probe;
use fencer_harness::{LibraryContext, LockLibrary};
use fencer_nemesis::ServerFaults;
use fencer_workloads::{ClientVariant, ReferenceLibrary};
use serde::{Deserialize, Serialize};

use crate::backends::{RunContext, Time};

/// A lock client as named by the user: `reference`, a client mutant (`zombie-renewal`), an
/// `exec:COMMAND` child, or a name their program registered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClientName(String);

impl ClientName {
    /// The name as given.
    pub fn new(name: impl Into<String>) -> ClientName {
        ClientName(name.into())
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// fencer's own client this name is, if it is one: what the worker's caller side does
    /// (ignoring a lost lease, resending a rejected write) follows it; any other client is
    /// driven as the reference drives its library.
    pub fn variant(&self) -> Option<ClientVariant> {
        ClientVariant::named(&self.0)
    }

    /// The command of an `exec:` client, if this is one.
    pub fn exec_command(&self) -> Option<&str> {
        self.0.strip_prefix(EXEC_PREFIX)
    }
}

impl Default for ClientName {
    /// The reference client, what a run uses unless told otherwise.
    fn default() -> ClientName {
        ClientName::from(ClientVariant::Reference)
    }
}

impl From<ClientVariant> for ClientName {
    fn from(variant: ClientVariant) -> ClientName {
        ClientName(variant.name().to_string())
    }
}

impl From<&str> for ClientName {
    fn from(name: &str) -> ClientName {
        ClientName(name.to_string())
    }
}

impl fmt::Display for ClientName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The prefix of a client run as a child process per worker.
pub const EXEC_PREFIX: &str = "exec:";

/// Builds one worker's library for a run.
pub type LibraryBuilder =
    Arc<dyn Fn(&LibraryContext) -> Result<Arc<dyn LockLibrary>, BackendError> + Send + Sync>;

/// What one run gets from a client's factory.
pub struct BuiltClient {
    /// Builds each worker's library.
    pub library: LibraryBuilder,
    /// Made before a real run starts: what must be up before any worker calls (an exec
    /// client's children, started and greeted).
    pub probe: Option<Arc<dyn Probe>>,
    /// What the client lets the nemesis reach besides the worker itself, by worker name: an
    /// exec client's child and proxy, which that worker's pauses, clock steps and proxy
    /// faults act on.
    pub targets: Vec<(String, Arc<dyn ServerFaults>)>,
    /// Kept alive until the run's history is complete (a child per worker, their proxies).
    pub guard: Option<Box<dyn std::any::Any + Send>>,
}

impl BuiltClient {
    /// A client whose every worker's library `build` makes.
    pub fn library<F>(build: F) -> BuiltClient
    where
        F: Fn(&LibraryContext) -> Arc<dyn LockLibrary> + Send + Sync + 'static,
    {
        BuiltClient::of(Arc::new(move |cx: &LibraryContext| Ok(build(cx))))
    }

    /// A client that is only its library builder: nothing to start before the run, nothing
    /// of its own for the nemesis, nothing to keep.
    pub fn of(library: LibraryBuilder) -> BuiltClient {
        BuiltClient {
            library,
            probe: None,
            targets: Vec::new(),
            guard: None,
        }
    }
}

type ClientFactory =
    Arc<dyn Fn(&RunContext<'_>) -> Result<BuiltClient, BackendError> + Send + Sync>;

/// One registered client: how it keeps time, what it is, and how to build it for a run.
#[derive(Clone)]
struct Registered {
    time: Time,
    about: String,
    factory: ClientFactory,
}

/// Every client a run can name: fencer's own, plus those registered by name.
#[derive(Clone, Default)]
pub struct Clients {
    registered: BTreeMap<String, Registered>,
}

impl fmt::Debug for Clients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clients")
            .field("registered", &self.registered.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Clients {
    /// Registers a lock client library under `name`: `build` makes each worker's library from
    /// its context, afresh for every run. `about` is one line for `--help`. Refuses a name
    /// fencer's own clients use, or one that starts `exec:`.
    pub fn register<F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        build: F,
    ) -> Result<&mut Clients, BackendError>
    where
        F: Fn(&LibraryContext) -> Arc<dyn LockLibrary> + Send + Sync + 'static,
    {
        let build: LibraryBuilder = Arc::new(move |cx: &LibraryContext| Ok(build(cx)));
        self.register_built(name, time, about, move |_| {
            Ok(BuiltClient::of(Arc::clone(&build)))
        })
    }

    /// Registers a client whose factory builds everything a run uses of it, as
    /// [`Clients::register`] for a library that needs the run (its recorder, a server).
    pub fn register_built<F>(
        &mut self,
        name: &str,
        time: Time,
        about: &str,
        factory: F,
    ) -> Result<&mut Clients, BackendError>
    where
        F: Fn(&RunContext<'_>) -> Result<BuiltClient, BackendError> + Send + Sync + 'static,
    {
        if ClientVariant::named(name).is_some() || name.starts_with(EXEC_PREFIX) {
            return Err(BackendError::BadUrl(format!(
                "cannot register client `{name}`: fencer's own clients use that name (choose \
                 another)"
            )));
        }
        self.registered.insert(
            name.to_string(),
            Registered {
                time,
                about: about.to_string(),
                factory: Arc::new(factory),
            },
        );
        Ok(self)
    }

    /// The registered clients: (name, how time passes, one line about it).
    pub fn registered(&self) -> impl Iterator<Item = (&str, Time, &str)> {
        self.registered
            .iter()
            .map(|(name, entry)| (name.as_str(), entry.time, entry.about.as_str()))
    }

    /// How time passes for the client `name`, or why no client has that name.
    pub fn time(&self, name: &ClientName) -> Result<Time, BackendError> {
        if let Some(entry) = self.registered.get(name.as_str()) {
            return Ok(entry.time);
        }
        if name.variant().is_some() {
            return Ok(Time::Simulated);
        }
        if name.exec_command().is_some() {
            return Ok(Time::Real);
        }
        Err(self.unknown(name))
    }

    /// Builds the client `name` for one run.
    pub fn build(
        &self,
        name: &ClientName,
        cx: &RunContext<'_>,
    ) -> Result<BuiltClient, BackendError> {
        if let Some(entry) = self.registered.get(name.as_str()) {
            return (entry.factory)(cx);
        }
        if let Some(library) = Clients::builtin(name) {
            return Ok(BuiltClient::of(library));
        }
        if let Some(command) = name.exec_command() {
            #[cfg(feature = "exec")]
            return crate::exec_client::build(command, cx);
            #[cfg(not(feature = "exec"))]
            return Err(BackendError::BadUrl(format!(
                "client `exec:{command}`: exec clients are not available in this build"
            )));
        }
        Err(self.unknown(name))
    }

    /// The library builder of fencer's own client `name`, if it is one: what needs no run to
    /// build.
    pub fn builtin(name: &ClientName) -> Option<LibraryBuilder> {
        let variant = name.variant()?;
        Some(Arc::new(move |cx: &LibraryContext| {
            Ok(Arc::new(ReferenceLibrary::new(cx, variant)) as Arc<dyn LockLibrary>)
        }))
    }

    /// The error for a name no client has, listing what the user could have meant.
    fn unknown(&self, name: &ClientName) -> BackendError {
        let mut known: Vec<String> = self.registered.keys().cloned().collect();
        known.extend(ClientVariant::ALL.map(|variant| variant.name().to_string()));
        BackendError::BadUrl(format!(
            "unknown client `{name}`: expected one of {}, or exec:COMMAND",
            known.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencer_s_own_clients_keep_simulated_time_and_exec_ones_real_time() {
        let clients = Clients::default();
        for variant in ClientVariant::ALL {
            assert_eq!(
                clients.time(&ClientName::from(variant)),
                Ok(Time::Simulated)
            );
        }
        assert_eq!(
            clients.time(&ClientName::new("exec:python3 client.py")),
            Ok(Time::Real)
        );
        let unknown = clients.time(&ClientName::new("redisson")).unwrap_err();
        assert!(
            unknown
                .to_string()
                .starts_with("unknown client `redisson`: expected one of reference, "),
            "{unknown}"
        );
    }

    #[test]
    fn a_registered_name_may_not_shadow_fencer_s_own() {
        let mut clients = Clients::default();
        let build = |cx: &LibraryContext| {
            Arc::new(ReferenceLibrary::new(cx, ClientVariant::Reference)) as Arc<dyn LockLibrary>
        };
        for taken in ["reference", "zombie-renewal", "exec:x"] {
            assert!(
                clients
                    .register(taken, Time::Simulated, "mine", build)
                    .is_err(),
                "{taken}"
            );
        }
        clients
            .register("my-lib", Time::Simulated, "mine", build)
            .unwrap();
        assert_eq!(
            clients.time(&ClientName::new("my-lib")),
            Ok(Time::Simulated)
        );
        assert_eq!(
            clients.registered().collect::<Vec<_>>(),
            [("my-lib", Time::Simulated, "mine")]
        );
    }
}
