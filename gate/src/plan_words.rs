//! A plan's faults and stop in a reader's words, as a shrink reports its result beside the
//! plan's size ([`crate::shrink::PlanSize::in_words`]): each fault by what it does, to whom,
//! how long and when, and where the plan ends the run.

use fencer_harness::words::secs;
use fencer_run::plan::Plan;

/// Faults listed one by one up to this many; more are counted by family.
const FAULTS_LISTED: usize = 4;

/// `a 12.000s pause of w0 at 1.500s; the run ends by 14.000s`, `5 pause, 1 cancel`, or
/// `no fault` for a plan without any.
pub fn faults_in_words(plan: &Plan) -> String {
    let mut words = if plan.faults.is_empty() {
        "no fault".to_string()
    } else if plan.faults.len() <= FAULTS_LISTED {
        let faults: Vec<String> = plan.faults.iter().map(|fault| fault.in_words()).collect();
        faults.join(", ")
    } else {
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
        families.join(", ")
    };
    if let Some(stop_at_ns) = plan.stop_at_ns {
        words.push_str(&format!("; the run ends by {}", secs(stop_at_ns)));
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shrink::PlanSize;
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
            PlanSize::of(&plan).in_words(),
            "2 workers acting, 3 cycles, 1 fault"
        );
        assert_eq!(
            faults_in_words(&plan),
            "a 12.000s pause of w0 at 1.500s; the run ends by 14.000s"
        );
        plan.faults.clear();
        plan.stop_at_ns = None;
        assert_eq!(faults_in_words(&plan), "no fault");
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
            PlanSize::of(&plan).in_words(),
            "2 workers acting, 2 cycles, 6 faults"
        );
        assert_eq!(faults_in_words(&plan), "5 pause, 1 cancel");
    }
}
