//! One line of a history: a client call's invocation or completion, a nemesis action, or a
//! server-side log entry.
//!
//! Client calls follow Jepsen's meaning: `invoke` opens a call; it is closed by `ok` (applied),
//! `fail` (definitely not applied) or `info` (unknown: timeout, lost reply, crash, panic).
//! `info` is never rounded to `ok` or `fail` by anyone downstream.
//!
//! The struct is deliberately flat: every field that any event kind uses is an optional column,
//! so the JSONL form has one stable field order (declaration order) and checkers can read any
//! event without matching on a nested enum.

use serde::{Deserialize, Serialize};

/// What an event says happened; the `type` field of the JSONL form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventType {
    /// A client call was sent.
    Invoke,
    /// The call completed and was applied.
    Ok,
    /// The call completed and was definitely not applied.
    Fail,
    /// The call's outcome is unknown (timeout, lost reply, cancelled, adapter panic).
    Info,
    /// A fault injected (or healed) by the nemesis.
    Nemesis,
    /// Ground truth recorded by a server: a grant, renewal or release the lock service applied,
    /// or a write the store applied. Checkers trust these over client replies.
    Log,
    /// What a worker's lock client library told it unprompted (its lease was lost, its
    /// auto-renewal extended the lease), recorded when the worker heard it.
    Notice,
}

impl EventType {
    /// Every event type, in declaration order: what tests of every table keyed by the type's
    /// name iterate over, so a new type cannot be missed by one (a test checks the list
    /// against the enum's JSON names).
    pub const ALL: [EventType; 7] = [
        EventType::Invoke,
        EventType::Ok,
        EventType::Fail,
        EventType::Info,
        EventType::Nemesis,
        EventType::Log,
        EventType::Notice,
    ];

    /// The type's name in the JSONL form (its `type` field).
    pub fn name(self) -> &'static str {
        match self {
            EventType::Invoke => "invoke",
            EventType::Ok => "ok",
            EventType::Fail => "fail",
            EventType::Info => "info",
            EventType::Nemesis => "nemesis",
            EventType::Log => "log",
            EventType::Notice => "notice",
        }
    }

    /// True for the three completion types that close an `invoke`.
    pub fn is_completion(self) -> bool {
        matches!(self, EventType::Ok | EventType::Fail | EventType::Info)
    }
}

