//! `fencer mutants`: hunt every mutant of the zoo and print how fast each was caught, from
//! seed 0 or from every start seed of a range.

use fencer_gate::mutants::{Detection, ZOO, detect_each, hunt};
use fencer_gate::seeds::SeedRange;
use fencer_gate::shrink::{PlanSize, ShrinkLimits};
use fencer_gate::zoo_shrink::shrink_first_catch;
use fencer_workloads::WaitMode;

use super::output::outln;
use super::{Failure, Outcome};

/// Hunts each mutant over seeds `0..cap`, or from every start seed of `seeds` (each hunt
/// capped at `cap` seeds), its workers waiting as `wait` says; exit 1 if any was not caught
/// (from any start).
pub fn mutants(cap: u64, seeds: Option<SeedRange>, wait: WaitMode) -> Outcome {
    if cap == 0 {
        return Err(Failure::BadInput("--cap must be at least 1".into()));
    }
    match seeds {
        None => from_zero(cap, wait),
        Some(SeedRange {
            start,
            end: Some(end),
        }) => from_every_start(start..end, cap, wait),
        Some(range) => Err(Failure::BadInput(format!(
            "--seeds {range}: expected a closed range A..B (or A..=B, or one seed N)"
        ))),
    }
}

fn internal(error: fencer_run::RunError) -> Failure {
    Failure::Internal(error.to_string())
}

/// One hunt per mutant from seed 0: the seeds it took.
fn from_zero(cap: u64, wait: WaitMode) -> Outcome {
    outln!(
        "{:<22} {:<24} {:<22} {:>8} {:>8}",
        "mutant",
        "expected",
        "found",
        "seeds",
        "runs/s"
    );
    let mut escaped = Vec::new();
    for mutant in &ZOO {
        let hunt = hunt(mutant, wait, cap).map_err(internal)?;
        let (found, seeds) = match &hunt.caught {
            Some(catch) => (catch.classes.join(","), (catch.seed + 1).to_string()),
            None => {
                escaped.push(mutant.name);
                ("NOT CAUGHT".to_string(), format!(">{cap}"))
            }
        };
        outln!(
            "{:<22} {:<24} {:<22} {:>8} {:>8.1}",
            mutant.name,
            mutant.expected_class,
            found,
            seeds,
            hunt.runs_per_s()
        );
    }
    if escaped.is_empty() {
        outln!("every mutant caught within {cap} seeds");
        Ok(0)
    } else {
        outln!("not caught within {cap} seeds: {}", escaped.join(", "));
        Ok(1)
    }
}

/// One hunt per mutant from every start seed: detection rate, median and max seeds to
/// detection.
fn from_every_start(starts: std::ops::Range<u64>, cap: u64, wait: WaitMode) -> Outcome {
    outln!(
        "{:<22} {:<24} {:>9} {:>7} {:>6} {:>8}  found",
        "mutant",
        "expected",
        "caught",
        "median",
        "max",
        "runs/s"
    );
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut escaped = Vec::new();
    let mut failed = None;
    detect_each(&ZOO, wait, starts.clone(), cap, jobs, |result| {
        if failed.is_some() {
            return;
        }
        match result {
            Ok(detection) => {
                let distances = &detection.distances;
                if distances.caught() < distances.starts() {
                    escaped.push(format!(
                        "{} ({} of {})",
                        detection.mutant.name,
                        distances.starts() - distances.caught(),
                        distances.starts()
                    ));
                }
                outln!("{}", row(&detection));
            }
            Err(error) => failed = Some(internal(error)),
        }
    });
    if let Some(failure) = failed {
        return Err(failure);
    }
    let range = format!("{}..{}", starts.start, starts.end);
    if escaped.is_empty() {
        outln!("every mutant caught within {cap} seeds from every start seed of {range}");
        Ok(0)
    } else {
        outln!(
            "not caught within {cap} seeds from every start seed of {range}: {}",
            escaped.join(", ")
        );
        Ok(1)
    }
}

/// A table row: the mutant, its seeds-to-detection figures, and what the lowest catching seed
/// found (last, since it may name several classes).
fn row(detection: &Detection) -> String {
    let distances = &detection.distances;
    let cap = distances.cap;
    let found = detection
        .first
        .as_ref()
        .map_or_else(|| "NOT CAUGHT".to_string(), |catch| catch.classes.join(","));
    let median = distances
        .median()
        .map_or_else(|| format!(">{cap}"), |median| format!("{median:.1}"));
    let max = distances
        .max()
        .map_or_else(|| format!(">{cap}"), |max| max.to_string());
    format!(
        "{:<22} {:<24} {:>9} {:>7} {:>6} {:>8.1}  {found}",
        detection.mutant.name,
        detection.mutant.expected_class,
        format!("{}/{}", distances.caught(), distances.starts()),
        median,
        max,
        detection.runs_per_s()
    )
}

/// Shrinks each mutant's first catch from seed 0 (hunting up to `cap` seeds) and prints its
/// size before and after, the candidates and seconds the shrink took, and the zoo's medians;
/// exit 1 if a mutant was not caught.
pub fn shrunk(cap: u64, wait: WaitMode) -> Outcome {
    if cap == 0 {
        return Err(Failure::BadInput("--cap must be at least 1".into()));
    }
    outln!(
        "{:<22} {:<24} {:<8} {:>4}  {:>26}  {:>26} {:>6} {:>6}",
        "mutant",
        "class",
        "where",
        "seed",
        "before (w/cyc/flt/events)",
        "after (w/cyc/flt/events)",
        "cands",
        "s"
    );
    let mut afters = Vec::new();
    let mut escaped = Vec::new();
    for mutant in &ZOO {
        let shrink = match shrink_first_catch(mutant, wait, cap, ShrinkLimits::default()) {
            Ok(shrink) => shrink,
            Err(fencer_gate::zoo_shrink::ZooShrinkError::Run(error)) => {
                return Err(internal(error));
            }
            Err(error) => {
                outln!("{:<22} {error}", mutant.name);
                escaped.push(mutant.name);
                continue;
            }
        };
        let stopped = shrink
            .stopped_by
            .map_or_else(String::new, |why| format!("  (stopped by the {why})"));
        outln!(
            "{:<22} {:<24} {:<8} {:>4}  {:>26}  {:>26} {:>6} {:>6.2}{stopped}",
            mutant.name,
            mutant.expected_class,
            shrink.scenario.name(),
            shrink.seed,
            size(shrink.before),
            size(shrink.after),
            shrink.candidates,
            shrink.shrink_s
        );
        afters.push((shrink.after, shrink.shrink_s));
    }
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        }
    };
    let of = |pick: fn(&(PlanSize, usize)) -> usize| {
        median(afters.iter().map(|(after, _)| pick(after) as f64).collect())
    };
    outln!(
        "median after shrinking over {} mutants: {:.1} workers, {:.1} cycles, {:.1} faults, {:.0} \
         events; {:.2} s per shrink (max {:.2} s)",
        afters.len(),
        of(|(size, _)| size.workers),
        of(|(size, _)| size.cycles),
        of(|(size, _)| size.faults),
        of(|(_, events)| *events),
        median(afters.iter().map(|(_, s)| *s).collect()),
        afters.iter().map(|(_, s)| *s).fold(0.0, f64::max)
    );
    if escaped.is_empty() {
        Ok(0)
    } else {
        outln!("not shrunk: {}", escaped.join(", "));
        Ok(1)
    }
}

/// `workers/cycles/faults/events`.
fn size((plan, events): (PlanSize, usize)) -> String {
    format!("{}/{}/{}/{events}", plan.workers, plan.cycles, plan.faults)
}
