//! The `fencer` command line, also as a library: a user's program registers its own lock
//! services and stores ([`Cli::lock`], [`Cli::store`]) and hands over to every command —
//! `run`, `replay`, `gate`, `shrink`, `check`, `explain`, `serve`, `merge` — with those names
//! beside fencer's own. Argument parsing and dispatch live here; each subcommand in its own
//! module.

mod bench;
mod bench_real;
mod check;
mod coverage;
mod demo;
mod explain;
mod gate;
mod merge;
mod mutants;
mod output;
mod progress;
mod replay;
mod run;
mod serve;
mod shrink;
mod signals;
mod summary;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::CheckOptions;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use fencer_harness::terminal::escape_lines;
use fencer_harness::{FencedStore, LockService, Workload};
use fencer_nemesis::FaultKind;
use fencer_run::settings::{Settings, parse_duration};
use fencer_run::{Backends, ClientName, Time};
use fencer_workloads::{RenewFailurePolicy, WaitMode};
use output::errln;

/// How a command ended, as Jepsen's exit codes.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments or input (254): the message says what was expected.
    BadInput(String),
    /// fencer itself failed (255).
    Internal(String),
    /// A real-time run was stopped by Ctrl-C (130), its servers torn down.
    Interrupted(String),
}

impl Failure {
    /// Bad input, with the error's message.
    fn bad_input(error: impl std::fmt::Display) -> Failure {
        Failure::BadInput(error.to_string())
    }

    /// fencer's own failure, with the error's message.
    fn internal(error: impl std::fmt::Display) -> Failure {
        Failure::Internal(error.to_string())
    }
}

impl From<fencer_results::SaveError> for Failure {
    /// A finished run that could not be saved where it was to go is the caller's to act on
    /// (the place, the disk), never a fault of fencer's: the message says where the run is
    /// kept instead.
    fn from(error: fencer_results::SaveError) -> Failure {
        Failure::bad_input(error)
    }
}

impl From<crate::RunError> for Failure {
    fn from(error: crate::RunError) -> Failure {
        if error.is_bad_input() {
            Failure::bad_input(error)
        } else if let crate::RunError::Interrupted(_) = error {
            Failure::Interrupted(error.to_string())
        } else {
            Failure::internal(error)
        }
    }
}

/// What a command returns: the verdict's exit code, or a failure.
pub type Outcome = Result<u8, Failure>;

/// The lock service unless `--lock` names one.
const DEFAULT_LOCK: &str = "sim";

/// The store unless `--store` names one.
const DEFAULT_STORE: &str = "sqlite";

/// Where saved runs go unless `--archive` says otherwise.
pub const DEFAULT_ARCHIVE: &str = "runs";

