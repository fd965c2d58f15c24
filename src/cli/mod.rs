//! Argument parsing and dispatch; each subcommand lives in its own module.

mod bench;
mod bench_real;
mod check;
mod demo;
mod explain;
mod gate;
mod merge;
mod mutants;
mod progress;
mod real_run;
mod replay;
mod report;
mod run;
mod serve;
mod shrink;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::CheckOptions;
use clap::{Args, Parser, Subcommand};
use fencer_harness::Workload;
use fencer_nemesis::FaultKind;
use fencer_run::settings::{
    BackendChoice, LockBackend, Settings, StoreBackend, format_duration, parse_choice,
    parse_duration,
};
use fencer_workloads::{RenewFailurePolicy, WorkerVariant};

/// How a command ended, as Jepsen's exit codes.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments or input (254): the message says what was expected.
    BadInput(String),
    /// fencer itself failed (255).
    Internal(String),
}

/// What a command returns: the verdict's exit code, or a failure.
pub type Outcome = Result<u8, Failure>;

/// Where saved runs go unless `--archive` says otherwise.
pub const DEFAULT_ARCHIVE: &str = "runs";

/// Exit code for bad arguments or input.
pub const EXIT_BAD_INPUT: u8 = 254;
/// Exit code for fencer's own failures.
pub const EXIT_INTERNAL: u8 = 255;

#[derive(Parser, Debug)]
#[command(
    name = "fencer",
    version,
    about = "Fault-injection harness for distributed locks: leases, owner tokens, fencing tokens",
    after_help = "Exit codes: 0 valid, 1 invalid (anomaly found), 2 unknown, 254 bad arguments \
                  or input, 255 internal error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one seeded simulation, check it, and save the run directory.
    Run(RunArgs),
    /// Re-run a saved run from its plan and check the history is byte-identical.
    Replay {
        /// The run directory (e.g. runs/latest).
        dir: PathBuf,
    },
    /// Reproduce the articles' experiment: a paused lease holder against unfenced and fenced
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
    },
    /// Run many seeds on every core, fail on the first anomaly, shrink it, save it as a
    /// regression: the CI gate.
    Gate(gate::GateArgs),
    /// Shrink a failing run's plan to a minimal one that still shows the same anomaly.
    Shrink(shrink::ShrinkArgs),
    /// Combine the summaries of gate shards (their --out directories) into one.
    Merge(merge::MergeArgs),
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
    /// fencer catches it; exit 1 if any escapes.
    Mutants {
        /// Seeds to try per mutant before declaring it not caught.
        #[arg(long, default_value_t = 200)]
        cap: u64,
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
    /// Serve a local web UI listing the runs in a store, with their timelines and plots.
    Serve {
        /// Root of the run archive, where saved runs live.
        #[arg(default_value = DEFAULT_ARCHIVE)]
        archive: PathBuf,
        /// Address to listen on (loopback by default; port 0 picks a free port).
        #[arg(long, default_value = serve::DEFAULT_LISTEN)]
        listen: String,
    },
}

/// `fencer run`'s flags; every default is the embedded default of [`Settings`].
#[derive(Args, Debug)]
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
}

/// Every flag a plan file replaces (clap ids), so `--plan` refuses them instead of ignoring
/// them. `--lock` and `--store` are not among them: with server URLs they say where a saved
/// plan runs again ([`run_dispatch`] refuses simulated names next to `--plan`).
const SETTINGS_FLAGS: [&str; 12] = [
    "seed",
    "workload",
    "worker",
    "workers",
    "ops",
    "ttl",
    "renew_every",
    "nemesis",
    "fault_gap",
    "on_renew_failure",
    "call_timeout",
    "swarm",
];

