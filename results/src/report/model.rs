//! What a report draws, read once from a history: swimlanes, leases (grant to expiry, on the
//! true clock), client calls with their outcomes, and nemesis fault periods.
//!
//! Lease ends come from the lock service's own log: a grant or renewal records the expiry on
//! the lock server's clock (`expires_ns`), converted to true time with the server's offset at
//! that moment (`time_ns - local_ns`); a release ends the lease where it happened; a restart of
//! the lock service ends every lease it held. A lock log read back after the run has no true
//! times ([`LogTiming`]): its leases are not drawn, since nothing says where they fall.

use std::collections::{BTreeMap, BTreeSet};

use fencer_harness::words::LogTiming;
use fencer_harness::{EventType, EventView, Op, PackedHistory};

/// One horizontal row of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lane {
    /// The process it shows (`w0`, `w0:renew`, `lock`, `store`, `nemesis`).
    pub name: String,
    /// A renewal task's lane is drawn thinner.
    pub thin: bool,
}

/// How a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Its owner released it.
    Released,
    /// Its TTL ran out (or the run ended first).
    Expired,
    /// The lock service restarted and forgot it.
    Lost,
}

/// A lease as the lock service applied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Lock name.
    pub lock: String,
    /// Fencing token of the grant.
    pub token: u64,
    /// Owner token.
    pub owner: String,
    /// The worker that asked for it, when the history tells.
    pub process: Option<String>,
    /// True time of the grant.
    pub start_ns: u64,
    /// True time it stopped being valid.
    pub end_ns: u64,
    /// Why it ended.
    pub end: LeaseEnd,
    /// History position of the grant's log entry.
    pub grant_index: usize,
    /// True times of the renewals the lock service applied to it.
    pub renewals_ns: Vec<u64>,
}

/// A client call, from its invoke to its completion, as read from the history's rows on
/// demand ([`Model::calls`]): there is one per invoke, so the model keeps only where its two
/// events are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// History position of the invoke.
    pub invoke: usize,
    /// History position of the completion, if the call completed.
    pub completion: Option<usize>,
    /// Which lane it belongs to.
    pub process: &'a str,
    /// The operation.
    pub f: Op,
    /// `Ok`, `Fail` or `Info`; `Info` too when the call never completed.
    pub outcome: EventType,
    /// True time of the invoke.
    pub start_ns: u64,
    /// True time of the completion (the run's end when it never completed).
    pub end_ns: u64,
}

/// A fault period (or instant, for clock faults) the nemesis injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpan {
    /// History position of the nemesis event that started it.
    pub index: usize,
    /// The fault.
    pub f: Op,
    /// Its target process or node.
    pub target: String,
    /// True time it began.
    pub start_ns: u64,
    /// True time it ended (equal to `start_ns` for instant faults).
    pub end_ns: u64,
}

/// Everything a report needs from a history, computed in one pass.
#[derive(Clone, Debug)]
pub struct Model<'a> {
    /// The history, in the checking form it was recorded in (its events are read as
    /// borrowed views, never copied out).
    pub history: &'a PackedHistory,
    /// Lanes, top to bottom.
    pub lanes: Vec<Lane>,
    /// True time of the last event.
    pub end_ns: u64,
    /// Leases in grant order.
    pub leases: Vec<Lease>,
    /// Client calls in invoke order, by the history positions of their invoke and completion
    /// ([`NEVER_COMPLETED`] for none): eight bytes a call.
    calls: Vec<(u32, u32)>,
    /// Faults in injection order.
    pub faults: Vec<FaultSpan>,
    /// Which server logs carry true times: the entries of one read back after the run are
    /// drawn nowhere on the time axis.
    pub timing: LogTiming,
}

impl<'a> Model<'a> {
    /// Reads `history` (a validated history, in index order).
    pub fn new(history: &'a PackedHistory) -> Model<'a> {
        let end_ns = history.rows().last().map_or(0, |row| row.time_ns);
        let timing = LogTiming::of(history.rows().iter().map(|row| (row.kind, row.f)));
        Model {
            history,
            lanes: lanes(history),
            end_ns,
            leases: if timing.lock_log_timed {
                leases(history, end_ns)
            } else {
                Vec::new()
            },
            calls: calls(history),
            faults: faults(history),
            timing,
        }
    }

    /// The event at history position `position`.
    pub fn event(&self, position: usize) -> EventView<'a> {
        self.history.view(position)
    }