/// Exit code for bad arguments or input.
pub const EXIT_BAD_INPUT: u8 = 254;
/// Exit code for fencer's own failures.
pub const EXIT_INTERNAL: u8 = 255;
/// Exit code for a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// `fencer --version`: the release and the git commit it was built from (`unknown` for a
/// build outside a git checkout), so a report names the exact source.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FENCER_GIT_COMMIT"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "fencer",
    version = VERSION,
    about = "Fault-injection harness for distributed locks: leases, owner tokens, fencing tokens",
    after_help = "Exit codes: 0 valid, 1 invalid (anomaly found), 2 unknown, 130 interrupted, \
                  254 bad arguments or input, 255 internal error."
)]
struct CliArgs {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one seeded simulation, check it, and save the run directory.
    Run(RunArgs),
    /// Re-run a saved run from its plan and check the history is byte-identical.
    Replay(replay::ReplayArgs),
    /// The stale-holder experiment: a paused lease holder against unfenced and fenced
    /// SQLite.
    Demo {
        /// Root of the run archive, where saved runs live.
        #[arg(long, default_value = DEFAULT_ARCHIVE, visible_alias = "store-dir")]
        archive: PathBuf,
    },
    /// Check a stored history (JSONL) again, e.g. after improving a checker.
    Check {
        /// The history file.
        history: PathBuf,
        /// The workload that produced it (default: from run.json beside it, else
        /// fenced-register): fenced-register, lock-counter, mutex.
        #[arg(long, value_parser = |s: &str| s.parse::<crate::Workload>())]
        workload: Option<crate::Workload>,
        /// Fail on warnings too (superseded-write-accepted, fencing's documented limit).
        #[arg(long)]
        strict: bool,
        /// Wall-clock budget of the linearizability search for histories without a store
        /// log; when it runs out the verdict is unknown (exit 2).
        #[arg(long, default_value_t = 10_000)]
        search_budget_ms: u64,
        /// Print every finding in full, warnings included (default: the first anomalies, the
        /// warnings counted on the verdict line).
        #[arg(long)]
        verbose: bool,
    },
    /// Run many seeds on every core, fail on the first anomaly, shrink it, save it as a
    /// regression: the CI gate.
    Gate(gate::GateArgs),
    /// Shrink a failing run's plan to a minimal one that still shows the same anomaly.
    Shrink(shrink::ShrinkArgs),
    /// Combine the summaries of gate shards (their --out directories) into one.
    Merge(merge::MergeArgs),
    /// Which race windows saved runs and gates reached (a rival's grant just after an expiry,
    /// a release in flight across one, …), by width, added up over every directory given.
    Coverage(coverage::CoverageArgs),
    /// Measure real adapters' operations per second, directly and through fencer.
    BenchReal {
        /// Lock server URL (redis://…, postgres://…, etcd://…, zk://…).
        #[arg(long)]
        lock: String,
        /// Store server URL (redis://…, postgres://…, etcd://…, zk://…).
        #[arg(long)]
        store: String,
        /// Acquire → write → release cycles to time.
        #[arg(long, default_value_t = 2_000)]
        cycles: u64,
    },
    /// Measure simulation and checking throughput on this machine (one core).
    Bench {
        /// Seeds to simulate, from 0.
        #[arg(long, default_value_t = 20)]
        seeds: u64,
        /// Number of workers.
        #[arg(long, default_value_t = 5)]
        workers: usize,
        /// Cycles per worker.
        #[arg(long, default_value_t = 100)]
        ops: usize,
        /// Workload to simulate: fenced-register, lock-counter, mutex.
        #[arg(long, default_value = "fenced-register", value_parser = |s: &str| s.parse::<Workload>())]
        workload: Workload,
    },
    /// Run every mutant (a deliberately broken lock, store or worker) over seeds 0.. until
    /// fencer catches it; exit 1 if any escapes. With --seeds, hunt from every start seed of
    /// the range and print the detection rate and the median and max seeds to detection.
    Mutants {
        /// Seeds to try per mutant (from each start seed) before declaring it not caught.
        #[arg(long, default_value_t = 200)]
        cap: u64,
        /// Start seeds to hunt from: A..B (B excluded), A..=B or a single seed
        /// [default: one hunt from seed 0].
        #[arg(long)]
        seeds: Option<fencer_gate::seeds::SeedRange>,
        /// How the mutants' workers wait for a busy lock: poll or backoff (as `run --wait`).
        #[arg(long, default_value = "poll", value_parser = |s: &str| s.parse::<WaitMode>())]
        wait: WaitMode,
        /// Shrink each mutant's first catch from seed 0 toward its expected class and print
        /// the sizes before and after (workers acting, cycles, faults, events), with medians.
        #[arg(long, conflicts_with = "seeds")]
        shrink: bool,
    },
    /// Tell a run's verdict as a numbered story: the evidence on both clocks, the defence that
    /// failed, the remedy.
    Explain {
        /// The run directory (e.g. runs/latest).
        dir: PathBuf,
        /// Tell every anomaly, not only the first five.
        #[arg(long)]
        all: bool,
    },
    /// Serve a local web UI listing the runs in a run archive, with their timelines and plots.
    Serve {
        /// Root of the run archive, where saved runs live.
        #[arg(default_value = DEFAULT_ARCHIVE)]
        archive: PathBuf,
        /// Address to listen on (loopback by default; port 0 picks a free port).
        #[arg(long, default_value = serve::DEFAULT_LISTEN)]
        listen: String,
        /// Allow an address that is not loopback (0.0.0.0, a network interface): everyone who
        /// can reach it can read every run in the archive.
        #[arg(long)]
        allow_remote: bool,
    },
}

