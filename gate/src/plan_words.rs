//! A plan in a reader's words, as a shrink reports its result: who acts, how many cycles, each
//! fault by what it does, and where the plan stops the run.

use fencer_harness::words::{count, secs};
use fencer_run::plan::Plan;

use crate::shrink::PlanSize;

/// Faults listed one by one up to this many; more are counted by family.
const FAULTS_LISTED: usize = 4;

/// `2 workers, 3 cycles, 1 fault: a 12.000s pause of w0 at 1.500s; the run ends by 14.000s`.
pub fn plan_in_words(plan: &Plan) -> String {
    let size = PlanSize::of(plan);
    let mut words = format!(
        "{}, {}, {}",
        count(size.workers, "worker", "workers"),
        count(size.cycles, "cycle", "cycles"),
        count(size.faults, "fault", "faults")
    );
    if !plan.faults.is_empty() && plan.faults.len() <= FAULTS_LISTED {
        let faults: Vec<String> = plan.faults.iter().map(|fault| fault.in_words()).collect();
        words.push_str(&format!(": {}", faults.join(", ")));
    } else if !plan.faults.is_empty() {
        let mut families: Vec<(&str, usize)> = Vec::new();
        for fault in &plan.faults {
            let name = fault.kind().name();
            match families.iter_mut().find(|(family, _)| *family == name) {
                Some((_, n)) => *n += 1,
                None => families.push((name, 1)),
            }
        }
        let families: Vec<String> = families
            .iter()
            .map(|(family, n)| format!("{n} {family}"))
            .collect();
        words.push_str(&format!(" ({})", families.join(", ")));
    }
    if let Some(stop_at_ns) = plan.stop_at_ns {
        words.push_str(&format!("; the run ends by {}", secs(stop_at_ns)));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_nemesis::Fault;
    use fencer_run::settings::Settings;

    fn pause(at_ns: u64, target: &str) -> Fault {
        Fault::Pause {
            at_ns,
            target: target.into(),
            duration_ns: 12_000_000_000,
        }
    }

    #[test]
    fn a_small_plan_lists_its_faults_and_its_stop() {
        let mut plan = Plan::generate(&Settings {
            workers: 2,
            ops_per_worker: 2,
            ..Settings::default()
        });
        plan.workers[1].cycles.truncate(1);
        plan.faults = vec![pause(1_500_000_000, "w0")];
        plan.stop_at_ns = Some(14_000_000_000);
        assert_eq!(
            plan_in_words(&plan),
            "2 workers, 3 cycles, 1 fault: a 12.000s pause of w0 at 1.500s; the run ends by \
             14.000s"
        );
    }

    #[test]
    fn many_faults_are_counted_by_family_and_silent_workers_do_not_count() {
        let mut plan = Plan::generate(&Settings {
            workers: 3,
            ops_per_worker: 1,
            ..Settings::default()
        });
        plan.workers[2].cycles.clear();
        plan.faults = (0..5).map(|i| pause(i, "w0")).collect();
        plan.faults.push(Fault::Cancel {
            at_ns: 9,
            target: "w1".into(),
        });
        assert_eq!(
            plan_in_words(&plan),
            "2 workers, 2 cycles, 6 faults (5 pause, 1 cancel)"
        );
    }
}
