//! Shrinking a failing run's plan in place: the minimal plan that still shows the anomaly
//! class is written beside the original as `plan.min.json`, with the before/after sizes in
//! `shrink.json`, and the run that confirmed it is saved as a run directory of its own,
//! `min/` (its history, verdict and timeline) — what `fencer shrink DIR` and every gate failure
//! leave behind.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use fencer_checkers::{AnomalyClass, Verdict};
use fencer_harness::PackedHistory;
use fencer_results::{FinishedRun, RunRecord, parse_run_json, save_run};
use fencer_run::plan::Plan;
use fencer_run::{Backends, Launch, Launched, RunError, Time};

use crate::plan_words::faults_in_words;
use crate::regressions::write_atomically;
use crate::shrink::{Evidence, PlanSize, ShrinkLimits, Shrunk, run_showing, shrink_toward};
use crate::summary::{Reran, ShrinkRecord};

/// Why a plan could not be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum MinimizeError {
    /// The plan does not show the class in the first place.
    #[error(
        "{plan}: the plan does not show {class} (nothing to shrink){}",
        if *.only_as_warning { "; it shows it as a warning, which --strict counts" } else { "" }
    )]
    DoesNotFail {
        /// The plan's file.
        plan: String,
        /// The class asked for.
        class: AnomalyClass,
        /// Whether the run showed the class as a warning, which only a strict shrink counts.
        only_as_warning: bool,
    },
    /// The shrunk plan did not show the class when run again: its backends are not
    /// deterministic (or real time decided differently).
    #[error(
        "the shrunk plan stopped showing {0} when run again: the run is not deterministic for it"
    )]
    NotReproducible(AnomalyClass),
    /// The shrunk plan could not run.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The confirming run could not be saved (the error says where it is kept instead).
    #[error(transparent)]
    Save(#[from] fencer_results::SaveError),
    /// The files could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// What to shrink against: where the plan's backend names resolve, and whether warnings count.
#[derive(Clone, Copy, Debug)]
pub struct Against<'a> {
    /// The backends.
    pub backends: &'a Backends,
    /// Warnings count as the anomaly too.
    pub strict: bool,
}

/// A failing plan shrunk: the smallest plan found and the run that confirmed it.
#[derive(Debug)]
pub struct ShrunkFailure {
    /// What the shrink produced.
    pub shrunk: Shrunk,
    /// Events the original plan's run recorded (the run the story was read from).
    pub original_events: usize,
    /// The shrunk plan's run that shows the class: in a simulation, the plan run once more (the
    /// same seed must give the same failure); in real time, the run the shrink accepted it on,
    /// as running it again may not fail again and would prove nothing about the plan.
    pub confirmed: Launched,
    /// What the checkers said of the confirming run.
    pub verdict: Verdict,
}

/// The run directory, inside the failing run's, where the confirming run of its minimal plan
/// is saved.
pub const MIN_RUN_DIR: &str = "min";

/// How many more times a real-time shrink runs the minimal plan it found, to say how often it
/// shows the class again: timing decides what a real-time plan's faults hit, and a plan that
/// failed once may fail seldom. A simulated plan fails every time or the run is a defect.
pub const REAL_TIME_RERUNS: usize = 5;

/// How many runs of a real-time candidate plan must each show the class for the shrink to take
/// it: timing decides what a real-time plan's faults hit, so a candidate taken on one run may
/// be one that fails seldom, and each later candidate is cut from it.
pub const REAL_TIME_CANDIDATE_RUNS: usize = 2;

/// Shrinks `plan`, which fails with `class`, toward the story of the first anomaly of that
/// class ([`Evidence::cited`]), then runs the result once more to confirm it still fails.
/// The story is read from `saved`, the failing run as it was recorded, when given; else from
/// running `plan` again. Stops early when `interrupted` is raised. `plan_path` names the plan
/// in errors.
pub fn shrink_failing(
    plan: &Plan,
    plan_path: &Path,
    class: AnomalyClass,
    limits: ShrinkLimits,
    against: Against<'_>,
    interrupted: &AtomicBool,
    saved: Option<Launched>,
) -> Result<ShrunkFailure, MinimizeError> {
    let original = match saved {
        Some(saved) => saved,
        None => Launch::new(against.backends).run(plan)?,
    };
    let verdict =
        fencer_run::checking::judge(&original.plan.settings, &original.history, against.strict);
    // The first story of the class: the plan cut to its evidence is tried first.
    let story = verdict
        .anomalies
        .iter()
        .find(|anomaly| anomaly.class == class);
    let Some(story) = story.filter(|_| verdict.anomaly_counts.contains_key(class.name())) else {
        return Err(MinimizeError::DoesNotFail {
            plan: plan_path.display().to_string(),
            class,
            only_as_warning: story.is_some(),
        });
    };
    let evidence = Evidence::cited(&original, &story.events);
    let real_time = original.time == Time::Real;
    // In real time, the run each accepted candidate failed with; the last is the shrunk plan's.
    let mut accepted_run: Option<(Launched, Verdict)> = None;
    let shrunk = shrink_toward(
        plan,
        &evidence,
        |candidate| {
            if interrupted.load(Ordering::SeqCst) {
                return false;
            }
            // A real-time candidate must show the class in each of its runs: one run that
            // happened to line the race up would make a plan that seldom fails again.
            let runs = if real_time {
                REAL_TIME_CANDIDATE_RUNS
            } else {
                1
            };
            let mut last = None;
            for _ in 0..runs {
                match run_showing(candidate, class, against.backends, against.strict) {
                    Ok(Some(run)) if !interrupted.load(Ordering::SeqCst) => last = Some(run),
                    _ => return false,
                }
            }
            if real_time {
                accepted_run = last;
            }
            true
        },
        limits,
    );
    let original_events = original.history.len();
    let (confirmed, verdict) = if real_time {
        // No candidate accepted: the shrunk plan is the original, and its run shows the class.
        accepted_run.unwrap_or((original, verdict))
    } else {
        // The predicate accepted this plan; a run without the class now would mean the run is
        // not deterministic.
        run_showing(&shrunk.plan, class, against.backends, against.strict)?
            .ok_or(MinimizeError::NotReproducible(class))?
    };
    Ok(ShrunkFailure {
        shrunk,
        original_events,
        confirmed,
        verdict,
    })
}

