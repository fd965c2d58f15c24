//! Every knob of a run, validated once, with the reasons a bad value is refused.

use std::collections::BTreeSet;

pub use fencer_backends::registry::{LockBackend, StoreBackend};

pub use crate::backends::BackendName;
pub use crate::clients::ClientName;
use fencer_harness::LatencyModel;
use fencer_harness::Workload;
use fencer_harness::words::count;
use fencer_nemesis::schedule::MAX_FAULTS;
use fencer_nemesis::{ClusterShape, FaultKind};
use fencer_servers::ClusterKind;
use fencer_workloads::{CycleShape, RenewFailurePolicy, WaitMode};
use serde::{Deserialize, Serialize};

/// A setting that cannot run, with the field it is about (so a plan file's error points at the
/// line to edit) and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SettingsError {
    /// The `Settings` field at fault (`ttl_ns`, `workers`, ...).
    pub field: &'static str,
    /// What was expected and what was found.
    pub message: String,
}

impl SettingsError {
    fn at(field: &'static str, message: impl Into<String>) -> SettingsError {
        SettingsError {
            field,
            message: message.into(),
        }
    }
}

/// Why a duration was refused: what was given and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

/// Every setting of a run. Serialised into `plan.json` and `run.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The seed every random choice derives from.
    pub seed: u64,
    /// What workers do under the lock.
    pub workload: Workload,
    /// Number of workers.
    pub workers: usize,
    /// Cycles per worker.
    pub ops_per_worker: usize,
    /// Lease TTL.
    pub ttl_ns: u64,
    /// Renewal period.
    pub renew_every_ns: u64,
    /// Enabled fault families.
    pub nemesis: BTreeSet<FaultKind>,
    /// Mean gap between faults.
    pub mean_fault_gap_ns: u64,
    /// Lock service, by name (a server's URL with its password hidden).
    pub lock: BackendName,
    /// Protected store, by name (a server's URL with its password hidden).
    pub store: BackendName,
    /// What workers do when a renewal fails or is unanswered.
    pub on_renew_failure: RenewFailurePolicy,
    /// One-way network latency in the simulation.
    pub latency: LatencyModel,
    /// How long a client waits for a reply before recording `info`.
    pub call_timeout_ns: u64,
    /// The lock client library the workers take their leases through: `reference`, a client
    /// mutant, `exec:COMMAND`, or a registered name. Older plans call it `worker`; absent:
    /// reference.
    #[serde(default, alias = "worker")]
    pub client: ClientName,
    /// How each cycle's waits are drawn: as in the simulation, or mostly short for the real
    /// tier (a critical section there sleeps in real time). Absent: as in the simulation.
    #[serde(default, skip_serializing_if = "CycleShape::is_full")]
    pub cycle_shape: CycleShape,
    /// How workers wait between acquire attempts on a busy lock: poll at a fixed interval or
    /// back off. Absent in older plans, and left out when polling so a polling plan reads and
    /// writes as it always did: poll.
    #[serde(default, skip_serializing_if = "WaitMode::is_poll")]
    pub wait: WaitMode,
}

pub(crate) const SECOND_NS: u64 = 1_000_000_000;
const MS_NS: u64 = 1_000_000;

/// The simulation's timers tick in milliseconds; a TTL below this is not meaningful there.
pub const MIN_TTL_NS: u64 = 10 * MS_NS;

/// The longest TTL, renewal period, mean fault gap, call timeout or network latency a run
/// takes: an hour. Leases of real lock services last seconds to minutes, and every fault and
/// wait of a generated plan is drawn as a few TTLs at most; without a ceiling a TTL of a
/// million hours makes each cycle renew its lease for ever.
pub const MAX_SETTING_NS: u64 = 3_600 * SECOND_NS;

/// The most renewals a lease may take per TTL: a renewal period below a thousandth of the TTL
/// renews each lease thousands of times over and fills the history with nothing else.
pub const MAX_RENEWALS_PER_TTL: u64 = 1_000;

/// The most cycles one run holds, every worker's together (`workers` × `ops`): each cycle
/// records a handful of events at least, and the run is checked in memory.
pub const MAX_CYCLES: usize = 1_000_000;