/// The operation (`f`) an event is about.
///
/// Client operations reuse the same names for the server's log entries (`type: log`), so
/// `{type: log, f: write}` reads as "the store applied a write".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Take a lease on a lock (client) or grant one (log).
    Acquire,
    /// Extend a held lease.
    Renew,
    /// Give a lease back.
    Release,
    /// Write the protected value with a fencing token.
    Write,
    /// Read the protected value.
    Read,
    /// Nemesis: freeze a process (and its renewal task) for `duration_ns`.
    Pause,
    /// Nemesis: a frozen process runs again.
    Resume,
    /// Nemesis: a node's clock jumps by `jump_ns`.
    ClockJump,
    /// Nemesis: a node's clock starts drifting at `drift_ppm`.
    ClockDrift,
    /// Nemesis: renew replies to a process are lost for `duration_ns` (the server still applies).
    DropRenew,
    /// Nemesis: renew replies to a process are delivered again.
    HealRenew,
    /// Nemesis: writes sent by a process are held in flight for `duration_ns` before delivery.
    DelayWrite,
    /// Nemesis: writes sent by a process are delivered promptly again.
    HealWrite,
    /// Nemesis: the lock service restarts (down for `duration_ns`, leases lost; whether its
    /// token counter survives is the backend's property).
    Restart,
    /// Nemesis: the restarted lock service answers again.
    Recover,
    /// Nemesis: acquire replies to a process are lost for `duration_ns` (the service still
    /// applies the acquire).
    DropAcquireReply,
    /// Nemesis: acquire replies to a process are delivered again.
    HealAcquireReply,
    /// Nemesis: write replies to a process are lost for `duration_ns` (the store still applies
    /// the write).
    DropWriteReply,
    /// Nemesis: write replies to a process are delivered again.
    HealWriteReply,
    /// Nemesis: a real server (`target`: `lock` or `store`) is frozen with SIGSTOP for
    /// `duration_ns`.
    ServerPause,
    /// Nemesis: a frozen real server runs again (SIGCONT).
    ServerResume,
    /// Nemesis: fencer's proxy to a real server passes nothing for `duration_ns`.
    Partition,
    /// Nemesis: the partition is over.
    HealPartition,
    /// Nemesis: fencer's proxy holds every reply from a real server for `delay_ns`, for
    /// `duration_ns`.
    DelayReplies,
    /// Nemesis: replies from the server are delivered promptly again.
    HealDelayReplies,
    /// Nemesis: fencer's proxy loses every reply from a real server for `duration_ns`.
    DropReplies,
    /// Nemesis: replies from the server flow again (connections that lost some are cut).
    HealDropReplies,
    /// Nemesis: fencer's proxy closes every connection to a real server.
    Cut,
    /// Nemesis: acquires sent by a process are held in flight for `duration_ns` before
    /// delivery.
    DelayAcquire,
    /// Nemesis: acquires sent by a process are delivered promptly again.
    HealDelayAcquire,
    /// Nemesis: renews sent by a process (and its renewal task) are held in flight for
    /// `duration_ns` before delivery.
    DelayRenew,
    /// Nemesis: renews sent by a process are delivered promptly again.
    HealDelayRenew,
    /// Nemesis: releases sent by a process are held in flight for `duration_ns` before
    /// delivery.
    DelayRelease,
    /// Nemesis: releases sent by a process are delivered promptly again.
    HealDelayRelease,
    /// Nemesis: for `duration_ns`, the lease of a process is attacked at its edge: its renews,
    /// releases and writes, and its rivals' acquires, are held until just before or after the
    /// moment the lease is about to expire.
    LeaseEdge,
    /// Nemesis: calls around the process's lease go out when they are made again.
    HealLeaseEdge,
    /// Nemesis: the links between the members of a cluster fencer started (`target`: its
    /// role, `lock`) are cut between the groups in `value` (`n1 n2 | n3 n4 n5`) for
    /// `duration_ns`; clients still reach every member.
    NetPartition,
    /// Nemesis: every link between the cluster's members is restored.
    HealNetPartition,
    /// Ask the worker's lock client library whether the lease is still held: `ok` when it
    /// answered held, `fail` (`not-held`) when it answered not.
    Check,
    /// Nemesis: the work a worker was doing under its lease is abandoned (the request it
    /// served was cancelled, its deadline passed) while the worker's process lives on.
    Cancel,
    /// Notice: the worker's lock client library told it the lease is lost.
    Lost,
    /// Notice: the worker's lock client library said its auto-renewal extended the lease.
    Renewed,
    /// Notice: the worker gave its lease up to its library without releasing it, because
    /// the work under it was cancelled: from here on nothing of the worker's wants the lease
    /// renewed.
    Abandoned,
    /// Notice: the lock service refused a renewal the worker's lock client library made on
    /// its own (the lease was not the owner's any more), as the library's host reports it: for
    /// a library fencer does not see call the service (an `exec:` child), the evidence that it
    /// learnt of the loss, whatever it then tells its worker. Recorded when the report
    /// arrives, after the refusal itself.
    RenewRefused,
}

/// The edge of a fault a nemesis event records ([`Op::fault_edge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultEdge {
    /// The fault begins (a pause, a clock step, a window of lost replies opening).
    Start,
    /// A lasting fault ends (a resume, a heal, a recovery).
    End,
}