/// Runs a real-time minimal plan [`REAL_TIME_RERUNS`] more times and counts the runs that
/// showed `class`; a run that could not run, or an interrupt, ends the count there.
fn rerun(
    plan: &Plan,
    class: AnomalyClass,
    against: Against<'_>,
    interrupted: &AtomicBool,
) -> Reran {
    let mut reran = Reran { runs: 0, showed: 0 };
    while reran.runs < REAL_TIME_RERUNS && !interrupted.load(Ordering::SeqCst) {
        match run_showing(plan, class, against.backends, against.strict) {
            Ok(showing) => {
                reran.runs += 1;
                reran.showed += usize::from(showing.is_some());
            }
            Err(_) => break,
        }
    }
    reran
}

/// The failing run saved in `dir`, when `plan` runs in real time and the directory holds its
/// history and its cycle starts: a real-time failure may not fail again when its plan runs
/// again, so its story is read from what was recorded.
pub fn saved_real_time_run(dir: &Path, plan: &Plan, backends: &Backends) -> Option<Launched> {
    if Launch::new(backends).time(plan).ok()? != Time::Real {
        return None;
    }
    let record: RunRecord = parse_run_json(dir, "run.json").ok()?;
    if record.cycle_starts_ns.is_empty() {
        return None;
    }
    let history = PackedHistory::read_jsonl_file(&dir.join("history.jsonl")).ok()?;
    Some(Launched {
        plan: plan.clone(),
        history,
        cycle_starts_ns: record.cycle_starts_ns,
        time: Time::Real,
    })
}

/// Shrinks `plan` (which failed with `class`, in `dir`) and writes `plan.min.json`,
/// `shrink.json` and the confirming run's directory ([`MIN_RUN_DIR`], replacing an earlier
/// shrink's) into `dir`. Stops early when `interrupted` is raised.
pub fn minimize(
    dir: &Path,
    plan: &Plan,
    class: AnomalyClass,
    events_before: usize,
    limits: ShrinkLimits,
    against: Against<'_>,
    interrupted: &AtomicBool,
) -> Result<ShrinkRecord, MinimizeError> {
    let ShrunkFailure {
        shrunk,
        confirmed,
        verdict,
        ..
    } = shrink_failing(
        plan,
        &dir.join("plan.json"),
        class,
        limits,
        against,
        interrupted,
        saved_real_time_run(dir, plan, against.backends),
    )?;
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| MinimizeError::Io { path, source }
    };
    let min_path = dir.join("plan.min.json");
    write_atomically(&min_path, &shrunk.plan.to_json()).map_err(io(&min_path))?;
    let run_dir = dir.join(MIN_RUN_DIR);
    if run_dir.join("run.json").is_file() {
        std::fs::remove_dir_all(&run_dir).map_err(io(&run_dir))?;
    }
    let finished = FinishedRun {
        command: "shrink",
        plan: &confirmed.plan,
        history: &confirmed.history,
        verdict: &verdict,
        cycle_starts_ns: &confirmed.cycle_starts_ns,
        interrupted_at_ns: None,
    };
    save_run(&finished, &run_dir, None)?;
    // A plan the shrink could not cut is the original, whose runs may be long: not run again.
    let reran = (confirmed.time == Time::Real && shrunk.plan != *plan)
        .then(|| rerun(&shrunk.plan, class, against, interrupted));
    let record = ShrinkRecord {
        plan: min_path.display().to_string(),
        run: Some(run_dir.display().to_string()),
        after_in_words: faults_in_words(&shrunk.plan),
        class: class.name().to_string(),
        before: PlanSize::of(plan),
        after: PlanSize::of(&shrunk.plan),
        events_before,
        events_after: confirmed.history.len(),
        candidates: shrunk.candidates,
        stopped_by: shrunk.stopped_by.map(str::to_string),
        reran,
    };
    let mut json = serde_json::to_vec_pretty(&record).expect("records always serialise");
    json.push(b'\n');
    let record_path = dir.join("shrink.json");
    write_atomically(&record_path, &json).map_err(io(&record_path))?;
    Ok(record)
}
