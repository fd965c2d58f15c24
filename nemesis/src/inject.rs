//! Applying a schedule to a running simulation, and recording each fault's start and end.
//!
//! One task walks the schedule; faults with a duration put their end on a queue, so starts and
//! ends interleave in true-time order without extra tasks. When the run stops, every fault still
//! active is healed and its end recorded, so the history never ends with a dangling pause.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fencer_harness::{
    Event, EventType, LocalClock, ProcessFaults, Recorder, Restartable, WorkerFault,
};
use tokio::sync::oneshot;

use crate::cluster::ClusterFaults;
use crate::fault::{Effect, Fault, LEADER, groups_text, target_member, target_role};
use crate::server::{FaultFailed, ServerAction, ServerFaults};

/// What faults can reach: processes by name, clocks by owner name.
#[derive(Clone, Debug, Default)]
pub struct Targets {
    /// Workers' fault switches, by process name (`w0`).
    pub processes: BTreeMap<String, Arc<ProcessFaults>>,
    /// Node clocks, by owner (`lock`, `w0`).
    pub clocks: BTreeMap<String, LocalClock>,
    /// Servers that can be restarted, by name (`lock`).
    pub servers: BTreeMap<String, Arc<dyn Restartable>>,
    /// Real servers fencer started itself, by role (`lock`, `store`): the targets of server
    /// pauses, proxy faults and, in the real tier, restarts and server clock jumps. A
    /// cluster's members are here one by one, as `ROLE.NODE` (`lock.n2`). A worker whose lock
    /// client is a process of its own (an exec client) is here by the worker's name (`w0`):
    /// the worker's pauses and clock steps reach that process too, and server faults aimed at
    /// the worker reach it and its proxy.
    pub real_servers: BTreeMap<String, Arc<dyn ServerFaults>>,
    /// Clusters fencer started itself, by role (`lock`): the targets of net partitions, and
    /// what resolves `lock.leader` to a member when a fault aimed at it starts.
    pub clusters: BTreeMap<String, Arc<dyn ClusterFaults>>,
}

/// A fault aimed at something the run does not have: the message names the fault and what
/// the run has.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(pub String);

/// Error for a schedule naming something the run does not have.
fn unknown_target(fault: &Fault, known: impl Iterator<Item = String>) -> TargetError {
    let known: Vec<String> = known.collect();
    TargetError(format!(
        "fault at {} ns targets `{}`, which this run does not have (known: {})",
        fault.at_ns(),
        fault.target(),
        known.join(", ")
    ))
}

/// Checks every fault's target exists before a run starts, so a hand-written plan with a typo
/// is refused up front rather than silently doing nothing.
pub fn validate(faults: &[Fault], targets: &Targets) -> Result<(), TargetError> {
    for fault in faults {
        let target = fault.target();
        let on_leader = target_member(target) == Some(LEADER)
            && targets.clusters.contains_key(target_role(target));
        let on_real_server = fault.server_action().is_some()
            && (on_leader || targets.real_servers.contains_key(target));
        let found = on_real_server
            || match fault.effect() {
                Effect::Cluster => {
                    validate_partition(fault, targets)?;
                    true
                }
                Effect::Worker(_) => targets.processes.contains_key(target),
                Effect::ClockJump(_) | Effect::ClockDrift(_) => targets.clocks.contains_key(target),
                Effect::Restart => targets.servers.contains_key(target),
                Effect::ServerOnly if targets.real_servers.is_empty() => {
                    return Err(TargetError(format!(
                        "fault at {} ns: `{}` needs a real server fencer started itself \
                         (fencer run --lock private:redis --store private:postgres); this run \
                         has none",
                        fault.at_ns(),
                        fault.kind().name()
                    )));
                }
                Effect::ServerOnly => false,
            };
        if !found {
            let names = targets
                .processes
                .keys()
                .chain(targets.clocks.keys())
                .chain(targets.servers.keys())
                .chain(targets.real_servers.keys())
                .cloned()
                .chain(
                    targets
                        .clusters
                        .keys()
                        .map(|role| format!("{role}.{LEADER}")),
                )
                .collect::<BTreeSet<_>>();
            return Err(unknown_target(fault, names.into_iter()));
        }
    }
    Ok(())
}