/// `fencer run`'s flags; every default is the embedded default of [`Settings`].
#[derive(Parser, Debug)]
struct RunArgs {
    /// Seed every random choice derives from.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run this plan file (a saved plan.json, a shrunk plan.min.json, or a hand-written plan)
    /// instead of generating one; the plan carries its own settings.
    #[arg(long, conflicts_with_all = SETTINGS_FLAGS)]
    plan: Option<PathBuf>,
    #[command(flatten)]
    settings: SettingsArgs,
    /// Run directory to create (default: <archive>/fenced-register/<seed>-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Root of the run archive, where saved runs live (`--store-dir` is its old name).
    #[arg(long, default_value = DEFAULT_ARCHIVE, visible_alias = "store-dir")]
    archive: PathBuf,
    /// Fail on warnings too (superseded-write-accepted, fencing's documented limit).
    #[arg(long)]
    strict: bool,
    /// Print every finding in full, warnings included, and every fault the run's backends
    /// could not take (default: the first anomalies, the warnings counted on the verdict line).
    #[arg(long)]
    verbose: bool,
}

impl RunArgs {
    /// `run --plan PLAN --archive ARCHIVE [--strict]`: running a saved plan again as it was.
    fn replaying(plan: PathBuf, archive: PathBuf, strict: bool) -> RunArgs {
        let mut args = RunArgs::try_parse_from(["run"]).expect("no flags parse");
        args.plan = Some(plan);
        args.archive = archive;
        args.strict = strict;
        args
    }
}

/// Every flag a plan file replaces (clap ids), so `--plan` refuses them instead of ignoring
/// them. `--lock` and `--store` are not among them: with server URLs they say where a saved
/// plan runs again ([`run_dispatch`] refuses simulated names next to `--plan`).
const SETTINGS_FLAGS: [&str; 13] = [
    "seed",
    "workload",
    "client",
    "workers",
    "ops",
    "ttl",
    "renew_every",
    "nemesis",
    "fault_gap",
    "on_renew_failure",
    "call_timeout",
    "wait",
    "swarm",
];