    /// The event at history position `position`, if the history holds one.
    pub fn get(&self, position: usize) -> Option<EventView<'a>> {
        (position < self.history.len()).then(|| self.history.view(position))
    }

    /// Whether `event` has a true time to be drawn at: every event but an entry of a log
    /// read back after the run.
    pub fn has_time(&self, event: &EventView<'_>) -> bool {
        self.timing.is_timed(event.kind, event.f)
    }

    /// Whether the history holds an entry of a log read back after the run.
    pub fn has_read_back_log(&self) -> bool {
        self.events().any(|event| !self.has_time(&event))
    }

    /// Every event, in order.
    pub fn events(&self) -> impl ExactSizeIterator<Item = EventView<'a>> + 'a {
        self.history.views()
    }

    /// Number of client calls (invokes): the measure of a history's size for drawing.
    pub fn ops(&self) -> usize {
        self.calls.len()
    }

    /// The client call at `slot` in invoke order.
    pub fn call(&self, slot: usize) -> Call<'a> {
        let (invoke, completion) = self.calls[slot];
        let started = self.event(invoke as usize);
        let done = (completion != NEVER_COMPLETED).then(|| self.event(completion as usize));
        Call {
            invoke: invoke as usize,
            completion: (completion != NEVER_COMPLETED).then_some(completion as usize),
            process: started.process,
            f: started.f,
            outcome: done.map_or(EventType::Info, |done| done.kind),
            start_ns: started.time_ns,
            end_ns: done.map_or(self.end_ns, |done| done.time_ns),
        }
    }

    /// Every client call, in invoke order.
    pub fn calls(&self) -> impl Iterator<Item = Call<'a>> + '_ {
        (0..self.calls.len()).map(|slot| self.call(slot))
    }

    /// The lane an event is drawn on: its process, or a nemesis event's target.
    pub fn lane_of(&self, event: &EventView<'_>) -> Option<usize> {
        let name = match (&event.kind, event.target) {
            (EventType::Nemesis, Some(target)) => target,
            _ => event.process,
        };
        self.lane_index(name)
            .or_else(|| self.lane_index(event.process))
    }

    /// The position of the lane named `name`.
    pub fn lane_index(&self, name: &str) -> Option<usize> {
        self.lanes.iter().position(|lane| lane.name == name)
    }
}

/// `w2` → ("w", 2) so `w10` sorts after `w9`.
fn natural_key(name: &str) -> (String, u64, String) {
    let (base, suffix) = name.split_once(':').unwrap_or((name, ""));
    let digits = base.trim_start_matches(|c: char| !c.is_ascii_digit());
    let prefix = &base[..base.len() - digits.len()];
    (
        prefix.to_string(),
        digits.parse().unwrap_or(u64::MAX),
        suffix.to_string(),
    )
}

fn lanes(history: &PackedHistory) -> Vec<Lane> {
    // In order of first appearance (the order ties keep when sorted), looked up in a set: a
    // thousand workers' histories name a couple of thousand processes.
    let mut workers: Vec<&str> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut has_nemesis = false;
    // Members of clusters fencer started (`lock.n2`), under their role's lane.
    let mut members: BTreeSet<(u8, (String, u64, String), String)> = BTreeSet::new();
    for event in history.views() {
        if event.kind == EventType::Nemesis
            && let Some(target) = event.target
        {
            for member in cluster_members(target, event.f, event.value) {
                let role = u8::from(member.starts_with("store."));
                members.insert((role, natural_key(&member), member));
            }
        }
        let name = event.process;
        match name {
            "lock" | "store" => {}
            "nemesis" => has_nemesis = true,
            _ if seen.insert(name) => workers.push(name),
            _ => {}
        }
    }
    workers.sort_by_key(|name| natural_key(name));
    let mut lanes: Vec<Lane> = Vec::new();
    if has_nemesis {
        lanes.push(Lane {
            name: "nemesis".into(),
            thin: false,
        });
    }
    lanes.extend(workers.into_iter().map(|name| Lane {
        name: name.to_string(),
        thin: name.contains(':'),
    }));
    for (role, server) in ["lock", "store"].into_iter().enumerate() {
        lanes.push(Lane {
            name: server.into(),
            thin: false,
        });
        lanes.extend(
            members
                .iter()
                .filter(|(of, ..)| usize::from(*of) == role)
                .map(|(_, _, name)| Lane {
                    name: name.clone(),
                    thin: false,
                }),
        );
    }
    lanes
}

