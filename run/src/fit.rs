//! Fitting a plan to the backends it runs against: the faults they cannot take are taken out
//! and named — family, target, how many and why — in the plan itself ([`Plan::left_out`]), so
//! a run never loses a fault silently and its record says what it did not test.
//!
//! What can take a fault: fencer's own workers and their clocks take every worker fault,
//! anywhere. A server fencer started itself (`private:` URL) takes its restarts, clock steps
//! and proxy faults. A server behind a plain URL, or a user's own backend, keeps its process
//! and clock to itself; of the server faults, it takes only a restart, and only when its lock
//! service offers one ([`fencer_harness::LockService::offers_restart`]).

use std::collections::BTreeMap;

use fencer_nemesis::{Fault, FaultKind};
use fencer_servers::PrivateBackend;
use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::settings::Settings;

/// What a run's backends can take besides the faults on fencer's own workers and servers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// The lock service offers a restart hook.
    pub lock_restarts: bool,
}

impl Reach {
    /// What `lock` can take: a restart if it offers one.
    pub fn of(lock: &dyn fencer_harness::LockService) -> Reach {
        Reach {
            lock_restarts: lock.offers_restart(),
        }
    }
}

/// Faults of one family, aimed at one target, that a plan left out for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeftOut {
    /// The fault family.
    pub family: FaultKind,
    /// What the faults were aimed at (`lock`, `store`).
    pub target: String,
    /// How many were left out.
    pub faults: usize,
    /// Why the run's backends cannot take them.
    pub why: String,
}

impl std::fmt::Display for LeftOut {
    /// `3 restart faults on lock: the lock service offers no restart hook (...)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = if self.faults == 1 { "" } else { "s" };
        write!(
            f,
            "{} {} fault{plural} on {}: {}",
            self.faults,
            self.family.name(),
            self.target,
            self.why
        )
    }
}

/// `plan` without the faults its backends cannot take (`reach`, and the servers its settings
/// name), each group of them recorded in [`Plan::left_out`].
pub fn fit(mut plan: Plan, reach: Reach) -> Plan {
    let mut groups: BTreeMap<(FaultKind, String, String), usize> = BTreeMap::new();
    let settings = plan.settings.clone();
    plan.faults
        .retain(|fault| match why_not(&settings, reach, fault) {
            None => true,
            Some(why) => {
                *groups
                    .entry((fault.kind(), fault.target().to_string(), why))
                    .or_default() += 1;
                false
            }
        });
    plan.left_out.extend(
        groups
            .into_iter()
            .map(|((family, target, why), faults)| LeftOut {
                family,
                target,
                faults,
                why,
            }),
    );
    plan
}

/// Refuses a plan (hand-written, or saved from another run) holding a fault its backends
/// cannot take, naming the fault and why.
pub fn check_takes(plan: &Plan, reach: Reach) -> Result<(), String> {
    for (index, fault) in plan.faults.iter().enumerate() {
        if let Some(why) = why_not(&plan.settings, reach, fault) {
            return Err(format!(
                "faults[{index}]: `{}` at {} ns aims at {}, which cannot take it: {why}",
                fault.kind().name(),
                fault.at_ns(),
                fault.target()
            ));
        }
    }
    Ok(())
}

/// Why a run with `settings` and `reach` cannot execute `fault`, in words that hold for every
/// fault of its family on its target (so they group); `None` if it can.
fn why_not(settings: &Settings, reach: Reach, fault: &Fault) -> Option<String> {
    if !fault.aims_at_server() {
        return None;
    }
    let target = fault.target();
    let url = settings.server_url(target);
    let private = url.and_then(PrivateBackend::parse);
    let Some(Ok((backend, _))) = private else {
        return not_fencers(target, url.is_some(), reach, fault);
    };
    match fault {
        Fault::ClockDrift { .. } => Some(
            "a real server's clock can be stepped (libfaketime, Redis expiry rewrite), not \
             made to drift"
                .into(),
        ),
        Fault::ClockJump { .. } if !backend.takes_clock_jumps() => Some(format!(
            "the clock of a private {backend:?} cannot be stepped (etcd ignores libfaketime; \
             ZooKeeper expires sessions by its monotonic clock)"
        )),
        _ => None,
    }
}

