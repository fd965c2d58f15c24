//! Applying a schedule to a running simulation, and recording each fault's start and end.
//!
//! One task walks the schedule; faults with a duration put their end on a queue, so starts and
//! ends interleave in true-time order without extra tasks. When the run stops, every fault still
//! active is healed and its end recorded, so the history never ends with a dangling pause.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fencer_harness::{Event, EventType, LocalClock, Op, ProcessFaults, Recorder, Restartable};
use tokio::sync::oneshot;

use crate::fault::Fault;
use crate::server::{ServerAction, ServerFaults};

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
    /// pauses, proxy faults and, in the real tier, restarts and server clock jumps.
    pub real_servers: BTreeMap<String, Arc<dyn ServerFaults>>,
}

/// Error for a schedule naming something the run does not have.
fn unknown_target(fault: &Fault, known: impl Iterator<Item = String>) -> String {
    let known: Vec<String> = known.collect();
    format!(
        "fault at {} ns targets `{}`, which this run does not have (known: {})",
        fault.at_ns(),
        fault.target(),
        known.join(", ")
    )
}

/// Checks every fault's target exists before a run starts, so a hand-written plan with a typo
/// is refused up front rather than silently doing nothing.
pub fn validate(faults: &[Fault], targets: &Targets) -> Result<(), String> {
    for fault in faults {
        let found = match fault {
            Fault::Pause { target, .. }
            | Fault::DropRenew { target, .. }
            | Fault::DelayWrite { target, .. }
            | Fault::DropAcquire { target, .. }
            | Fault::DropWrite { target, .. } => targets.processes.contains_key(target),
            Fault::Restart { target, .. } => {
                targets.servers.contains_key(target) || targets.real_servers.contains_key(target)
            }
            Fault::ClockJump { target, .. } => {
                targets.clocks.contains_key(target) || targets.real_servers.contains_key(target)
            }
            Fault::ClockDrift { target, .. } => targets.clocks.contains_key(target),
            Fault::ServerPause { target, .. }
            | Fault::Partition { target, .. }
            | Fault::DelayReplies { target, .. }
            | Fault::DropReplies { target, .. }
            | Fault::Cut { target, .. } => {
                if targets.real_servers.is_empty() {
                    return Err(format!(
                        "fault at {} ns: `{}` needs a real server fencer started itself \
                         (fencer run --lock private:redis --store private:postgres); this run \
                         has none",
                        fault.at_ns(),
                        fault.kind().name()
                    ));
                }
                targets.real_servers.contains_key(target)
            }
        };
        if !found {
            let names = targets
                .processes
                .keys()
                .chain(targets.clocks.keys())
                .chain(targets.servers.keys())
                .chain(targets.real_servers.keys())
                .cloned()
                .collect::<BTreeSet<_>>();
            return Err(unknown_target(fault, names.into_iter()));
        }
    }
    Ok(())
}

