//! Putting events into plain words: times on both clocks, short owner tokens, and a process's
//! story (its grant, its calls and the faults that hit it) told in history order.
//!
//! Times are printed from integer nanoseconds rounded to milliseconds, so explanations are
//! identical on every platform.

pub(crate) use fencer_harness::words::{count, secs, secs_signed, short_owner};
use fencer_harness::{Event, EventType, Op};

use crate::context::Context;

/// At most this many faults are told in one story; the rest are counted.
const MAX_FAULT_PHRASES: usize = 6;

/// At most this many fault events are cited as evidence for one anomaly.
const MAX_FAULT_EVENTS: usize = 16;

/// `at 12.504s (its clock 0.504s)`: the true time of `event` and the reading of the acting
/// node's own clock, named `clock` (`its`, `lock`, `store`). An entry of a log read back after
/// the run has no true time: it is told by what it holds ([`untimed`]).
pub(crate) fn when(ctx: &Context<'_>, event: &Event, clock: &str) -> String {
    if !ctx.timing.is_timed(event.kind, event.f) {
        return untimed(ctx, event);
    }
    match event.local_ns {
        Some(local_ns) => format!(
            "at {} ({clock} clock {})",
            secs(event.time_ns),
            secs_signed(local_ns)
        ),
        None => format!("at {}", secs(event.time_ns)),
    }
}

/// `at 12.504s`: the true time of `event` alone; for an entry of a log read back after the
/// run, what it holds instead ([`untimed`]).
pub(crate) fn at_time(ctx: &Context<'_>, event: &Event) -> String {
    if !ctx.timing.is_timed(event.kind, event.f) {
        return untimed(ctx, event);
    }
    format!("at {}", secs(event.time_ns))
}

/// `at 12.504s (store clock 12.504s, store order 7)`; for a store log read back after the
/// run, `in store order 7` alone.
pub(crate) fn at_store_order(ctx: &Context<'_>, applied: &Event) -> String {
    if !ctx.timing.is_timed(applied.kind, applied.f) {
        return untimed(ctx, applied);
    }
    let seq = applied.seq.map_or("unknown".into(), |seq| seq.to_string());
    match applied.local_ns {
        Some(local_ns) => format!(
            "at {} (store clock {}, store order {seq})",
            secs(applied.time_ns),
            secs_signed(local_ns)
        ),
        None => format!("at {} (store order {seq})", secs(applied.time_ns)),
    }
}

/// What an entry of a log read back after the run tells of when it was applied: its place in
/// the store's order and the bounds the client replies give, or the lock service's own clock
/// reading. Its `time_ns` is when the log was read back, so it is never told.
pub(crate) fn untimed(ctx: &Context<'_>, event: &Event) -> String {
    match (event.f, event.seq, event.local_ns) {
        (Op::Write, Some(seq), _) => format!(
            "in store order {seq} (the store's log, read back after the run, has no times{})",
            store_bounds(ctx, event)
        ),
        (_, _, Some(local_ns)) => format!("at lock clock {}", secs_signed(local_ns)),
        _ => "at a time the history does not hold (its log was read back after the run)".into(),
    }
}

/// `; it was applied after its write was first sent, at 12.100s, and before it was
/// acknowledged, at 12.300s`: what the replies to the write's calls bound its application by.
/// The acknowledgement bounds only a write id the store applied once (a second application
/// may come after the first reply).
fn store_bounds(ctx: &Context<'_>, applied: &Event) -> String {
    let Some(write_id) = applied.write_id.as_deref().and_then(|id| ctx.sym(id)) else {
        return String::new();
    };
    let lookup = ctx.lookup();
    let sends = lookup.write_invokes(write_id);
    let Some(&first) = sends.first() else {
        return String::new();
    };
    let mut bounds = format!(
        "; it was applied after its write was first sent, at {}",
        secs(ctx.at(first).time_ns)
    );
    let key = applied.key.as_deref().and_then(|key| ctx.sym(key));
    let applied_once = key.is_some_and(|key| ctx.versions().applications(key, write_id) == 1);
    let acknowledged = sends
        .iter()
        .filter_map(|&send| lookup.partner(send))
        .find(|&reply| ctx.rows.get(reply).kind == EventType::Ok);
    if let (true, Some(ok)) = (applied_once, acknowledged) {
        bounds.push_str(&format!(
            ", and before it was acknowledged, at {}",
            secs(ctx.at(ok).time_ns)
        ));
    }
    bounds
}

