//! Argument parsing and dispatch; each subcommand lives in its own module.

mod bench;
mod bench_real;
mod check;
mod demo;
mod real_run;
mod replay;
mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use fencer::settings::{
    BackendChoice, LockBackend, Settings, StoreBackend, format_duration, parse_choice,
    parse_duration,
};
use fencer_nemesis::FaultKind;
use fencer_workloads::RenewFailurePolicy;

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
        /// The run directory (e.g. store/latest).
        dir: PathBuf,
    },
    /// Reproduce the articles' experiment: a paused lease holder against unfenced and fenced
    /// SQLite.
    Demo {
        /// Root of the run store.
        #[arg(long, default_value = "store")]
        store_dir: PathBuf,
    },
    /// Check a stored history (JSONL) again, e.g. after improving a checker.
    Check {
        /// The history file.
        history: PathBuf,
    },
    /// Measure real adapters' operations per second, directly and through fencer.
    BenchReal {
        /// Lock server URL (redis://…, postgres://…).
        #[arg(long)]
        lock: String,
        /// Store server URL (redis://…, postgres://…).
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
    },
}

/// `fencer run`'s flags; every default is the embedded default of [`Settings`].
#[derive(Args, Debug)]
struct RunArgs {
    /// Seed every random choice derives from.
    #[arg(long, default_value_t = 0)]
    seed: u64,
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
    /// Faults to inject: a comma list of pause, skew, drop-renew; or none.
    #[arg(long, default_value = "pause,skew,drop-renew", value_parser = parse_nemesis)]
    nemesis: NemesisList,
    /// Mean gap between two faults.
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    fault_gap: u64,
    /// Protected store: sqlite, sqlite-unfenced, sqlite-check-then-write; or a server URL
    /// (redis://host:port, postgres://user@host:port/db; `?variant=unfenced` for the mutant).
    #[arg(long, default_value = "sqlite", value_parser = |s: &str| parse_choice("store", s, &StoreBackend::ALL))]
    store: BackendChoice<StoreBackend>,
    /// Lock service: sim, or a mutant (sim-unsafe-release, sim-unchecked-renew,
    /// sim-resurrecting-renew, sim-clock-tokens); or a server URL (redis://host:port,
    /// postgres://user@host:port/db; `?variant=unsafe-release` for the Redis mutant).
    #[arg(long, default_value = "sim", value_parser = |s: &str| parse_choice("lock", s, &LockBackend::ALL))]
    lock: BackendChoice<LockBackend>,
    /// What a worker does when a renewal fails or is unanswered: stop or continue.
    #[arg(long, default_value = "stop", value_parser = |s: &str| s.parse::<RenewFailurePolicy>())]
    on_renew_failure: RenewFailurePolicy,
    /// How long a client waits for a reply before recording the call as unknown.
    #[arg(long, default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    call_timeout: u64,
    /// Run directory to create (default: <store-dir>/fenced-register/<seed>-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Real tier: run this saved plan.json again (needs --lock and --store URLs).
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Root of the run store.
    #[arg(long, default_value = "store")]
    store_dir: PathBuf,
}

/// A parsed `--nemesis` list (a newtype so clap does not treat it as repeated values).
#[derive(Clone, Debug)]
struct NemesisList(Vec<FaultKind>);

fn parse_nemesis(text: &str) -> Result<NemesisList, String> {
    if text == "none" {
        return Ok(NemesisList(Vec::new()));
    }
    text.split(',')
        .map(|name| name.trim().parse::<FaultKind>())
        .collect::<Result<Vec<_>, _>>()
        .map(NemesisList)
}

impl RunArgs {
    fn settings(&self) -> Settings {
        Settings {
            seed: self.seed,
            workers: self.workers,
            ops_per_worker: self.ops,
            ttl_ns: self.ttl,
            renew_every_ns: self.renew_every,
            nemesis: self.nemesis.0.iter().copied().collect(),
            mean_fault_gap_ns: self.fault_gap,
            lock: match self.lock {
                BackendChoice::Sim(lock) => lock,
                BackendChoice::Url(_) => LockBackend::Sim,
            },
            store: match self.store {
                BackendChoice::Sim(store) => store,
                BackendChoice::Url(_) => StoreBackend::Sqlite,
            },
            on_renew_failure: self.on_renew_failure,
            call_timeout_ns: self.call_timeout,
            ..Settings::default()
        }
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
        Command::Run(args) => match (&args.lock, &args.store) {
            (BackendChoice::Url(lock_url), BackendChoice::Url(store_url)) => real_run::run(
                &args.settings(),
                &real_run::RealTargets {
                    lock_url,
                    store_url,
                },
                args.plan.as_deref(),
                args.out.as_deref(),
                &args.store_dir,
            ),
            (BackendChoice::Sim(_), BackendChoice::Sim(_)) if args.plan.is_none() => {
                run::run(&args.settings(), args.out.as_deref(), &args.store_dir)
            }
            _ => Err(Failure::BadInput(
                "expected --lock and --store both as server URLs (real time) or both as \
                 simulated backend names; --plan needs URLs"
                    .into(),
            )),
        },
        Command::Replay { dir } => replay::replay(&dir),
        Command::Demo { store_dir } => demo::demo(&store_dir),
        Command::Check { history } => check::check(&history),
        Command::BenchReal {
            lock,
            store,
            cycles,
        } => bench_real::bench_real(&lock, &store, cycles),
        Command::Bench {
            seeds,
            workers,
            ops,
        } => bench::bench(
            &Settings {
                workers,
                ops_per_worker: ops,
                ..Settings::default()
            },
            seeds,
        ),
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
fn describe(settings: &Settings) -> String {
    let nemesis: Vec<&str> = settings.nemesis.iter().map(|kind| kind.name()).collect();
    format!(
        "{} seed {}: {} workers x {} cycles, ttl {}, renew every {}, nemesis {}, lock {}, store {}, on renew failure {}",
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
            .unwrap_or_else(|| fencer::settings::name_of(&settings.lock)),
        settings
            .store_url
            .clone()
            .unwrap_or_else(|| fencer::settings::name_of(&settings.store)),
        settings.on_renew_failure.name(),
    )
}