impl Op {
    /// Every operation, in declaration order: what tests of every table keyed by an op's name
    /// iterate over (the fast history reader's above all, which would otherwise send a new
    /// op's every line to the slow path unnoticed). A test checks the list against the enum's
    /// JSON names, so a variant added but not listed fails it.
    pub const ALL: [Op; 44] = [
        Op::Acquire,
        Op::Renew,
        Op::Release,
        Op::Write,
        Op::Read,
        Op::Pause,
        Op::Resume,
        Op::ClockJump,
        Op::ClockDrift,
        Op::DropRenew,
        Op::HealRenew,
        Op::DelayWrite,
        Op::HealWrite,
        Op::Restart,
        Op::Recover,
        Op::DropAcquireReply,
        Op::HealAcquireReply,
        Op::DropWriteReply,
        Op::HealWriteReply,
        Op::ServerPause,
        Op::ServerResume,
        Op::Partition,
        Op::HealPartition,
        Op::DelayReplies,
        Op::HealDelayReplies,
        Op::DropReplies,
        Op::HealDropReplies,
        Op::Cut,
        Op::DelayAcquire,
        Op::HealDelayAcquire,
        Op::DelayRenew,
        Op::HealDelayRenew,
        Op::DelayRelease,
        Op::HealDelayRelease,
        Op::LeaseEdge,
        Op::HealLeaseEdge,
        Op::NetPartition,
        Op::HealNetPartition,
        Op::Check,
        Op::Cancel,
        Op::Lost,
        Op::Renewed,
        Op::Abandoned,
        Op::RenewRefused,
    ];

    /// Which edge of a fault a nemesis event with this op records: every fault starts with
    /// one, and a lasting fault ends with one of its own; `None` for ops that are no fault's.
    /// Every op is listed, so a new one cannot be left out of fault counts and timelines.
    pub fn fault_edge(self) -> Option<FaultEdge> {
        match self {
            Op::Pause
            | Op::ClockJump
            | Op::ClockDrift
            | Op::DropRenew
            | Op::DelayWrite
            | Op::Restart
            | Op::DropAcquireReply
            | Op::DropWriteReply
            | Op::ServerPause
            | Op::Partition
            | Op::DelayReplies
            | Op::DropReplies
            | Op::Cut
            | Op::DelayAcquire
            | Op::DelayRenew
            | Op::DelayRelease
            | Op::LeaseEdge
            | Op::NetPartition
            | Op::Cancel => Some(FaultEdge::Start),
            Op::Resume
            | Op::HealRenew
            | Op::HealWrite
            | Op::Recover
            | Op::HealAcquireReply
            | Op::HealWriteReply
            | Op::ServerResume
            | Op::HealPartition
            | Op::HealDelayReplies
            | Op::HealDropReplies
            | Op::HealDelayAcquire
            | Op::HealDelayRenew
            | Op::HealDelayRelease
            | Op::HealLeaseEdge
            | Op::HealNetPartition => Some(FaultEdge::End),
            Op::Acquire
            | Op::Renew
            | Op::Release
            | Op::Write
            | Op::Read
            | Op::Check
            | Op::Lost
            | Op::Renewed
            | Op::Abandoned
            | Op::RenewRefused => None,
        }
    }

    /// Whether a nemesis event with this op records a fault's start ([`Op::fault_edge`]).
    pub fn starts_fault(self) -> bool {
        self.fault_edge() == Some(FaultEdge::Start)
    }

    /// The kebab-case name, as in the JSONL form.
    pub fn name(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Write => "write",
            Op::Read => "read",
            Op::Pause => "pause",
            Op::Resume => "resume",
            Op::ClockJump => "clock-jump",
            Op::ClockDrift => "clock-drift",
            Op::DropRenew => "drop-renew",
            Op::HealRenew => "heal-renew",
            Op::DelayWrite => "delay-write",
            Op::HealWrite => "heal-write",
            Op::Restart => "restart",
            Op::Recover => "recover",
            Op::DropAcquireReply => "drop-acquire-reply",
            Op::HealAcquireReply => "heal-acquire-reply",
            Op::DropWriteReply => "drop-write-reply",
            Op::HealWriteReply => "heal-write-reply",
            Op::ServerPause => "server-pause",
            Op::ServerResume => "server-resume",
            Op::Partition => "partition",
            Op::HealPartition => "heal-partition",
            Op::DelayReplies => "delay-replies",
            Op::HealDelayReplies => "heal-delay-replies",
            Op::DropReplies => "drop-replies",
            Op::HealDropReplies => "heal-drop-replies",
            Op::Cut => "cut",
            Op::DelayAcquire => "delay-acquire",
            Op::HealDelayAcquire => "heal-delay-acquire",
            Op::DelayRenew => "delay-renew",
            Op::HealDelayRenew => "heal-delay-renew",
            Op::DelayRelease => "delay-release",
            Op::HealDelayRelease => "heal-delay-release",
            Op::LeaseEdge => "lease-edge",
            Op::HealLeaseEdge => "heal-lease-edge",
            Op::NetPartition => "net-partition",
            Op::HealNetPartition => "heal-net-partition",
            Op::Check => "check",
            Op::Cancel => "cancel",
            Op::Lost => "lost",
            Op::Renewed => "renewed",
            Op::Abandoned => "abandoned",
            Op::RenewRefused => "renew-refused",
        }
    }

    /// True for operations a worker calls on a lock service, a store or its lock client
    /// library (`check`): the operations an `invoke` opens.
    pub fn is_client_op(self) -> bool {
        matches!(
            self,
            Op::Acquire | Op::Renew | Op::Release | Op::Write | Op::Read | Op::Check
        )
    }

    /// True for what a lock client library tells its worker unprompted, and what the worker
    /// tells its library outside any call (`notice` events).
    pub fn is_notice(self) -> bool {
        matches!(
            self,
            Op::Lost | Op::Renewed | Op::Abandoned | Op::RenewRefused
        )
    }
}