/// A process name when the history tells who held `owner`, else the owner token itself.
pub(crate) fn who_owns(ctx: &Context<'_>, owner: &str) -> String {
    let process = ctx
        .sym(owner)
        .and_then(|owner| ctx.lookup().process_of_owner(ctx, owner));
    match process {
        Some(process) => format!("{process} (owner {})", short_owner(owner)),
        None => format!("owner {}", short_owner(owner)),
    }
}

/// Nemesis events that targeted `process` (or its worker) between positions `from` and `to`
/// inclusive, at most [`MAX_FAULT_EVENTS`] of them.
pub(crate) fn faults_between(
    ctx: &Context<'_>,
    process: &str,
    from: usize,
    to: usize,
) -> Vec<usize> {
    let mut faults = ctx.lookup().faults_on(process, from, to);
    faults.truncate(MAX_FAULT_EVENTS);
    faults
}

/// One actor's part in an anomaly, as a sentence: `w1 acquired ..., was paused ..., and ...`.
pub(crate) struct Story {
    subject: String,
    /// (history position, verb phrase), told in position order.
    phrases: Vec<(usize, String)>,
}

impl Story {
    /// A story about `subject` (`w1`, `the lock server`).
    pub fn new(subject: impl Into<String>) -> Story {
        Story {
            subject: subject.into(),
            phrases: Vec::new(),
        }
    }

    /// Adds what happened at `position`, as a verb phrase without the subject.
    pub fn add(&mut self, position: usize, phrase: impl Into<String>) {
        self.phrases.push((position, phrase.into()));
    }

    /// True when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.phrases.is_empty()
    }

    /// Adds the faults at `positions` (nemesis events, ascending). A resume or heal right after
    /// the pause or drop it ends is not told twice; beyond [`MAX_FAULT_PHRASES`] faults are
    /// only counted.
    pub fn add_faults(&mut self, ctx: &Context<'_>, positions: &[usize]) {
        let mut told = 0;
        let mut untold = 0;
        let mut paused = false;
        let mut dropping = false;
        for &position in positions {
            let event = ctx.at(position);
            let phrase = match event.f {
                Op::Resume if paused => {
                    paused = false;
                    continue;
                }
                Op::HealRenew if dropping => {
                    dropping = false;
                    continue;
                }
                Op::Pause => {
                    paused = true;
                    fault_phrase(&event)
                }
                Op::DropRenew => {
                    dropping = true;
                    fault_phrase(&event)
                }
                _ => fault_phrase(&event),
            };
            if told < MAX_FAULT_PHRASES {
                self.add(position, phrase);
                told += 1;
            } else {
                untold += 1;
            }
        }
        if untold > 0 {
            let last = positions.last().copied().unwrap_or_default();
            self.add(
                last,
                format!(
                    "was hit by {} (see the evidence events)",
                    count(untold, "more fault", "more faults")
                ),
            );
        }
    }

    /// `subject p1, p2, and p3`, without a final period.
    pub fn render(mut self) -> String {
        self.phrases.sort_by_key(|(position, _)| *position);
        let phrases: Vec<String> = self.phrases.into_iter().map(|(_, phrase)| phrase).collect();
        let body = match phrases.as_slice() {
            [] => String::new(),
            [only] => only.clone(),
            [first, second] => format!("{first} and {second}"),
            [init @ .., last] => format!("{}, and {last}", init.join(", ")),
        };
        format!("{} {body}", self.subject)
    }
}

