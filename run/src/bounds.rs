//! Ceilings of a plan and of a run: the longest wait, fault, clock step and drift a plan may
//! hold, and the most simulated time and events one run may take.
//!
//! Every time a run computes (a fault's end, a lease's expiry, a run's budget) is a sum of
//! these, so with them a sum of nanoseconds stays far inside `u64` and `i64`; and a run that
//! asks for more than it could ever finish (a lease renewed every few seconds for a million
//! hours) is refused, or stopped with a usage error, instead of running and growing for ever.
//! A plan past a ceiling is refused at the line to edit.

use fencer_nemesis::Fault;
use fencer_nemesis::schedule::MAX_FAULTS;

use fencer_harness::Recorder;

use crate::RunError;
use crate::plan::{InvalidPlan, Plan};
use crate::plan_locate::Step;
use crate::settings::format_duration;

const HOUR_NS: u64 = 3_600 * crate::settings::SECOND_NS;

/// The longest single wait or size in a plan: a cycle's delay, think, prepare or hold time, a
/// fault's duration or reply delay, a lease-edge offset, a clock step. A day: generated plans
/// draw each as a few TTLs at most, and a TTL is at most an hour.
pub const MAX_STEP_NS: u64 = 24 * HOUR_NS;

/// The largest clock drift a plan may set, in ppm either way: a clock running at half or one
/// and a half times the true rate. Generated plans stay within a tenth of it.
pub const MAX_DRIFT_PPM: i64 = 500_000;

/// The most simulated (or, in the real tier, wall) time one run may take: 30 days. Default
/// runs take about an hour of simulated time, and the contended million-event runs of the
/// benchmarks under a day.
pub const MAX_RUN_SIMULATED_NS: u64 = 30 * 24 * HOUR_NS;

/// The most events one run may record: room for the ten-million-event history of the
/// benchmarks, and no more, since the history is held in memory (about 540 bytes an event,
/// so some 6.5 GB at the limit) and written as one JSONL file.
pub const MAX_RUN_EVENTS: usize = 12_000_000;

/// What one run may take before it is stopped with a usage error: [`MAX_RUN_EVENTS`] and
/// [`MAX_RUN_SIMULATED_NS`] unless lowered (a test that must stay quick lowers them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// The most events the run may record.
    pub events: usize,
    /// The most simulated time the run may take, in nanoseconds.
    pub simulated_ns: u64,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            events: MAX_RUN_EVENTS,
            simulated_ns: MAX_RUN_SIMULATED_NS,
        }
    }
}

impl RunLimits {
    /// Whether a run past this point stays within the limits: `recorder` not filled, and
    /// (`out_of_time`) no worker still running when the simulated time ran out.
    pub(crate) fn check(&self, recorder: &Recorder, out_of_time: bool) -> Result<(), RunError> {
        if recorder.is_full() {
            return Err(self.too_many_events());
        }
        if out_of_time {
            return Err(self.out_of_time());
        }
        Ok(())
    }

    /// When a run of `plan` is stopped, in nanoseconds from the workers' start: at the plan's
    /// own stop ([`Plan::stop_at_ns`]) or at [`RunLimits::simulated_ns`], whichever comes
    /// first; and whether it is the plan's (workers still running then are no error).
    pub(crate) fn stop_ns(&self, plan: &Plan) -> (u64, bool) {
        match plan.stop_at_ns {
            Some(stop_at_ns) if stop_at_ns <= self.simulated_ns => (stop_at_ns, true),
            _ => (self.simulated_ns, false),
        }
    }

    /// The error of a run that recorded as many events as it may and had more to record.
    fn too_many_events(&self) -> RunError {
        RunError::Limit(format!(
            "the run recorded {} events, the most one run may record, and was still going: \
             fewer workers or cycles, a longer renew-every, or fewer faults",
            self.events
        ))
    }

