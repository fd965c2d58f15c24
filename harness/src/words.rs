//! Events, times and owner tokens in plain words, shared by every place fencer explains a
//! history (checker explanations, timelines and their tooltips, `fencer explain`), so one
//! history reads the same in all.
//!
//! Times are printed from integer nanoseconds rounded to milliseconds, never through floats,
//! so the same history gives the same words on every platform.

use crate::event::{Event, EventType, Op};

/// `12.504s`: seconds with three decimals, rounded to the nearest millisecond.
pub fn secs(ns: u64) -> String {
    let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

/// As [`secs`], for a clock reading that may be negative after a backward jump.
pub fn secs_signed(ns: i64) -> String {
    let magnitude = secs(ns.unsigned_abs());
    if ns < 0 && magnitude != "0.000s" {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// `1 write`, `2 writes`: a count with its noun in the right number.
pub fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The first 8 characters of an owner token, enough to tell holders apart in prose.
pub fn short_owner(owner: &str) -> String {
    match owner.char_indices().nth(8) {
        Some((cut, _)) => format!("{}…", &owner[..cut]),
        None => owner.to_string(),
    }
}

/// `26.813s (w2's clock 26.813s)`: the true time, and the acting node's own reading if known.
/// A nemesis event's reading is its target's clock (after a jump, the new reading).
pub fn both_clocks(event: &Event) -> String {
    let node = match (event.kind, &event.target) {
        (EventType::Nemesis, Some(target)) => target,
        _ => &event.process,
    };
    match event.local_ns {
        Some(local_ns) => format!(
            "{} ({node}'s clock {})",
            secs(event.time_ns),
            secs_signed(local_ns)
        ),
        None => secs(event.time_ns),
    }
}

/// Which of a history's server logs carry true times: those recorded as the servers applied
/// their changes, interleaved with the calls (fencer's simulated backends). A log read back
/// after the run (a real service's lock log, a store's applied log, an exec child's) was
/// appended once the run was over: its entries' `time_ns` is when it was read back, the same
/// for all, and says nothing of when anything was applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogTiming {
    /// The store log (`log` `write` entries) was recorded as writes were applied.
    pub store_log_timed: bool,
    /// The lock log (`log` grants, renewals, releases) was recorded as changes were applied.
    pub lock_log_timed: bool,
}

impl LogTiming {
    /// Found from each event's type and operation, in history order. A log was recorded as
    /// it went when some client call completes after its first entry; one appended after the
    /// run follows every completion, since a change the server applied comes before its
    /// reply.
    pub fn of(events: impl IntoIterator<Item = (EventType, Op)>) -> LogTiming {
        let mut timing = LogTiming::default();
        let (mut store_seen, mut lock_seen) = (false, false);
        for (kind, f) in events {
            match (kind, f) {
                (EventType::Log, Op::Write) => store_seen = true,
                (EventType::Log, Op::Acquire | Op::Renew | Op::Release) => lock_seen = true,
                (kind, f) if kind.is_completion() && f.is_client_op() => {
                    timing.store_log_timed |= store_seen;
                    timing.lock_log_timed |= lock_seen;
                }
                _ => {}
            }
        }
        timing
    }

    /// The timing of `events`' logs.
    pub fn of_events(events: &[Event]) -> LogTiming {
        LogTiming::of(events.iter().map(|event| (event.kind, event.f)))
    }

    /// Whether the `time_ns` of an event of type `kind` and operation `f` says when it
    /// happened: true for every event but an entry of a log read back after the run.
    pub fn is_timed(&self, kind: EventType, f: Op) -> bool {
        match (kind, f) {
            (EventType::Log, Op::Write) => self.store_log_timed,
            (EventType::Log, Op::Acquire | Op::Renew | Op::Release) => self.lock_log_timed,
            _ => true,
        }
    }
}

/// When `event` happened, as far as the history knows: [`both_clocks`] for an event whose
/// true time is known; for an entry of a log read back after the run, what it does tell: the
/// lock service's own clock reading (`lock clock 1.362s`), or the store's order
/// (`store order 7`), and that its true time is unknown.
pub fn when_known(event: &Event, timing: LogTiming) -> String {
    if timing.is_timed(event.kind, event.f) {
        return both_clocks(event);
    }
    let order = match event.seq {
        Some(seq) if event.f == Op::Write => format!("store order {seq}"),
        _ => match event.local_ns {
            Some(local_ns) => format!("lock clock {}", secs_signed(local_ns)),
            None => "time unknown".to_string(),
        },
    };
    format!("{order} (read back after the run: true time unknown)")
}

/// What a server fault acts on, in words: `the lock service`, `the store`, `member n2 of the
/// lock service`; aimed at a worker, its lock client's own process and proxy (`w1's lock
/// client`), since a worker whose client is a child of its own takes a server's faults.
pub fn server_name(target: &str) -> String {
    if crate::roles::worker_number(target).is_some() {
        return format!("{target}'s lock client");
    }
    let role = |role: &str| match role {
        "lock" => "the lock service".to_string(),
        "store" => "the store".to_string(),
        other => other.to_string(),
    };
    // A member of a cluster fencer started: `lock.n2`.
    match target.split_once('.') {
        Some((owner, member)) => format!("member {member} of {}", role(owner)),
        None => role(target),
    }
}

/// The replies a reply fault on `target` holds or loses: those a server sends (`replies from
/// the lock service`), or, aimed at a worker, those its lock client's proxy passes back to it
/// (`replies to w1's lock client`).
pub fn replies_of(target: &str) -> String {
    if crate::roles::worker_number(target).is_some() {
        format!("replies to {}", server_name(target))
    } else {
        format!("replies from {}", server_name(target))
    }
}

fn opt<T: ToString>(value: &Option<T>) -> String {
    value.as_ref().map_or("?".into(), T::to_string)
}

/// What `event` says happened, without its time: `w2 sent write w2-1 with token 6 to key k`.
pub fn describe(event: &Event) -> String {
    let who = &event.process;
    let token = opt(&event.token);
    let lock = opt(&event.lock);
    let key = opt(&event.key);
    let write = event
        .write_id
        .clone()
        .or_else(|| event.value.clone())
        .unwrap_or_else(|| "?".into());
    // The value, when it says more than the write id (a user's own values, say).
    let value = match (&event.value, &event.write_id) {
        (Some(value), Some(id)) if value != id => format!(" (value {value:?})"),
        (Some(value), None) => format!(" (value {value:?})"),
        _ => String::new(),
    };
    let error = event
        .error
        .as_deref()
        .map_or(String::new(), |error| format!(" ({error})"));
    let target = opt(&event.target);
    // A server fault's target as a reader knows it (`the lock service`, not `lock`).
    let server = server_name(&target);
    let replies = replies_of(&target);
    let duration = event
        .duration_ns
        .map_or(String::new(), |d| format!(" for {}", secs(d)));
    // A member fault aimed at whichever member led: the plan said `lock.leader`.
    let server = match (event.kind, event.value.as_deref()) {
        (EventType::Nemesis, Some(aimed)) if aimed.ends_with(".leader") => {
            format!("{server} (the leader)")
        }
        _ => server,
    };
    match (event.kind, event.f) {
        (EventType::Invoke, Op::Acquire) => format!("{who} asked for lock {lock}"),
        (EventType::Invoke, Op::Renew) => format!("{who} asked to renew lock {lock}"),
        (EventType::Invoke, Op::Release) => format!("{who} asked to release lock {lock}"),
        (EventType::Invoke, Op::Write) => {
            format!("{who} sent write {write}{value} with token {token} to key {key}")
        }
        (EventType::Invoke, Op::Read) => format!("{who} read key {key}"),
        (EventType::Invoke, Op::Check) => format!(
            "{who} asked its lock client whether it still holds lock {lock} (owner {})",
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Ok, Op::Check) => {
            format!("{who} was told by its lock client that it still holds lock {lock}")
        }
        (EventType::Fail, Op::Check) => {
            format!("{who} was told by its lock client that it no longer holds lock {lock}")
        }
        (EventType::Notice, Op::Lost) => format!(
            "{who}'s lock client told it the lease of owner {} on lock {lock} is lost{error}",
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Notice, Op::Renewed) => format!(
            "{who}'s lock client said it renewed the lease of owner {} on lock {lock}",
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Notice, Op::RenewRefused) => format!(
            "{who}'s lock client reported that the lock service refused its renewal of the lease \
             of owner {} on lock {lock}{error}",
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Notice, Op::Abandoned) => format!(
            "{who} gave up the lease of owner {} on lock {lock} without releasing it (its work \
             was cancelled)",
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Nemesis, Op::Cancel) => format!(
            "the nemesis cancelled {target}'s work under its lease: at once if it held one, \
             else halfway through the thinking of its next (its process lives on)"
        ),
        (EventType::Ok, Op::Acquire) => format!("{who} was granted lock {lock} with token {token}"),
        (EventType::Ok, Op::Renew) => {
            format!("{who} was told its renewal of lock {lock} succeeded")
        }
        (EventType::Ok, Op::Release) => format!("{who} was told lock {lock} was released"),
        (EventType::Ok, Op::Write) => {
            format!("{who} was told write {write} (token {token}) was accepted")
        }
        (EventType::Ok, Op::Read) => format!("{who} read {write} (token {token}) from key {key}"),
        (EventType::Fail, Op::Write) => format!(
            "{who} was told write {write} (token {token}) was rejected: the store held token {}",
            opt(&event.current_token)
        ),
        (EventType::Fail, f) => format!("{who}'s {} failed{error}", f.name()),
        // A fault the nemesis could not aim (no leader to hit) did not happen.
        (EventType::Info, f) if !f.is_client_op() => {
            format!("the nemesis did not {} {target}{error}", f.name())
        }
        (EventType::Info, f) => {
            format!("{who}'s {} got no answer{error}: outcome unknown", f.name())
        }
        (EventType::Log, Op::Acquire) => format!(
            "the lock service granted lock {lock} to owner {} with token {token}, expiring at lock clock {}",
            short_owner(event.owner.as_deref().unwrap_or("?")),
            event.expires_ns.map_or("?".into(), secs_signed)
        ),
        (EventType::Log, Op::Renew) => format!(
            "the lock service renewed the lease of token {} on lock {lock} (asked by owner {}), now expiring at lock clock {}",
            opt(&event.holder_token),
            short_owner(event.owner.as_deref().unwrap_or("?")),
            event.expires_ns.map_or("?".into(), secs_signed)
        ),
        (EventType::Log, Op::Release) => format!(
            "the lock service released the lease of token {} on lock {lock} (asked by owner {})",
            opt(&event.holder_token),
            short_owner(event.owner.as_deref().unwrap_or("?"))
        ),
        (EventType::Log, Op::Write) => format!(
            "the store applied write {write}{value} with token {token} to key {key} (store order {})",
            opt(&event.seq)
        ),
        (EventType::Log, f) => format!("the {who} logged {}", f.name()),
        (EventType::Nemesis, Op::Pause) => format!("the nemesis paused {target}{duration}"),
        // Pauses of one process overlap: it runs again only when the last of them ends.
        (EventType::Nemesis, Op::Resume) => {
            format!("a pause of {target} ended (it runs again unless another still holds it)")
        }
        (EventType::Nemesis, Op::ClockJump) => format!(
            "the nemesis jumped {target}'s clock by {}",
            event.jump_ns.map_or("?".into(), secs_signed)
        ),
        (EventType::Nemesis, Op::ClockDrift) => format!(
            "the nemesis made {target}'s clock drift {} ppm",
            event.drift_ppm.map_or("?".into(), |ppm| format!("{ppm:+}"))
        ),
        (EventType::Nemesis, Op::DropRenew) => {
            format!("the nemesis began dropping renew replies to {target}{duration}")
        }
        (EventType::Nemesis, Op::HealRenew) => format!("renew replies to {target} flow again"),
        (EventType::Nemesis, Op::DelayWrite) => {
            format!("the nemesis began holding writes from {target} in flight{duration}")
        }
        (EventType::Nemesis, Op::HealWrite) => format!("writes from {target} flow again"),
        (EventType::Nemesis, Op::DelayAcquire) => {
            format!("the nemesis began holding acquires from {target} in flight{duration}")
        }
        (EventType::Nemesis, Op::HealDelayAcquire) => {
            format!("acquires from {target} flow again")
        }
        (EventType::Nemesis, Op::DelayRenew) => {
            format!("the nemesis began holding renews from {target} in flight{duration}")
        }
        (EventType::Nemesis, Op::HealDelayRenew) => format!("renews from {target} flow again"),
        (EventType::Nemesis, Op::DelayRelease) => {
            format!("the nemesis began holding releases from {target} in flight{duration}")
        }
        (EventType::Nemesis, Op::HealDelayRelease) => {
            format!("releases from {target} flow again")
        }
        (EventType::Nemesis, Op::LeaseEdge) => format!(
            "the nemesis began aiming {target}'s lease calls, and its rivals' acquires, at \
             the edge of its lease{duration}"
        ),
        (EventType::Nemesis, Op::HealLeaseEdge) => {
            format!("{target}'s lease calls go out when made again")
        }
        (EventType::Nemesis, Op::Restart) => {
            format!("the nemesis restarted {server}{duration}")
        }
        (EventType::Nemesis, Op::Recover) => format!("{server} answers again"),
        (EventType::Nemesis, Op::ServerPause) => {
            format!("the nemesis froze {server} (SIGSTOP){duration}")
        }
        (EventType::Nemesis, Op::ServerResume) => {
            format!("{server} runs again (SIGCONT)")
        }
        (EventType::Nemesis, Op::Partition) => {
            format!("the nemesis cut {server} off the network{duration}")
        }
        (EventType::Nemesis, Op::HealPartition) => {
            format!("{server} is reachable again")
        }
        (EventType::Nemesis, Op::DelayReplies) => format!(
            "the nemesis began holding {replies} for {}{duration}",
            event.delay_ns.map_or("?".into(), secs)
        ),
        (EventType::Nemesis, Op::HealDelayReplies) => {
            format!("{replies} arrive promptly again")
        }
        (EventType::Nemesis, Op::DropReplies) => {
            format!("the nemesis began losing {replies}{duration}")
        }
        (EventType::Nemesis, Op::HealDropReplies) => format!("{replies} flow again"),
        (EventType::Nemesis, Op::Cut) => {
            format!("the nemesis closed every connection to {server}")
        }
        (EventType::Nemesis, Op::NetPartition) => format!(
            "the nemesis cut the links between the members of {server} into {}{duration}",
            opt(&event.value)
        ),
        (EventType::Nemesis, Op::HealNetPartition) => {
            format!("the members of {server} reach each other again")
        }
        (kind, f) => format!("{who} {kind:?} {}", f.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_read_back_after_the_run_is_known_to_carry_no_times() {
        let (invoke, ok) = ((EventType::Invoke, Op::Write), (EventType::Ok, Op::Write));
        let store = (EventType::Log, Op::Write);
        let lock = (EventType::Log, Op::Acquire);
        let timing = |events: &[(EventType, Op)]| LogTiming::of(events.iter().copied());
        assert!(timing(&[invoke, store, ok]).store_log_timed);
        assert!(!timing(&[invoke, ok, store]).store_log_timed);
        assert!(!timing(&[invoke, ok]).store_log_timed);
        assert!(!timing(&[invoke, store, ok]).lock_log_timed);
        assert!(timing(&[lock, invoke, ok, store]).lock_log_timed);
        let read_back = timing(&[invoke, ok, lock, store]);
        assert!(!read_back.is_timed(EventType::Log, Op::Write));
        assert!(!read_back.is_timed(EventType::Log, Op::Renew));
        assert!(read_back.is_timed(EventType::Ok, Op::Write));
    }

    #[test]
    fn an_entry_of_a_log_read_back_is_told_by_its_order_or_its_server_s_clock() {
        let applied = Event {
            time_ns: 12_889_000_000,
            seq: Some(7),
            ..Event::new("store", EventType::Log, Op::Write)
        };
        let granted = Event {
            time_ns: 12_889_000_000,
            local_ns: Some(1_362_000_000),
            ..Event::new("lock", EventType::Log, Op::Acquire)
        };
        let untimed = LogTiming::default();
        assert_eq!(
            when_known(&applied, untimed),
            "store order 7 (read back after the run: true time unknown)"
        );
        assert_eq!(
            when_known(&granted, untimed),
            "lock clock 1.362s (read back after the run: true time unknown)"
        );
        let timed = LogTiming {
            store_log_timed: true,
            lock_log_timed: true,
        };
        assert_eq!(when_known(&applied, timed), "12.889s");
        assert_eq!(when_known(&granted, timed), "12.889s (lock's clock 1.362s)");
    }

    #[test]
    fn seconds_round_to_the_millisecond_and_keep_the_sign() {
        assert_eq!(secs(12_504_500_000), "12.505s");
        assert_eq!(secs_signed(-1_500_000_000), "-1.500s");
        assert_eq!(secs_signed(-100), "0.000s");
    }

    #[test]
    fn a_fault_on_a_worker_s_lock_client_and_the_end_of_a_pause_are_told_as_they_act() {
        let fault = |f, target: &str| Event {
            target: Some(target.into()),
            delay_ns: Some(1_000_000_000),
            ..Event::new("nemesis", EventType::Nemesis, f)
        };
        assert_eq!(
            describe(&fault(Op::DelayReplies, "w1")),
            "the nemesis began holding replies to w1's lock client for 1.000s"
        );
        assert_eq!(
            describe(&fault(Op::DelayReplies, "lock")),
            "the nemesis began holding replies from the lock service for 1.000s"
        );
        assert_eq!(
            describe(&fault(Op::ServerPause, "w2")),
            "the nemesis froze w2's lock client (SIGSTOP)"
        );
        assert_eq!(
            describe(&fault(Op::HealDropReplies, "lock.n2")),
            "replies from member n2 of the lock service flow again"
        );
        assert_eq!(
            describe(&fault(Op::Resume, "w1")),
            "a pause of w1 ended (it runs again unless another still holds it)"
        );
    }

    #[test]
    fn owners_are_cut_to_eight_characters() {
        assert_eq!(short_owner("0123456789abcdef"), "01234567…");
        assert_eq!(short_owner("abc"), "abc");
    }

    #[test]
    fn times_round_to_the_millisecond_and_keep_their_sign() {
        assert_eq!(secs(12_504_500_000), "12.505s");
        assert_eq!(secs_signed(-1_500_000_000), "-1.500s");
        assert_eq!(secs_signed(-100), "0.000s");
    }

    #[test]
    fn a_rejected_write_names_both_tokens_and_a_grant_its_lock_clock_expiry() {
        let mut rejected = Event::new("w1", EventType::Fail, Op::Write);
        rejected.token = Some(3);
        rejected.current_token = Some(5);
        rejected.write_id = Some("w1-7".into());
        assert_eq!(
            describe(&rejected),
            "w1 was told write w1-7 (token 3) was rejected: the store held token 5"
        );
        let mut grant = Event::new("lock", EventType::Log, Op::Acquire);
        grant.lock = Some("L".into());
        grant.owner = Some("0123456789abcdef".into());
        grant.token = Some(9);
        grant.expires_ns = Some(10_000_000_000);
        grant.local_ns = Some(2_000_000);
        grant.time_ns = 1_000_000;
        assert_eq!(
            describe(&grant),
            "the lock service granted lock L to owner 01234567… with token 9, expiring at lock clock 10.000s"
        );
        assert_eq!(both_clocks(&grant), "0.001s (lock's clock 0.002s)");
        let mut jump = Event::new("nemesis", EventType::Nemesis, Op::ClockJump);
        jump.target = Some("w3".into());
        jump.local_ns = Some(-5_000_000_000);
        assert_eq!(both_clocks(&jump), "0.000s (w3's clock -5.000s)");
    }
}