impl Default for Settings {
    /// The embedded default: 5 workers, 100 cycles each, 10 s leases renewed every 3 s, all
    /// faults on, reference lease service, fenced SQLite store.
    fn default() -> Self {
        Settings {
            seed: 0,
            workload: Workload::FencedRegister,
            workers: 5,
            ops_per_worker: 100,
            ttl_ns: 10 * SECOND_NS,
            renew_every_ns: 3 * SECOND_NS,
            nemesis: FaultKind::DEFAULT.into_iter().collect(),
            mean_fault_gap_ns: 10 * SECOND_NS,
            lock: LockBackend::Sim.into(),
            store: StoreBackend::Sqlite.into(),
            on_renew_failure: RenewFailurePolicy::Stop,
            latency: LatencyModel {
                min_ns: MS_NS,
                max_ns: 5 * MS_NS,
            },
            call_timeout_ns: SECOND_NS,
            client: ClientName::default(),
            cycle_shape: CycleShape::Full,
            wait: WaitMode::Poll,
        }
    }
}

impl Settings {
    /// Roles (`lock`, `store`) whose server fencer starts itself (a `private:` URL, or an
    /// `exec:` child): the only servers it may freeze, kill, put behind a faulty proxy or skew.
    pub fn private_servers(&self) -> Vec<String> {
        [("lock", &self.lock), ("store", &self.store)]
            .into_iter()
            .filter(|(_, name)| name.is_fencers_own_server())
            .map(|(role, _)| role.to_string())
            .collect()
    }

    /// The clusters fencer starts itself for the roles (`--lock private:redlock`), as the plan
    /// generator and checker see them: members, leader, whether they take net partitions.
    /// A cluster name whose query is unreadable counts as none here; starting it says why.
    pub fn clusters(&self) -> Vec<ClusterShape> {
        [("lock", &self.lock), ("store", &self.store)]
            .into_iter()
            .filter_map(|(role, name)| {
                let (kind, query) = ClusterKind::parse(name.as_str())?;
                let takes = kind.takes();
                Some(ClusterShape {
                    role: role.to_string(),
                    members: kind.members(&query).ok()?,
                    leader: takes.leader,
                    partitions: takes.partitions,
                })
            })
            .collect()
    }

    /// These settings for the real tier: no simulated latency (the wire is real) and mostly
    /// short cycles ([`CycleShape::RealTime`]: a critical section sleeps in real time).
    pub fn in_real_time(&self) -> Settings {
        Settings {
            latency: LatencyModel::NONE,
            cycle_shape: CycleShape::RealTime,
            ..self.clone()
        }
    }

    /// These settings at `seed`, with the seed's own fault mix in swarm mode.
    pub fn for_seed(&self, seed: u64, swarm: bool) -> Settings {
        let settings = Settings {
            seed,
            ..self.clone()
        };
        if swarm {
            crate::swarm::swarm_settings(&settings)
        } else {
            settings
        }
    }

    /// One line describing the settings, for summaries.
    pub fn describe(&self) -> String {
        self.describe_with_shape(&format!(
            "{} x {}",
            count(self.workers, "worker", "workers"),
            count(self.ops_per_worker, "cycle", "cycles")
        ))
    }

    /// As [`Settings::describe`], with `shape` where the workers and cycles go: a plan's
    /// scripts may hold other than what the settings draw ([`crate::plan::Plan::describe`]).
    pub(crate) fn describe_with_shape(&self, shape: &str) -> String {
        format!(
            "{} seed {}: {shape}, ttl {}, renew every {}, nemesis {}, lock {}, store {}, \
             client {}, on renew failure {}, wait {}",
            self.workload,
            self.seed,
            format_duration(self.ttl_ns),
            format_duration(self.renew_every_ns),
            self.nemesis_list(),
            self.lock,
            self.store,
            self.client,
            self.on_renew_failure.name(),
            self.wait,
        )
    }

    /// The fault families as `--nemesis` takes them (`none` for none).
    pub fn nemesis_list(&self) -> String {
        if self.nemesis.is_empty() {
            return "none".to_string();
        }
        let names: Vec<&str> = self.nemesis.iter().map(|kind| kind.name()).collect();
        names.join(",")
    }

