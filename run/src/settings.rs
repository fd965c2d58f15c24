//! Every knob of a run, validated once, with the reasons a bad value is refused.

use std::collections::BTreeSet;

pub use fencer_backends::registry::{LockBackend, StoreBackend};
use fencer_harness::LatencyModel;
use fencer_harness::Workload;
use fencer_nemesis::FaultKind;
use fencer_servers::PRIVATE_SCHEME;
use fencer_workloads::{CycleShape, RenewFailurePolicy, WorkerVariant};
use serde::{Deserialize, Serialize};

/// Parses a kebab-case name through the type's serde form, listing the valid names on error.
pub fn parse_name<T: serde::de::DeserializeOwned + Serialize>(
    what: &str,
    text: &str,
    all: &[T],
) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(|_| {
        let names: Vec<String> = all.iter().map(|value| name_of(value)).collect();
        format!(
            "unknown {what} `{text}`: expected one of {}",
            names.join(", ")
        )
    })
}

/// The kebab-case name of a value, from its serde form.
pub fn name_of<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

/// A backend as named on the command line: a simulated one by name, or a real server by URL
/// (anything with `://`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendChoice<T> {
    /// A simulated backend.
    Sim(T),
    /// A real server, e.g. `redis://127.0.0.1:6379` (may carry a password: never print it raw).
    Url(String),
}

impl<T> BackendChoice<T> {
    /// The server URL, for a real server.
    pub fn url(&self) -> Option<&str> {
        match self {
            BackendChoice::Sim(_) => None,
            BackendChoice::Url(url) => Some(url),
        }
    }
}

/// Parses a `--lock`/`--store` value: a URL, or one of `all`'s names.
pub fn parse_choice<T: serde::de::DeserializeOwned + Serialize>(
    what: &str,
    text: &str,
    all: &[T],
) -> Result<BackendChoice<T>, String> {
    if text.contains("://") || text.starts_with(PRIVATE_SCHEME) {
        Ok(BackendChoice::Url(text.to_string()))
    } else {
        parse_name(what, text, all)
            .map(BackendChoice::Sim)
            .map_err(|error| {
                format!(
                    "{error}, or a server URL (redis://…, postgres://…, etcd://…, zk://…, {})",
                    fencer_servers::PrivateBackend::URLS
                )
            })
    }
}

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
    /// Lock service.
    pub lock: LockBackend,
    /// Protected store.
    pub store: StoreBackend,
    /// What workers do when a renewal fails or is unanswered.
    pub on_renew_failure: RenewFailurePolicy,
    /// One-way network latency in the simulation.
    pub latency: LatencyModel,
    /// How long a client waits for a reply before recording `info`.
    pub call_timeout_ns: u64,
    /// The workers' code: `reference` or a worker mutant. Absent in older plans: reference.
    #[serde(default)]
    pub worker: WorkerVariant,
    /// How cycle durations are drawn: `full` (the simulation's; left out when saved) or
    /// `real-time` (mostly short cycles, so a real-time seed takes seconds).
    #[serde(default, skip_serializing_if = "CycleShape::is_full")]
    pub cycle_shape: CycleShape,
    /// Real tier: the lock server's URL with its password hidden (the real URL is never
    /// saved); `lock` is then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_url: Option<String>,
    /// Real tier: the store server's URL with its password hidden; `store` is then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_url: Option<String>,
}

const SECOND_NS: u64 = 1_000_000_000;
const MS_NS: u64 = 1_000_000;

/// The simulation's timers tick in milliseconds; a TTL below this is not meaningful there.
pub const MIN_TTL_NS: u64 = 10 * MS_NS;

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
            lock: LockBackend::Sim,
            store: StoreBackend::Sqlite,
            on_renew_failure: RenewFailurePolicy::Stop,
            latency: LatencyModel {
                min_ns: MS_NS,
                max_ns: 5 * MS_NS,
            },
            call_timeout_ns: SECOND_NS,
            worker: WorkerVariant::Reference,
            cycle_shape: CycleShape::Full,
            lock_url: None,
            store_url: None,
        }
    }
}

impl Settings {
    /// Roles (`lock`, `store`) whose server fencer starts itself (a `private:` URL): the only
    /// servers it may freeze, kill, put behind a faulty proxy or skew.
    pub fn private_servers(&self) -> Vec<String> {
        ["lock", "store"]
            .into_iter()
            .filter(|role| {
                self.server_url(role)
                    .is_some_and(|url| url.starts_with(PRIVATE_SCHEME))
            })
            .map(String::from)
            .collect()
    }

    /// The URL given for a role's server (`lock`, `store`), if any.
    pub fn server_url(&self, role: &str) -> Option<&str> {
        match role {
            "lock" => self.lock_url.as_deref(),
            "store" => self.store_url.as_deref(),
            _ => None,
        }
    }