/// The workload, backend and nemesis flags `run` and `gate` share.
#[derive(Args, Debug)]
struct SettingsArgs {
    /// What workers do under the lock: fenced-register, lock-counter, mutex.
    #[arg(long, default_value = "fenced-register", value_parser = |s: &str| s.parse::<Workload>())]
    workload: Workload,
    /// The workers' code: reference, or a worker mutant (ignore-renew-failure,
    /// zombie-renewal, blind-retry).
    #[arg(long, default_value = "reference", value_parser = |s: &str| s.parse::<WorkerVariant>())]
    worker: WorkerVariant,
    /// Number of workers.
    #[arg(long, default_value_t = 5)]
    workers: usize,
    /// Acquire → write → release cycles per worker.
    #[arg(long, default_value_t = 100)]
    ops: usize,
    /// Lease TTL (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    ttl: u64,
    /// Renewal period while a lease is held; must be shorter than the TTL.
    #[arg(long, default_value = "3s", value_parser = parse_duration, allow_hyphen_values = true)]
    renew_every: u64,
    /// Faults to inject: a comma list of fault families; default (pause, skew, drop-renew,
    /// delay-write, restart); all (also drop-acquire and drop-write, and on servers fencer
    /// starts, private:…, also server-pause, partition, delay-replies, drop-replies, cut); or
    /// none.
    #[arg(long, default_value = "default", value_parser = parse_nemesis)]
    nemesis: NemesisList,
    /// Mean gap between two faults.
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    fault_gap: u64,
    /// Protected store: sqlite, sqlite-unfenced, sqlite-check-then-write; or a server URL
    /// (redis://host:port, postgres://user@host:port/db; `?variant=unfenced` for the mutant);
    /// or private:redis / private:postgres / private:etcd / private:zookeeper for a server
    /// fencer starts itself. Default: sqlite.
    #[arg(long, value_parser = |s: &str| parse_choice("store", s, &StoreBackend::ALL))]
    store: Option<BackendChoice<StoreBackend>>,
    /// Lock service: sim, or a mutant (sim-unsafe-release, sim-unchecked-renew,
    /// sim-resurrecting-renew, sim-clock-tokens, sim-volatile-counter); or a server URL
    /// (redis://host:port, postgres://user@host:port/db; `?variant=unsafe-release` for the
    /// Redis mutant); or private:redis / private:postgres / private:etcd / private:zookeeper
    /// for a server fencer starts itself. Default: sim.
    #[arg(long, value_parser = |s: &str| parse_choice("lock", s, &LockBackend::ALL))]
    lock: Option<BackendChoice<LockBackend>>,
    /// What a worker does when a renewal fails or is unanswered: stop or continue.
    #[arg(long, default_value = "stop", value_parser = |s: &str| s.parse::<RenewFailurePolicy>())]
    on_renew_failure: RenewFailurePolicy,
    /// How long a client waits for a reply before recording the call as unknown.
    #[arg(long, default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    call_timeout: u64,
    /// Swarm testing: each seed also chooses which of the enabled faults are on and how
    /// often they come.
    #[arg(long)]
    swarm: bool,
}

/// A parsed `--nemesis` value (a newtype so clap does not treat it as repeated values).
#[derive(Clone, Debug)]
enum NemesisList {
    /// `all`: every family the run's backends can take.
    All,
    /// Named families (`default` and `none` included).
    Named(Vec<FaultKind>),
}

fn parse_nemesis(text: &str) -> Result<NemesisList, String> {
    match text {
        "none" => Ok(NemesisList::Named(Vec::new())),
        "default" => Ok(NemesisList::Named(FaultKind::DEFAULT.to_vec())),
        "all" => Ok(NemesisList::All),
        _ => text
            .split(',')
            .map(|name| name.trim().parse::<FaultKind>())
            .collect::<Result<Vec<_>, _>>()
            .map(NemesisList::Named),
    }
}

impl NemesisList {
    /// The families it names, when the run does (`private`) or does not start its own servers:
    /// `all` leaves out the server families a run without them could not take.
    fn kinds(&self, private: bool) -> Vec<FaultKind> {
        match self {
            NemesisList::All => FaultKind::ALL
                .into_iter()
                .filter(|kind| private || !kind.needs_private_server())
                .collect(),
            NemesisList::Named(kinds) => kinds.clone(),
        }
    }
}

impl SettingsArgs {
    /// Refuses server URLs where only the simulation tier is meant (e.g. `gate`), instead of
    /// silently simulating the default backends.
    fn simulated_only(&self, command: &str) -> Result<(), Failure> {
        if matches!(self.lock, Some(BackendChoice::Url(_)))
            || matches!(self.store, Some(BackendChoice::Url(_)))
        {
            return Err(Failure::BadInput(format!(
                "{command} runs the simulation tier: --lock and --store take simulated backend                  names here (real servers: fencer run --lock URL --store URL)"
            )));
        }
        Ok(())
    }

    /// True when the lock or the store is a server fencer starts itself.
    fn private(&self) -> bool {
        [
            self.lock.as_ref().map(BackendChoice::url),
            self.store.as_ref().map(BackendChoice::url),
        ]
        .into_iter()
        .flatten()
        .flatten()
        .any(|url| url.starts_with(fencer_servers::PRIVATE_SCHEME))
    }

    /// The settings before any seed is applied (`seed` 0, no swarm draw).
    fn base(&self) -> Settings {
        Settings {
            seed: 0,
            workload: self.workload,
            worker: self.worker,
            workers: self.workers,
            ops_per_worker: self.ops,
            ttl_ns: self.ttl,
            renew_every_ns: self.renew_every,
            nemesis: self.nemesis.kinds(self.private()).into_iter().collect(),
            mean_fault_gap_ns: self.fault_gap,
            lock: match self.lock {
                Some(BackendChoice::Sim(lock)) => lock,
                Some(BackendChoice::Url(_)) | None => LockBackend::Sim,
            },
            store: match self.store {
                Some(BackendChoice::Sim(store)) => store,
                Some(BackendChoice::Url(_)) | None => StoreBackend::Sqlite,
            },
            on_renew_failure: self.on_renew_failure,
            call_timeout_ns: self.call_timeout,
            ..Settings::default()
        }
    }
}

/// The settings of seed `seed`: `base` with the seed, and with the seed's fault mix in swarm
/// mode.
fn settings_for_seed(base: &Settings, seed: u64, swarm: bool) -> Settings {
    let settings = Settings {
        seed,
        ..base.clone()
    };
    if swarm {
        fencer_run::swarm::swarm_settings(&settings)
    } else {
        settings
    }
}