    /// The `run` command line (after the program's name) that runs the plan saved at
    /// `plan_path` again against these settings' lock service and store: how a real-time run
    /// is run again, since it is not replayed from its history.
    pub fn run_plan_command(&self, plan_path: &std::path::Path) -> String {
        format!(
            "run --plan {} --lock {} --store {}",
            shell_word(&plan_path.display().to_string()),
            shell_word(self.lock.as_str()),
            shell_word(self.store.as_str())
        )
    }

    /// The `run` command line (after the program's name) that reproduces seed `seed` of a
    /// gate over these settings: every setting spelled out, so it does not depend on defaults.
    pub fn run_command(&self, seed: u64, swarm: bool) -> String {
        let mut command = format!(
            "run --seed {seed} --workload {} --client {} --workers {} --ops {} --ttl {} \
             --renew-every {} --nemesis {} --fault-gap {} --store {} --lock {} \
             --on-renew-failure {} --call-timeout {} --wait {}",
            self.workload,
            shell_word(self.client.as_str()),
            self.workers,
            self.ops_per_worker,
            format_duration(self.ttl_ns),
            format_duration(self.renew_every_ns),
            self.nemesis_list(),
            format_duration(self.mean_fault_gap_ns),
            shell_word(self.store.as_str()),
            shell_word(self.lock.as_str()),
            self.on_renew_failure.name(),
            format_duration(self.call_timeout_ns),
            self.wait,
        );
        if swarm {
            command.push_str(" --swarm");
        }
        command
    }

    /// When faults can come: from the start until every worker's cycles could have run back to
    /// back at up to one TTL each (with one lock, cycles mostly serialise), and never past the
    /// simulated time a run may take.
    pub fn fault_horizon_ns(&self) -> u64 {
        let cycles = (self.workers as u64).saturating_mul(self.ops_per_worker as u64);
        self.ttl_ns
            .saturating_mul(cycles)
            .min(crate::bounds::MAX_RUN_SIMULATED_NS)
    }

    /// About how many faults a schedule over [`Settings::fault_horizon_ns`] holds: one per mean
    /// fault gap.
    pub fn expected_faults(&self) -> u64 {
        if self.nemesis.is_empty() || self.mean_fault_gap_ns == 0 {
            return 0;
        }
        self.fault_horizon_ns() / self.mean_fault_gap_ns
    }