/// The workload, backend and nemesis flags `run` and `gate` share.
#[derive(Args, Debug)]
struct SettingsArgs {
    /// What workers do under the lock: fenced-register, lock-counter, mutex.
    #[arg(long, default_value = "fenced-register", value_parser = |s: &str| s.parse::<Workload>())]
    workload: Workload,
    /// The lock client library the workers take their leases through: reference, a client
    /// mutant (ignore-renew-failure, zombie-renewal, blind-retry, eternal-watchdog,
    /// cached-check, silent-watchdog, sparse-renewal), exec:COMMAND (a child per worker that
    /// wraps a real client library: docs/exec-protocol.md), or a name your program registered.
    /// `--worker` is its older name.
    #[arg(long, alias = "worker", default_value = "reference")]
    client: String,
    /// Number of workers (1 to 1000).
    #[arg(long, default_value_t = 5)]
    workers: usize,
    /// Acquire → write → release cycles per worker (workers × ops at most 1000000).
    #[arg(long, default_value_t = 100)]
    ops: usize,
    /// Lease TTL (e.g. 10s, 500ms; 10ms to 1h).
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    ttl: u64,
    /// Renewal period while a lease is held; shorter than the TTL and at least a thousandth
    /// of it.
    #[arg(long, default_value = "3s", value_parser = parse_duration, allow_hyphen_values = true)]
    renew_every: u64,
    /// Faults to inject: a comma list of fault families and the groups default (pause, skew,
    /// drop-renew, delay-write, restart, delay-acquire, delay-renew, delay-release, lease-edge)
    /// and all (also drop-acquire, drop-write and cancel, and on servers fencer starts,
    /// private:…, also
    /// server-pause, partition, delay-replies, drop-replies, cut, and on a cluster whose
    /// members talk to each other, private:etcd3, private:zookeeper3 or private:redis-sentinel,
    /// net-partition), e.g.
    /// default,drop-write; or none.
    #[arg(long, default_value = "default", value_parser = parse_nemesis)]
    nemesis: NemesisList,
    /// Mean gap between two faults (at most 1h; a run's schedule holds at most 1000000
    /// faults).
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    fault_gap: u64,
    /// Protected store: sqlite, or a mutant (sqlite-unfenced, sqlite-check-then-write,
    /// sqlite-refuses-newer, sqlite-phantom-read, sqlite-stale-cache,
    /// sqlite-ignores-rowcount); or a server URL (redis://host:port,
    /// postgres://user@host:port/db; `?variant=unfenced` for the mutant); or private:redis /
    /// private:postgres / private:etcd / private:zookeeper for a server fencer starts itself;
    /// or exec:COMMAND for a store fencer runs as its child (docs/exec-protocol.md); or a
    /// store this program registered (listed below).
    #[arg(long)]
    store: Option<String>,
    /// Lock service: sim, or a mutant (sim-unsafe-release, sim-unchecked-renew,
    /// sim-resurrecting-renew, sim-clock-tokens, sim-volatile-counter, sim-late-renew,
    /// sim-busy-while-free, sim-sticky-lock, sim-revive-expired, sim-clock-throttled-renew,
    /// sim-two-step-release, sim-two-step-renew, sim-expired-renew-ok); or
    /// a server URL (redis://host:port, postgres://user@host:port/db; `?variant=unsafe-release`
    /// for the Redis mutant); or private:redis / private:postgres / private:etcd /
    /// private:zookeeper for a server fencer starts itself; or exec:COMMAND for a lock service
    /// fencer runs as its child (docs/exec-protocol.md); or a lock service this program
    /// registered (listed below).
    #[arg(long)]
    lock: Option<String>,
    /// What a worker does when a renewal fails or is unanswered: stop or continue.
    #[arg(long, default_value = "stop", value_parser = |s: &str| s.parse::<RenewFailurePolicy>())]
    on_renew_failure: RenewFailurePolicy,
    /// How long a client waits for a reply before recording the call as unknown (at most 1h).
    #[arg(long, default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    call_timeout: u64,
    /// How workers wait for a busy lock: poll (retry every TTL/20, so every release and
    /// expiry meets a storm of acquires), backoff (capped exponential back-off with jitter
    /// from TTL/20 up to 16 TTLs, as client libraries retry; scales to 1000 workers), or
    /// auto: poll up to 10 workers, backoff above.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<WaitArg>())]
    wait: WaitArg,
    /// Swarm testing: each seed also chooses which of the enabled faults are on and how
    /// often they come.
    #[arg(long)]
    swarm: bool,
}

/// A parsed `--wait` value: a mode, or `auto`, which picks one by the size of the crowd
/// ([`WaitMode::for_crowd`]). A plan always records the mode it ran with, so `auto` never
/// reaches a saved run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitArg {
    Auto,
    Mode(WaitMode),
}

impl WaitArg {
    /// The mode a run of `workers` waits in.
    fn for_crowd(self, workers: usize) -> WaitMode {
        match self {
            WaitArg::Auto => WaitMode::for_crowd(workers),
            WaitArg::Mode(mode) => mode,
        }
    }
}

/// A `--wait` or `--nemesis` value fencer cannot read: clap prints the sentence as it is,
/// after the flag's name.
#[derive(Debug)]
enum FlagValueError {
    /// `--wait` named no wait mode.
    WaitMode(String),
    /// `none` came with other families in a `--nemesis` list.
    NoneInList(String),
    /// A `--nemesis` item named no fault family.
    Fault(fencer_nemesis::UnknownFault),
}

