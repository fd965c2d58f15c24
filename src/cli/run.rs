//! `fencer run`: one seed (or one plan file) against the backends it names, checked and saved.
//!
//! fencer's own simulated backends, and those a program registered in simulated time, run in
//! the simulation tier; a server URL, a `private:` server fencer starts itself (free loopback
//! port, temp dir, its fault proxy in front; stopped when the run ends, on error too) or an
//! `exec:` child makes it the real tier. The saved settings carry URLs with their passwords
//! hidden; `--plan` runs a saved, shrunk or hand-written plan, with `--lock`/`--store` naming
//! the servers it runs against again.

use std::path::Path;
use std::sync::Arc;

use fencer_harness::terminal::{escape, escape_lines};
use fencer_results::report::TIMELINE_FILE;
use fencer_results::run_dir::{check_dir_writable, check_run_place};
use fencer_results::save::{self, FinishedRun, default_run_dir, save_run};
use fencer_run::checking::judge;
use fencer_run::plan::read_plan_bytes;
use fencer_run::settings::Settings;
use fencer_run::{Launch, Launched, RunError, Time, Unfinished};

use super::output::{errln, outln};
use super::signals::{Arrival, Signals};
use super::{Context, Failure, Outcome, RunArgs, summary};
use crate::{Plan, Validity};

/// Runs what `args` asks for.
pub fn run(args: &RunArgs, context: &mut Context) -> Outcome {
    run_saved(args, context).map(|saved| saved.verdict.validity.exit_code())
}

/// A run that ended, was judged and was saved.
pub struct SavedRun {
    /// What the checkers concluded.
    pub verdict: crate::Verdict,
    /// The run directory it was saved in.
    pub dir: std::path::PathBuf,
}

/// Runs what `args` asks for, prints its summary and saves it.
pub fn run_saved(args: &RunArgs, context: &mut Context) -> Result<SavedRun, Failure> {
    if let Some(dir) = &args.out {
        // Refused before the run rather than after it: `--out` never overwrites a run, and a
        // run whose place cannot hold it is not run at all.
        check_run_place(dir).map_err(Failure::bad_input)?;
    }
    let base = args.settings.base(&mut context.backends);
    let launch = Launch {
        note: Arc::new(|line: &str| outln!("{}", escape_lines(line))),
        // A plan given by file meant every fault it holds: refuse it rather than drop one.
        refuse_unreachable: args.plan.is_some(),
        ..Launch::new(&context.backends)
    };
    let given = args.plan.as_deref().map(read_plan).transpose()?;
    if args.out.is_none() {
        // The run goes into the archive, under its workload, and `latest` into the archive's
        // root: both must take it before the plan is even drawn.
        let workload = given
            .as_ref()
            .map_or(base.workload, |plan| plan.settings.workload);
        let place = default_run_dir(&args.archive, workload.name(), "place");
        check_run_place(&place).map_err(Failure::bad_input)?;
        check_dir_writable(&args.archive).map_err(Failure::bad_input)?;
    }
    let plan = match given {
        Some(mut plan) => {
            if args.settings.names_given() {
                // The servers are the ones named now: they decide which faults can run.
                plan.settings.lock = base.lock.clone();
                plan.settings.store = base.store.clone();
            }
            plan
        }
        None => {
            let settings = base.for_seed(args.seed, args.settings.swarm);
            // Refused before anything is drawn: settings past a ceiling could draw for ever.
            // Real time only drops the simulated latency and cycle shape, which nothing
            // validated depends on.
            for warning in settings.validate().map_err(Failure::bad_input)? {
                errln!("warning: {warning}");
            }
            let settings = match launch.time(&Plan::generate(&settings))? {
                Time::Real => settings.in_real_time(),
                Time::Simulated => settings,
            };
            Plan::generate(&settings)
        }
    };
    let time = launch.time(&plan)?;
    outln!(
        "fencer run{}: {}",
        if time == Time::Real {
            " (real time)"
        } else {
            ""
        },
        escape(&plan.describe())
    );
    if time == Time::Real {
        install_interrupt_handler();
    }
    let started = std::time::Instant::now();
    let Launched {
        plan,
        history,
        cycle_starts_ns,
        ..
    } = launch
        .run(&plan)
        .map_err(|error| match (error, &args.plan) {
            (RunError::Plan(error), Some(path)) => {
                Failure::BadInput(format!("{}: {error}", path.display()))
            }
            (RunError::Interrupted(Some(unfinished)), _) => save_unfinished(args, &unfinished),
            (error, _) => Failure::from(error),
        })?;
    for left in &plan.left_out {
        // Faults of a family the user named are worth a line; those drawn only because a
        // group (`default`, `all`) holds their family are in run.json, `explain` and --verbose.
        if args.verbose || args.settings.nemesis.names(left.family) {
            outln!("left out: {}", escape(&left.to_string()));
        }
    }
    let verdict = judge(&plan.settings, &history, args.strict);
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            let label = match time {
                Time::Simulated => plan.settings.seed.to_string(),
                Time::Real => format!("real-{}", plan.settings.seed),
            };
            default_run_dir(&args.archive, plan.settings.workload.name(), &label)
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    let detail = summary::Detail {
        verbose: args.verbose,
        explain: Some(format!("{} explain {}", context.program, dir.display())),
        takes_verbose: true,
    };
    summary::print_summary(
        &summary::Shape::of_packed(&history),
        &verdict,
        match time {
            Time::Simulated => summary::Took::Simulated { wall_s },
            Time::Real => summary::Took::Real { wall_s },
        },
        &detail,
    );
    let finished = FinishedRun {
        command: "run",
        plan: &plan,
        history: &history,
        verdict: &verdict,
        cycle_starts_ns: &cycle_starts_ns,
        interrupted_at_ns: None,
    };
    // `latest` only tracks runs inside the archive.
    save_run(
        &finished,
        &dir,
        args.out.is_none().then_some(args.archive.as_path()),
    )
    .map_err(Failure::from)?;
    outln!("run directory: {}", dir.display());
    let strict = if args.strict { " --strict" } else { "" };
    if time == Time::Real {
        outln!(
            "run the same plan again: {} {}{strict}",
            context.program,
            plan.settings.run_plan_command(&dir.join("plan.json"))
        );
    }
    if verdict.validity != Validity::Valid {
        print_next_steps(args, &base, &plan, time, &dir, &context.program);
    }
    Ok(SavedRun { verdict, dir })
}