/// One history event. See the module docs for why it is flat.
///
/// Times: `time_ns` is the true (simulated or monotonic) time since the run began; `local_ns` is
/// the reading of the acting node's own clock at that moment, which skew can move anywhere.
///
/// It is written through [`EventView`], the one definition of the JSONL form, which a packed
/// row is written through too: both forms give the same bytes by construction.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Event {
    /// Position in the history, from 0, with no gaps.
    pub index: u64,
    /// True time since the start of the run, in nanoseconds.
    pub time_ns: u64,
    /// Who acted: a worker (`w0`), its renewal task (`w0:renew`), `nemesis`, `lock` or `store`.
    pub process: String,
    /// Invoke, completion, nemesis action or server log entry.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The operation.
    pub f: Op,
    /// The acting node's local clock reading, in nanoseconds (may be negative after a jump).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_ns: Option<i64>,
    /// Lock name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// Store key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Owner token of the caller (random per acquisition, 32 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Fencing token carried by the call, granted, or applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Unique id of a write, or the id a read saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_id: Option<String>,
    /// The value written or read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Lease TTL requested, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ns: Option<u64>,
    /// Lock log: the owner of the lease the entry affected (differs from `owner` only when a
    /// stale owner touched someone else's lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Lock log: the fencing token of the lease the entry affected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_token: Option<u64>,
    /// Lock log: when the lease ends after this entry, on the lock server's clock, in
    /// nanoseconds: the first reading at which it is no longer live, by the service's own
    /// boundary rule ([`ExpiryRule`](crate::ExpiryRule)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ns: Option<i64>,
    /// Store: the fence the store held when it rejected a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_token: Option<u64>,
    /// Store log: position of an applied write in the store's own order, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Nemesis: the process or node a fault targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Nemesis: how long a fault lasts, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// Nemesis: clock jump, in nanoseconds (negative jumps backwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jump_ns: Option<i64>,
    /// Nemesis: clock drift, in parts per million (negative runs slow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ppm: Option<i64>,
    /// Nemesis: how long each reply is held by a `delay-replies` fault, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ns: Option<u64>,
    /// Why a call failed or is unknown (`busy`, `not-owner`, `rejected`, `timeout`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An event with its strings borrowed: what is serialised, from an [`Event`] or from a packed