/// The cluster members a nemesis event names as `ROLE.NODE` lanes: its target when that is a
/// member (`lock.n2`), and for a net partition every member in its groups.
fn cluster_members(target: &str, f: Op, value: Option<&str>) -> Vec<String> {
    if f == Op::NetPartition || f == Op::HealNetPartition {
        return partition_sides(value)
            .into_iter()
            .flatten()
            .map(|member| format!("{target}.{member}"))
            .collect();
    }
    match target.split_once('.') {
        Some((role, member)) if matches!(role, "lock" | "store") && !member.is_empty() => {
            vec![target.to_string()]
        }
        _ => Vec::new(),
    }
}

/// The sides of a net partition as its start event records them (`n1 n2 | n3 n4 n5`, with
/// ` (leader n2)` after it when the leader was resolved), each a list of member names.
pub fn partition_sides(value: Option<&str>) -> Vec<Vec<&str>> {
    let Some(value) = value else {
        return Vec::new();
    };
    let groups = value.split(" (").next().unwrap_or(value);
    groups
        .split('|')
        .map(|side| side.split_whitespace().collect::<Vec<_>>())
        .filter(|side| !side.is_empty())
        .collect()
}

/// True time at which a lock-clock deadline falls, using the server's offset at `event`.
fn deadline_true_ns(event: &EventView<'_>) -> Option<u64> {
    let expires_ns = event.expires_ns?;
    let local_ns = event.local_ns.unwrap_or(event.time_ns as i64);
    let remaining_ns = i128::from(expires_ns) - i128::from(local_ns);
    Some((i128::from(event.time_ns) + remaining_ns).max(0) as u64)
}

fn leases(history: &PackedHistory, end_ns: u64) -> Vec<Lease> {
    let mut process_of_owner: BTreeMap<&str, &str> = BTreeMap::new();
    for event in history.views() {
        if event.kind == EventType::Invoke
            && event.f == Op::Acquire
            && let Some(owner) = event.owner
        {
            process_of_owner.insert(owner, event.process);
        }
    }
    let mut leases: Vec<Lease> = Vec::new();
    // (lock, token) → position in `leases`, for leases still valid.
    let mut open: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for (position, event) in history.views().enumerate() {
        if event.is(EventType::Nemesis, Op::Restart) {
            for (_, lease) in std::mem::take(&mut open) {
                let lease = &mut leases[lease];
                if lease.end_ns > event.time_ns {
                    lease.end_ns = event.time_ns;
                    lease.end = LeaseEnd::Lost;
                }
            }
            continue;
        }
        if event.kind != EventType::Log {
            continue;
        }
        let Some(lock) = event.lock else {
            continue;
        };
        match event.f {
            Op::Acquire => {
                let (Some(token), Some(owner)) = (event.token, event.owner) else {
                    continue;
                };
                open.insert((lock, token), leases.len());
                leases.push(Lease {
                    lock: lock.to_string(),
                    token,
                    owner: owner.to_string(),
                    process: process_of_owner.get(owner).map(|p| p.to_string()),
                    start_ns: event.time_ns,
                    end_ns: deadline_true_ns(&event).unwrap_or(end_ns).min(end_ns),
                    end: LeaseEnd::Expired,
                    grant_index: position,
                    renewals_ns: Vec::new(),
                });
            }
            Op::Renew => {
                let Some(token) = event.holder_token else {
                    continue;
                };
                if let Some(&lease) = open.get(&(lock, token)) {
                    let lease = &mut leases[lease];
                    lease.renewals_ns.push(event.time_ns);
                    if let Some(deadline) = deadline_true_ns(&event) {
                        lease.end_ns = deadline.min(end_ns).max(lease.start_ns);
                        lease.end = LeaseEnd::Expired;
                    }
                }
            }
            Op::Release => {
                let Some(token) = event.holder_token else {
                    continue;
                };
                if let Some(lease) = open.remove(&(lock, token)) {
                    let lease = &mut leases[lease];
                    if event.time_ns < lease.end_ns {
                        lease.end_ns = event.time_ns;
                        lease.end = LeaseEnd::Released;
                    }
                }
            }
            _ => {}
        }
    }
    leases
}

/// The completion position of a call that never completed.
const NEVER_COMPLETED: u32 = u32::MAX;