    /// The error of a run whose workers were still running when its simulated time ran out.
    fn out_of_time(&self) -> RunError {
        RunError::Limit(format!(
            "the run's workers were still running after {} of simulated time, the most one \
             run may take: fewer cycles, or shorter waits and faults",
            format_duration(self.simulated_ns)
        ))
    }
}

/// Checks every cycle and fault of `plan` against the ceilings; the error's path is the field
/// past one.
pub(crate) fn check_plan(plan: &Plan) -> Result<(), InvalidPlan> {
    if plan.faults.len() > MAX_FAULTS {
        return Err(InvalidPlan::at(
            vec![Step::Key("faults")],
            format!(
                "expected at most {MAX_FAULTS} faults, found {}",
                plan.faults.len()
            ),
        ));
    }
    for (worker, script) in plan.workers.iter().enumerate() {
        let mut total_ns = 0u64;
        for (index, cycle) in script.cycles.iter().enumerate() {
            for (field, step_ns) in [
                ("delay_ns", cycle.delay_ns),
                ("think_ns", cycle.think_ns),
                ("prepare_ns", cycle.prepare_ns),
                ("hold_ns", cycle.hold_ns),
            ] {
                if step_ns > MAX_STEP_NS {
                    return Err(InvalidPlan::at(
                        vec![
                            Step::Key("workers"),
                            Step::Index(worker),
                            Step::Key("cycles"),
                            Step::Index(index),
                            Step::Key(field),
                        ],
                        too_long(field, step_ns),
                    ));
                }
                total_ns = total_ns.saturating_add(step_ns);
            }
        }
        if total_ns > MAX_RUN_SIMULATED_NS {
            return Err(InvalidPlan::at(
                vec![Step::Key("workers"), Step::Index(worker)],
                format!(
                    "w{worker}'s cycles wait {} in all, more than the {} of simulated time \
                     one run may take",
                    format_duration(total_ns),
                    format_duration(MAX_RUN_SIMULATED_NS)
                ),
            ));
        }
    }
    if let Some(stop_at_ns) = plan.stop_at_ns
        && stop_at_ns > MAX_RUN_SIMULATED_NS
    {
        return Err(InvalidPlan::at(
            vec![Step::Key("stop_at_ns")],
            format!(
                "expected stop_at_ns within the {} of simulated time one run may take, found \
                 {stop_at_ns}",
                format_duration(MAX_RUN_SIMULATED_NS)
            ),
        ));
    }
    for (index, fault) in plan.faults.iter().enumerate() {
        check_fault(fault).map_err(|(field, message)| {
            InvalidPlan::at(
                vec![Step::Key("faults"), Step::Index(index), Step::Key(field)],
                format!("{message} (a {} fault)", fault.kind().name()),
            )
        })?;
    }
    Ok(())
}

/// The field of `fault` past a ceiling, and why.
fn check_fault(fault: &Fault) -> Result<(), (&'static str, String)> {
    if fault.at_ns() > MAX_RUN_SIMULATED_NS {
        return Err((
            "at_ns",
            format!(
                "expected at_ns within the {} of simulated time one run may take, found {}",
                format_duration(MAX_RUN_SIMULATED_NS),
                fault.at_ns()
            ),
        ));
    }
    for (field, size_ns) in fault.sizes_ns() {
        if size_ns > MAX_STEP_NS {
            return Err((field, too_long(field, size_ns)));
        }
    }
    if let Fault::ClockDrift { drift_ppm, .. } = fault
        && drift_ppm.unsigned_abs() > MAX_DRIFT_PPM.unsigned_abs()
    {
        return Err((
            "drift_ppm",
            format!("expected drift_ppm within ±{MAX_DRIFT_PPM}, found {drift_ppm}"),
        ));
    }
    Ok(())
}