/// row ([`PackedHistory::view`](crate::PackedHistory::view)), so writing or reading through a
/// history never copies a string. Field order and the rule that an empty column is left out are
/// the JSONL form's (and [`Event`]'s `Deserialize` reads them back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EventView<'a> {
    /// Position in the history, from 0, with no gaps.
    pub index: u64,
    /// True time since the start of the run, in nanoseconds.
    pub time_ns: u64,
    /// Who acted: a worker (`w0`), its renewal task (`w0:renew`), `nemesis`, `lock` or `store`.
    pub process: &'a str,
    /// Invoke, completion, nemesis action or server log entry.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The operation.
    pub f: Op,
    /// The acting node's local clock reading, in nanoseconds (may be negative after a jump).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_ns: Option<i64>,
    /// Lock name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock: Option<&'a str>,
    /// Store key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    /// Owner token of the caller (random per acquisition, 32 hex digits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<&'a str>,
    /// Fencing token carried by the call, granted, or applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Unique id of a write, or the id a read saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_id: Option<&'a str>,
    /// The value written or read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<&'a str>,
    /// Lease TTL requested, in nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ns: Option<u64>,
    /// Lock log: the owner of the lease the entry affected (differs from `owner` only when a
    /// stale owner touched someone else's lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<&'a str>,
    /// Lock log: the fencing token of the lease the entry affected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder_token: Option<u64>,
    /// Lock log: when the lease ends after this entry, on the lock server's clock, in
    /// nanoseconds: the first reading at which it is no longer live, by the service's own
    /// boundary rule ([`ExpiryRule`](crate::ExpiryRule)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_ns: Option<i64>,
    /// Store: the fence the store held when it rejected a write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_token: Option<u64>,
    /// Store log: position of an applied write in the store's own order, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Nemesis: the process or node a fault targets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<&'a str>,
    /// Nemesis: how long a fault lasts, in nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
    /// Nemesis: clock jump, in nanoseconds (negative jumps backwards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jump_ns: Option<i64>,
    /// Nemesis: clock drift, in parts per million (negative runs slow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_ppm: Option<i64>,
    /// Nemesis: how long each reply is held by a `delay-replies` fault, in nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ns: Option<u64>,
    /// Why a call failed or is unknown (`busy`, `not-owner`, `rejected`, `timeout`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

impl<'a> EventView<'a> {
    /// A view with only its identity set, as [`Event::new`] makes an event: callers fill the
    /// columns their entry uses with struct-update syntax, borrowing their own strings.
    pub fn new(process: &'a str, kind: EventType, f: Op) -> EventView<'a> {
        EventView {
            index: 0,
            time_ns: 0,
            process,
            kind,
            f,
            local_ns: None,
            lock: None,
            key: None,
            owner: None,
            token: None,
            write_id: None,
            value: None,
            ttl_ns: None,
            holder: None,
            holder_token: None,
            expires_ns: None,
            current_token: None,
            seq: None,
            target: None,
            duration_ns: None,
            jump_ns: None,
            drift_ppm: None,
            delay_ns: None,
            error: None,
        }
    }

    /// True if this is an event of the given type and operation.
    pub fn is(&self, kind: EventType, f: Op) -> bool {
        self.kind == kind && self.f == f
    }

    /// The owned event, for keeping.
    pub fn to_event(&self) -> Event {
        let text = |column: Option<&str>| column.map(str::to_owned);
        Event {
            index: self.index,
            time_ns: self.time_ns,
            process: self.process.to_owned(),
            kind: self.kind,
            f: self.f,
            local_ns: self.local_ns,
            lock: text(self.lock),
            key: text(self.key),
            owner: text(self.owner),
            token: self.token,
            write_id: text(self.write_id),
            value: text(self.value),
            ttl_ns: self.ttl_ns,
            holder: text(self.holder),
            holder_token: self.holder_token,
            expires_ns: self.expires_ns,
            current_token: self.current_token,
            seq: self.seq,
            target: text(self.target),
            duration_ns: self.duration_ns,
            jump_ns: self.jump_ns,
            drift_ppm: self.drift_ppm,
            delay_ns: self.delay_ns,
            error: text(self.error),
        }
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.view().serialize(serializer)
    }
}

impl Event {
    /// This event with its strings borrowed.
    pub fn view(&self) -> EventView<'_> {
        EventView {
            index: self.index,
            time_ns: self.time_ns,
            process: &self.process,
            kind: self.kind,
            f: self.f,
            local_ns: self.local_ns,
            lock: self.lock.as_deref(),
            key: self.key.as_deref(),
            owner: self.owner.as_deref(),
            token: self.token,
            write_id: self.write_id.as_deref(),
            value: self.value.as_deref(),
            ttl_ns: self.ttl_ns,
            holder: self.holder.as_deref(),
            holder_token: self.holder_token,
            expires_ns: self.expires_ns,
            current_token: self.current_token,
            seq: self.seq,
            target: self.target.as_deref(),
            duration_ns: self.duration_ns,
            jump_ns: self.jump_ns,
            drift_ppm: self.drift_ppm,
            delay_ns: self.delay_ns,
            error: self.error.as_deref(),
        }
    }