    /// Checks the settings make sense; returns warnings worth printing, or why they are refused.
    pub fn validate(&self) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        if let Some(kind) = self.nemesis.iter().find(|kind| kind.needs_private_server())
            && self.private_servers().is_empty()
        {
            return Err(format!(
                "nemesis `{}` needs a server fencer starts itself: fencer run --lock \
                 private:redis --store private:postgres (the simulation has no server process, \
                 and a server behind a URL is not fencer's to freeze or cut off)",
                kind.name()
            ));
        }
        if !(1..=1_000).contains(&self.workers) {
            return Err(format!("workers must be 1 to 1000, got {}", self.workers));
        }
        if !(1..=1_000_000).contains(&self.ops_per_worker) {
            return Err(format!(
                "ops must be 1 to 1000000, got {}",
                self.ops_per_worker
            ));
        }
        if self.ttl_ns < MIN_TTL_NS {
            return Err(format!(
                "ttl must be at least 10ms (got {}): simulated timers tick in milliseconds",
                format_duration(self.ttl_ns)
            ));
        }
        if self.renew_every_ns == 0 {
            return Err("renew-every must be positive".into());
        }
        if self.renew_every_ns >= self.ttl_ns {
            return Err(format!(
                "renew-every ({}) must be shorter than ttl ({}): the lease would expire before \
                 its first renewal",
                format_duration(self.renew_every_ns),
                format_duration(self.ttl_ns)
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
            return Err("latency min must not exceed max".into());
        }
        if self.call_timeout_ns == 0 {
            return Err("call timeout must be positive".into());
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
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .ok_or_else(|| format!("`{text}` has no unit: write e.g. 10s, 500ms, 2m"))?;
    let (number, unit) = trimmed.split_at(split);
    let scale: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}` (expected ns, us, ms, s, m or h)"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: `{number}` is not a number"))?;
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("`{text}`: a duration must be positive"));
    }
    let nanos = value * scale;
    if nanos > u64::MAX as f64 / 2.0 {
        return Err(format!("`{text}` is too long"));
    }
    Ok(nanos.round() as u64)
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
        assert!(error.contains("must be shorter than ttl"), "{error}");
        let settings = Settings {
            renew_every_ns: 6 * SECOND_NS,
            ..Settings::default()
        };
        assert_eq!(settings.validate().unwrap().len(), 1);
        assert_eq!(Settings::default().validate(), Ok(vec![]));
    }

    #[test]
    fn server_faults_need_a_server_fencer_started() {
        let settings = Settings {
            nemesis: [FaultKind::Cut].into_iter().collect(),
            lock_url: Some("redis://h:1".into()),
            ..Settings::default()
        };
        let error = settings.validate().unwrap_err();
        assert!(
            error.contains("`cut` needs a server fencer starts itself"),
            "{error}"
        );
        let settings = Settings {
            store_url: Some("private:postgres".into()),
            ..settings
        };
        assert_eq!(settings.private_servers(), ["store"]);
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn server_urls_are_optional_in_saved_settings() {
        let json = serde_json::to_value(Settings::default()).unwrap();
        assert!(json.get("lock_url").is_none(), "absent unless set: {json}");
        let back: Settings = serde_json::from_value(json).unwrap();
        assert_eq!(back, Settings::default());
        assert_eq!(
            parse_choice("lock", "redis://h:1", &LockBackend::ALL),
            Ok(BackendChoice::Url("redis://h:1".into()))
        );
        assert_eq!(
            parse_choice("lock", "sim", &LockBackend::ALL),
            Ok(BackendChoice::Sim(LockBackend::Sim))
        );
        assert!(
            parse_choice("lock", "etcd", &LockBackend::ALL)
                .unwrap_err()
                .contains(
                    "or a server URL (redis://…, postgres://…, etcd://…, zk://…, private:redis"
                )
        );
        assert_eq!(
            parse_choice("lock", "private:redis", &LockBackend::ALL),
            Ok(BackendChoice::Url("private:redis".into()))
        );
    }

    #[test]
    fn backend_names_parse_and_list_alternatives() {
        assert_eq!(
            parse_name("store", "sqlite-unfenced", &StoreBackend::ALL),
            Ok(StoreBackend::SqliteUnfenced)
        );
        let error = parse_name("store", "mysql", &StoreBackend::ALL).unwrap_err();
        assert_eq!(
            error,
            "unknown store `mysql`: expected one of sqlite, sqlite-unfenced, sqlite-check-then-write"
        );
        assert_eq!(name_of(&LockBackend::SimClockTokens), "sim-clock-tokens");
    }
}