/// The end of a timed fault, waiting in the queue.
#[derive(Debug)]
struct PendingEnd {
    f: Op,
    target: String,
    /// The switch to turn off when the fault ends, for faults that need an explicit heal.
    heal: Option<(Arc<ProcessFaults>, u64)>,
    /// What to do to a real server when the fault ends (resume it, start it again, ...).
    server_heal: Option<(Arc<dyn ServerFaults>, ServerAction)>,
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
) -> Result<(), String> {
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
            () = tokio::time::sleep_until(truth.instant_at(wake_ns)) => {}
        }
        // Ends first at equal times: a fault ending as another starts is healed before it.
        if next_end == Some(wake_ns) {
            let (_, end) = ends.pop_first().expect("peeked above");
            record_end(&recorder, end).await?;
            continue;
        }
        let fault = next.next().expect("peeked above");
        let now_ns = truth.now_ns();
        let start = Event {
            target: Some(fault.target().to_string()),
            ..Event::new("nemesis", EventType::Nemesis, Op::Pause)
        };
        if let Some(server) = real_server(&fault, &targets) {
            act_on_server(&fault, server, &recorder, start, &mut ends, &mut end_seq).await?;
            continue;
        }
        let (event, end) = match &fault {
            Fault::Pause {
                target,
                duration_ns,
                ..
            } => {
                targets.processes[target].freeze_until(now_ns + duration_ns);
                (
                    Event {
                        duration_ns: Some(*duration_ns),
                        ..start
                    },
                    Some((now_ns + duration_ns, Op::Resume)),
                )
            }
            Fault::DropRenew {
                target,
                duration_ns,
                ..
            } => {
                targets.processes[target].drop_renew_replies_until(now_ns + duration_ns);
                (
                    Event {
                        f: Op::DropRenew,
                        duration_ns: Some(*duration_ns),
                        ..start
                    },
                    Some((now_ns + duration_ns, Op::HealRenew)),
                )
            }
            Fault::DelayWrite {
                target,
                duration_ns,
                ..
            } => {
                targets.processes[target].delay_writes_until(now_ns + duration_ns, *duration_ns);
                (
                    Event {
                        f: Op::DelayWrite,
                        duration_ns: Some(*duration_ns),
                        ..start
                    },
                    Some((now_ns + duration_ns, Op::HealWrite)),
                )
            }
            Fault::Restart {
                target,
                duration_ns,
                ..
            } => {
                // Recorded before the server acts, so the leases it logs as lost follow the
                // restart that lost them.
                recorder.record(Event {
                    f: Op::Restart,
                    duration_ns: Some(*duration_ns),
                    ..start
                });
                targets.servers[target].restart(*duration_ns);
                end_seq += 1;
                ends.insert(
                    (now_ns + duration_ns, end_seq),
                    PendingEnd {
                        f: Op::Recover,
                        target: target.clone(),
                        heal: None,
                        server_heal: None,
                    },
                );
                continue;
            }
            Fault::DropAcquire {
                target,
                duration_ns,
                ..
            } => {
                targets.processes[target].drop_acquire_replies_until(now_ns + duration_ns);
                (
                    Event {
                        f: Op::DropAcquireReply,
                        duration_ns: Some(*duration_ns),
                        ..start
                    },
                    Some((now_ns + duration_ns, Op::HealAcquireReply)),
                )
            }
            Fault::DropWrite {
                target,
                duration_ns,
                ..
            } => {
                targets.processes[target].drop_write_replies_until(now_ns + duration_ns);
                (
                    Event {
                        f: Op::DropWriteReply,
                        duration_ns: Some(*duration_ns),
                        ..start
                    },
                    Some((now_ns + duration_ns, Op::HealWriteReply)),
                )
            }
            Fault::ClockJump {
                target, jump_ns, ..
            } => {
                targets.clocks[target].jump(*jump_ns);
                (
                    Event {
                        f: Op::ClockJump,
                        jump_ns: Some(*jump_ns),
                        local_ns: Some(targets.clocks[target].now_ns()),
                        ..start
                    },
                    None,
                )
            }
            Fault::ClockDrift {
                target, drift_ppm, ..
            } => {
                targets.clocks[target].set_drift(*drift_ppm);
                (
                    Event {
                        f: Op::ClockDrift,
                        drift_ppm: Some(*drift_ppm),
                        ..start
                    },
                    None,
                )
            }
            Fault::ServerPause { .. }
            | Fault::Partition { .. }
            | Fault::DelayReplies { .. }
            | Fault::DropReplies { .. }
            | Fault::Cut { .. } => {
                unreachable!("validate refuses server faults without a real server")
            }
        };
        recorder.record(event);
        if let Some((end_ns, f)) = end {
            end_seq += 1;
            let heal = (f == Op::HealWrite)
                .then(|| (Arc::clone(&targets.processes[fault.target()]), end_ns));
            ends.insert(
                (end_ns, end_seq),
                PendingEnd {
                    f,
                    target: fault.target().to_string(),
                    heal,
                    server_heal: None,
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

/// The real server `fault` acts on, when the run has one for its target (the simulation's
/// lock service keeps its own restarts and clock).
fn real_server<'a>(fault: &Fault, targets: &'a Targets) -> Option<&'a Arc<dyn ServerFaults>> {
    let sim_owns = match fault {
        Fault::Restart { target, .. } => targets.servers.contains_key(target),
        Fault::ClockJump { target, .. } => targets.clocks.contains_key(target),
        _ => false,
    };
    if sim_owns {
        return None;
    }
    targets.real_servers.get(fault.target())
}

/// Applies `fault` to a real server, records it (`start` is its nemesis event so far) and
/// queues its end. Recorded before the server acts, so what the fault causes follows it.
async fn act_on_server(
    fault: &Fault,
    server: &Arc<dyn ServerFaults>,
    recorder: &Recorder,
    start: Event,
    ends: &mut BTreeMap<(u64, u64), PendingEnd>,
    end_seq: &mut u64,
) -> Result<(), String> {
    let duration_ns = fault.duration_ns();
    let timed = |f: Op| Event {
        f,
        duration_ns: Some(duration_ns),
        ..start.clone()
    };
    let (event, action, end) = match fault {
        Fault::Restart { .. } => (
            timed(Op::Restart),
            ServerAction::Kill,
            Some((Op::Recover, Some(ServerAction::Start))),
        ),
        Fault::ClockJump { jump_ns, .. } => (
            Event {
                f: Op::ClockJump,
                jump_ns: Some(*jump_ns),
                ..start.clone()
            },
            ServerAction::JumpClock(*jump_ns),
            None,
        ),
        Fault::ServerPause { .. } => (
            timed(Op::ServerPause),
            ServerAction::Pause,
            Some((Op::ServerResume, Some(ServerAction::Resume))),
        ),
        Fault::Partition { .. } => (
            timed(Op::Partition),
            ServerAction::Partition(std::time::Duration::from_nanos(duration_ns)),
            Some((Op::HealPartition, None)),
        ),
        Fault::DelayReplies { delay_ns, .. } => (
            Event {
                delay_ns: Some(*delay_ns),
                ..timed(Op::DelayReplies)
            },
            ServerAction::DelayReplies(std::time::Duration::from_nanos(*delay_ns)),
            Some((
                Op::HealDelayReplies,
                Some(ServerAction::DelayReplies(std::time::Duration::ZERO)),
            )),
        ),
        Fault::DropReplies { .. } => (
            timed(Op::DropReplies),
            ServerAction::DropReplies,
            Some((Op::HealDropReplies, Some(ServerAction::HealReplies))),
        ),
        Fault::Cut { .. } => (
            Event {
                f: Op::Cut,
                ..start.clone()
            },
            ServerAction::Cut,
            None,
        ),
        Fault::Pause { .. }
        | Fault::ClockDrift { .. }
        | Fault::DropRenew { .. }
        | Fault::DelayWrite { .. }
        | Fault::DropAcquire { .. }
        | Fault::DropWrite { .. } => {
            unreachable!("validate lets only server faults reach a real server")
        }
    };
    let now_ns = recorder.truth().now_ns();
    recorder.record(event);
    server
        .apply(action)
        .await
        .map_err(|error| format!("{} on {}: {error}", fault.kind().name(), fault.target()))?;
    if let Some((f, heal)) = end {
        *end_seq += 1;
        ends.insert(
            (now_ns + duration_ns, *end_seq),
            PendingEnd {
                f,
                target: fault.target().to_string(),
                heal: None,
                server_heal: heal.map(|action| (Arc::clone(server), action)),
            },
        );
    }
    Ok(())
}

async fn record_end(recorder: &Recorder, end: PendingEnd) -> Result<(), String> {
    if let Some((faults, until_ns)) = &end.heal {
        faults.heal_writes(*until_ns);
    }
    if let Some((server, action)) = &end.server_heal {
        server
            .apply(*action)
            .await
            .map_err(|error| format!("{action:?} on {}: {error}", end.target))?;
    }
    recorder.record(Event {
        target: Some(end.target),
        ..Event::new("nemesis", EventType::Nemesis, end.f)
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
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
            let injector = tokio::spawn(inject(faults, targets, Arc::clone(&recorder), stop_rx));
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
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

    impl Restartable for Restarts {
        fn restart(&self, down_ns: u64) {
            self.0.lock().unwrap().push(down_ns);
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
            let injector = tokio::spawn(inject(faults, targets, Arc::clone(&recorder), stop_rx));
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let delay_inside = worker.write_delay_at(truth.now_ns());
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let delay_after = worker.write_delay_at(truth.now_ns());
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
        let error = validate(&faults, &targets).unwrap_err();
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
        async fn apply(&self, action: ServerAction) -> Result<(), String> {
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
            let injector = tokio::spawn(inject(faults, targets, Arc::clone(&recorder), stop_rx));
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
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

    #[test]
    fn server_faults_are_refused_without_a_real_server() {
        let faults = vec![Fault::Partition {
            at_ns: 1,
            target: "lock".into(),
            duration_ns: 1,
        }];
        let error = validate(&faults, &Targets::default()).unwrap_err();
        assert!(
            error.contains("`partition` needs a real server fencer started itself"),
            "{error}"
        );
    }
}
