//! A plan: the settings plus everything the seed expanded into — each worker's script and the
//! nemesis schedule. It is the unit of replay: `plan.json` alone reproduces a run, and a
//! hand-written one pins a scenario.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use fencer_harness::words::{count, secs};
use fencer_harness::{Stream, stream_rng};
use fencer_nemesis::{Fault, ScheduleConfig};
use fencer_workloads::{ClientVariant, RegisterConfig, WorkerPlan, plan_workers};
use serde::{Deserialize, Serialize};

use crate::plan_locate::{Step, line_of};
use crate::reach::LeftOut;
use crate::settings::Settings;

/// Version of the plan format; bumped when the same plan would run differently.
/// 2: delay-write and restart faults, `worker` and the lock-counter and mutex workloads, and
/// a run ends only once writes still in flight have landed.
/// 3: the simulation runs on fencer's own executor, whose timers are exact to the nanosecond
/// and ordered by deadline, then by registration (format 2 ran on tokio's millisecond timer
/// wheel), so the same plan records other times and interleavings.
/// 4: a simulated call is carried by two timers and no task of its own (format 3 handed each
/// request to a courier task), so two wake-ups due at the same nanosecond may come in another
/// order. Otherwise a plan runs as in format 3, which still runs ([`OLDEST_RUNNABLE_FORMAT`]).
/// 5: workers take their leases through a lock client library (`client`, which older plans
/// call `worker`); fencer's reference one asks the lock service for its ownership check (a
/// recorded `check` and a renew as `wN:check`), tells its worker of a lost lease (`notice`
/// events) and claims nothing past a lease's validity, so the same plan records more calls
/// and other times.
pub const PLAN_FORMAT: u32 = 5;

/// The oldest plan format that still runs. Plans of formats 3 and 4 run with the reference
/// client to a history that differs from the one they were saved with (`fencer replay` says
/// why: [`Plan::replays_differently`]); their seeds, run again, give plans of the current
/// format.
pub const OLDEST_RUNNABLE_FORMAT: u32 = 3;

/// Why a plan of an older format cannot be replayed byte for byte, for the error that refuses it.
fn older_format(format: u32) -> &'static str {
    match format {
        2 => {
            "format 2 ran on tokio's millisecond timer wheel, format 3 on fencer's own \
             executor with nanosecond timers: the same plan would record another history. \
             Run its seed again (`fencer run --seed N` with the settings in the plan) to \
             record a newer plan; a regression saved as format 2 is found again the same way"
        }
        _ => "written by another fencer version",
    }
}

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
    /// Faults the seed drew that this run's backends cannot take, by family and reason
    /// ([`crate::reach::Roles::fit`]); they are not in `faults`. Informational: a run executes
    /// `faults` only. Absent when nothing was left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// When the run is stopped if it is still going, in nanoseconds from the workers' start
    /// (as fault times count): every worker is cancelled where it is, its calls in flight are
    /// recorded as `info` and its library's tasks end, as at any run's deadline. A shrunk plan
    /// stops just after its story, so a worker left waiting for a lock that is never freed
    /// does not fill the history with its retries. Absent: the run goes on until every worker
    /// is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at_ns: Option<u64>,
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

/// Why a plan cannot run: what was expected, and where in the plan (so a plan file's error can
/// point at the line to edit).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidPlan {
    path: Vec<Step>,
    /// What was expected and what was found.
    pub message: String,
}

impl InvalidPlan {
    /// A problem with the value at `path` of the plan.
    pub(crate) fn at(path: Vec<Step>, message: String) -> InvalidPlan {
        InvalidPlan { path, message }
    }

    /// A problem with the fault at `index` of the schedule.
    pub(crate) fn at_fault(index: usize, message: String) -> InvalidPlan {
        InvalidPlan::at(vec![Step::Key("faults"), Step::Index(index)], message)
    }

    /// Where in the plan the problem is.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &[Step] {
        &self.path
    }
}