fn calls(history: &PackedHistory) -> Vec<(u32, u32)> {
    let position_of = |position: usize| {
        u32::try_from(position)
            .ok()
            .filter(|&position| position != NEVER_COMPLETED)
            .expect("a history drawn holds fewer than 4 billion events")
    };
    let mut calls: Vec<(u32, u32)> = Vec::new();
    let mut open: BTreeMap<&str, usize> = BTreeMap::new();
    for (position, event) in history.views().enumerate() {
        if event.kind == EventType::Invoke {
            open.insert(event.process, calls.len());
            calls.push((position_of(position), NEVER_COMPLETED));
        } else if event.kind.is_completion()
            && let Some(call) = open.remove(event.process)
        {
            calls[call].1 = position_of(position);
        }
    }
    calls
}

fn faults(history: &PackedHistory) -> Vec<FaultSpan> {
    let mut spans: Vec<FaultSpan> = Vec::new();
    // (fault, target) → spans without a duration, waiting for their heal event.
    let mut waiting: BTreeMap<(Op, &str), Vec<usize>> = BTreeMap::new();
    for (position, event) in history.views().enumerate() {
        if event.kind != EventType::Nemesis {
            continue;
        }
        let target = event.target.unwrap_or("lock");
        let starts = event.f.starts_fault();
        if starts {
            let end_ns = match event.duration_ns {
                Some(duration_ns) => event.time_ns.saturating_add(duration_ns),
                None => event.time_ns,
            };
            if event.duration_ns.is_none()
                && !matches!(
                    event.f,
                    Op::ClockJump | Op::ClockDrift | Op::Cut | Op::Cancel
                )
            {
                waiting
                    .entry((event.f, target))
                    .or_default()
                    .push(spans.len());
            }
            spans.push(FaultSpan {
                index: position,
                f: event.f,
                target: target.to_string(),
                start_ns: event.time_ns,
                end_ns,
            });
            continue;
        }
        let opened_by = match event.f {
            Op::Resume => Op::Pause,
            Op::HealRenew => Op::DropRenew,
            Op::HealAcquireReply => Op::DropAcquireReply,
            Op::HealWriteReply => Op::DropWriteReply,
            Op::HealWrite => Op::DelayWrite,
            Op::Recover => Op::Restart,
            Op::ServerResume => Op::ServerPause,
            Op::HealPartition => Op::Partition,
            Op::HealDelayReplies => Op::DelayReplies,
            Op::HealDropReplies => Op::DropReplies,
            Op::HealDelayAcquire => Op::DelayAcquire,
            Op::HealDelayRenew => Op::DelayRenew,
            Op::HealDelayRelease => Op::DelayRelease,
            Op::HealLeaseEdge => Op::LeaseEdge,
            Op::HealNetPartition => Op::NetPartition,
            _ => continue,
        };
        if let Some(open) = waiting.get_mut(&(opened_by, target))
            && !open.is_empty()
        {
            let span = open.remove(0);
            spans[span].end_ns = event.time_ns;
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Event, History};

    fn packed(events: Vec<Event>) -> PackedHistory {
        PackedHistory::pack(&History { events })
    }

    fn event(time_ms: u64, process: &str, kind: EventType, f: Op) -> Event {
        Event {
            time_ns: time_ms * 1_000_000,
            ..Event::new(process, kind, f)
        }
    }

    #[test]
    fn lanes_put_workers_in_natural_order_between_nemesis_and_servers() {
        let events = vec![
            event(0, "w10", EventType::Invoke, Op::Read),
            event(0, "store", EventType::Log, Op::Write),
            event(0, "w2:renew", EventType::Invoke, Op::Renew),
            event(0, "w2", EventType::Invoke, Op::Read),
            event(0, "nemesis", EventType::Nemesis, Op::Pause),
        ];
        let names: Vec<String> = lanes(&packed(events)).into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["nemesis", "w2", "w2:renew", "w10", "lock", "store"]);
    }

    #[test]
    fn a_lease_runs_from_grant_to_the_true_time_of_its_lock_clock_deadline() {
        let mut invoke = event(0, "w1", EventType::Invoke, Op::Acquire);
        invoke.owner = Some("o1".into());
        let mut grant = event(1_000, "lock", EventType::Log, Op::Acquire);
        grant.lock = Some("L".into());
        grant.owner = Some("o1".into());
        grant.token = Some(4);
        // The lock clock runs 500 ms ahead; the lease expires 10 s after the grant.
        grant.local_ns = Some(1_500_000_000);
        grant.expires_ns = Some(11_500_000_000);
        let mut renew = event(4_000, "lock", EventType::Log, Op::Renew);
        renew.lock = Some("L".into());
        renew.holder_token = Some(4);
        renew.local_ns = Some(4_500_000_000);
        renew.expires_ns = Some(14_500_000_000);
        let mut granted = event(1_001, "w1", EventType::Ok, Op::Acquire);
        granted.owner = Some("o1".into());
        let last = event(30_000, "w1", EventType::Invoke, Op::Read);
        let history = packed(vec![invoke, grant, granted, renew, last.clone()]);
        let model = Model::new(&history);
        assert_eq!(model.leases.len(), 1);
        let lease = &model.leases[0];
        assert_eq!(lease.process.as_deref(), Some("w1"));
        assert_eq!(
            (lease.start_ns, lease.end_ns),
            (1_000_000_000, 14_000_000_000)
        );
        assert_eq!(lease.renewals_ns, [4_000_000_000]);
        assert_eq!(lease.end, LeaseEnd::Expired);
        // The same log read back after the run says nothing of when its leases held.
        let mut invoke = event(0, "w1", EventType::Invoke, Op::Acquire);
        invoke.owner = Some("o1".into());
        let mut granted = event(1_001, "w1", EventType::Ok, Op::Acquire);
        granted.owner = Some("o1".into());
        let mut grant = grant_at(30_000);
        grant.local_ns = Some(1_500_000_000);
        let history = packed(vec![invoke, granted, last, grant]);
        let model = Model::new(&history);
        assert!(model.leases.is_empty());
        assert!(model.has_read_back_log());
    }

    /// A grant of token 4 on lock L to owner o1, logged at `time_ms`.
    fn grant_at(time_ms: u64) -> Event {
        let mut grant = event(time_ms, "lock", EventType::Log, Op::Acquire);
        grant.lock = Some("L".into());
        grant.owner = Some("o1".into());
        grant.token = Some(4);
        grant.expires_ns = Some(11_500_000_000);
        grant
    }

    #[test]
    fn a_release_ends_the_lease_and_a_heal_ends_a_fault_without_duration() {
        let mut grant = event(0, "lock", EventType::Log, Op::Acquire);
        grant.lock = Some("L".into());
        grant.owner = Some("o1".into());
        grant.token = Some(1);
        grant.expires_ns = Some(10_000_000_000);
        let mut release = event(2_000, "lock", EventType::Log, Op::Release);
        release.lock = Some("L".into());
        release.holder_token = Some(1);
        let mut drop = event(3_000, "nemesis", EventType::Nemesis, Op::DropRenew);
        drop.target = Some("w1".into());
        let mut heal = event(5_000, "nemesis", EventType::Nemesis, Op::HealRenew);
        heal.target = Some("w1".into());
        // A call answered after the log's entries: the log was recorded as it went.
        let read = event(6_000, "w1", EventType::Invoke, Op::Read);
        let mut read_ok = read.clone();
        read_ok.kind = EventType::Ok;
        let history = packed(vec![grant, release, drop, heal, read, read_ok]);
        let model = Model::new(&history);
        assert_eq!(model.leases[0].end, LeaseEnd::Released);
        assert_eq!(model.leases[0].end_ns, 2_000_000_000);
        assert_eq!(model.faults.len(), 1);
        assert_eq!(
            (model.faults[0].start_ns, model.faults[0].end_ns),
            (3_000_000_000, 5_000_000_000)
        );
    }

    #[test]
    fn every_fault_family_draws_a_span_lost_acquire_and_write_replies_included() {
        let nemesis = |time_ms, f| {
            let mut fault = event(time_ms, "nemesis", EventType::Nemesis, f);
            fault.target = Some("w0".into());
            fault
        };
        let history = packed(vec![
            nemesis(1_000, Op::DropAcquireReply),
            nemesis(2_000, Op::HealAcquireReply),
            nemesis(3_000, Op::DropWriteReply),
            nemesis(4_000, Op::HealWriteReply),
            nemesis(5_000, Op::Cancel),
        ]);
        let spans: Vec<(Op, u64, u64)> = Model::new(&history)
            .faults
            .iter()
            .map(|span| (span.f, span.start_ns, span.end_ns))
            .collect();
        assert_eq!(
            spans,
            [
                (Op::DropAcquireReply, 1_000_000_000, 2_000_000_000),
                (Op::DropWriteReply, 3_000_000_000, 4_000_000_000),
                (Op::Cancel, 5_000_000_000, 5_000_000_000),
            ]
        );
    }
}