/// Why a server fencer did not start (behind a plain URL when `url`, else a user's own backend)
/// cannot take `fault`; `None` for a restart its lock service offers.
fn not_fencers(target: &str, url: bool, reach: Reach, fault: &Fault) -> Option<String> {
    let skewed_workers =
        "the workers' clocks are skewed, and adapters read them through fencer::caller_clock";
    let private = PrivateBackend::URLS;
    Some(match fault {
        Fault::Restart { .. } if target == "lock" && reach.lock_restarts => return None,
        Fault::Restart { .. } if target == "lock" && url => format!(
            "the lock server behind a plain URL is not fencer's own, and its adapter offers no \
             restart hook (a server fencer starts itself takes restarts: --lock {private})"
        ),
        Fault::Restart { .. } if target == "lock" => {
            "the lock service offers no restart hook (LockService::offers_restart)".into()
        }
        Fault::ClockJump { .. } | Fault::ClockDrift { .. } if url => format!(
            "the {target} server behind a plain URL is not fencer's own and keeps its own \
             clock (a server fencer starts itself takes clock steps: --{target} {private}); \
             {skewed_workers}"
        ),
        Fault::ClockJump { .. } | Fault::ClockDrift { .. } => format!(
            "the {target} service keeps its own clock, out of fencer's reach; {skewed_workers}"
        ),
        _ if url => format!(
            "the {target} server behind a plain URL is not fencer's own (a server fencer starts \
             itself takes it: --{target} {private})"
        ),
        _ => format!("the {target} service is not a server fencer started"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn plan(settings: Settings) -> Plan {
        Plan::generate(&Settings {
            nemesis: [FaultKind::Pause, FaultKind::Skew, FaultKind::Restart]
                .into_iter()
                .collect(),
            ..settings
        })
    }

    fn server_faults(plan: &Plan, kind: FaultKind) -> usize {
        plan.faults
            .iter()
            .filter(|fault| fault.kind() == kind && fault.aims_at_server())
            .count()
    }

    #[test]
    fn a_user_s_backend_loses_server_clock_and_restart_faults_and_they_are_named() {
        let generated = plan(Settings::default());
        let restarts = server_faults(&generated, FaultKind::Restart);
        let lock_skews = server_faults(&generated, FaultKind::Skew);
        assert!(restarts > 0 && lock_skews > 0);
        let fitted = fit(generated.clone(), Reach::default());
        assert!(fitted.faults.iter().all(|fault| !fault.aims_at_server()));
        let named: Vec<(FaultKind, &str, usize)> = fitted
            .left_out
            .iter()
            .map(|left| (left.family, left.target.as_str(), left.faults))
            .collect();
        assert_eq!(
            named,
            [
                (FaultKind::Skew, "lock", lock_skews),
                (FaultKind::Restart, "lock", restarts)
            ]
        );
        assert!(
            fitted.left_out[1]
                .to_string()
                .ends_with("the lock service offers no restart hook (LockService::offers_restart)"),
            "{}",
            fitted.left_out[1]
        );
        assert_eq!(
            fitted.faults.len() + lock_skews + restarts,
            generated.faults.len(),
            "nothing else is dropped"
        );
    }

    #[test]
    fn a_lock_service_that_offers_restart_keeps_its_restarts() {
        let generated = plan(Settings::default());
        let fitted = fit(
            generated.clone(),
            Reach {
                lock_restarts: true,
            },
        );
        assert_eq!(
            server_faults(&fitted, FaultKind::Restart),
            server_faults(&generated, FaultKind::Restart)
        );
        assert!(
            fitted
                .left_out
                .iter()
                .all(|left| left.family == FaultKind::Skew)
        );
        assert!(check_takes(&fitted, Reach::default()).is_err());
        assert_eq!(
            check_takes(
                &fitted,
                Reach {
                    lock_restarts: true
                }
            ),
            Ok(())
        );
    }

    #[test]
    fn a_private_server_takes_steps_but_not_drift_and_a_plain_url_is_told_how() {
        let private = fit(
            plan(Settings {
                lock_url: Some("private:redis".into()),
                ..Settings::default()
            }),
            Reach::default(),
        );
        assert_eq!(private.left_out.len(), 1, "{:?}", private.left_out);
        assert!(private.left_out[0].why.contains("not made to drift"));
        assert!(
            private
                .faults
                .iter()
                .any(|fault| matches!(fault, Fault::Restart { .. }))
        );
        let plain = fit(
            plan(Settings {
                lock_url: Some("redis://h:1".into()),
                ..Settings::default()
            }),
            Reach::default(),
        );
        assert!(
            plain.left_out.iter().all(|left| left
                .why
                .contains("a server fencer starts itself takes")
                && left.why.contains("--lock private:redis")),
            "{:?}",
            plain.left_out
        );
    }

    #[test]
    fn left_out_faults_survive_plan_json_and_a_plan_without_them_omits_the_field() {
        let fitted = fit(plan(Settings::default()), Reach::default());
        let json = fitted.to_json();
        assert_eq!(Plan::from_json(&json, "plan.json").unwrap(), fitted);
        let plain = plan(Settings::default());
        let text = String::from_utf8(plain.to_json()).unwrap();
        assert!(!text.contains("left_out"), "{text}");
    }
}