/// The `fencer run` command line that reproduces seed `seed` of a gate over `base`: every
/// setting spelled out, so it does not depend on defaults.
fn run_command(base: &Settings, seed: u64, swarm: bool) -> String {
    let nemesis: Vec<&str> = base.nemesis.iter().map(|kind| kind.name()).collect();
    let mut command = format!(
        "fencer run --seed {seed} --workload {} --worker {} --workers {} --ops {} --ttl {} \
         --renew-every {} --nemesis {} --fault-gap {} --store {} --lock {} --on-renew-failure {} \
         --call-timeout {}",
        base.workload,
        base.worker.name(),
        base.workers,
        base.ops_per_worker,
        format_duration(base.ttl_ns),
        format_duration(base.renew_every_ns),
        if nemesis.is_empty() {
            "none".to_string()
        } else {
            nemesis.join(",")
        },
        format_duration(base.mean_fault_gap_ns),
        fencer_run::settings::name_of(&base.store),
        fencer_run::settings::name_of(&base.lock),
        base.on_renew_failure.name(),
        format_duration(base.call_timeout_ns),
    );
    if swarm {
        command.push_str(" --swarm");
    }
    command
}

/// `fencer run`: the simulation tier for backend names, the real tier for server URLs, a
/// saved or hand-written plan with `--plan`.
fn run_dispatch(args: &RunArgs) -> Outcome {
    let settings = || settings_for_seed(&args.settings.base(), args.seed, args.settings.swarm);
    match (&args.settings.lock, &args.settings.store) {
        (Some(BackendChoice::Url(lock_url)), Some(BackendChoice::Url(store_url))) => real_run::run(
            &settings(),
            &real_run::RealTargets {
                lock_url,
                store_url,
            },
            args.plan.as_deref(),
            args.out.as_deref(),
            &args.archive,
        ),
        (None | Some(BackendChoice::Sim(_)), None | Some(BackendChoice::Sim(_))) => {
            match &args.plan {
                Some(_) if args.settings.lock.is_some() || args.settings.store.is_some() => {
                    Err(Failure::BadInput(
                        "--plan carries its own lock and store: next to it, --lock and --store \
                         take server URLs only"
                            .into(),
                    ))
                }
                Some(path) => {
                    run::run_plan_file(path, args.out.as_deref(), &args.archive, args.strict)
                }
                None => run::run(&settings(), args.out.as_deref(), &args.archive, args.strict),
            }
        }
        _ => Err(Failure::BadInput(
            "expected --lock and --store both as server URLs (real time) or both as simulated \
             backend names"
                .into(),
        )),
    }
}

/// Parses arguments, runs the command, and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    init_tracing();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() {
                EXIT_BAD_INPUT
            } else {
                0
            });
        }
    };
    let outcome = match cli.command {
        Command::Run(args) => run_dispatch(&args),
        Command::Gate(args) => gate::gate(&args),
        Command::Shrink(args) => shrink::shrink_command(&args),
        Command::Merge(args) => merge::merge_command(&args),
        Command::Replay { dir } => replay::replay(&dir),
        Command::Demo { archive } => demo::demo(&archive),
        Command::Check {
            history,
            workload,
            strict,
            search_budget_ms,
        } => check::check(
            &history,
            workload,
            CheckOptions {
                strict,
                search_budget_ms,
                ..CheckOptions::default()
            },
        ),
        Command::Mutants { cap } => mutants::mutants(cap),
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
        Command::Serve { archive, listen } => serve::serve(&archive, &listen),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(Failure::BadInput(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
        Err(Failure::Internal(message)) => {
            eprintln!("internal error: {message}");
            ExitCode::from(EXIT_INTERNAL)
        }
    }
}

/// Logs go to stderr, filtered by `FENCER_LOG` (e.g. `FENCER_LOG=debug`); quiet by default.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FENCER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// One line describing the settings, for summaries.
/// Names every fault the plan left out because its backends cannot take them, one line per
/// family, target and reason, so a run never drops a fault without saying so.
fn print_left_out(plan: &crate::Plan) {
    for left in &plan.left_out {
        println!("left out: {left}");
    }
}

fn describe(settings: &Settings) -> String {
    let nemesis: Vec<&str> = settings.nemesis.iter().map(|kind| kind.name()).collect();
    format!(
        "{} seed {}: {} workers x {} cycles, ttl {}, renew every {}, nemesis {}, lock {}, store {}, worker {}, on renew failure {}",
        settings.workload,
        settings.seed,
        settings.workers,
        settings.ops_per_worker,
        format_duration(settings.ttl_ns),
        format_duration(settings.renew_every_ns),
        if nemesis.is_empty() {
            "none".to_string()
        } else {
            nemesis.join(",")
        },
        settings
            .lock_url
            .clone()
            .unwrap_or_else(|| fencer_run::settings::name_of(&settings.lock)),
        settings
            .store_url
            .clone()
            .unwrap_or_else(|| fencer_run::settings::name_of(&settings.store)),
        settings.worker.name(),
        settings.on_renew_failure.name(),
    )
}