impl std::fmt::Display for FlagValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlagValueError::WaitMode(text) => write!(
                f,
                "unknown wait mode `{text}`: expected auto, poll or backoff"
            ),
            FlagValueError::NoneInList(text) => write!(
                f,
                "`none` stands alone (--nemesis none), found it in the list `{text}`"
            ),
            FlagValueError::Fault(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for FlagValueError {}

impl std::str::FromStr for WaitArg {
    type Err = FlagValueError;

    fn from_str(text: &str) -> Result<WaitArg, FlagValueError> {
        if text == "auto" {
            return Ok(WaitArg::Auto);
        }
        text.parse()
            .map(WaitArg::Mode)
            .map_err(|_| FlagValueError::WaitMode(text.to_string()))
    }
}

/// A parsed `--nemesis` value: a comma list of fault families and the groups `default` and
/// `all` (`all,drop-write`, `default,server-pause`), or `none` alone. The families named one by
/// one are kept apart from the groups: they are the ones the user asked for by name.
#[derive(Clone, Debug, Default)]
struct NemesisList {
    /// `default` was given: the default families.
    default: bool,
    /// `all` was given: every family the run's backends can take.
    all: bool,
    /// Families named one by one.
    named: Vec<FaultKind>,
}

fn parse_nemesis(text: &str) -> Result<NemesisList, FlagValueError> {
    if text.trim() == "none" {
        return Ok(NemesisList::default());
    }
    let mut list = NemesisList::default();
    for item in text.split(',').map(str::trim) {
        match item {
            "default" => list.default = true,
            "all" => list.all = true,
            "none" => return Err(FlagValueError::NoneInList(text.to_string())),
            name => list
                .named
                .push(name.parse::<FaultKind>().map_err(FlagValueError::Fault)?),
        }
    }
    Ok(list)
}

impl NemesisList {
    /// The families it names, when the run does (`private`) or does not start its own servers:
    /// `all` leaves out the server families a run without them could not take (naming one of
    /// them as well asks for it, and such a run is refused).
    fn kinds(&self, private: bool) -> BTreeSet<FaultKind> {
        let all = FaultKind::ALL
            .into_iter()
            .filter(|kind| self.all && (private || !kind.needs_private_server()));
        let default = FaultKind::DEFAULT.into_iter().filter(|_| self.default);
        all.chain(default)
            .chain(self.named.iter().copied())
            .collect()
    }

    /// Whether `kind` was named one by one, not only through `default` or `all`: then the
    /// user asked for its faults, and is told of any the run's backends could not take.
    fn names(&self, kind: FaultKind) -> bool {
        self.named.contains(&kind)
    }
}

impl SettingsArgs {
    /// The settings before any seed is applied (`seed` 0, no swarm draw). A server URL is
    /// saved with its password hidden; `backends` learns the real one behind that name.
    fn base(&self, backends: &mut Backends) -> Settings {
        let lock = backends.reveal(self.lock.as_deref().unwrap_or(DEFAULT_LOCK));
        let store = backends.reveal(self.store.as_deref().unwrap_or(DEFAULT_STORE));
        let private = lock.is_fencers_own_server() || store.is_fencers_own_server();
        Settings {
            seed: 0,
            workload: self.workload,
            client: ClientName::new(self.client.as_str()),
            workers: self.workers,
            ops_per_worker: self.ops,
            ttl_ns: self.ttl,
            renew_every_ns: self.renew_every,
            nemesis: self.nemesis.kinds(private),
            mean_fault_gap_ns: self.fault_gap,
            lock,
            store,
            on_renew_failure: self.on_renew_failure,
            call_timeout_ns: self.call_timeout,
            wait: self.wait.for_crowd(self.workers),
            ..Settings::default()
        }
    }

    /// True when `--lock` or `--store` was given (next to `--plan`, where they say which
    /// backends the plan runs against this time).
    fn names_given(&self) -> bool {
        self.lock.is_some() || self.store.is_some()
    }
}

/// What every command runs with: the backends names resolve to, and how the program that runs
/// fencer is called (for the commands it prints).
pub(crate) struct Context {
    backends: Backends,
    program: String,
}

/// fencer's command line over fencer's own backends and those a program registers.
///
/// ```no_run
/// use fencer::{Cli, Time};
/// # #[derive(Default)] struct MyLock;
/// # #[fencer::async_trait] impl fencer::LockService for MyLock {
/// #     async fn acquire(&self, _: &str, _: fencer::OwnerToken, _: std::time::Duration) -> Result<fencer::Acquired, fencer::CallError> { Ok(fencer::Acquired::Busy) }
/// #     async fn renew(&self, _: &str, _: fencer::OwnerToken, _: std::time::Duration) -> Result<fencer::Owned, fencer::CallError> { Ok(fencer::Owned::NotOwner) }
/// #     async fn release(&self, _: &str, _: fencer::OwnerToken) -> Result<fencer::Owned, fencer::CallError> { Ok(fencer::Owned::NotOwner) }
/// # }
/// fn main() -> std::process::ExitCode {
///     Cli::new()
///         .lock("my-lock", Time::Simulated, "my lease service, in memory", MyLock::default)
///         .main()
/// }
/// ```
///
/// Then `my-program gate --lock my-lock --store sqlite --seeds 0..1000` runs the gate on it.
pub struct Cli {
    backends: Backends,
    program: Option<String>,
}

impl Default for Cli {
    fn default() -> Cli {
        Cli::new()
    }
}

impl Cli {
    /// The command line over fencer's own backends.
    pub fn new() -> Cli {
        Cli {
            backends: Backends::new(),
            program: None,
        }
    }

    /// Registers a lock service under `name` (`--lock NAME`), built afresh for every run by
    /// `factory`. `time` says whether it runs in simulated time (it measures time only with
    /// `tokio::time`) or real time (it talks to a server). Panics on a name fencer's own
    /// backends use: a program's setup is not input to recover from.
    pub fn lock<L, F>(mut self, name: &str, time: Time, about: &str, factory: F) -> Cli
    where
        L: LockService + 'static,
        F: Fn() -> L + Send + Sync + 'static,
    {
        if let Err(error) = self.backends.lock(name, time, about, factory) {
            panic!("{error}");
        }
        self
    }

    /// Registers a fenced store under `name` (`--store NAME`), as [`Cli::lock`].
    pub fn store<S, F>(mut self, name: &str, time: Time, about: &str, factory: F) -> Cli
    where
        S: FencedStore + 'static,
        F: Fn() -> S + Send + Sync + 'static,
    {
        if let Err(error) = self.backends.store(name, time, about, factory) {
            panic!("{error}");
        }
        self
    }

    /// Registers a lock client library under `name` (`--client NAME`): `build` makes each
    /// worker's library from its [`LibraryContext`](fencer_harness::LibraryContext), afresh
    /// for every run, over the recorded lock service the run names. Panics on a name fencer's
    /// own clients use.
    pub fn client<L, F>(mut self, name: &str, time: Time, about: &str, build: F) -> Cli
    where
        L: fencer_harness::LockLibrary + 'static,
        F: Fn(&fencer_harness::LibraryContext) -> L + Send + Sync + 'static,
    {
        let registered = self
            .backends
            .clients_mut()
            .register(name, time, about, move |cx| {
                std::sync::Arc::new(build(cx)) as std::sync::Arc<dyn fencer_harness::LockLibrary>
            });
        if let Err(error) = registered {
            panic!("{error}");
        }
        self
    }

    /// Uses `backends` (registered by hand, e.g. with what fencer may do to them) instead.
    pub fn backends(mut self, backends: Backends) -> Cli {
        self.backends = backends;
        self
    }

    /// How the commands fencer prints call this program (default: its file name), e.g.
    /// `cargo run --bin my-gate --` or `cargo test --test gate --`.
    pub fn program(mut self, program: &str) -> Cli {
        self.program = Some(program.to_string());
        self
    }

    /// Runs the command in this process's arguments and returns its exit code.
    pub fn main(self) -> ExitCode {
        self.run_from(std::env::args_os())
    }

    /// Runs the command in `args` (the program's name first) and returns its exit code.
    pub fn run_from<I, T>(self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        init_tracing();
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let program = self.program.clone().unwrap_or_else(|| {
            args.first()
                .and_then(|first| std::path::Path::new(first).file_name())
                .map_or_else(
                    || "fencer".into(),
                    |name| name.to_string_lossy().into_owned(),
                )
        });
        let command = with_registered_backends(CliArgs::command(), &self.backends);
        let parsed = command
            .try_get_matches_from(args)
            .and_then(|matches| CliArgs::from_arg_matches(&matches));
        let cli = match parsed {
            Ok(parsed) => parsed,
            Err(error) => {
                let _ = error.print();
                return ExitCode::from(if error.use_stderr() {
                    EXIT_BAD_INPUT
                } else {
                    0
                });
            }
        };
        let context = Context {
            backends: self.backends,
            program,
        };
        exit(dispatch(cli.command, context))
    }
}

/// `command` with the program's registered backends listed in the help of the commands that
/// take `--lock` and `--store`.
fn with_registered_backends(command: clap::Command, backends: &Backends) -> clap::Command {
    let mut lines = Vec::new();
    let time = |time: Time| match time {
        Time::Simulated => "simulated time",
        Time::Real => "real time",
    };
    for (name, when, about) in backends.registered_locks() {
        lines.push(format!("  --lock {name}  ({}) {about}", time(when)));
    }
    for (name, when, about) in backends.registered_stores() {
        lines.push(format!("  --store {name}  ({}) {about}", time(when)));
    }
    for (name, when, about) in backends.clients().registered() {
        lines.push(format!("  --client {name}  ({}) {about}", time(when)));
    }
    if lines.is_empty() {
        return command;
    }
    let listed = format!("This program's own backends:\n{}", lines.join("\n"));
    let command = command.after_help(listed.clone());
    ["run", "gate"].into_iter().fold(command, |command, name| {
        command.mut_subcommand(name, |sub| sub.after_help(listed.clone()))
    })
}

fn exit(outcome: Outcome) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(Failure::BadInput(message)) => {
            errln!("error: {}", escape_lines(&message));
            ExitCode::from(EXIT_BAD_INPUT)
        }
        Err(Failure::Internal(message)) => {
            errln!("internal error: {}", escape_lines(&message));
            ExitCode::from(EXIT_INTERNAL)
        }
        Err(Failure::Interrupted(message)) => {
            errln!("{}", escape_lines(&message));
            ExitCode::from(EXIT_INTERRUPTED)
        }
    }
}

