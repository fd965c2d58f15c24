//! Which of a plan's faults its backends can take. A fault aimed at a role (`lock`, `store`)
//! reaches the backend only where fencer owns what the fault acts on: the simulated lease
//! service's clock and restart, a user's lock service that offers a restart hook
//! ([`fencer_harness::LockService::offers_restart`]), a server fencer started itself
//! (`private:`), an `exec:` child. Everything else is the backend's own — a server behind a
//! plain URL keeps its process and clock, a user's service its clock — so such faults are taken
//! out of the plan and named in it ([`Plan::left_out`]: family, target, how many and why), never
//! dropped silently; the run's record says what it did not test.

use std::collections::BTreeMap;

use fencer_backends::registry::{EXEC_SCHEME, exec_refusal};
use fencer_harness::{Op, WorkerFault};
use fencer_nemesis::{Effect, Fault, FaultKind, LEADER, target_member, target_role};
use fencer_servers::{ClusterKind, PrivateBackend};
use serde::{Deserialize, Serialize};

use crate::backends::{BackendName, Built};
use crate::clients::ClientName;
use crate::plan::{InvalidPlan, Plan};

/// What fencer can do to one backend besides calling it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// Its clock is fencer's to step and skew.
    pub clock: bool,
    /// fencer can restart it (its volatile state lost).
    pub restart: bool,
    /// fencer runs its process: server faults reach it, as far as that server takes them.
    pub server: bool,
}

impl Reach {
    /// What fencer can do to a backend as built for a run.
    pub fn of<T: ?Sized>(built: &Built<T>) -> Reach {
        Reach {
            clock: built.clock.is_some(),
            restart: built.restart.is_some(),
            server: built.server.is_some() || built.cluster.is_some(),
        }
    }

    /// Whether the backend `name`, in the role `fault` aims at, can take `fault`, or why not,
    /// in words that hold for every fault of its family on that role (so they group).
    // The reason is kept as words: it is saved in the plan's `left_out` (`why`), and the
    // faults left out are grouped by it.
    fn takes(&self, name: &BackendName, fault: &Fault) -> Result<(), String> {
        let own = target_member(fault.target()).is_none()
            && match fault.effect() {
                Effect::ClockJump(_) | Effect::ClockDrift(_) => self.clock,
                Effect::Restart => self.restart,
                Effect::Worker(_) | Effect::ServerOnly | Effect::Cluster => false,
            };
        if own {
            return Ok(());
        }
        if self.server {
            // A process fencer runs takes what that kind of server can be made to do.
            return server_takes(name, fault);
        }
        let role = fault.target();
        let url = name.as_str().contains("://");
        let private = PrivateBackend::URLS;
        Err(match fault.effect() {
            Effect::Restart if url => format!(
                "`{name}` is not fencer's own server, and its adapter offers no restart hook (a \
                 server fencer starts itself takes restarts: --{role} {private})"
            ),
            Effect::Restart => format!(
                "`{name}` offers no restart hook (LockService::offers_restart): fencer restarts \
                 its simulated lease service, servers it starts ({private}) and exec children"
            ),
            Effect::ClockJump(_) | Effect::ClockDrift(_) if url => format!(
                "`{name}` is not fencer's own server and keeps its own clock (a server fencer \
                 starts itself takes clock steps: --{role} {private}); the workers' clocks are \
                 skewed, and adapters read them through fencer::caller_clock"
            ),
            Effect::ClockJump(_) | Effect::ClockDrift(_) => format!(
                "`{name}` keeps its own clock, out of fencer's reach; the workers' clocks are \
                 skewed, and adapters read them through fencer::caller_clock"
            ),
            _ => format!(
                "`{name}` is not fencer's own server (a server fencer starts itself takes it: \
                 --{role} {private})"
            ),
        })
    }
}