fn too_long(field: &str, found_ns: u64) -> String {
    format!(
        "expected {field} of at most {} ({MAX_STEP_NS}), found {found_ns}",
        format_duration(MAX_STEP_NS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;
    use crate::{Backends, Launch};

    fn small_plan() -> Plan {
        Plan::generate(&Settings {
            workers: 2,
            ops_per_worker: 3,
            ..Settings::default()
        })
    }

    #[test]
    fn a_generated_plan_is_within_every_ceiling() {
        assert_eq!(check_plan(&small_plan()), Ok(()));
        assert_eq!(check_plan(&Plan::generate(&Settings::default())), Ok(()));
    }

    #[test]
    fn a_cycle_step_past_a_day_is_refused_at_its_field() {
        let mut plan = small_plan();
        plan.workers[1].cycles[2].hold_ns = MAX_STEP_NS + 1;
        let error = check_plan(&plan).unwrap_err();
        assert!(
            error
                .message
                .starts_with("expected hold_ns of at most 86400s"),
            "{error}"
        );
        let text = String::from_utf8(plan.to_json()).unwrap();
        let line = crate::plan_locate::line_of(text.as_bytes(), error.path()).unwrap();
        assert!(
            text.lines()
                .nth(line - 1)
                .unwrap()
                .contains("\"hold_ns\": 86400000000001"),
            "line {line}"
        );
    }

    #[test]
    fn a_worker_whose_cycles_outlast_the_run_is_refused() {
        let mut plan = small_plan();
        let day_long = fencer_workloads::CyclePlan {
            think_ns: MAX_STEP_NS,
            ..plan.workers[0].cycles[0].clone()
        };
        plan.workers[0].cycles = vec![day_long; 31];
        let error = check_plan(&plan).unwrap_err();
        assert_eq!(error.path(), [Step::Key("workers"), Step::Index(0)]);
        assert!(error.message.contains("more than the 2592000s"), "{error}");
    }

    #[test]
    fn fault_sizes_drift_and_start_times_have_ceilings() {
        let refused = |fault: Fault| {
            let mut plan = small_plan();
            plan.faults = vec![fault];
            check_plan(&plan).unwrap_err()
        };
        let pause = refused(Fault::Pause {
            at_ns: 0,
            target: "w0".into(),
            duration_ns: u64::MAX,
        });
        assert_eq!(
            pause.path(),
            [
                Step::Key("faults"),
                Step::Index(0),
                Step::Key("duration_ns")
            ]
        );
        assert!(pause.message.ends_with("(a pause fault)"), "{pause}");
        let jump = refused(Fault::ClockJump {
            at_ns: 0,
            target: "lock".into(),
            jump_ns: i64::MIN,
        });
        assert_eq!(jump.path()[2], Step::Key("jump_ns"));
        let drift = refused(Fault::ClockDrift {
            at_ns: 0,
            target: "lock".into(),
            drift_ppm: -1_000_000,
        });
        assert!(drift.message.contains("within ±500000"), "{drift}");
        let late = refused(Fault::Cut {
            at_ns: MAX_RUN_SIMULATED_NS + 1,
            target: "lock".into(),
        });
        assert_eq!(late.path()[2], Step::Key("at_ns"));
        let mut plan = small_plan();
        plan.faults = vec![Fault::ClockDrift {
            at_ns: MAX_RUN_SIMULATED_NS,
            target: "lock".into(),
            drift_ppm: MAX_DRIFT_PPM,
        }];
        assert_eq!(
            check_plan(&plan),
            Ok(()),
            "the ceilings themselves are allowed"
        );
        plan.stop_at_ns = Some(MAX_RUN_SIMULATED_NS + 1);
        let stop = check_plan(&plan).unwrap_err();
        assert_eq!(stop.path(), [Step::Key("stop_at_ns")]);
        plan.stop_at_ns = Some(MAX_RUN_SIMULATED_NS);
        assert_eq!(check_plan(&plan), Ok(()));
    }

    #[test]
    fn a_plan_that_stops_its_run_early_ends_it_there_and_records_the_calls_it_cut_as_info() {
        use fencer_harness::EventType;
        let backends = Backends::new();
        let mut plan = small_plan();
        let whole = Launch::new(&backends).run(&plan).unwrap().history.unpack();
        // Stop the run 1 ns after a worker's call left, half way through the run.
        let cut = whole
            .events
            .iter()
            .filter(|event| event.kind == EventType::Invoke && event.process == "w1")
            .nth(2)
            .unwrap();
        let stop_at_ns = cut.time_ns + 1;
        plan.stop_at_ns = Some(stop_at_ns);
        let stopped = Launch::new(&backends).run(&plan).unwrap().history.unpack();
        let again = Launch::new(&backends).run(&plan).unwrap().history.unpack();
        assert_eq!(stopped.sha256_hex(), again.sha256_hex());
        assert!(stopped.events.len() < whole.events.len());
        assert!(
            stopped
                .events
                .iter()
                .filter(|event| event.kind == EventType::Invoke)
                .all(|event| event.time_ns <= stop_at_ns)
        );
        // The history is the whole run's up to the stop, and the call in flight then ends
        // `info` at the stop.
        let until_stop = |history: &fencer_harness::History| -> Vec<String> {
            history
                .events
                .iter()
                .filter(|event| event.time_ns < stop_at_ns && event.process.starts_with('w'))
                .map(|event| format!("{event:?}"))
                .collect()
        };
        assert_eq!(until_stop(&stopped), until_stop(&whole));
        let completion = stopped
            .events
            .iter()
            .find(|event| event.process == cut.process && event.time_ns >= stop_at_ns)
            .unwrap();
        assert_eq!(
            (completion.kind, completion.f, completion.time_ns),
            (EventType::Info, cut.f, stop_at_ns)
        );
        // A plan's stop past what a run may take leaves the ceiling in charge.
        let ceiling = Launch {
            limits: RunLimits {
                simulated_ns: stop_at_ns - 1,
                ..RunLimits::default()
            },
            ..Launch::new(&backends)
        };
        assert!(ceiling.run(&plan).unwrap_err().is_bad_input());
    }

    #[test]
    fn a_run_that_would_record_more_than_it_may_is_stopped_with_a_usage_error() {
        let backends = Backends::new();
        let plan = small_plan();
        let whole = Launch::new(&backends).run(&plan).unwrap().history.unpack();
        let limited = |events| Launch {
            limits: RunLimits {
                events,
                ..RunLimits::default()
            },
            ..Launch::new(&backends)
        };
        let error = limited(whole.events.len() - 1).run(&plan).unwrap_err();
        assert!(error.is_bad_input(), "{error}");
        assert!(
            error.to_string().starts_with(&format!(
                "the run recorded {} events, the most one run may record",
                whole.events.len() - 1
            )),
            "{error}"
        );
        let exact = limited(whole.events.len())
            .run(&plan)
            .unwrap()
            .history
            .unpack();
        assert_eq!(
            exact, whole,
            "a run within its limit is the run without one"
        );
    }

    #[test]
    fn a_run_still_going_when_its_simulated_time_runs_out_is_stopped() {
        let backends = Backends::new();
        let plan = small_plan();
        let whole = Launch::new(&backends).run(&plan).unwrap().history.unpack();
        let last_ns = whole.events.last().unwrap().time_ns;
        let limited = |simulated_ns| Launch {
            limits: RunLimits {
                simulated_ns,
                ..RunLimits::default()
            },
            ..Launch::new(&backends)
        };
        let error = limited(last_ns / 2).run(&plan).unwrap_err();
        assert!(error.is_bad_input(), "{error}");
        assert!(error.to_string().contains("still running after"), "{error}");
        // Workers done just inside the limit: the run is the run without one.
        let just_after_ns = last_ns + 1_000_000;
        assert_eq!(
            limited(just_after_ns).run(&plan).unwrap().history.unpack(),
            whole
        );
    }
}
