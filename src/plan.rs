//! A plan: the settings plus everything the seed expanded into — each worker's script and the
//! nemesis schedule. It is the unit of replay: `plan.json` alone reproduces a run, and a
//! hand-written one pins a scenario.

use std::collections::BTreeSet;

use fencer_harness::{Stream, stream_rng};
use fencer_nemesis::{Fault, ScheduleConfig};
use fencer_workloads::{RegisterConfig, WorkerPlan, plan_workers};
use serde::{Deserialize, Serialize};

use crate::settings::Settings;

/// Version of the plan format; bumped when the same plan would run differently.
/// 2: delay-write and restart faults, `worker` and the lock-counter and mutex workloads, and
/// a run ends only once writes still in flight have landed.
pub const PLAN_FORMAT: u32 = 2;

/// Settings, worker scripts and fault schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_FORMAT`] at the time of writing.
    pub format: u32,
    /// Every setting.
    pub settings: Settings,
    /// One script per worker (`w0`, `w1`, ...).
    pub workers: Vec<WorkerPlan>,
    /// Faults, sorted by start time.
    pub faults: Vec<Fault>,
}

/// Why a plan file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}: {message}")]
pub struct PlanError {
    /// Where the plan came from.
    pub origin: String,
    /// 1-based line (1 when the problem is not tied to a line).
    pub line: usize,
    /// What was expected.
    pub message: String,
}

impl Plan {
    /// Expands `settings.seed` into worker scripts and a fault schedule.
    pub fn generate(settings: &Settings) -> Plan {
        let workers = plan_workers(&settings.register_config(), settings.seed);
        // Faults can only matter while workers run; with one lock, cycles mostly serialise, so
        // a generous bound is every worker's cycles back to back at up to one TTL each.
        let horizon_ns = settings
            .ttl_ns
            .saturating_mul((settings.workers * settings.ops_per_worker) as u64);
        let schedule = ScheduleConfig {
            kinds: settings.nemesis.clone(),
            workers: settings.workers,
            ttl_ns: settings.ttl_ns,
            horizon_ns,
            mean_gap_ns: settings.mean_fault_gap_ns,
        };
        let faults = fencer_nemesis::schedule(
            &schedule,
            &mut stream_rng(settings.seed, Stream::Nemesis, 0),
        );
        Plan {
            format: PLAN_FORMAT,
            settings: settings.clone(),
            workers,
            faults,
        }
    }

    /// Reads a plan from JSON, naming `origin` and the line in every error, and checks it is
    /// runnable (settings valid, one script per worker, faults sorted and aimed at real targets).
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Plan, PlanError> {
        let plan: Plan = serde_json::from_slice(bytes).map_err(|error| PlanError {
            origin: origin.to_string(),
            line: error.line().max(1),
            message: format!("expected a fencer plan: {error}"),
        })?;
        plan.check().map_err(|message| PlanError {
            origin: origin.to_string(),
            line: 1,
            message,
        })?;
        Ok(plan)
    }

    /// Checks the plan is runnable; the message says what was expected.
    pub fn check(&self) -> Result<(), String> {
        if self.format != PLAN_FORMAT {
            return Err(format!(
                "expected plan format {PLAN_FORMAT}, found {} (written by another fencer version)",
                self.format
            ));
        }
        self.settings.validate()?;
        if self.workers.len() != self.settings.workers {
            return Err(format!(
                "expected {} worker scripts (settings.workers), found {}",
                self.settings.workers,
                self.workers.len()
            ));
        }
        if let Some(pair) = self
            .faults
            .windows(2)
            .find(|pair| pair[0].at_ns() > pair[1].at_ns())
        {
            return Err(format!(
                "expected faults sorted by at_ns, found {} before {}",
                pair[0].at_ns(),
                pair[1].at_ns()
            ));
        }
        let workers: BTreeSet<String> = (0..self.workers.len()).map(|i| format!("w{i}")).collect();
        for fault in &self.faults {
            let target = fault.target();
            if let Fault::Restart { .. } = fault {
                if target != "lock" {
                    return Err(format!(
                        "expected restart target to be the lock service (lock), found `{target}`"
                    ));
                }
                continue;
            }
            let clock_target = matches!(fault, Fault::ClockJump { .. } | Fault::ClockDrift { .. });
            if !(workers.contains(target) || (clock_target && target == "lock")) {
                return Err(format!(
                    "expected fault target to be a worker (w0..w{}){}, found `{target}`",
                    self.workers.len() - 1,
                    if clock_target { " or lock" } else { "" }
                ));
            }
        }
        Ok(())
    }

    /// Pretty JSON, newline-terminated, as written to `plan.json`.
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("plans always serialise");
        bytes.push(b'\n');
        bytes
    }
}

impl Settings {
    /// The workload's view of the settings (call on validated settings: an unknown workload
    /// name falls back to the default workload).
    pub fn register_config(&self) -> RegisterConfig {
        RegisterConfig {
            on_renew_failure: self.on_renew_failure,
            ..RegisterConfig::new(
                self.workers,
                self.ops_per_worker,
                self.ttl_ns,
                self.renew_every_ns,
            )
        }
        .for_workload(self.workload_kind().unwrap_or_default(), self.worker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trips_through_json() {
        let plan = Plan::generate(&Settings {
            seed: 9,
            ..Settings::default()
        });
        assert!(!plan.faults.is_empty());
        let back = Plan::from_json(&plan.to_json(), "plan.json").unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn bad_plans_are_refused_with_file_and_line() {
        let error = Plan::from_json(b"{\n  \"format\": 1,\n  \"bogus\": true\n}", "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("p.json:3: expected a fencer plan"),
            "{error}"
        );

        let mut plan = Plan::generate(&Settings::default());
        plan.faults.insert(
            0,
            Fault::Pause {
                at_ns: 0,
                target: "w99".into(),
                duration_ns: 1,
            },
        );
        let error = Plan::from_json(&plan.to_json(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(error.contains("found `w99`"), "{error}");

        let mut plan = Plan::generate(&Settings::default());
        plan.workers.pop();
        let error = Plan::from_json(&plan.to_json(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(error.contains("expected 5 worker scripts"), "{error}");
    }
}