/// Whether a server fencer runs for `name` (a private server, an exec child) takes `fault`.
// The reason is the words saved in the plan's `left_out`, as for `Reach::takes`.
fn server_takes(name: &BackendName, fault: &Fault) -> Result<(), String> {
    if let Some((kind, _)) = ClusterKind::parse(name.as_str()) {
        return cluster_takes(kind, fault);
    }
    if let Some(member) = target_member(fault.target()) {
        return Err(format!(
            "`{name}` is one server, not a cluster with a member `{member}` (clusters: \
             private:redlock, private:etcd3, private:zookeeper3, private:redis-sentinel)"
        ));
    }
    if let Fault::NetPartition { .. } = fault {
        return Err(format!(
            "`{name}` is one server, not a cluster whose members could be cut apart (clusters: \
             private:etcd3, private:zookeeper3, private:redis-sentinel)"
        ));
    }
    if name.as_str().starts_with(EXEC_SCHEME) {
        return exec_refusal(fault).map_or(Ok(()), Err);
    }
    let Some(Ok((backend, _))) = PrivateBackend::parse(name.as_str()) else {
        return Ok(());
    };
    match fault {
        Fault::ClockJump { .. } | Fault::ClockDrift { .. } if !backend.takes_clock_jumps() => {
            Err(format!(
                "the clock of a private {backend:?} cannot be stepped, nor made to drift (etcd \
                 ignores libfaketime; ZooKeeper expires sessions by its monotonic clock)"
            ))
        }
        Fault::ClockDrift { .. } => Err(
            "a real server's clock can be stepped (libfaketime, Redis expiry rewrite), not made \
             to drift"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// Whether a cluster of `kind` takes `fault`: its members take what one private server takes
/// (clock steps where the kind's servers can be stepped), the cluster as a whole takes net
/// partitions where its members talk, and `ROLE.leader` needs a leader.
// The reason is the words saved in the plan's `left_out`, as for `Reach::takes`.
fn cluster_takes(kind: ClusterKind, fault: &Fault) -> Result<(), String> {
    let takes = kind.takes();
    let cluster = format!("private:{}", kind.name());
    if let Fault::NetPartition { .. } = fault {
        return if takes.partitions {
            Ok(())
        } else {
            Err(format!(
                "the members of a {cluster} never talk to each other, so there is no link \
                 between them to cut: cut clients off one member with `partition` aimed at \
                 {}.n1 instead",
                target_role(fault.target())
            ))
        };
    }
    let Some(member) = target_member(fault.target()) else {
        return Err(format!(
            "a {cluster} is no single process: aim the fault at one of its members ({role}.n1, \
             …{})",
            if takes.leader {
                format!(" or {role}.{LEADER}", role = target_role(fault.target()))
            } else {
                String::new()
            },
            role = target_role(fault.target())
        ));
    };
    if member == LEADER && !takes.leader {
        return Err(format!(
            "a {cluster} has no leader: its members are independent (aim at one of them)"
        ));
    }
    match fault {
        Fault::ClockJump { .. } | Fault::ClockDrift { .. } if !takes.clock_jumps => Err(format!(
            "the clocks of a {cluster}'s members cannot be stepped, nor made to drift (etcd \
             ignores libfaketime; ZooKeeper expires sessions by its monotonic clock)"
        )),
        Fault::ClockDrift { .. } => Err(
            "a real server's clock can be stepped (libfaketime, Redis expiry rewrite), not made \
             to drift"
                .into(),
        ),
        _ => Ok(()),
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
    /// `3 restart faults on lock: `my-lock` offers no restart hook (...)`.
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

/// Adds `more` to `total`, by family, target and reason: what several seeds left out.
pub fn add_left_out(total: &mut Vec<LeftOut>, more: &[LeftOut]) {
    for left in more {
        match total.iter_mut().find(|seen| {
            (seen.family, &seen.target, &seen.why) == (left.family, &left.target, &left.why)
        }) {
            Some(seen) => seen.faults += left.faults,
            None => total.push(left.clone()),
        }
    }
}

/// The backends of a run, each by name with what fencer can do to it.
#[derive(Clone, Copy, Debug)]
pub struct Roles<'a> {
    /// The lock service.
    pub lock: (&'a BackendName, Reach),
    /// The store.
    pub store: (&'a BackendName, Reach),
}

impl Roles<'_> {
    /// Why the role `fault` aims at cannot take it; `Ok` for faults aimed at a worker.
    // The reason is the words saved in the plan's `left_out`, as for `Reach::takes`.
    fn takes(&self, fault: &Fault) -> Result<(), String> {
        let (name, reach) = match target_role(fault.target()) {
            "lock" => self.lock,
            "store" => self.store,
            _ => return Ok(()),
        };
        reach.takes(name, fault)
    }

    /// `plan` without the faults its backends cannot take, each group of them recorded in
    /// [`Plan::left_out`].
    pub fn fit(&self, plan: &Plan) -> Plan {
        fit_by(plan, |fault| self.takes(fault))
    }

    /// Refuses the first fault of `plan` its backends cannot take, at its place in the plan:
    /// for plans written by hand or saved from another run, whose every fault was meant.
    pub fn check(&self, plan: &Plan) -> Result<(), InvalidPlan> {
        check_by(plan, |fault| self.takes(fault))
    }
}

/// `plan` without the faults `takes` refuses, each group of them (by family, target and
/// reason) recorded in [`Plan::left_out`].
pub(crate) fn fit_by(plan: &Plan, takes: impl Fn(&Fault) -> Result<(), String>) -> Plan {
    let mut fitted = plan.clone();
    let mut groups: BTreeMap<(FaultKind, String, String), usize> = BTreeMap::new();
    fitted.faults.retain(|fault| match takes(fault) {
        Ok(()) => true,
        Err(why) => {
            *groups
                .entry((fault.kind(), fault.target().to_string(), why))
                .or_default() += 1;
            false
        }
    });
    fitted.left_out.extend(
        groups
            .into_iter()
            .map(|((family, target, why), faults)| LeftOut {
                family,
                target,
                faults,
                why,
            }),
    );
    fitted
}

/// Refuses the first fault of `plan` that `takes` refuses, at its place in the plan.
pub(crate) fn check_by(
    plan: &Plan,
    takes: impl Fn(&Fault) -> Result<(), String>,
) -> Result<(), InvalidPlan> {
    for (index, fault) in plan.faults.iter().enumerate() {
        takes(fault).map_err(|why| {
            InvalidPlan::at_fault(
                index,
                format!(
                    "faults[{index}]: `{}` at {} ns aims at the {}, which cannot take it: {why}",
                    fault.kind().name(),
                    fault.at_ns(),
                    fault.target()
                ),
            )
        })?;
    }
    Ok(())
}

/// Whether a worker whose lock client is `client` can take `fault` aimed at it, or why not;
/// `Ok` for faults aimed at a server. A worker with fencer's own client (or a user's over the
/// recorded lock service) takes every worker fault and no server fault. A worker with an exec
/// client takes pauses (its child freezes too), cancels, the faults of its store calls, clock
/// steps when libfaketime can step the child's clock, and the server faults its own proxy and
/// child take; its lock calls do not cross fencer's simulated network, so the faults that act
/// there do not reach them.
pub(crate) fn client_takes(client: &ClientName, fault: &Fault) -> Result<(), String> {
    if fault.aims_at_server() {
        return Ok(());
    }
    let exec = client.exec_command().is_some();
    match (fault.effect(), exec) {
        (Effect::ServerOnly, false) => Err(format!(
            "`{client}` is no exec client: a worker's proxy and lock client process exist only \
             for --client exec:COMMAND"
        )),
        (Effect::ServerOnly, true) => match fault.kind() {
            FaultKind::ServerPause
            | FaultKind::Partition
            | FaultKind::DelayReplies
            | FaultKind::DropReplies
            | FaultKind::Cut => Ok(()),
            _ => Err("an exec client takes no cluster faults".to_string()),
        },
        (_, false) => Ok(()),
        (Effect::Worker(worker), true) => match worker {
            WorkerFault::Freeze
            | WorkerFault::Cancel
            | WorkerFault::LoseReplies(Op::Write)
            | WorkerFault::DelayRequests { op: Op::Write, .. } => Ok(()),
            _ => Err(format!(
                "the exec client `{client}` calls the lock service itself, not through fencer's \
                 simulated network: aim partition, delay-replies, drop-replies or cut at the \
                 worker instead (its own proxy)"
            )),
        },
        (Effect::ClockJump(_), true) => fencer_servers::ServerClock::available().map_err(|error| {
            format!("an exec client's clock is stepped with libfaketime, and {error}")
        }),
        (Effect::ClockDrift(_), true) => Err(
            "an exec client's clock can be stepped (libfaketime), not made to drift".to_string(),
        ),
        (Effect::Restart | Effect::Cluster, true) => {
            Err("an exec client takes no restarts or net partitions".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn restart() -> Fault {
        Fault::Restart {
            at_ns: 5,
            target: "lock".into(),
            duration_ns: 1,
        }
    }

    const SIM: Reach = Reach {
        clock: true,
        restart: true,
        server: false,
    };

    const SERVER: Reach = Reach {
        clock: false,
        restart: false,
        server: true,
    };

    #[test]
    fn a_cluster_takes_member_faults_and_only_what_its_kind_can_take() {
        let redlock: BackendName = "private:redlock".into();
        let etcd3: BackendName = "private:etcd3".into();
        let pause = |target: &str| Fault::ServerPause {
            at_ns: 1,
            target: target.into(),
            duration_ns: 1,
        };
        let split = Fault::NetPartition {
            at_ns: 1,
            target: "lock".into(),
            duration_ns: 1,
            groups: vec![vec!["n1".into()], vec!["n2".into(), "n3".into()]],
        };
        assert!(SERVER.takes(&redlock, &pause("lock.n2")).is_ok());
        assert!(SERVER.takes(&etcd3, &pause("lock.leader")).is_ok());
        assert!(SERVER.takes(&etcd3, &split).is_ok());
        let why = SERVER.takes(&redlock, &split).unwrap_err();
        assert!(why.contains("never talk to each other"), "{why}");
        let why = SERVER.takes(&redlock, &pause("lock.leader")).unwrap_err();
        assert!(why.contains("has no leader"), "{why}");
        let why = SERVER.takes(&redlock, &pause("lock")).unwrap_err();
        assert!(why.contains("aim the fault at one of its members"), "{why}");
        let jump = Fault::ClockJump {
            at_ns: 1,
            target: "lock.n1".into(),
            jump_ns: 5,
        };
        assert!(SERVER.takes(&redlock, &jump).is_ok());
        assert!(SERVER.takes(&etcd3, &jump).is_err());
        let why = SERVER
            .takes(&"private:redis".into(), &pause("lock.n1"))
            .unwrap_err();
        assert!(why.contains("is one server, not a cluster"), "{why}");
    }

    #[test]
    fn a_fault_reaches_only_what_fencer_owns() {
        assert!(SIM.takes(&"sim".into(), &restart()).is_ok());
        let why = Reach::default()
            .takes(&"my-lock".into(), &restart())
            .unwrap_err();
        assert!(
            why.starts_with("`my-lock` offers no restart hook (LockService::offers_restart)"),
            "{why}"
        );
        let why = Reach::default()
            .takes(&"redis://h:1".into(), &restart())
            .unwrap_err();
        assert!(why.contains("--lock private:redis"), "{why}");
        let cut = Fault::Cut {
            at_ns: 1,
            target: "store".into(),
        };
        assert!(SERVER.takes(&"private:redis".into(), &cut).is_ok());
        let why = SERVER.takes(&"exec:python3 x.py".into(), &cut).unwrap_err();
        assert!(why.contains("takes only server-pause and restart"), "{why}");
        let jump = Fault::ClockJump {
            at_ns: 1,
            target: "store".into(),
            jump_ns: 5,
        };
        assert!(SERVER.takes(&"private:redis".into(), &jump).is_ok());
        assert!(SERVER.takes(&"private:etcd".into(), &jump).is_err());
        let drift = Fault::ClockDrift {
            at_ns: 1,
            target: "lock".into(),
            drift_ppm: 5,
        };
        let why = SERVER.takes(&"private:redis".into(), &drift).unwrap_err();
        assert!(why.contains("not made to drift"), "{why}");
        // A server whose clock takes no steps gives one reason for steps and drifts alike,
        // which never says its clock can be stepped.
        let member_jump = Fault::ClockJump {
            at_ns: 1,
            target: "lock.n2".into(),
            jump_ns: 5,
        };
        let member_drift = Fault::ClockDrift {
            at_ns: 1,
            target: "lock.n2".into(),
            drift_ppm: 5,
        };
        for (name, jump, drift) in [
            ("private:etcd", &jump, &drift),
            ("private:zookeeper3", &member_jump, &member_drift),
        ] {
            let stepped = SERVER.takes(&name.into(), jump).unwrap_err();
            let drifted = SERVER.takes(&name.into(), drift).unwrap_err();
            assert_eq!(stepped, drifted, "{name}");
            assert!(
                stepped.contains("cannot be stepped, nor made to drift"),
                "{stepped}"
            );
        }
    }

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

    fn roles<'a>(lock: &'a BackendName, store: &'a BackendName, reach: Reach) -> Roles<'a> {
        Roles {
            lock: (lock, reach),
            store: (store, Reach::default()),
        }
    }

    #[test]
    fn a_user_s_backend_loses_server_clock_and_restart_faults_and_they_are_named() {
        let generated = plan(Settings::default());
        let restarts = server_faults(&generated, FaultKind::Restart);
        let lock_skews = server_faults(&generated, FaultKind::Skew);
        assert!(restarts > 0 && lock_skews > 0);
        let (lock, store) = ("my-lock".into(), "my-store".into());
        let fitted = roles(&lock, &store, Reach::default()).fit(&generated);
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
            fitted.left_out[1].to_string().starts_with(&format!(
                "{restarts} restart faults on lock: `my-lock` offers"
            )),
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
    fn a_lock_service_that_offers_restart_keeps_its_restarts_and_a_plan_is_refused_otherwise() {
        let generated = plan(Settings::default());
        let (lock, store) = ("my-lock".into(), "my-store".into());
        let restarting = Reach {
            restart: true,
            ..Reach::default()
        };
        let fitted = roles(&lock, &store, restarting).fit(&generated);
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
        let refused = roles(&lock, &store, Reach::default())
            .check(&fitted)
            .unwrap_err();
        assert!(
            refused.message.contains("which cannot take it"),
            "{refused}"
        );
        assert_eq!(roles(&lock, &store, restarting).check(&fitted), Ok(()));
    }

    #[test]
    fn left_out_faults_survive_plan_json_and_a_plan_without_them_omits_the_field() {
        let (lock, store) = ("my-lock".into(), "my-store".into());
        let fitted = roles(&lock, &store, Reach::default()).fit(&plan(Settings::default()));
        assert!(!fitted.left_out.is_empty());
        let json = fitted.to_json();
        assert_eq!(Plan::from_json(&json, "plan.json").unwrap(), fitted);
        let text = String::from_utf8(plan(Settings::default()).to_json()).unwrap();
        assert!(!text.contains("left_out"), "{text}");
    }

    #[test]
    fn left_out_faults_add_up_over_seeds() {
        let why = "`my-lock` offers no restart hook".to_string();
        let fault = LeftOut {
            family: FaultKind::Restart,
            target: "lock".into(),
            faults: 2,
            why: why.clone(),
        };
        let mut total = Vec::new();
        add_left_out(&mut total, std::slice::from_ref(&fault));
        add_left_out(&mut total, &[fault]);
        assert_eq!(total.len(), 1);
        assert_eq!(total[0].faults, 4);
        assert_eq!(
            total[0].to_string(),
            format!("4 restart faults on lock: {why}")
        );
    }
}