    /// Checks the settings make sense; returns warnings worth printing, or why they are refused.
    pub fn validate(&self) -> Result<Vec<String>, SettingsError> {
        let mut warnings = Vec::new();
        if let Some(kind) = self.nemesis.iter().find(|kind| kind.needs_private_server())
            && self.private_servers().is_empty()
            && self.client.exec_command().is_none()
        {
            return Err(SettingsError::at(
                "nemesis",
                format!(
                    "nemesis `{}` needs a server fencer starts itself (fencer run --lock \
                 private:redis --store private:postgres) or an exec client's proxy (--client \
                 exec:COMMAND): the simulation has no server process, and a server behind a \
                 URL is not fencer's to freeze or cut off",
                    kind.name()
                ),
            ));
        }
        if !(1..=1_000).contains(&self.workers) {
            return Err(SettingsError::at(
                "workers",
                format!("workers must be 1 to 1000, got {}", self.workers),
            ));
        }
        if !(1..=1_000_000).contains(&self.ops_per_worker) {
            return Err(SettingsError::at(
                "ops_per_worker",
                format!("ops must be 1 to 1000000, got {}", self.ops_per_worker),
            ));
        }
        if self.workers * self.ops_per_worker > MAX_CYCLES {
            return Err(SettingsError::at(
                "ops_per_worker",
                format!(
                    "workers x ops must be at most {MAX_CYCLES} cycles in one run, got {} x {}",
                    self.workers, self.ops_per_worker
                ),
            ));
        }
        if self.ttl_ns < MIN_TTL_NS {
            return Err(SettingsError::at(
                "ttl_ns",
                format!(
                    "ttl must be at least 10ms (got {}): simulated timers tick in milliseconds",
                    format_duration(self.ttl_ns)
                ),
            ));
        }
        if self.renew_every_ns == 0 {
            return Err(SettingsError::at(
                "renew_every_ns",
                "renew-every must be positive".to_string(),
            ));
        }
        for (field, name, value_ns) in [
            ("ttl_ns", "ttl", self.ttl_ns),
            ("renew_every_ns", "renew-every", self.renew_every_ns),
            ("mean_fault_gap_ns", "fault-gap", self.mean_fault_gap_ns),
            ("call_timeout_ns", "call timeout", self.call_timeout_ns),
            ("latency", "latency max", self.latency.max_ns),
        ] {
            if value_ns > MAX_SETTING_NS {
                return Err(SettingsError::at(
                    field,
                    format!(
                        "{name} must be at most {} (got {})",
                        format_duration(MAX_SETTING_NS),
                        format_duration(value_ns)
                    ),
                ));
            }
        }
        if self.renew_every_ns >= self.ttl_ns {
            return Err(SettingsError::at(
                "renew_every_ns",
                format!(
                    "renew-every ({}) must be shorter than ttl ({}): the lease would expire before \
                 its first renewal",
                    format_duration(self.renew_every_ns),
                    format_duration(self.ttl_ns)
                ),
            ));
        }
        if self.renew_every_ns.saturating_mul(MAX_RENEWALS_PER_TTL) < self.ttl_ns {
            return Err(SettingsError::at(
                "renew_every_ns",
                format!(
                    "renew-every ({}) must be at least a thousandth of the ttl ({}): each lease \
                     would be renewed {} times",
                    format_duration(self.renew_every_ns),
                    format_duration(self.ttl_ns),
                    self.ttl_ns / self.renew_every_ns
                ),
            ));
        }
        if self.renew_every_ns * 2 > self.ttl_ns {
            warnings.push(format!(
                "renew-every ({}) is more than half the ttl ({}): one late or lost renewal \
                 loses the lease",
                format_duration(self.renew_every_ns),
                format_duration(self.ttl_ns)
            ));
        }
        if self.latency.min_ns > self.latency.max_ns {
            return Err(SettingsError::at(
                "latency",
                "latency min must not exceed max".to_string(),
            ));
        }
        let expected_faults = self.expected_faults();
        if expected_faults > MAX_FAULTS as u64 {
            return Err(SettingsError::at(
                "mean_fault_gap_ns",
                format!(
                    "fault-gap {} would schedule about {expected_faults} faults over the run's \
                     {} of cycles, more than the {MAX_FAULTS} a plan may hold: a longer \
                     fault-gap, or fewer cycles",
                    format_duration(self.mean_fault_gap_ns),
                    format_duration(self.fault_horizon_ns())
                ),
            ));
        }
        if self.call_timeout_ns == 0 {
            return Err(SettingsError::at(
                "call_timeout_ns",
                "call timeout must be positive".to_string(),
            ));
        }
        if self.call_timeout_ns >= self.ttl_ns {
            warnings.push(format!(
                "call timeout ({}) is not shorter than ttl ({}): a worker learns of a lost reply \
                 only after its lease is gone",
                format_duration(self.call_timeout_ns),
                format_duration(self.ttl_ns)
            ));
        }
        Ok(warnings)
    }
}

/// Parses `10s`, `500ms`, `2m`, `1.5s`, `250us`, `100ns`; refuses zero, negatives and junk.
pub fn parse_duration(text: &str) -> Result<u64, DurationError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .ok_or_else(|| DurationError(format!("`{text}` has no unit: write e.g. 10s, 500ms, 2m")))?;
    let (number, unit) = trimmed.split_at(split);
    let scale: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => {
            return Err(DurationError(format!(
                "`{text}`: unknown unit `{unit}` (expected ns, us, ms, s, m or h)"
            )));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError(format!("`{text}`: `{number}` is not a number")))?;
    if !value.is_finite() || value <= 0.0 {
        return Err(DurationError(format!(
            "`{text}`: a duration must be positive"
        )));
    }
    let nanos = value * scale;
    if nanos > u64::MAX as f64 / 2.0 {
        return Err(DurationError(format!("`{text}` is too long")));
    }
    Ok(nanos.round() as u64)
}