/// Saves what an interrupted real-time run recorded where the run was to go, says where and
/// what its events show, and is the interrupt's failure (exit 130): the run did not finish,
/// so its verdict is no verdict on the plan.
fn save_unfinished(args: &RunArgs, unfinished: &Unfinished) -> Failure {
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => default_run_dir(
            &args.archive,
            unfinished.plan.settings.workload.name(),
            &format!("real-{}-interrupted", unfinished.plan.settings.seed),
        ),
    };
    let archive = args.out.is_none().then_some(args.archive.as_path());
    let saved = save::save_unfinished("run", unfinished, args.strict, &dir, archive);
    if let Some(error) = &saved.error {
        errln!("warning: {}", escape_lines(&error.to_string()));
    }
    if let Some(line) = saved.report("interrupted", "unfinished") {
        outln!("{line}");
    }
    Failure::from(RunError::Interrupted(None))
}

/// What to do about a run that did not end valid, saved in `dir`: the commands that reproduce
/// it, as the gate prints them (a simulated run's; a real-time run's plan line is printed for
/// every run), its timeline, and where its story is told.
fn print_next_steps(
    args: &RunArgs,
    base: &Settings,
    plan: &Plan,
    time: Time,
    dir: &Path,
    program: &str,
) {
    let strict = if args.strict { " --strict" } else { "" };
    if time == Time::Simulated {
        outln!("reproduce: {program} replay {}{strict}", dir.display());
        match &args.plan {
            Some(_) => outln!(
                "reproduce: {program} run --plan {}{strict}",
                dir.join("plan.json").display()
            ),
            None => outln!(
                "reproduce: {program} {}{strict}",
                base.run_command(plan.settings.seed, args.settings.swarm)
            ),
        }
    }
    outln!("timeline: {}", dir.join(TIMELINE_FILE).display());
    let serve = match args.out {
        None => format!(
            " (every saved run: {program} serve {})",
            args.archive.display()
        ),
        Some(_) => String::new(),
    };
    outln!("explain: {program} explain {}{serve}", dir.display());
}

/// Reads the plan in `path`: a plan that does not parse or cannot run is refused with
/// `file:line: what was expected`.
pub fn read_plan(path: &Path) -> Result<Plan, Failure> {
    let bytes = read_plan_bytes(path)
        .map_err(|error| Failure::BadInput(format!("{}: {error}", path.display())))?;
    let plan = Plan::from_json(&bytes, &path.display().to_string()).map_err(Failure::bad_input)?;
    for warning in plan.settings.validate().map_err(Failure::bad_input)? {
        errln!("warning: {warning}");
    }
    Ok(plan)
}

/// Ctrl-C (or SIGTERM, SIGHUP) during a real-time run stops it and tears down every server and
/// cluster it started, namespaces included, before fencer exits with 130; a second signal
/// ([`Arrival::Again`]), or one that comes while no run is under way (starting servers,
/// saving), exits at once. The servers fencer started are in its process group, so a
/// terminal's Ctrl-C stops them too.
fn install_interrupt_handler() {
    let signals = Signals::default();
    let _ = ctrlc::set_handler(move || match signals.arrived() {
        Arrival::First if fencer_run::interrupt::request() => {
            errln!("interrupted: stopping the run and tearing down its servers");
        }
        Arrival::Repeat => {}
        Arrival::First | Arrival::Again => {
            std::process::exit(i32::from(super::EXIT_INTERRUPTED));
        }
    });
}