/// Runs `command` with `context`.
fn dispatch(command: Command, mut context: Context) -> Outcome {
    match command {
        Command::Run(args) => run::run(&args, &mut context),
        Command::Gate(args) => gate::gate(&args, &mut context),
        Command::Shrink(args) => shrink::shrink_command(&args, &context),
        Command::Merge(args) => merge::merge_command(&args),
        Command::Coverage(args) => coverage::coverage_command(&args),
        Command::Replay(args) => replay::replay(&args, &mut context),
        Command::Demo { archive } => demo::demo(&archive),
        Command::Check {
            history,
            workload,
            strict,
            search_budget_ms,
            verbose,
        } => check::check(
            &history,
            workload,
            CheckOptions {
                strict,
                search_budget_ms,
                ..CheckOptions::default()
            },
            verbose,
        ),
        Command::Mutants {
            cap,
            seeds,
            wait,
            shrink: false,
        } => mutants::mutants(cap, seeds, wait),
        Command::Mutants {
            cap,
            wait,
            shrink: true,
            ..
        } => mutants::shrunk(cap, wait),
        Command::BenchReal {
            lock,
            store,
            cycles,
        } => bench_real::bench_real(&lock, &store, cycles),
        Command::Bench {
            seeds,
            workers,
            ops,
            workload,
        } => bench::bench(
            &Settings {
                workers,
                ops_per_worker: ops,
                workload,
                ..Settings::default()
            },
            seeds,
        ),
        Command::Explain { dir, all } => explain::explain(&dir, all),
        Command::Serve {
            archive,
            listen,
            allow_remote,
        } => serve::serve(&archive, &listen, allow_remote),
    }
}

/// Runs fencer's command line over its own backends.
pub fn main() -> ExitCode {
    Cli::new().main()
}

/// Logs go to stderr, filtered by `FENCER_LOG` (e.g. `FENCER_LOG=debug`); quiet by default.
/// The ZooKeeper client warns of every session it cannot establish, which under fencer's own
/// faults on a ZooKeeper (cuts, partitions, restarts) is what the run is for, not news: only
/// its errors show unless `FENCER_LOG` asks for more.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FENCER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,zookeeper_client=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