/// The largest plan file fencer reads: 512 MiB. A plan fencer writes for the most cycles and
/// faults a run may hold ([`crate::settings::MAX_CYCLES`],
/// [`fencer_nemesis::schedule::MAX_FAULTS`]) takes about 300 MB.
pub const MAX_PLAN_BYTES: usize = 512 << 20;

/// Reads the plan file at `path`, but no more than one byte past [`MAX_PLAN_BYTES`], so a
/// device that never ends (`/dev/zero`) is read only that far and [`Plan::from_json`] refuses
/// it at the line where the limit falls.
pub fn read_plan_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_PLAN_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl Plan {
    /// Expands `settings.seed` into worker scripts and a fault schedule.
    pub fn generate(settings: &Settings) -> Plan {
        let workers = plan_workers(&settings.register_config(), settings.seed);
        // A cluster's faults aim at its members, never at the role as one server.
        let clusters = settings.clusters();
        let mut servers: Vec<String> = settings
            .private_servers()
            .into_iter()
            .filter(|role| clusters.iter().all(|cluster| &cluster.role != role))
            .collect();
        // An exec client's child and proxy take server faults, aimed at its worker.
        if settings.client.exec_command().is_some() {
            servers.extend((0..settings.workers).map(|index| format!("w{index}")));
        }
        let schedule = ScheduleConfig {
            kinds: settings.nemesis.clone(),
            workers: settings.workers,
            ttl_ns: settings.ttl_ns,
            // Faults can only matter while workers run.
            horizon_ns: settings.fault_horizon_ns(),
            mean_gap_ns: settings.mean_fault_gap_ns,
            servers,
            clusters,
        };
        let faults = fencer_nemesis::schedule(
            &schedule,
            &mut stream_rng(settings.seed, Stream::Nemesis, 0),
            &mut stream_rng(settings.seed, Stream::Aim, 0),
        );
        Plan {
            format: PLAN_FORMAT,
            settings: settings.clone(),
            workers,
            faults,
            left_out: Vec::new(),
            stop_at_ns: None,
        }
    }

    /// One line describing the plan, for summaries: its settings, with the workers and cycles
    /// its scripts hold when they are not what the settings draw (a shrunk or hand-written
    /// plan), and where the plan stops the run.
    pub fn describe(&self) -> String {
        // One script per worker is what a runnable plan has ([`Plan::check`]).
        let drawn = self
            .workers
            .iter()
            .all(|script| script.cycles.len() == self.settings.ops_per_worker);
        let mut line = if drawn {
            self.settings.describe()
        } else {
            let acting = self
                .workers
                .iter()
                .filter(|script| !script.cycles.is_empty());
            let cycles = self.workers.iter().map(|script| script.cycles.len()).sum();
            self.settings.describe_with_shape(&format!(
                "{} acting, {} in all (the plan's scripts)",
                count(acting.count(), "worker", "workers"),
                count(cycles, "cycle", "cycles")
            ))
        };
        if let Some(stop_at_ns) = self.stop_at_ns {
            line.push_str(&format!(", the plan ends the run by {}", secs(stop_at_ns)));
        }
        line
    }

    /// Reads a plan from JSON, naming `origin` and the line in every error, and checks it is
    /// runnable (settings valid, one script per worker, faults sorted and aimed at real targets).
    pub fn from_json(bytes: &[u8], origin: &str) -> Result<Plan, PlanError> {
        if bytes.len() > MAX_PLAN_BYTES {
            return Err(PlanError {
                origin: origin.to_string(),
                line: 1 + memchr::memchr_iter(b'\n', &bytes[..MAX_PLAN_BYTES]).count(),
                message: format!(
                    "expected a plan of at most {MAX_PLAN_BYTES} bytes, found more (the limit \
                     falls on this line)"
                ),
            });
        }
        let plan: Plan = serde_json::from_slice(bytes).map_err(|error| PlanError {
            origin: origin.to_string(),
            line: error.line().max(1),
            message: format!("expected a fencer plan: {error}"),
        })?;
        plan.check().map_err(|invalid| PlanError {
            origin: origin.to_string(),
            line: line_of(bytes, &invalid.path).unwrap_or(1),
            message: invalid.message,
        })?;
        Ok(plan)
    }

    /// Why this plan's saved history may differ from the one it records now, though the
    /// simulation is deterministic: it was recorded by an older format's executor. `None` for
    /// a plan of the current format.
    pub fn replays_differently(&self) -> Option<String> {
        (self.format < PLAN_FORMAT).then(|| match self.format {
            3 => format!(
                "the run was recorded with plan format 3, which handed each request to a \
                 courier task, and had workers check their lease on their own clock; format \
                 {PLAN_FORMAT} carries a request with timers alone and has them ask their \
                 lock client library, which asks the lock service"
            ),
            _ => format!(
                "the run was recorded with plan format {}, whose workers checked their lease \
                 on their own clock; in format {PLAN_FORMAT} they ask their lock client \
                 library, which asks the lock service (a recorded check and renew) and tells \
                 them of a lost lease",
                self.format
            ),
        })
    }

    /// Checks the plan is runnable: settings valid, one script per worker, faults sorted and
    /// aimed at targets that can take them.
    pub fn check(&self) -> Result<(), InvalidPlan> {
        let at = |path: Vec<Step>| move |message: String| InvalidPlan { path, message };
        if !(OLDEST_RUNNABLE_FORMAT..=PLAN_FORMAT).contains(&self.format) {
            return Err(at(vec![Step::Key("format")])(format!(
                "expected plan format {OLDEST_RUNNABLE_FORMAT} to {PLAN_FORMAT}, found {} ({})",
                self.format,
                older_format(self.format)
            )));
        }
        self.settings.validate().map_err(|error| InvalidPlan {
            path: vec![Step::Key("settings"), Step::Key(error.field)],
            message: error.message,
        })?;
        if self.workers.len() != self.settings.workers {
            return Err(at(vec![Step::Key("workers")])(format!(
                "expected {} worker scripts (settings.workers), found {}",
                self.settings.workers,
                self.workers.len()
            )));
        }
        crate::bounds::check_plan(self)?;
        if let Some(index) = self
            .faults
            .windows(2)
            .position(|pair| pair[0].at_ns() > pair[1].at_ns())
        {
            let pair = &self.faults[index..=index + 1];
            return Err(at(vec![Step::Key("faults"), Step::Index(index + 1)])(
                format!(
                    "expected faults sorted by at_ns, found {} before {}",
                    pair[0].at_ns(),
                    pair[1].at_ns()
                ),
            ));
        }
        let workers: BTreeSet<String> = (0..self.workers.len()).map(|i| format!("w{i}")).collect();
        let clusters = self.settings.clusters();
        // A worker takes what a server's process and proxy take only when its lock client is
        // a process with a proxy of its own.
        let exec_client = self.settings.client.exec_command().is_some();
        for (index, fault) in self.faults.iter().enumerate() {
            let target = fault.target();
            let mut aims = fault.aims();
            if fault.effect() == fencer_nemesis::Effect::ServerOnly && !exec_client {
                aims.worker = false;
            }
            let role = fencer_nemesis::target_role(target);
            let cluster = clusters.iter().find(|cluster| cluster.role == role);
            let on_member = match (cluster, fencer_nemesis::target_member(target)) {
                (Some(cluster), Some(member)) => {
                    aims.servers.contains(&role)
                        && (member == fencer_nemesis::LEADER
                            || cluster.members.iter().any(|name| name == member))
                }
                _ => false,
            };
            if let (Some(cluster), Fault::NetPartition { groups, .. }) = (cluster, fault)
                && let Some(name) = groups
                    .iter()
                    .flatten()
                    .find(|name| *name != fencer_nemesis::LEADER && !cluster.members.contains(name))
            {
                return Err(at(vec![Step::Key("faults"), Step::Index(index)])(format!(
                    "expected the groups of a net-partition of `{role}` to name its members \
                     ({}, or {}), found `{name}`",
                    cluster.members.join(", "),
                    fencer_nemesis::LEADER
                )));
            }
            if let Some(cluster) = cluster
                && !on_member
                && fencer_nemesis::target_member(target).is_some()
            {
                return Err(at(vec![Step::Key("faults"), Step::Index(index)])(format!(
                    "expected a member of the {role} cluster ({}{}), found `{target}` (a {} \
                     fault)",
                    cluster
                        .members
                        .iter()
                        .map(|member| format!("{role}.{member}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if cluster.leader {
                        format!(", {role}.{}", fencer_nemesis::LEADER)
                    } else {
                        String::new()
                    },
                    fault.kind().name()
                )));
            }
            if !(on_member
                || (aims.worker && workers.contains(target))
                || aims.servers.contains(&target))
            {
                return Err(at(vec![Step::Key("faults"), Step::Index(index)])(format!(
                    "expected fault target to be {}, found `{target}` (a {} fault; \
                     workers w0..w{})",
                    aims.describe(),
                    fault.kind().name(),
                    self.workers.len() - 1,
                )));
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
    /// The workload's view of the settings.
    pub fn register_config(&self) -> RegisterConfig {
        RegisterConfig {
            on_renew_failure: self.on_renew_failure,
            cycle_shape: self.cycle_shape,
            wait: self.wait,
            ..RegisterConfig::new(
                self.workers,
                self.ops_per_worker,
                self.ttl_ns,
                self.renew_every_ns,
            )
        }
        .for_workload(
            self.workload,
            self.client.variant().unwrap_or(ClientVariant::Reference),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_s_summary_counts_its_own_scripts_and_names_its_stop() {
        let mut plan = Plan::generate(&Settings {
            workers: 2,
            ops_per_worker: 3,
            ..Settings::default()
        });
        assert_eq!(plan.describe(), plan.settings.describe());
        assert!(plan.describe().contains(": 2 workers x 3 cycles, "));
        plan.workers[1].cycles.clear();
        plan.workers[0].cycles.truncate(2);
        plan.stop_at_ns = Some(14_011_000_000);
        let line = plan.describe();
        assert!(
            line.contains(": 1 worker acting, 2 cycles in all (the plan's scripts), "),
            "{line}"
        );
        assert!(
            line.ends_with(", the plan ends the run by 14.011s"),
            "{line}"
        );
    }

    #[test]
    fn a_cluster_plan_aims_at_its_members_by_name() {
        let settings = Settings {
            lock: "private:redlock?nodes=3".into(),
            nemesis: [fencer_nemesis::FaultKind::ServerPause]
                .into_iter()
                .collect(),
            ..Settings::default().in_real_time()
        };
        let mut plan = Plan::generate(&settings);
        assert!(!plan.faults.is_empty());
        assert!(
            plan.faults
                .iter()
                .all(|f| ["lock.n1", "lock.n2", "lock.n3"].contains(&f.target())),
            "{:?}",
            plan.faults
        );
        plan.check().unwrap();
        plan.faults = vec![Fault::ServerPause {
            at_ns: 1,
            target: "lock.n4".into(),
            duration_ns: 1,
        }];
        let error = plan.check().unwrap_err().message;
        assert!(
            error.contains("expected a member of the lock cluster (lock.n1, lock.n2, lock.n3)"),
            "{error}"
        );
        plan.faults = vec![Fault::NetPartition {
            at_ns: 1,
            target: "lock".into(),
            duration_ns: 1,
            groups: vec![vec!["n1".into()], vec!["n7".into()]],
        }];
        let error = plan.check().unwrap_err().message;
        assert!(error.contains("found `n7`"), "{error}");
        let mut single = plan.clone();
        single.settings.lock = "private:redis".into();
        single.faults = vec![Fault::ServerPause {
            at_ns: 1,
            target: "lock.n1".into(),
            duration_ns: 1,
        }];
        assert!(single.check().is_err(), "a single server has no members");
    }

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
    fn a_plan_file_larger_than_the_limit_is_refused_at_the_line_it_crosses() {
        let mut bytes = read_plan_bytes(Path::new("/dev/zero")).unwrap();
        assert_eq!(
            bytes.len(),
            MAX_PLAN_BYTES + 1,
            "an endless file is read one byte past the limit"
        );
        bytes[..3].copy_from_slice(b"{\n\n");
        let error = Plan::from_json(&bytes, "big.json").unwrap_err().to_string();
        assert!(
            error.starts_with("big.json:3: expected a plan of at most 536870912 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_pause_to_the_end_of_time_is_refused_at_its_duration() {
        let mut plan = Plan::generate(&Settings::default());
        plan.faults.insert(
            0,
            Fault::Pause {
                at_ns: 0,
                target: "w0".into(),
                duration_ns: u64::MAX,
            },
        );
        let text = String::from_utf8(plan.to_json()).unwrap();
        let line = 1 + text
            .lines()
            .position(|l| l.contains("18446744073709551615"))
            .unwrap();
        let error = Plan::from_json(text.as_bytes(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "p.json:{line}: expected duration_ns of at most 86400s (86400000000000), found \
                 18446744073709551615 (a pause fault)"
            )),
            "{error}"
        );
    }

    #[test]
    fn a_format_2_plan_is_refused_with_why_its_history_would_differ() {
        let mut plan = Plan::generate(&Settings::default());
        plan.format = 2;
        let text = String::from_utf8(plan.to_json()).unwrap();
        let line = 1 + text.lines().position(|l| l.contains("\"format\"")).unwrap();
        let error = Plan::from_json(text.as_bytes(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "p.json:{line}: expected plan format 3 to 5, found 2 (format 2 ran on tokio's \
                 millisecond timer wheel"
            )),
            "{error}"
        );
        assert!(error.contains("fencer run --seed N"), "{error}");
    }

    #[test]
    fn plans_of_formats_3_and_4_run_and_say_why_their_histories_differ_and_a_newer_one_is_refused()
    {
        let mut plan = Plan::generate(&Settings::default());
        assert_eq!(plan.replays_differently(), None);
        plan.format = 3;
        let reparsed = Plan::from_json(&plan.to_json(), "p.json").expect("format 3 runs");
        let why = reparsed
            .replays_differently()
            .expect("recorded by format 3");
        assert!(why.contains("courier task"), "{why}");
        plan.format = 4;
        let why = Plan::from_json(&plan.to_json(), "p.json")
            .expect("format 4 runs")
            .replays_differently()
            .expect("recorded by format 4");
        assert!(why.contains("ask their lock client library"), "{why}");
        plan.format = PLAN_FORMAT + 1;
        let error = Plan::from_json(&plan.to_json(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("written by another fencer version"),
            "{error}"
        );
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
        let text = String::from_utf8(plan.to_json()).unwrap();
        let fault_line = 1 + text.lines().position(|l| l.contains("\"w99\"")).unwrap();
        // The fault object opens a line or two above its target member.
        let reported: usize = error.split(':').nth(1).unwrap().parse().unwrap();
        assert!(
            (fault_line - 3..fault_line).contains(&reported),
            "{error} (target on line {fault_line})"
        );

        let mut plan = Plan::generate(&Settings::default());
        plan.settings.renew_every_ns = plan.settings.ttl_ns;
        let text = String::from_utf8(plan.to_json()).unwrap();
        let renew_line = 1 + text
            .lines()
            .position(|l| l.contains("renew_every_ns"))
            .unwrap();
        let error = Plan::from_json(text.as_bytes(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!("p.json:{renew_line}: renew-every")),
            "{error}"
        );

        let mut plan = Plan::generate(&Settings::default());
        plan.faults.insert(
            0,
            Fault::Partition {
                at_ns: 0,
                target: "w0".into(),
                duration_ns: 1,
            },
        );
        let error = Plan::from_json(&plan.to_json(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("expected fault target to be a server (lock, store), found `w0`"),
            "{error}"
        );

        let mut plan = Plan::generate(&Settings::default());
        plan.workers.pop();
        let error = Plan::from_json(&plan.to_json(), "p.json")
            .unwrap_err()
            .to_string();
        assert!(error.contains("expected 5 worker scripts"), "{error}");
    }
}