/// Checks a net partition aims at a cluster and its groups name that cluster's members.
fn validate_partition(fault: &Fault, targets: &Targets) -> Result<(), TargetError> {
    let Fault::NetPartition { target, groups, .. } = fault else {
        return Ok(());
    };
    let Some(cluster) = targets.clusters.get(target) else {
        let roles: Vec<&String> = targets.clusters.keys().collect();
        return Err(TargetError(format!(
            "fault at {} ns: `net-partition` aims at `{target}`, which is no cluster fencer \
             started (clusters: {})",
            fault.at_ns(),
            if roles.is_empty() {
                "none; fencer run --lock private:etcd3 starts one".to_string()
            } else {
                roles
                    .iter()
                    .map(|role| role.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )));
    };
    let members = cluster.nodes();
    for name in groups.iter().flatten() {
        if name != LEADER && !members.contains(name) {
            return Err(TargetError(format!(
                "fault at {} ns: `net-partition` of `{target}` names `{name}`, which is not one \
                 of its members ({}, or {LEADER})",
                fault.at_ns(),
                members.join(", ")
            )));
        }
    }
    Ok(())
}

/// What ends a timed fault besides recording its end.
#[derive(Debug)]
enum Heal {
    /// Nothing to undo: the fault's window simply passes.
    Nothing,
    /// A worker's fault switch to turn off, and the process of its lock client to thaw when
    /// the fault froze that too.
    Worker(
        Arc<ProcessFaults>,
        WorkerFault,
        u64,
        Option<Arc<dyn ServerFaults>>,
    ),
    /// What to do to a real server (resume it, start it again, ...).
    Server(Arc<dyn ServerFaults>, ServerAction),
    /// A cluster whose member-to-member links to restore.
    Cluster(Arc<dyn ClusterFaults>),
}

/// A fault as it started: what its end must undo, and the member it hit when it was aimed at
/// the leader (its end is recorded on that member too).
#[derive(Debug)]
struct Started {
    heal: Heal,
    member: Option<String>,
}

/// The end of a timed fault, waiting in the queue.
#[derive(Debug)]
struct PendingEnd {
    event: Event,
    heal: Heal,
}

/// Injects `faults` (sorted by `at_ns`, targets validated) until `stop` fires, then ends every
/// fault still active (a paused server is resumed, a killed one started again) and records
/// its end. Run it as its own task beside the workers. Fails when a real server could not
/// take a fault: the history would claim a fault that did not happen.
pub async fn inject(
    faults: Vec<Fault>,
    targets: Targets,
    recorder: Arc<Recorder>,
    mut stop: oneshot::Receiver<()>,
) -> Result<(), FaultFailed> {
    let truth = recorder.truth();
    let mut ends: BTreeMap<(u64, u64), PendingEnd> = BTreeMap::new();
    let mut end_seq = 0u64;
    let mut next = faults.into_iter().peekable();
    loop {
        let next_start = next.peek().map(Fault::at_ns);
        let next_end = ends.keys().next().map(|&(at_ns, _)| at_ns);
        let wake_ns = match (next_start, next_end) {
            (None, None) => break,
            (Some(start), Some(end)) => start.min(end),
            (Some(at), None) | (None, Some(at)) => at,
        };
        tokio::select! {
            biased;
            _ = &mut stop => break,
            () = fencer_harness::time::sleep_until(truth.instant_at(wake_ns)) => {}
        }
        // Ends first at equal times: a fault ending as another starts is healed before it.
        if next_end == Some(wake_ns) {
            let (_, end) = ends.pop_first().expect("peeked above");
            record_end(&recorder, end).await?;
            continue;
        }
        let fault = next.next().expect("peeked above");
        // A fault that would end past the end of time is refused before it starts: a wrapped
        // end would heal it at once and the history would claim a fault that never held.
        let end_ns = truth
            .now_ns()
            .checked_add(fault.duration_ns())
            .ok_or_else(|| {
                FaultFailed(format!(
                    "{} on {} at {} ns: a duration of {} ns ends past the end of time",
                    fault.kind().name(),
                    fault.target(),
                    fault.at_ns(),
                    fault.duration_ns()
                ))
            })?;
        // A fault aimed at a leader when there is none did not happen: nothing to end.
        let Some(started) = start(&fault, &targets, &recorder, end_ns).await? else {
            continue;
        };
        if let Some(mut event) = fault.end_event() {
            if let Some(member) = started.member {
                event.target = Some(member);
            }
            end_seq += 1;
            ends.insert(
                (end_ns, end_seq),
                PendingEnd {
                    event,
                    heal: started.heal,
                },
            );
        }
    }
    // Stopped: heal what is still active (a frozen worker cannot have finished, so this only
    // records ends that fall after the last worker's last operation).
    for (_, end) in std::mem::take(&mut ends) {
        record_end(&recorder, end).await?;
    }
    Ok(())
}

/// Starts `fault` (to last until `end_ns`) on its target and records its start; returns what
/// its end must undo. A fault is recorded before its target acts on it when acting records
/// events of its own (a restarting service logs the leases it lost, after the restart), and
/// after a clock step, whose event carries the stepped clock's new reading.
///
/// A fault aimed at `ROLE.leader`, or a net partition naming the leader, first asks the
/// cluster which member leads: its events name that member (and say the fault was aimed at
/// the leader); when none does, an `info` event says the fault did not happen, and `None` is
/// returned.
async fn start(
    fault: &Fault,
    targets: &Targets,
    recorder: &Recorder,
    end_ns: u64,
) -> Result<Option<Started>, FaultFailed> {
    let target = fault.target();
    let mut event = fault.start_event();
    if let Fault::NetPartition { groups, .. } = fault {
        let cluster = &targets.clusters[target];
        let groups = if groups.iter().flatten().any(|name| name == LEADER) {
            let Some(leader) = leader_of(fault, cluster.as_ref(), recorder).await else {
                return Ok(None);
            };
            let resolved = resolve_leader(groups, &leader);
            event.value = Some(format!("{} ({LEADER} {leader})", groups_text(&resolved)));
            resolved
        } else {
            groups.clone()
        };
        recorder.record(event);
        cluster.partition(&groups).await.map_err(|error| {
            FaultFailed(format!(
                "net-partition of {target} into {groups:?}: {error}"
            ))
        })?;
        return Ok(Some(Started {
            heal: Heal::Cluster(Arc::clone(cluster)),
            member: None,
        }));
    }
    let aimed = match real_server(fault, targets, recorder).await? {
        Aimed::NoLeader => return Ok(None),
        aimed => aimed,
    };
    if let Aimed::Server(server, member) = aimed {
        let (action, heal) = fault
            .server_action()
            .expect("validate lets only what servers take reach a real server");
        if let Some(member) = &member {
            event.value = Some(target.to_string());
            event.target = Some(member.clone());
        }
        let hit = event.target.clone().unwrap_or_default();
        recorder.record(event);
        server
            .apply(action)
            .await
            .map_err(|error| FaultFailed(format!("{} on {hit}: {error}", fault.kind().name())))?;
        return Ok(Some(Started {
            heal: heal.map_or(Heal::Nothing, |action| Heal::Server(server, action)),
            member,
        }));
    }
    let heal = match fault.effect() {
        Effect::Worker(worker_fault) => {
            let process = &targets.processes[target];
            // A worker whose lock client is a process of its own freezes with it.
            let client = match (worker_fault, targets.real_servers.get(target)) {
                (WorkerFault::Freeze, Some(client)) => Some(Arc::clone(client)),
                _ => None,
            };
            process.start(worker_fault, end_ns);
            if let Some(client) = &client {
                client.apply(ServerAction::Pause).await.map_err(|error| {
                    FaultFailed(format!("pause of {target}'s lock client: {error}"))
                })?;
            }
            recorder.record(event);
            Heal::Worker(Arc::clone(process), worker_fault, end_ns, client)
        }
        Effect::ClockJump(jump_ns) => {
            let clock = &targets.clocks[target];
            clock.jump(jump_ns);
            // A worker whose lock client is a process of its own has its clock stepped too.
            if let Some(client) = targets.real_servers.get(target) {
                client
                    .apply(ServerAction::JumpClock(jump_ns))
                    .await
                    .map_err(|error| {
                        FaultFailed(format!("clock-jump of {target}'s lock client: {error}"))
                    })?;
            }
            event.local_ns = Some(clock.now_ns());
            recorder.record(event);
            Heal::Nothing
        }
        Effect::ClockDrift(drift_ppm) => {
            targets.clocks[target].set_drift(drift_ppm);
            recorder.record(event);
            Heal::Nothing
        }
        Effect::Restart => {
            recorder.record(event);
            targets.servers[target]
                .restart(fault.duration_ns())
                .await
                .map_err(|error| FaultFailed(format!("restart of {target}: {error}")))?;
            Heal::Nothing
        }
        Effect::ServerOnly | Effect::Cluster => {
            unreachable!("validate refuses server faults without a real server or cluster")
        }
    };
    Ok(Some(Started { heal, member: None }))
}

/// The member of `cluster` leading now, for `fault` aimed at it; when there is none (or the
/// cluster cannot say), records an `info` event for the fault that did not happen.
async fn leader_of(
    fault: &Fault,
    cluster: &dyn ClusterFaults,
    recorder: &Recorder,
) -> Option<String> {
    let why = match cluster.leader().await {
        Ok(Some(leader)) => return Some(leader),
        Ok(None) => "no member leads right now".to_string(),
        Err(error) => format!("cannot tell which member leads: {error}"),
    };
    let mut event = fault.start_event();
    event.kind = EventType::Info;
    event.error = Some(why);
    recorder.record(event);
    None
}

/// `groups` with [`LEADER`] replaced by `leader`, who then counts in that group only.
fn resolve_leader(groups: &[Vec<String>], leader: &str) -> Vec<Vec<String>> {
    let names_leader = |group: &Vec<String>| group.iter().any(|name| name == LEADER);
    groups
        .iter()
        .map(|group| {
            if names_leader(group) {
                group
                    .iter()
                    .map(|name| if name == LEADER { leader } else { name })
                    .map(str::to_string)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect()
            } else {
                group
                    .iter()
                    .filter(|name| *name != leader)
                    .cloned()
                    .collect()
            }
        })
        .collect()
}

/// Where a fault aimed at a server lands.
enum Aimed {
    /// On this real server; the member's target (`lock.n2`) when it was aimed at the leader.
    Server(Arc<dyn ServerFaults>, Option<String>),
    /// Aimed at the leader, and no member leads (an `info` event said so): it does not happen.
    NoLeader,
    /// Not on a real server: fencer's own simulated target takes it.
    Elsewhere,
}

/// The real server `fault` acts on, when the run has one for its target (the simulation's
/// lock service keeps its own restarts and clock).
async fn real_server(
    fault: &Fault,
    targets: &Targets,
    recorder: &Recorder,
) -> Result<Aimed, FaultFailed> {
    let target = fault.target();
    let sim_owns = match fault.effect() {
        Effect::Restart => targets.servers.contains_key(target),
        Effect::ClockJump(_) => targets.clocks.contains_key(target),
        _ => false,
    };
    // A worker's pause reaches the process of its lock client as part of the worker's fault.
    if sim_owns || fault.server_action().is_none() {
        return Ok(Aimed::Elsewhere);
    }
    let role = target_role(target);
    if target_member(target) == Some(LEADER)
        && let Some(cluster) = targets.clusters.get(role)
    {
        let Some(leader) = leader_of(fault, cluster.as_ref(), recorder).await else {
            return Ok(Aimed::NoLeader);
        };
        let member = format!("{role}.{leader}");
        let server = targets.real_servers.get(&member).ok_or_else(|| {
            FaultFailed(format!(
                "{} on {target}: the cluster says `{leader}` leads, which is none of its members",
                fault.kind().name()
            ))
        })?;
        return Ok(Aimed::Server(Arc::clone(server), Some(member)));
    }
    Ok(match targets.real_servers.get(target) {
        Some(server) => Aimed::Server(Arc::clone(server), None),
        None => Aimed::Elsewhere,
    })
}

async fn record_end(recorder: &Recorder, end: PendingEnd) -> Result<(), FaultFailed> {
    match &end.heal {
        Heal::Nothing => {}
        Heal::Worker(process, fault, until_ns, client) => {
            process.heal(*fault, *until_ns);
            if let Some(client) = client {
                client.apply(ServerAction::Resume).await.map_err(|error| {
                    let target = end.event.target.as_deref().unwrap_or("?");
                    FaultFailed(format!("resuming {target}'s lock client: {error}"))
                })?;
            }
        }
        Heal::Server(server, action) => {
            server.apply(*action).await.map_err(|error| {
                let target = end.event.target.as_deref().unwrap_or("?");
                FaultFailed(format!("{action:?} on {target}: {error}"))
            })?;
        }
        Heal::Cluster(cluster) => {
            cluster.heal().await.map_err(|error| {
                let target = end.event.target.as_deref().unwrap_or("?");
                FaultFailed(format!("healing the net partition of {target}: {error}"))
            })?;
        }
    }
    recorder.record(end.event);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::Op;
    use fencer_harness::{NodeClock, TrueClock, runtime::simulation_runtime};

    /// Tokio's timers tick in milliseconds, so schedules in tests use millisecond steps.
    const MS: u64 = 1_000_000;

    #[test]
    fn faults_are_applied_recorded_and_healed_in_time_order() {
        let (history, frozen_until, clock_reading) = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let worker = Arc::new(ProcessFaults::default());
            let lock_clock = LocalClock::new(truth, NodeClock::with_offset(0));
            let targets = Targets {
                processes: [("w0".to_string(), Arc::clone(&worker))].into(),
                clocks: [("lock".to_string(), lock_clock.clone())].into(),
                ..Targets::default()
            };
            let faults = vec![
                Fault::Pause {
                    at_ns: 10 * MS,
                    target: "w0".into(),
                    duration_ns: 100 * MS,
                },
                Fault::ClockJump {
                    at_ns: 50 * MS,
                    target: "lock".into(),
                    jump_ns: -1_000,
                },
                Fault::DropRenew {
                    at_ns: 60 * MS,
                    target: "w0".into(),
                    duration_ns: 1_000 * MS,
                },
            ];
            validate(&faults, &targets).unwrap();
            let (stop_tx, stop_rx) = oneshot::channel();
            let injector = fencer_harness::task::spawn(inject(
                faults,
                targets,
                Arc::clone(&recorder),
                stop_rx,
            ));
            fencer_harness::time::sleep(std::time::Duration::from_millis(500)).await;
            let clock_reading = lock_clock.now_ns();
            stop_tx.send(()).unwrap();
            injector.await.unwrap().unwrap();
            (
                recorder.take_history(),
                worker.frozen_until_ns(),
                clock_reading,
            )
        });
        let story: Vec<(u64, Op)> = history.events.iter().map(|e| (e.time_ns, e.f)).collect();
        assert_eq!(
            story,
            [
                (10 * MS, Op::Pause),
                (50 * MS, Op::ClockJump),
                (60 * MS, Op::DropRenew),
                (110 * MS, Op::Resume),
                (500 * MS, Op::HealRenew),
            ]
        );
        assert_eq!(frozen_until, 110 * MS);
        assert_eq!(clock_reading, (500 * MS) as i64 - 1_000);
    }

    /// A server that only remembers when it was restarted and for how long.
    #[derive(Debug, Default)]
    struct Restarts(std::sync::Mutex<Vec<u64>>);

    #[async_trait::async_trait]
    impl Restartable for Restarts {
        async fn restart(&self, down_ns: u64) -> Result<(), fencer_harness::RestartError> {
            self.0.lock().unwrap().push(down_ns);
            Ok(())
        }
    }

    #[test]
    fn delay_write_opens_and_heals_a_window_and_restart_reaches_the_server() {
        let server = Arc::new(Restarts::default());
        let (history, delay_inside, delay_after) = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let worker = Arc::new(ProcessFaults::default());
            let targets = Targets {
                processes: [("w0".to_string(), Arc::clone(&worker))].into(),
                clocks: BTreeMap::new(),
                servers: [(
                    "lock".to_string(),
                    Arc::clone(&server) as Arc<dyn Restartable>,
                )]
                .into(),
                real_servers: BTreeMap::new(),
                clusters: BTreeMap::new(),
            };
            let faults = vec![
                Fault::DelayWrite {
                    at_ns: 10 * MS,
                    target: "w0".into(),
                    duration_ns: 100 * MS,
                },
                Fault::Restart {
                    at_ns: 20 * MS,
                    target: "lock".into(),
                    duration_ns: 50 * MS,
                },
            ];
            validate(&faults, &targets).unwrap();
            let (stop_tx, stop_rx) = oneshot::channel();
            let injector = fencer_harness::task::spawn(inject(
                faults,
                targets,
                Arc::clone(&recorder),
                stop_rx,
            ));
            fencer_harness::time::sleep(std::time::Duration::from_millis(50)).await;
            let delay_inside = worker.request_delay_at(Op::Write, truth.now_ns());
            fencer_harness::time::sleep(std::time::Duration::from_millis(100)).await;
            let delay_after = worker.request_delay_at(Op::Write, truth.now_ns());
            // Every fault has ended by now, so the injector may be gone already.
            let _ = stop_tx.send(());
            injector.await.unwrap().unwrap();
            (recorder.take_history(), delay_inside, delay_after)
        });
        let story: Vec<(u64, Op)> = history.events.iter().map(|e| (e.time_ns, e.f)).collect();
        assert_eq!(
            story,
            [
                (10 * MS, Op::DelayWrite),
                (20 * MS, Op::Restart),
                (70 * MS, Op::Recover),
                (110 * MS, Op::HealWrite),
            ]
        );
        assert_eq!((delay_inside, delay_after), (100 * MS, 0));
        assert_eq!(*server.0.lock().unwrap(), [50 * MS]);
    }

    #[test]
    fn call_delays_and_lease_edge_attacks_reach_their_worker_and_heal() {
        let (history, inside, after) = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let worker = Arc::new(ProcessFaults::default());
            worker.publish_lease(
                fencer_harness::OwnerToken(1),
                fencer_harness::LeaseEdges {
                    sent_ns: 500 * MS,
                    answered_ns: 500 * MS,
                },
            );
            let targets = Targets {
                processes: [("w0".to_string(), Arc::clone(&worker))].into(),
                ..Targets::default()
            };
            let window = |at_ms: u64| (at_ms * MS, "w0".to_string(), 100 * MS);
            let (at_ns, target, duration_ns) = window(10);
            let faults = vec![
                Fault::DelayAcquire {
                    at_ns,
                    target: target.clone(),
                    duration_ns,
                },
                Fault::DelayRenew {
                    at_ns: at_ns + MS,
                    target: target.clone(),
                    duration_ns,
                },
                Fault::DelayRelease {
                    at_ns: at_ns + 2 * MS,
                    target: target.clone(),
                    duration_ns,
                },
                Fault::LeaseEdge {
                    at_ns: at_ns + 3 * MS,
                    target,
                    duration_ns,
                    own_offset_ns: -(7 * MS as i64),
                    rival_offset_ns: 0,
                    anchor: fencer_harness::EdgeAnchor::Sent,
                },
            ];
            validate(&faults, &targets).unwrap();
            let (stop_tx, stop_rx) = oneshot::channel();
            let injector = fencer_harness::task::spawn(inject(
                faults,
                targets,
                Arc::clone(&recorder),
                stop_rx,
            ));
            fencer_harness::time::sleep(std::time::Duration::from_millis(50)).await;
            let now = truth.now_ns();
            let probe = |worker: &ProcessFaults, now| {
                (
                    [Op::Acquire, Op::Renew, Op::Release, Op::Write]
                        .map(|op| worker.request_delay_at(op, now)),
                    worker.edge_hold_until(Op::Write, now),
                )
            };
            let inside = probe(&worker, now);
            fencer_harness::time::sleep(std::time::Duration::from_millis(100)).await;
            let after = probe(&worker, truth.now_ns());
            let _ = stop_tx.send(());
            injector.await.unwrap().unwrap();
            (recorder.take_history(), inside, after)
        });
        let story: Vec<(u64, Op)> = history.events.iter().map(|e| (e.time_ns, e.f)).collect();
        assert_eq!(
            story,
            [
                (10 * MS, Op::DelayAcquire),
                (11 * MS, Op::DelayRenew),
                (12 * MS, Op::DelayRelease),
                (13 * MS, Op::LeaseEdge),
                (110 * MS, Op::HealDelayAcquire),
                (111 * MS, Op::HealDelayRenew),
                (112 * MS, Op::HealDelayRelease),
                (113 * MS, Op::HealLeaseEdge),
            ]
        );
        assert_eq!(inside, ([100 * MS, 100 * MS, 100 * MS, 0], Some(493 * MS)));
        assert_eq!(after, ([0; 4], None));
    }

    #[test]
    fn a_fault_that_would_end_past_the_end_of_time_is_refused_not_healed_at_once() {
        let (result, history, frozen_until) = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let worker = Arc::new(ProcessFaults::default());
            let targets = Targets {
                processes: [("w0".to_string(), Arc::clone(&worker))].into(),
                ..Targets::default()
            };
            let faults = vec![Fault::Pause {
                at_ns: 10 * MS,
                target: "w0".into(),
                duration_ns: u64::MAX,
            }];
            let (_stop, stop_rx) = oneshot::channel();
            let result = inject(faults, targets, Arc::clone(&recorder), stop_rx).await;
            (result, recorder.take_history(), worker.frozen_until_ns())
        });
        let error = result.unwrap_err().to_string();
        assert!(
            error.contains("pause on w0 at 10000000 ns") && error.contains("past the end of time"),
            "{error}"
        );
        assert_eq!(
            history.events,
            [],
            "neither a pause nor a resume is claimed"
        );
        assert_eq!(frozen_until, 0, "the worker was never frozen");
    }

    #[test]
    fn validate_names_the_unknown_target() {
        let faults = vec![Fault::Pause {
            at_ns: 1,
            target: "w9".into(),
            duration_ns: 1,
        }];
        let targets = Targets {
            processes: [("w0".to_string(), Arc::new(ProcessFaults::default()))].into(),
            ..Targets::default()
        };
        let error = validate(&faults, &targets).unwrap_err().to_string();
        assert!(
            error.contains("targets `w9`") && error.contains("known: w0"),
            "{error}"
        );
    }

    /// A server that remembers what was done to it, and when.
    #[derive(Debug, Default)]
    struct Actions {
        done: std::sync::Mutex<Vec<(u64, ServerAction)>>,
        truth: std::sync::OnceLock<TrueClock>,
    }

    #[async_trait::async_trait]
    impl ServerFaults for Actions {
        async fn apply(&self, action: ServerAction) -> Result<(), FaultFailed> {
            let now_ns = self.truth.get().map_or(0, TrueClock::now_ns);
            self.done.lock().unwrap().push((now_ns, action));
            Ok(())
        }
    }

    #[test]
    fn server_faults_reach_real_servers_and_are_healed_even_when_the_run_stops() {
        let server = Arc::new(Actions::default());
        let history = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            server.truth.set(truth).unwrap();
            let recorder = Arc::new(Recorder::new(truth));
            let targets = Targets {
                real_servers: [(
                    "store".to_string(),
                    Arc::clone(&server) as Arc<dyn ServerFaults>,
                )]
                .into(),
                ..Targets::default()
            };
            let faults = vec![
                Fault::ServerPause {
                    at_ns: 10 * MS,
                    target: "store".into(),
                    duration_ns: 20 * MS,
                },
                Fault::Cut {
                    at_ns: 40 * MS,
                    target: "store".into(),
                },
                Fault::Restart {
                    at_ns: 50 * MS,
                    target: "store".into(),
                    duration_ns: 1_000 * MS,
                },
            ];
            validate(&faults, &targets).unwrap();
            let (stop_tx, stop_rx) = oneshot::channel();
            let injector = fencer_harness::task::spawn(inject(
                faults,
                targets,
                Arc::clone(&recorder),
                stop_rx,
            ));
            fencer_harness::time::sleep(std::time::Duration::from_millis(100)).await;
            stop_tx.send(()).unwrap();
            injector.await.unwrap().unwrap();
            recorder.take_history()
        });
        let story: Vec<(u64, Op)> = history.events.iter().map(|e| (e.time_ns, e.f)).collect();
        assert_eq!(
            story,
            [
                (10 * MS, Op::ServerPause),
                (30 * MS, Op::ServerResume),
                (40 * MS, Op::Cut),
                (50 * MS, Op::Restart),
                (100 * MS, Op::Recover),
            ]
        );
        assert_eq!(
            *server.done.lock().unwrap(),
            [
                (10 * MS, ServerAction::Pause),
                (30 * MS, ServerAction::Resume),
                (40 * MS, ServerAction::Cut),
                (50 * MS, ServerAction::Kill),
                (100 * MS, ServerAction::Start),
            ],
            "the restarted server is started again when the run stops"
        );
    }

    /// A cluster that remembers its partitions and heals, with a leader that can change.
    #[derive(Debug, Default)]
    struct Links {
        leader: std::sync::Mutex<Option<String>>,
        done: std::sync::Mutex<Vec<Option<Vec<Vec<String>>>>>,
    }

    #[async_trait::async_trait]
    impl ClusterFaults for Links {
        fn nodes(&self) -> Vec<String> {
            ["n1", "n2", "n3"].map(String::from).to_vec()
        }

        async fn leader(&self) -> Result<Option<String>, FaultFailed> {
            Ok(self.leader.lock().unwrap().clone())
        }

        async fn partition(&self, groups: &[Vec<String>]) -> Result<(), FaultFailed> {
            self.done.lock().unwrap().push(Some(groups.to_vec()));
            Ok(())
        }

        async fn heal(&self) -> Result<(), FaultFailed> {
            self.done.lock().unwrap().push(None);
            Ok(())
        }
    }

    /// Targets of a three-member cluster for `lock`: each member a server, and its links.
    fn cluster_targets(links: &Arc<Links>, members: &[Arc<Actions>]) -> Targets {
        Targets {
            real_servers: members
                .iter()
                .enumerate()
                .map(|(index, server)| {
                    (
                        format!("lock.n{}", index + 1),
                        Arc::clone(server) as Arc<dyn ServerFaults>,
                    )
                })
                .collect(),
            clusters: [(
                "lock".to_string(),
                Arc::clone(links) as Arc<dyn ClusterFaults>,
            )]
            .into(),
            ..Targets::default()
        }
    }

    #[test]
    fn net_partitions_and_leader_faults_resolve_the_leader_and_record_whom_they_hit() {
        let links = Arc::new(Links::default());
        *links.leader.lock().unwrap() = Some("n2".into());
        let members: Vec<Arc<Actions>> = (0..3).map(|_| Arc::new(Actions::default())).collect();
        let history = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let targets = cluster_targets(&links, &members);
            let faults = vec![
                Fault::NetPartition {
                    at_ns: 10 * MS,
                    target: "lock".into(),
                    duration_ns: 20 * MS,
                    groups: vec![vec!["n1".into()], vec!["n2".into(), "n3".into()]],
                },
                Fault::NetPartition {
                    at_ns: 40 * MS,
                    target: "lock".into(),
                    duration_ns: 20 * MS,
                    groups: vec![
                        vec![LEADER.into()],
                        vec!["n1".into(), "n2".into(), "n3".into()],
                    ],
                },
                Fault::ServerPause {
                    at_ns: 70 * MS,
                    target: "lock.leader".into(),
                    duration_ns: 10 * MS,
                },
                Fault::Cut {
                    at_ns: 90 * MS,
                    target: "lock.n3".into(),
                },
            ];
            validate(&faults, &targets).unwrap();
            let (stop_tx, stop_rx) = oneshot::channel();
            let injector = fencer_harness::task::spawn(inject(
                faults,
                targets,
                Arc::clone(&recorder),
                stop_rx,
            ));
            fencer_harness::time::sleep(std::time::Duration::from_millis(200)).await;
            let _ = stop_tx.send(());
            injector.await.unwrap().unwrap();
            recorder.take_history()
        });
        let story: Vec<(u64, Op, &str, Option<&str>)> = history
            .events
            .iter()
            .map(|e| {
                (
                    e.time_ns / MS,
                    e.f,
                    e.target.as_deref().unwrap_or("?"),
                    e.value.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            story,
            [
                (10, Op::NetPartition, "lock", Some("n1 | n2 n3")),
                (30, Op::HealNetPartition, "lock", None),
                (40, Op::NetPartition, "lock", Some("n2 | n1 n3 (leader n2)")),
                (60, Op::HealNetPartition, "lock", None),
                (70, Op::ServerPause, "lock.n2", Some("lock.leader")),
                (80, Op::ServerResume, "lock.n2", None),
                (90, Op::Cut, "lock.n3", None),
            ]
        );
        let strings = |groups: &[&[&str]]| {
            Some(
                groups
                    .iter()
                    .map(|g| g.iter().map(|m| m.to_string()).collect())
                    .collect(),
            )
        };
        assert_eq!(
            *links.done.lock().unwrap(),
            [
                strings(&[&["n1"], &["n2", "n3"]]),
                None,
                strings(&[&["n2"], &["n1", "n3"]]),
                None,
            ]
        );
        let actions = |index: usize| -> Vec<ServerAction> {
            let done = members[index].done.lock().unwrap();
            done.iter().map(|(_, action)| *action).collect()
        };
        assert_eq!(actions(0), []);
        assert_eq!(actions(1), [ServerAction::Pause, ServerAction::Resume]);
        assert_eq!(actions(2), [ServerAction::Cut]);
    }

    #[test]
    fn a_fault_aimed_at_the_leader_when_there_is_none_is_recorded_as_not_done() {
        let links = Arc::new(Links::default());
        let members: Vec<Arc<Actions>> = (0..3).map(|_| Arc::new(Actions::default())).collect();
        let history = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let targets = cluster_targets(&links, &members);
            let faults = vec![Fault::Restart {
                at_ns: 10 * MS,
                target: "lock.leader".into(),
                duration_ns: 10 * MS,
            }];
            validate(&faults, &targets).unwrap();
            let (_stop, stop_rx) = oneshot::channel();
            inject(faults, targets, Arc::clone(&recorder), stop_rx)
                .await
                .unwrap();
            recorder.take_history()
        });
        assert_eq!(history.events.len(), 1, "{:?}", history.events);
        let event = &history.events[0];
        assert_eq!(
            (event.kind, event.f, event.target.as_deref()),
            (EventType::Info, Op::Restart, Some("lock.leader"))
        );
        assert_eq!(event.error.as_deref(), Some("no member leads right now"));
        assert!(members.iter().all(|m| m.done.lock().unwrap().is_empty()));
    }

    #[test]
    fn validate_names_a_clusters_members() {
        let links = Arc::new(Links::default());
        let members: Vec<Arc<Actions>> = (0..3).map(|_| Arc::new(Actions::default())).collect();
        let targets = cluster_targets(&links, &members);
        let pause = vec![Fault::ServerPause {
            at_ns: 1,
            target: "lock.n4".into(),
            duration_ns: 1,
        }];
        let error = validate(&pause, &targets).unwrap_err().to_string();
        assert!(
            error.contains("targets `lock.n4`")
                && error.contains("lock.leader, lock.n1, lock.n2, lock.n3"),
            "{error}"
        );
        let split = vec![Fault::NetPartition {
            at_ns: 1,
            target: "lock".into(),
            duration_ns: 1,
            groups: vec![vec!["n1".into()], vec!["n9".into()]],
        }];
        let error = validate(&split, &targets).unwrap_err().to_string();
        assert!(
            error.contains("names `n9`") && error.contains("(n1, n2, n3, or leader)"),
            "{error}"
        );
        let error = validate(&split, &Targets::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("no cluster fencer started"), "{error}");
    }

    #[test]
    fn server_faults_are_refused_without_a_real_server() {
        let faults = vec![Fault::Partition {
            at_ns: 1,
            target: "lock".into(),
            duration_ns: 1,
        }];
        let error = validate(&faults, &Targets::default())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`partition` needs a real server fencer started itself"),
            "{error}"
        );
    }
}