    /// An event with only its identity set; the recorder fills `index` and `time_ns`, callers
    /// fill the columns their operation uses with struct-update syntax.
    pub fn new(process: impl Into<String>, kind: EventType, f: Op) -> Event {
        Event {
            process: process.into(),
            ..EventView::new("", kind, f).to_event()
        }
    }

    /// Seconds on the true clock, for explanations.
    pub fn time_s(&self) -> f64 {
        self.time_ns as f64 / 1e9
    }

    /// True if this is a client call's completion with the given outcome and operation.
    pub fn is(&self, kind: EventType, f: Op) -> bool {
        self.kind == kind && self.f == f
    }
}

/// An event with every column set, negative where a column may be: a fixture for the tests of
/// every form an event takes (JSON line, packed row).
#[cfg(test)]
pub(crate) fn every_column() -> Event {
    Event {
        index: 7,
        time_ns: 1_000_000_007,
        local_ns: Some(-5),
        lock: Some("L".into()),
        key: Some("k".into()),
        owner: Some("0123456789abcdef0123456789abcdef".into()),
        token: Some(u64::MAX),
        write_id: Some("w1-3".into()),
        value: Some("ünïcode".into()),
        ttl_ns: Some(10),
        holder: Some("h".into()),
        holder_token: Some(0),
        expires_ns: Some(i64::MIN + 1),
        current_token: Some(4),
        seq: Some(9),
        target: Some("w1".into()),
        duration_ns: Some(12),
        jump_ns: Some(i64::MAX),
        drift_ppm: Some(-100),
        delay_ns: Some(3),
        error: Some("busy".into()),
        ..Event::new("w1:renew", EventType::Info, Op::HealAcquireReply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_json_keeps_declaration_order_and_omits_empty_columns() {
        let event = Event {
            token: Some(3),
            lock: Some("L".into()),
            ..Event::new("w1", EventType::Ok, Op::Acquire)
        };
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(
            json,
            r#"{"index":0,"time_ns":0,"process":"w1","type":"ok","f":"acquire","lock":"L","token":3}"#
        );
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, event);
    }

    /// The names serde's derived `Deserialize` accepts for enum `T`, in declaration order:
    /// the derive lists every variant, however the enum grows, and hands the list to
    /// `deserialize_enum`, where this deserializer keeps it.
    fn variant_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        use serde::de::{Error, Visitor, value};

        struct Variants(Option<&'static [&'static str]>);

        impl<'de> serde::Deserializer<'de> for &mut Variants {
            type Error = value::Error;

            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, value::Error> {
                Err(value::Error::custom("not an enum"))
            }

            fn deserialize_enum<V: Visitor<'de>>(
                self,
                _name: &'static str,
                variants: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, value::Error> {
                self.0 = Some(variants);
                Err(value::Error::custom("variants taken"))
            }

            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                struct identifier ignored_any
            }
        }

        let mut variants = Variants(None);
        let _ = T::deserialize(&mut variants);
        variants
            .0
            .expect("a derived enum Deserialize calls deserialize_enum")
    }

    #[test]
    fn op_all_lists_every_op_in_declaration_order_under_its_json_name() {
        let names: Vec<&str> = Op::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names, variant_names::<Op>());
        for f in Op::ALL {
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
    }

    #[test]
    fn event_type_all_lists_every_type_in_declaration_order_under_its_json_name() {
        let names: Vec<&str> = EventType::ALL.iter().map(|kind| kind.name()).collect();
        assert_eq!(names, variant_names::<EventType>());
        for kind in EventType::ALL {
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.name())
            );
        }
    }

    #[test]
    fn only_ok_fail_info_close_an_invoke() {
        assert!(EventType::Info.is_completion());
        assert!(!EventType::Invoke.is_completion());
        assert!(!EventType::Log.is_completion());
    }
}