/// What a nemesis event did to its target, as a verb phrase.
fn fault_phrase(event: &Event) -> String {
    let at = secs(event.time_ns);
    match (event.f, event.duration_ns, event.jump_ns, event.drift_ppm) {
        (Op::Pause, Some(duration_ns), _, _) => format!(
            "was paused {} from {at} to {}",
            secs(duration_ns),
            secs(event.time_ns.saturating_add(duration_ns))
        ),
        (Op::Pause, None, _, _) => format!("was paused at {at}"),
        (Op::Resume, ..) => format!("was resumed at {at}"),
        (Op::ClockJump, _, Some(jump_ns), _) => format!(
            "had its clock jumped {} {} at {at}",
            if jump_ns < 0 { "backward" } else { "forward" },
            secs(jump_ns.unsigned_abs())
        ),
        (Op::ClockDrift, _, _, Some(drift_ppm)) => {
            format!("had its clock set to drift {drift_ppm:+} ppm at {at}")
        }
        (Op::DropRenew, Some(duration_ns), _, _) => format!(
            "lost its renew replies for {} from {at} to {}",
            secs(duration_ns),
            secs(event.time_ns.saturating_add(duration_ns))
        ),
        (Op::DropRenew, None, _, _) => format!("started losing its renew replies at {at}"),
        (Op::HealRenew, ..) => format!("got its renew replies back at {at}"),
        (Op::DelayWrite, Some(duration_ns), _, _) => format!(
            "had its writes held in flight for {} from {at} to {}",
            secs(duration_ns),
            secs(event.time_ns.saturating_add(duration_ns))
        ),
        (Op::DelayWrite, None, _, _) => format!("started having its writes delayed at {at}"),
        (Op::HealWrite, ..) => format!("had its writes delivered promptly again at {at}"),
        (Op::Restart, Some(duration_ns), _, _) => {
            format!("was restarted at {at}, down for {}", secs(duration_ns))
        }
        (Op::Restart, None, _, _) => format!("was restarted at {at}"),
        (Op::Recover, ..) => format!("answered again after its restart at {at}"),
        (f, ..) => format!("was hit by a {} fault at {at}", f.name()),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::EventType;

    use super::*;

    #[test]
    fn seconds_have_three_decimals_rounded_to_the_millisecond() {
        assert_eq!(secs(0), "0.000s");
        assert_eq!(secs(3_000_000), "0.003s");
        assert_eq!(secs(12_504_400_000), "12.504s");
        assert_eq!(secs(12_504_500_000), "12.505s");
        assert_eq!(secs_signed(-1_500_000_000), "-1.500s");
        assert_eq!(secs_signed(-100), "0.000s");
    }

    #[test]
    fn when_names_both_clocks_if_the_local_one_is_known() {
        let history = fencer_harness::PackedHistory::default();
        let ctx = Context::new(&history);
        let mut event = Event::new("w1", EventType::Ok, Op::Acquire);
        event.time_ns = 3_000_000;
        assert_eq!(when(&ctx, &event, "its"), "at 0.003s");
        event.local_ns = Some(-7_000_000_000);
        assert_eq!(when(&ctx, &event, "its"), "at 0.003s (its clock -7.000s)");
    }

    #[test]
    fn an_entry_of_a_log_read_back_after_the_run_is_never_given_a_time() {
        // No client call completes after the logs: both were read back after the run.
        let history = fencer_harness::PackedHistory::default();
        let ctx = Context::new(&history);
        // Both read back at 12.889 s: the store's 148th write, and a grant at lock clock 1.362 s.
        let mut applied = Event::new("store", EventType::Log, Op::Write);
        (applied.time_ns, applied.seq) = (12_889_000_000, Some(148));
        let mut granted = Event::new("lock", EventType::Log, Op::Acquire);
        (granted.time_ns, granted.local_ns) = (12_889_000_000, Some(1_362_000_000));
        for told in [
            when(&ctx, &applied, "store"),
            at_store_order(&ctx, &applied),
            when(&ctx, &granted, "lock"),
        ] {
            assert!(!told.contains("12.889"), "{told}");
        }
        assert!(at_store_order(&ctx, &applied).starts_with("in store order 148"));
        assert_eq!(when(&ctx, &granted, "lock"), "at lock clock 1.362s");
    }

    #[test]
    fn counts_agree_with_their_noun() {
        assert_eq!(count(1, "write", "writes"), "1 write");
        assert_eq!(count(0, "write", "writes"), "0 writes");
        assert_eq!(count(3, "time", "times"), "3 times");
    }

    #[test]
    fn owner_tokens_are_shortened() {
        assert_eq!(short_owner("000000000000000000000000000000ab"), "00000000…");
        assert_eq!(short_owner("o1"), "o1");
    }

    #[test]
    fn story_joins_phrases_in_history_order() {
        let mut story = Story::new("w1");
        story.add(9, "wrote");
        story.add(2, "acquired");
        story.add(5, "was paused");
        assert_eq!(story.render(), "w1 acquired, was paused, and wrote");
        let mut story = Story::new("w2");
        story.add(1, "a");
        story.add(0, "b");
        assert_eq!(story.render(), "w2 b and a");
    }

    #[test]
    fn a_story_tells_a_pause_once_and_counts_faults_beyond_the_limit() {
        let mut b = crate::testkit::Builder::new();
        b.pause("w1", 2.0);
        b.resume("w1");
        for _ in 0..MAX_FAULT_PHRASES {
            b.nemesis(Op::ClockDrift, "w1", |e| e.drift_ppm = Some(-50));
        }
        b.resume("w1");
        let history = b.build();
        let packed = fencer_harness::PackedHistory::pack(&history);
        let ctx = Context::new(&packed);
        let faults = faults_between(&ctx, "w1:renew", 0, history.events.len());
        assert_eq!(faults.len(), history.events.len());
        let mut story = Story::new("w1");
        story.add_faults(&ctx, &faults);
        let text = story.render();
        assert!(
            text.starts_with(
                "w1 was paused 2.000s from 0.000s to 2.000s, had its clock set to drift -50 ppm"
            ),
            "{text}"
        );
        assert_eq!(text.matches("was resumed").count(), 0, "{text}");
        assert!(
            text.ends_with("and was hit by 2 more faults (see the evidence events)"),
            "{text}"
        );
    }

    #[test]
    fn fault_phrases_give_durations_and_directions() {
        let mut pause = Event::new("nemesis", EventType::Nemesis, Op::Pause);
        pause.time_ns = 500_000_000;
        pause.duration_ns = Some(12_000_000_000);
        assert_eq!(
            fault_phrase(&pause),
            "was paused 12.000s from 0.500s to 12.500s"
        );
        let mut jump = Event::new("nemesis", EventType::Nemesis, Op::ClockJump);
        jump.jump_ns = Some(-5_000_000_000);
        assert_eq!(
            fault_phrase(&jump),
            "had its clock jumped backward 5.000s at 0.000s"
        );
        let mut delay = Event::new("nemesis", EventType::Nemesis, Op::DelayWrite);
        delay.time_ns = 1_000_000_000;
        delay.duration_ns = Some(3_000_000_000);
        assert_eq!(
            fault_phrase(&delay),
            "had its writes held in flight for 3.000s from 1.000s to 4.000s"
        );
        let mut restart = Event::new("nemesis", EventType::Nemesis, Op::Restart);
        restart.duration_ns = Some(2_000_000_000);
        assert_eq!(
            fault_phrase(&restart),
            "was restarted at 0.000s, down for 2.000s"
        );
    }
}