/// `text` as one shell word: quoted when it holds spaces or quotes (an `exec:` command line).
pub fn shell_word(text: &str) -> String {
    if text.contains([' ', '\t', '\'', '"', '\\']) {
        format!("'{}'", text.replace('\'', r"'\''"))
    } else {
        text.to_string()
    }
}

/// `10s`, `1.5s`, `250ms`: the shortest exact-ish human form, for messages and summaries.
pub fn format_duration(ns: u64) -> String {
    if ns >= SECOND_NS && ns.is_multiple_of(SECOND_NS / 1_000) {
        let seconds = ns as f64 / 1e9;
        format!("{}s", trim_float(seconds))
    } else if ns >= MS_NS && ns.is_multiple_of(1_000) {
        format!("{}ms", trim_float(ns as f64 / 1e6))
    } else {
        format!("{ns}ns")
    }
}

fn trim_float(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("10s"), Ok(10 * SECOND_NS));
        assert_eq!(parse_duration("1.5s"), Ok(1_500 * MS_NS));
        assert_eq!(parse_duration("250ms"), Ok(250 * MS_NS));
        assert_eq!(parse_duration("2m"), Ok(120 * SECOND_NS));
        for bad in ["0s", "-1s", "10", "ten s", "5 parsecs", ""] {
            assert!(parse_duration(bad).is_err(), "{bad} must be refused");
        }
        assert!(
            parse_duration("-1s")
                .unwrap_err()
                .to_string()
                .contains("must be positive")
        );
    }

    #[test]
    fn durations_format_back() {
        assert_eq!(format_duration(10 * SECOND_NS), "10s");
        assert_eq!(format_duration(1_500 * MS_NS), "1.5s");
        assert_eq!(format_duration(250 * MS_NS), "250ms");
    }

    #[test]
    fn renew_period_must_be_shorter_than_ttl() {
        let settings = Settings {
            renew_every_ns: 10 * SECOND_NS,
            ..Settings::default()
        };
        let error = settings.validate().unwrap_err();
        assert_eq!(error.field, "renew_every_ns");
        assert!(
            error.message.contains("must be shorter than ttl"),
            "{error}"
        );
        let settings = Settings {
            renew_every_ns: 6 * SECOND_NS,
            ..Settings::default()
        };
        assert_eq!(settings.validate().unwrap().len(), 1);
        assert_eq!(Settings::default().validate(), Ok(vec![]));
    }

    #[test]
    fn every_duration_setting_has_a_ceiling_of_an_hour() {
        let ttl = parse_duration("1000000h").unwrap();
        let refused = |settings: Settings| settings.validate().unwrap_err();
        let error = refused(Settings {
            ttl_ns: ttl,
            ..Settings::default()
        });
        assert_eq!(error.field, "ttl_ns");
        assert_eq!(error.message, "ttl must be at most 3600s (got 3600000000s)");
        let longest = Settings {
            ttl_ns: MAX_SETTING_NS,
            renew_every_ns: MAX_SETTING_NS / 3,
            mean_fault_gap_ns: MAX_SETTING_NS,
            call_timeout_ns: MAX_SETTING_NS / 2,
            ..Settings::default()
        };
        assert!(longest.validate().is_ok(), "the ceiling itself is allowed");
        let past = MAX_SETTING_NS + 1;
        for (field, settings) in [
            (
                "mean_fault_gap_ns",
                Settings {
                    mean_fault_gap_ns: past,
                    ..longest.clone()
                },
            ),
            (
                "call_timeout_ns",
                Settings {
                    call_timeout_ns: past,
                    ..longest.clone()
                },
            ),
            (
                "latency",
                Settings {
                    latency: LatencyModel {
                        min_ns: 0,
                        max_ns: past,
                    },
                    ..longest.clone()
                },
            ),
        ] {
            let error = refused(settings);
            assert_eq!(error.field, field);
            assert!(error.message.contains("must be at most 3600s"), "{error}");
        }
    }

    #[test]
    fn a_lease_is_renewed_at_most_a_thousand_times_per_ttl() {
        let settings = |renew_every_ns| Settings {
            ttl_ns: MAX_SETTING_NS,
            renew_every_ns,
            ..Settings::default()
        };
        assert!(settings(MAX_SETTING_NS / 1_000).validate().is_ok());
        let error = settings(MS_NS).validate().unwrap_err();
        assert_eq!(error.field, "renew_every_ns");
        assert!(
            error.message.contains("would be renewed 3600000 times"),
            "{error}"
        );
    }

    #[test]
    fn a_run_holds_at_most_a_million_cycles_and_a_bounded_fault_schedule() {
        let error = Settings {
            workers: 1_000,
            ops_per_worker: 1_001,
            ..Settings::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(error.field, "ops_per_worker");
        assert!(error.message.contains("at most 1000000 cycles"), "{error}");
        let settings = Settings {
            mean_fault_gap_ns: MS_NS,
            ..Settings::default()
        };
        assert_eq!(settings.expected_faults(), 5_000_000);
        let error = settings.validate().unwrap_err();
        assert_eq!(error.field, "mean_fault_gap_ns");
        assert!(error.message.contains("about 5000000 faults"), "{error}");
        let none = Settings {
            nemesis: BTreeSet::new(),
            ..settings
        };
        assert_eq!(none.expected_faults(), 0, "no families, no faults");
        assert!(none.validate().is_ok());
    }

    #[test]
    fn server_faults_need_a_server_fencer_started() {
        let settings = Settings {
            nemesis: [FaultKind::Cut].into_iter().collect(),
            lock: "redis://h:1".into(),
            ..Settings::default()
        };
        let error = settings.validate().unwrap_err();
        assert_eq!(error.field, "nemesis");
        assert!(
            error
                .message
                .contains("`cut` needs a server fencer starts itself"),
            "{error}"
        );
        let settings = Settings {
            store: "private:postgres".into(),
            ..settings
        };
        assert_eq!(settings.private_servers(), ["store"]);
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn commands_with_spaces_are_quoted_for_the_shell() {
        assert_eq!(shell_word("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(shell_word("exec:python3 x.py"), "'exec:python3 x.py'");
        assert_eq!(shell_word("exec:sh -c 'a'"), r"'exec:sh -c '\''a'\'''");
    }

    #[test]
    fn a_seeds_run_command_spells_out_every_setting() {
        let settings = Settings {
            lock: "exec:python3 lock.py".into(),
            ..Settings::default()
        };
        assert_eq!(
            settings.run_command(7, true),
            "run --seed 7 --workload fenced-register --client reference --workers 5 --ops 100 \
             --ttl 10s --renew-every 3s --nemesis pause,skew,drop-renew,delay-write,restart,\
             delay-acquire,delay-renew,delay-release,lease-edge --fault-gap 10s --store sqlite --lock 'exec:python3 lock.py' --on-renew-failure \
             stop --call-timeout 1s --wait poll --swarm"
        );
    }

    #[test]
    fn settings_saved_without_a_wait_mode_read_as_polling_and_polling_is_left_out() {
        let polling = serde_json::to_value(Settings::default()).unwrap();
        assert!(polling.get("wait").is_none(), "{polling}");
        let back: Settings = serde_json::from_value(polling).unwrap();
        assert_eq!(back.wait, WaitMode::Poll);
        let backing_off = Settings {
            wait: WaitMode::Backoff,
            ..Settings::default()
        };
        let json = serde_json::to_value(&backing_off).unwrap();
        assert_eq!(json["wait"], "backoff");
        assert_eq!(
            serde_json::from_value::<Settings>(json).unwrap(),
            backing_off
        );
        assert!(backing_off.describe().ends_with(", wait backoff"));
        assert!(
            backing_off
                .run_command(3, false)
                .ends_with(" --wait backoff")
        );
    }

    #[test]
    fn backends_are_saved_by_name() {
        let json = serde_json::to_value(Settings::default()).unwrap();
        assert_eq!(json["lock"], "sim");
        assert_eq!(json["store"], "sqlite");
        let back: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(back, Settings::default());
    }

    #[test]
    fn exec_children_take_server_faults_like_private_servers() {
        let settings = Settings {
            nemesis: [FaultKind::ServerPause].into_iter().collect(),
            lock: "exec:python3 x.py".into(),
            store: "redis://127.0.0.1:6379".into(),
            ..Settings::default()
        };
        assert_eq!(settings.private_servers(), ["lock"]);
        assert!(settings.validate().is_ok());
    }
}
