//! Shrinking a failing plan to a small one that still fails the same way.
//!
//! First the story itself: when the anomaly names its evidence (the events it cites, so the
//! workers they belong to and the stretch of time they span), the plan in which only those
//! workers act, each with only its cycles that overlap that stretch, and only the faults that
//! reach them then, is tried before anything else: most of a run's workers and cycles have
//! nothing to do with one stale write. The kept cycles start as early as the run allows, each
//! worker's first kept cycle waiting as long as it began after the earliest, and the faults
//! move with them, so the cast meets as it met in the run. A story is cut up to four ways
//! ([`StoryCut::ALL`]: each worker's cycles from the story's start or from its own part, each
//! starting when granted or when it first asked), and in a simulation each cut is also tried
//! with [`STORY_RESEEDS`] other seeds, since a race of milliseconds can hinge on message
//! latencies the cut draws anew; in real time each cut runs up to [`REAL_TIME_STORY_TRIES`]
//! times, its timing new on every run. Failing all, the plan in which only the cast acts, with all
//! their cycles. Silenced workers keep their place with an empty script rather than being
//! removed: a worker's number names its random streams (owner tokens, waits), so renumbering
//! the cast would change what it does. Then delta debugging over the plan as data: drop
//! faults, then worker cycles, then whole workers (renumbering fault targets so the plan stays
//! runnable), then make durations, clock steps and drifts smaller. A candidate is kept only if
//! it passes [`Plan::check`] and the caller's predicate ("does it still fail with class C?")
//! holds, so the result always reproduces.
//!
//! Candidates are tried in a fixed order, so with the same predicate and the same candidate
//! limit the result is the same on every machine; the time budget is a safety net whose
//! stopping point does depend on machine speed (reported in [`Shrunk::stopped_by`]).

use std::ops::Range;
use std::time::{Duration, Instant};

use fencer_checkers::{AnomalyClass, Verdict};
use fencer_harness::words::count;
use fencer_harness::{EventType, roles};
use fencer_nemesis::{Fault, FaultKind};
use serde::{Deserialize, Serialize};

use fencer_run::plan::Plan;
use fencer_run::{Backends, Launch, Launched, RunError, Time};

/// Bounds on one shrink.
#[derive(Clone, Copy, Debug)]
pub struct ShrinkLimits {
    /// Stop after trying this many candidates.
    pub max_candidates: usize,
    /// Stop after this much wall time.
    pub budget: Duration,
}

impl Default for ShrinkLimits {
    /// 30 s or 2000 candidates, whichever comes first.
    fn default() -> Self {
        ShrinkLimits {
            max_candidates: 2_000,
            budget: Duration::from_secs(30),
        }
    }
}

/// The size of a plan, as the shrinker reduces it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PlanSize {
    /// Scheduled faults.
    pub faults: usize,
    /// Cycles over all workers.
    pub cycles: usize,
    /// Workers that act (have at least one cycle): a worker with an empty script records
    /// nothing and draws no lane.
    pub workers: usize,
}

impl PlanSize {
    /// Measures `plan`.
    pub fn of(plan: &Plan) -> PlanSize {
        PlanSize {
            faults: plan.faults.len(),
            cycles: plan.workers.iter().map(|worker| worker.cycles.len()).sum(),
            workers: plan
                .workers
                .iter()
                .filter(|worker| !worker.cycles.is_empty())
                .count(),
        }
    }

    /// `2 workers acting, 3 cycles, 1 fault`: the size as a reader counts it.
    pub fn in_words(&self) -> String {
        format!(
            "{} acting, {}, {}",
            count(self.workers, "worker", "workers"),
            count(self.cycles, "cycle", "cycles"),
            count(self.faults, "fault", "faults")
        )
    }

    /// Whether no part is larger than `other`'s.
    pub fn fits_in(self, other: PlanSize) -> bool {
        self.faults <= other.faults && self.cycles <= other.cycles && self.workers <= other.workers
    }
}

/// What a shrink produced.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The smallest reproducing plan found (the original if nothing smaller reproduced).
    pub plan: Plan,
    /// Candidates simulated.
    pub candidates: usize,
    /// Candidates that reproduced and were kept.
    pub accepted: usize,
    /// Why shrinking stopped early (`candidate limit`, `time budget`), or `None` when no
    /// candidate was left to try.
    pub stopped_by: Option<&'static str>,
}

/// The predicate a gate shrinks with: `plan` runs on `backends`, and its verdict has at least
/// one anomaly of `class` (warnings count under `strict`).
pub fn fails_with(
    class: AnomalyClass,
    backends: &Backends,
    strict: bool,
) -> impl FnMut(&Plan) -> bool + '_ {
    move |plan| run_showing(plan, class, backends, strict).is_ok_and(|run| run.is_some())
}

/// Runs `plan` on `backends` and judges it (warnings count under `strict`): the run and its
/// verdict when it shows `class`, `None` when it does not.
pub fn run_showing(
    plan: &Plan,
    class: AnomalyClass,
    backends: &Backends,
    strict: bool,
) -> Result<Option<(Launched, Verdict)>, RunError> {
    let launched = Launch::new(backends).run(plan)?;
    let verdict = fencer_run::checking::judge(&launched.plan.settings, &launched.history, strict);
    Ok(verdict
        .anomaly_counts
        .contains_key(class.name())
        .then_some((launched, verdict)))
}

/// Shrinks `plan` while `reproduces` holds. `plan` itself is assumed to reproduce.
pub fn shrink(plan: &Plan, reproduces: impl FnMut(&Plan) -> bool, limits: ShrinkLimits) -> Shrunk {
    shrink_toward(plan, &Evidence::default(), reproduces, limits)
}

/// What an anomaly cites, as a shrink aims at it: the workers it is about and the stretch of
/// true time its cited events span, with when each worker began each cycle in the run that
/// showed it ([`Launched::cycle_starts_ns`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evidence {
    /// The workers, by number, ascending (see [`participants`]).
    pub workers: Vec<usize>,
    /// For each of [`Evidence::workers`], in the same order, when the earliest cited event that
    /// names it happened ([`cited_workers`]), counted as [`Evidence::span_ns`] is; a worker
    /// without an entry counts from the first cited event.
    pub first_cited_ns: Vec<u64>,
    /// When the first and the last cited event happened, in nanoseconds from when the workers
    /// began, as a plan's fault times count; `None` when nothing is cited.
    pub span_ns: Option<(u64, u64)>,
    /// When each worker began each of its cycles, counted the same way.
    pub cycle_starts_ns: Vec<Vec<u64>>,
    /// When each worker sent each acquire that was granted, counted the same way.
    pub grants_ns: Vec<Vec<u64>>,
    /// When each of those grants was answered, in the same order, counted the same way.
    pub granted_ns: Vec<Vec<u64>>,
    /// Whether the run drew its message latencies from its seed (a simulation): then a story cut
    /// is tried again with other draws ([`STORY_RESEEDS`]); else it is run again as it is
    /// ([`REAL_TIME_STORY_TRIES`]).
    pub latencies_drawn: bool,
}

impl Evidence {
    /// The evidence of an anomaly citing the events at positions `cited` of `run`'s history,
    /// with when its workers began their cycles ([`Launched::cycle_starts_ns`], true time, as
    /// the history's). A real-time run's clock starts before its servers do and its plan's
    /// times count from its workers' start, so both are counted from the first cycle's start
    /// here (zero in a simulation).
    pub fn cited(run: &Launched, cited: &[u64]) -> Evidence {
        let history = &run.history;
        let mut cycle_starts_ns = run.cycle_starts_ns.clone();
        let began_ns = cycle_starts_ns
            .iter()
            .filter_map(|starts| starts.first().copied())
            .min()
            .unwrap_or(0);
        for start in cycle_starts_ns.iter_mut().flatten() {
            *start -= began_ns;
        }
        let times = cited
            .iter()
            .filter_map(|&index| usize::try_from(index).ok())
            .filter(|&position| position < history.len())
            .map(|position| history.view(position).time_ns.saturating_sub(began_ns));
        let span_ns = times.fold(None, |span: Option<(u64, u64)>, time| match span {
            None => Some((time, time)),
            Some((first, last)) => Some((first.min(time), last.max(time))),
        });
        let mut grants_ns = vec![Vec::new(); cycle_starts_ns.len()];
        let mut granted_ns = vec![Vec::new(); cycle_starts_ns.len()];
        let mut sent_ns = vec![None; cycle_starts_ns.len()];
        for position in 0..history.len() {
            let event = history.view(position);
            if event.f != fencer_harness::Op::Acquire {
                continue;
            }
            let Some(worker) = roles::worker_number(event.process).filter(|&w| w < grants_ns.len())
            else {
                continue;
            };
            match event.kind {
                EventType::Invoke => sent_ns[worker] = Some(event.time_ns),
                EventType::Ok => {
                    if let Some(time_ns) = sent_ns[worker].take() {
                        grants_ns[worker].push(time_ns.saturating_sub(began_ns));
                        granted_ns[worker].push(event.time_ns.saturating_sub(began_ns));
                    }
                }
                _ => {}
            }
        }
        let (workers, first_cited_ns) = cited_workers(history, cited)
            .into_iter()
            .map(|(worker, time_ns)| (worker, time_ns.saturating_sub(began_ns)))
            .unzip();
        Evidence {
            workers,
            first_cited_ns,
            span_ns,
            cycle_starts_ns,
            grants_ns,
            granted_ns,
            latencies_drawn: run.time == Time::Simulated,
        }
    }
}

/// As [`shrink`], trying first the plan cut to `evidence` ([`around_evidence`]), then the plan
/// in which only its workers act ([`only_workers_act`]); when neither reproduces, shrinking goes
/// on from `plan` as [`shrink`] does.
pub fn shrink_toward(
    plan: &Plan,
    evidence: &Evidence,
    reproduces: impl FnMut(&Plan) -> bool,
    limits: ShrinkLimits,
) -> Shrunk {
    let mut shrinker = Shrinker {
        best: plan.clone(),
        reproduces: Box::new(reproduces),
        limits,
        started: Instant::now(),
        candidates: 0,
        accepted: 0,
        stopped_by: None,
        // One failing run accepts a real-time candidate, and when two workers then ask for the
        // lock at the same instant, which asked first was a race that run happened to go the
        // story's way: the minimal plan keeps the stagger of each worker's first ask, and with
        // it the order of the run it came from.
        keeps_first_asks: !evidence.latencies_drawn && !evidence.workers.is_empty(),
    };
    if !evidence.workers.is_empty() {
        // The story, then the same story with other timing: a race of a few milliseconds can
        // hinge on it. The simulated network draws each message's latency in turn, so with the
        // rest of the run gone every latency is another, and other seeds draw others; a
        // real-time run's timing is new on every run, so the same cut is simply run again.
        let (tries, reseed_step) = if evidence.latencies_drawn {
            (STORY_RESEEDS + 1, 1)
        } else {
            (REAL_TIME_STORY_TRIES, 0)
        };
        let mut stories: Vec<Plan> = Vec::new();
        for story in StoryCut::ALL
            .into_iter()
            .filter_map(|cut| around_evidence(plan, evidence, cut))
        {
            // Two cuts often agree (a worker whose part begins with the story's): run it once.
            if !stories.contains(&story) {
                stories.push(story);
            }
        }
        let told = (0..tries).any(|attempt| {
            stories.iter().any(|story| {
                shrinker.try_candidate(Some(reseeded(story.clone(), attempt * reseed_step)))
            })
        });
        if !told {
            let cast = only_workers_act(&shrinker.best, &evidence.workers);
            shrinker.try_candidate(cast);
        }
    }
    // Each pass can unlock another (fewer workers make some faults removable), so repeat
    // until a whole round changes nothing; three rounds bound the cost.
    for _ in 0..3 {
        let before = shrinker.accepted;
        shrinker.truncate_cycles();
        shrinker.drop_chunks(
            |plan| plan.faults.len(),
            |plan, range| {
                let mut candidate = plan.clone();
                candidate.faults.drain(range);
                Some(candidate)
            },
        );
        for worker in 0..shrinker.best.workers.len() {
            shrinker.drop_chunks(
                move |plan| plan.workers.get(worker).map_or(0, |w| w.cycles.len()),
                move |plan, range| {
                    let mut candidate = plan.clone();
                    candidate.workers.get_mut(worker)?.cycles.drain(range);
                    Some(candidate)
                },
            );
        }
        for worker in (0..shrinker.best.workers.len()).rev() {
            let candidate = without_worker(&shrinker.best, worker);
            shrinker.try_candidate(candidate);
        }
        shrinker.shrink_fault_sizes();
        shrinker.shrink_cycle_durations();
        if shrinker.accepted == before || shrinker.stopped_by.is_some() {
            break;
        }
    }
    Shrunk {
        plan: shrinker.best,
        candidates: shrinker.candidates,
        accepted: shrinker.accepted,
        stopped_by: shrinker.stopped_by,
    }
}

/// The workers an anomaly is about: those whose events (or whose tasks' events: `w1:renew` is
/// `w1`'s) it cites, those the faults it cites were aimed at, those whose writes it cites,
/// and those whose leases its cited events name (the owner or holder of a lock log entry: the
/// worker that asked for that owner token), by number, ascending.
pub fn participants(history: &fencer_harness::PackedHistory, cited: &[u64]) -> Vec<usize> {
    cited_workers(history, cited)
        .into_iter()
        .map(|(worker, _)| worker)
        .collect()
}

/// [`participants`], each with the true time of the earliest cited event that names it: where
/// that worker's part in the story begins, which can be long after the first cited event (a
/// rival granted the lock only after the holder's lease ran out).
pub fn cited_workers(history: &fencer_harness::PackedHistory, cited: &[u64]) -> Vec<(usize, u64)> {
    let number = roles::worker_number;
    let cited: Vec<usize> = cited
        .iter()
        .filter_map(|&index| usize::try_from(index).ok())
        .filter(|&position| position < history.len())
        .collect();
    // Which worker asked for each owner token the cited events name.
    let owners: Vec<(&str, u64)> = cited
        .iter()
        .flat_map(|&position| {
            let event = history.view(position);
            [event.owner, event.holder]
                .into_iter()
                .flatten()
                .map(move |owner| (owner, event.time_ns))
        })
        .collect();
    // A write's id names the worker and cycle that sent it (`w2-7`), even in the store's log.
    let mut workers: Vec<(usize, u64)> = cited
        .iter()
        .flat_map(|&position| {
            let event = history.view(position);
            let writer = event.write_id.and_then(roles::writer_of);
            [Some(event.process), event.target, writer]
                .into_iter()
                .flatten()
                .filter_map(number)
                .map(move |worker| (worker, event.time_ns))
        })
        .collect();
    if !owners.is_empty() {
        for event in history.views() {
            let asker = (event.f == fencer_harness::Op::Acquire)
                .then(|| number(event.process))
                .flatten();
            let Some(asker) = asker else { continue };
            workers.extend(
                owners
                    .iter()
                    .filter(|(owner, _)| event.owner == Some(*owner))
                    .map(|&(_, time_ns)| (asker, time_ns)),
            );
        }
    }
    workers.sort_unstable();
    workers.dedup_by_key(|(worker, _)| *worker);
    workers
}

/// `plan` in which only the workers numbered in `keep` act: every other worker's script
/// emptied and the faults that no longer reach the cast dropped (those aimed at a silenced
/// worker, but lease-edge attacks: an attack on a worker that holds no lease holds every
/// holder's calls at its lease's edge), numbers unchanged; `None` when that silences nobody or everybody.
pub fn only_workers_act(plan: &Plan, keep: &[usize]) -> Option<Plan> {
    let silenced: Vec<usize> = (0..plan.workers.len())
        .filter(|w| !keep.contains(w) && !plan.workers[*w].cycles.is_empty())
        .collect();
    if silenced.is_empty() || keep.iter().all(|&w| w >= plan.workers.len()) {
        return None;
    }
    let mut candidate = plan.clone();
    for &worker in &silenced {
        candidate.workers[worker].cycles.clear();
    }
    candidate
        .faults
        .retain(|fault| reaches_cast(fault, |worker| !silenced.contains(&worker)));
    Some(candidate)
}

/// How many other seeds a story cut is tried with when it does not fail with the plan's own.
pub const STORY_RESEEDS: u64 = 8;

/// How often a real-time shrink runs each story cut before giving up on the story: its run
/// meets the race again only if real time lines it up again, and the story is the one
/// candidate worth real seconds more than once (the time budget still bounds the whole).
pub const REAL_TIME_STORY_TRIES: u64 = 3;

/// `plan` with its seed moved on by `by`: the same workers, cycles and faults, with the draws
/// a run makes as it goes (message latencies, owner tokens, backoff waits) drawn again.
fn reseeded(mut plan: Plan, by: u64) -> Plan {
    plan.settings.seed = plan.settings.seed.wrapping_add(by);
    plan
}

/// How a story is cut from a plan ([`around_evidence`]): which cycles each worker keeps and
/// when the first of them starts. Which way tells a story again depends on what it hinges on,
/// so the shrinker tries each ([`StoryCut::ALL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoryCut {
    /// Where each worker's kept cycles begin.
    pub from: CutFrom,
    /// When each worker's first kept cycle starts.
    pub start_at: StartAt,
}

impl StoryCut {
    /// Every cut, in the order the shrinker tries them.
    pub const ALL: [StoryCut; 4] = [
        StoryCut {
            from: CutFrom::StoryStart,
            start_at: StartAt::Grant,
        },
        StoryCut {
            from: CutFrom::OwnPart,
            start_at: StartAt::Grant,
        },
        StoryCut {
            from: CutFrom::StoryStart,
            start_at: StartAt::FirstAskInStory,
        },
        StoryCut {
            from: CutFrom::OwnPart,
            start_at: StartAt::FirstAskInStory,
        },
    ];
}

/// Where a story cut begins each kept worker's cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CutFrom {
    /// At the cycle each was in when the first cited event happened: earlier cycles of a
    /// worker whose own part comes later can set the scene (a lease it held before).
    StoryStart,
    /// At the cycle each was in at the first cited event that names it: a worker whose part
    /// comes late (a rival granted the lock once the holder's lease ran out) does not replay
    /// what it did before, which can change who holds the lock when.
    OwnPart,
}

/// When a story cut starts each kept worker's first cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// At the acquire of that cycle that was granted: the rivals it waited for are gone, so
    /// it asks when it got the lock. Right when the wait was for workers the cut silences.
    Grant,
    /// At the cycle's first ask, as the plan has it, for a worker that first asked after the
    /// earliest grant of the story (its wait was for the cast: a rival polling while a fault
    /// held its acquires until the holder's lease edge); at its grant for the others.
    FirstAskInStory,
}

/// One worker of a story cut: which of its cycles it keeps and when it asked for the lock in
/// the first of them, on the plan's clock.
struct KeptWorker {
    worker: usize,
    /// Its first and last kept cycle.
    first: usize,
    last: usize,
    /// When its first kept cycle began.
    begun_ns: u64,
    /// When it first asked for the lock there.
    first_ask_ns: u64,
    /// When it asked for the lock it got there (see [`around_evidence`]).
    granted_ask_ns: u64,
    /// When that grant was answered, if the run recorded it.
    granted_ns: Option<u64>,
}

/// In a real-time story cut, how long after another kept worker's grant was answered a worker
/// granted after it asks at the earliest: long enough for that grant to be answered again in
/// a run on a loaded machine, short beside any TTL.
pub const ASK_ORDER_MARGIN_NS: u64 = 10_000_000;

/// `plan` cut to `evidence` as `cut` says: only its workers act, each with only the cycles it
/// was in while the cited events happened (from the one under way at the first cited event, or
/// at the first that names it, to the one under way at the last), and only the faults that
/// still reach the cast (as [`only_workers_act`] keeps them), started no later than the last cited event, and
/// were still to end when the earliest kept worker asked for the lock (or last: a clock step
/// or drift, an instant fault on a kept worker in its first kept cycle). Everything moves
/// earlier by that ask; each worker's first kept cycle waits as long as it asked after it (in
/// real time, at least until [`ASK_ORDER_MARGIN_NS`] after the answer of each kept worker's
/// grant that came before its own), and a fault already under way then starts at once. `None` when the evidence names no worker
/// with a known cycle, or cuts nothing.
pub fn around_evidence(plan: &Plan, evidence: &Evidence, cut: StoryCut) -> Option<Plan> {
    let (first_ns, last_ns) = evidence.span_ns?;
    let kept: Vec<KeptWorker> = evidence
        .workers
        .iter()
        .enumerate()
        .filter_map(|(at, &worker)| {
            let starts = evidence.cycle_starts_ns.get(worker)?;
            let cycles = plan.workers.get(worker)?.cycles.len().min(starts.len());
            if cycles == 0 {
                return None;
            }
            let begun_by = |time_ns: u64| {
                starts[..cycles]
                    .iter()
                    .rposition(|&start| start <= time_ns)
                    .unwrap_or(0)
            };
            // A cycle begins the instant the one before ends, so an event at that instant (a
            // cancellation, a refused release) belongs to the one before: a worker's own part
            // begins in the last cycle begun strictly before its first cited event.
            let begun_before = |time_ns: u64| {
                starts[..cycles]
                    .iter()
                    .rposition(|&start| start < time_ns)
                    .unwrap_or(0)
            };
            let (first, cited_ns) = match cut.from {
                CutFrom::StoryStart => (begun_by(first_ns), None),
                CutFrom::OwnPart => {
                    let cited_ns = evidence.first_cited_ns.get(at).copied().unwrap_or(first_ns);
                    (begun_before(cited_ns), Some(cited_ns))
                }
            };
            let begun_ns = starts[first];
            let ended_ns = starts.get(first + 1).copied().unwrap_or(u64::MAX);
            let first_ask_ns = begun_ns.saturating_add(plan.workers[worker].cycles[first].delay_ns);
            // When it sent the acquire granted in its first kept cycle (when it got the lock:
            // the rivals it waited for are gone), else when it first asked there; or, cut from
            // its own part, when its first cited event happened if that was earlier (busy
            // answers the story cites).
            let grant = evidence.grants_ns.get(worker).and_then(|grants| {
                grants
                    .iter()
                    .position(|&sent_ns| begun_ns <= sent_ns && sent_ns < ended_ns)
                    .map(|at| (grants[at], at))
            });
            let granted_ask_ns = grant.map_or(first_ask_ns, |(sent_ns, _)| sent_ns);
            let granted_ns = grant.and_then(|(_, at)| {
                evidence
                    .granted_ns
                    .get(worker)
                    .and_then(|answers| answers.get(at).copied())
            });
            Some(KeptWorker {
                worker,
                first,
                last: begun_by(last_ns),
                begun_ns,
                first_ask_ns,
                granted_ask_ns: cited_ns.map_or(granted_ask_ns, |cited| granted_ask_ns.min(cited)),
                granted_ns,
            })
        })
        .collect();
    let origin_ns = kept.iter().map(|kept| kept.granted_ask_ns).min()?;
    let cut_ask_ns = |kept: &KeptWorker| match cut.start_at {
        StartAt::Grant => kept.granted_ask_ns,
        // A worker that began asking once the story was under way waited for the cast: its
        // wait is kept. One that began before waited for others: it starts when granted.
        StartAt::FirstAskInStory if kept.first_ask_ns >= origin_ns => kept.first_ask_ns,
        StartAt::FirstAskInStory => kept.granted_ask_ns,
    };
    // In real time, two workers that asked at about the same time are granted in whatever
    // order that run's timing gives: a worker granted after another kept worker asks only
    // once that grant was answered ([`ASK_ORDER_MARGIN_NS`] later), so the cut keeps the
    // run's order of grants rather than leave it to a race. A simulation replays its order.
    let ask_ns = |worker: &KeptWorker| {
        let asked_ns = cut_ask_ns(worker);
        let Some(own_ns) = worker.granted_ns.filter(|_| !evidence.latencies_drawn) else {
            return asked_ns;
        };
        kept.iter()
            .filter_map(|other| other.granted_ns.filter(|&granted_ns| granted_ns < own_ns))
            .fold(asked_ns, |ask, granted_ns| {
                ask.max(granted_ns + ASK_ORDER_MARGIN_NS)
            })
    };
    let kept_as = |worker: usize| kept.iter().find(|kept| kept.worker == worker);
    let mut candidate = plan.clone();
    for (index, script) in candidate.workers.iter_mut().enumerate() {
        match kept_as(index) {
            Some(kept) => {
                script.cycles.truncate(kept.last + 1);
                script.cycles.drain(..kept.first);
                script.cycles[0].delay_ns = ask_ns(kept) - origin_ns;
            }
            None => script.cycles.clear(),
        }
    }
    // An instant fault aimed at a kept worker since its first kept cycle began (a
    // cancellation while it waited for the lock) acts on the work the story is about.
    let cycle_begun_ns = |target: &str| Some(kept_as(roles::worker_number(target)?)?.begun_ns);
    candidate.faults = plan
        .faults
        .iter()
        .filter(|fault| reaches_cast(fault, |worker| kept_as(worker).is_some()))
        .filter(|fault| fault.at_ns() <= last_ns)
        .filter(|fault| {
            // An instant fault still acts if it is a clock step or drift (the clock the kept
            // cycles read carries it) or hit a kept worker in its first kept cycle.
            let instant_that_lasts = fault.duration_ns() == 0
                && (fault.kind() == FaultKind::Skew
                    || cycle_begun_ns(fault.target())
                        .is_some_and(|begun_ns| fault.at_ns() >= begun_ns));
            instant_that_lasts || fault.at_ns().saturating_add(fault.duration_ns()) >= origin_ns
        })
        .map(|fault| {
            let at_ns = fault.at_ns().saturating_sub(origin_ns);
            fault.clone().starting_at(at_ns)
        })
        .collect();
    let story_end_ns = last_ns
        .saturating_sub(origin_ns)
        .saturating_add(after_story_ns(&plan.settings));
    candidate.stop_at_ns = Some(plan.stop_at_ns.map_or(story_end_ns, |stop_ns| {
        stop_ns.saturating_sub(origin_ns).min(story_end_ns)
    }));
    (candidate != *plan).then_some(candidate)
}

/// How long a story cut runs on after its last cited event: a TTL and a call timeout. In the
/// cut the cited calls may be answered later than in the run (other latencies, other rivals),
/// a lease the story names has lapsed by then, and a library has had a renewal period to tell
/// its worker what became of it, so the stop neither cuts the story short nor makes a silence
/// that the rest of the run would have broken.
fn after_story_ns(settings: &fencer_run::settings::Settings) -> u64 {
    settings.ttl_ns.saturating_add(settings.call_timeout_ns)
}

/// Whether `fault` still acts on a plan in which only the workers `acts` says yes to act: one
/// aimed at a server or at one of them, or a lease-edge attack on any worker (an attack on a
/// worker that holds no lease holds every holder's calls at its lease's edge,
/// [`fencer_harness::ProcessFaults::edge_hold_until`], so silencing its target does not
/// silence it).
fn reaches_cast(fault: &Fault, acts: impl Fn(usize) -> bool) -> bool {
    fault.kind() == FaultKind::LeaseEdge || roles::worker_number(fault.target()).is_none_or(acts)
}

/// `plan` without worker `index`: its script and the faults aimed at it removed, later workers
/// renumbered (`w3` becomes `w2`) in fault targets. `None` for the last worker (a plan needs
/// one).
pub fn without_worker(plan: &Plan, index: usize) -> Option<Plan> {
    if plan.workers.len() <= 1 || index >= plan.workers.len() {
        return None;
    }
    let mut candidate = plan.clone();
    candidate.workers.remove(index);
    candidate.settings.workers -= 1;
    candidate.faults = plan
        .faults
        .iter()
        .filter_map(|fault| {
            let Some(number) = roles::worker_number(fault.target()) else {
                return Some(fault.clone());
            };
            match number.cmp(&index) {
                std::cmp::Ordering::Less => Some(fault.clone()),
                std::cmp::Ordering::Equal => None,
                std::cmp::Ordering::Greater => Some(retarget(fault, format!("w{}", number - 1))),
            }
        })
        .collect();
    Some(candidate)
}

/// `fault` aimed at `new_target`. Works on the fault's JSON form so every fault kind, present
/// and future, is renumbered the same way (each has a `target`).
fn retarget(fault: &Fault, new_target: String) -> Fault {
    let mut value = serde_json::to_value(fault).expect("faults always serialise");
    value["target"] = serde_json::Value::String(new_target);
    serde_json::from_value(value).expect("only the target changed")
}

/// `fault` with its `field` (a magnitude: duration, clock step, drift) halved toward zero, or
/// `None` if it is already zero. JSON-based for the same reason as [`retarget`].
fn halved(fault: &Fault, field: &str) -> Option<Fault> {
    let mut value = serde_json::to_value(fault).expect("faults always serialise");
    let number = &mut value[field];
    let half = if let Some(unsigned) = number.as_u64() {
        (unsigned != 0).then(|| serde_json::Value::from(unsigned / 2))?
    } else {
        let signed = number.as_i64()?;
        (signed != 0).then(|| serde_json::Value::from(signed / 2))?
    };
    *number = half;
    serde_json::from_value(value).ok()
}

/// The numeric fields of `fault` other than its start time: what shrinking makes smaller.
fn magnitudes(fault: &Fault) -> Vec<String> {
    match serde_json::to_value(fault).expect("faults always serialise") {
        serde_json::Value::Object(fields) => fields
            .into_iter()
            .filter(|(name, value)| name != "at_ns" && value.is_number())
            .map(|(name, _)| name)
            .collect(),
        _ => Vec::new(),
    }
}

struct Shrinker<'a> {
    best: Plan,
    reproduces: Box<dyn FnMut(&Plan) -> bool + 'a>,
    limits: ShrinkLimits,
    started: Instant,
    candidates: usize,
    accepted: usize,
    stopped_by: Option<&'static str>,
    /// Whether each worker's first delay stays as it is ([`shrink_toward`] says why).
    keeps_first_asks: bool,
}

impl Shrinker<'_> {
    fn exhausted(&mut self) -> bool {
        if self.stopped_by.is_none() {
            if self.candidates >= self.limits.max_candidates {
                self.stopped_by = Some("candidate limit");
            } else if self.started.elapsed() >= self.limits.budget {
                self.stopped_by = Some("time budget");
            }
        }
        self.stopped_by.is_some()
    }

    /// Tries `candidate`; keeps it as the new best if it is runnable and reproduces.
    fn try_candidate(&mut self, candidate: Option<Plan>) -> bool {
        let Some(candidate) = candidate else {
            return false;
        };
        if self.exhausted() || candidate == self.best || candidate.check().is_err() {
            return false;
        }
        self.candidates += 1;
        if (self.reproduces)(&candidate) {
            self.best = candidate;
            self.accepted += 1;
            true
        } else {
            false
        }
    }

    /// Cuts every worker's script to its first `keep` cycles, for the smallest `keep` found by
    /// halving steps. Whatever happens after the anomaly cannot matter, so cutting the tail
    /// usually works and makes every later candidate cheaper to simulate.
    fn truncate_cycles(&mut self) {
        let longest = |plan: &Plan| {
            plan.workers
                .iter()
                .map(|w| w.cycles.len())
                .max()
                .unwrap_or(0)
        };
        let mut step = longest(&self.best) / 2;
        while step > 0 && !self.exhausted() {
            let keep = longest(&self.best).saturating_sub(step);
            let mut candidate = self.best.clone();
            for worker in &mut candidate.workers {
                worker.cycles.truncate(keep);
            }
            if !self.try_candidate(Some(candidate)) {
                step /= 2;
            }
        }
    }

    /// Delta debugging over one list of the plan: remove chunks of halving size.
    fn drop_chunks(
        &mut self,
        len: impl Fn(&Plan) -> usize,
        without: impl Fn(&Plan, Range<usize>) -> Option<Plan>,
    ) {
        let mut chunk = len(&self.best).div_ceil(2).max(1);
        loop {
            let mut start = 0;
            while start < len(&self.best) {
                if self.exhausted() {
                    return;
                }
                let end = (start + chunk).min(len(&self.best));
                if !self.try_candidate(without(&self.best, start..end)) {
                    start = end;
                }
            }
            if chunk == 1 {
                return;
            }
            chunk = chunk.div_ceil(2);
        }
    }

    /// Halves each fault's duration, clock step or drift while the failure reproduces.
    fn shrink_fault_sizes(&mut self) {
        for index in 0..self.best.faults.len() {
            for field in magnitudes(&self.best.faults[index]) {
                // A magnitude halves at most 16 times before it is negligible.
                for _ in 0..16 {
                    let Some(fault) = halved(&self.best.faults[index], &field) else {
                        break;
                    };
                    let mut candidate = self.best.clone();
                    candidate.faults[index] = fault;
                    if !self.try_candidate(Some(candidate)) {
                        break;
                    }
                }
            }
        }
    }

    /// Sets each cycle's delay, think, prepare and hold time to zero where the failure still
    /// reproduces: the shortest schedule that still fails is the easiest to read. A worker's
    /// first delay is kept when the shrinker keeps first asks and another worker acts too.
    fn shrink_cycle_durations(&mut self) {
        let acting = |plan: &Plan| plan.workers.iter().filter(|w| !w.cycles.is_empty()).count();
        for worker in 0..self.best.workers.len() {
            for cycle in 0..self.best.workers[worker].cycles.len() {
                for field in 0..4 {
                    if self.keeps_first_asks && cycle == 0 && field == 0 && acting(&self.best) > 1 {
                        continue;
                    }
                    let mut candidate = self.best.clone();
                    let plan = &mut candidate.workers[worker].cycles[cycle];
                    let value = match field {
                        0 => &mut plan.delay_ns,
                        1 => &mut plan.think_ns,
                        2 => &mut plan.prepare_ns,
                        _ => &mut plan.hold_ns,
                    };
                    if *value == 0 {
                        continue;
                    }
                    *value = 0;
                    self.try_candidate(Some(candidate));
                    if self.stopped_by.is_some() {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_nemesis::FaultKind;
    use fencer_run::settings::Settings;

    fn plan() -> Plan {
        Plan::generate(&Settings {
            seed: 3,
            ops_per_worker: 6,
            nemesis: FaultKind::DEFAULT.into_iter().collect(),
            mean_fault_gap_ns: 2_000_000_000,
            ..Settings::default()
        })
    }

    #[test]
    fn removing_a_worker_renumbers_fault_targets_and_keeps_the_plan_runnable() {
        let plan = plan();
        assert!(plan.faults.iter().any(|f| f.target() == "w4"));
        let smaller = without_worker(&plan, 1).unwrap();
        smaller.check().unwrap();
        assert_eq!(smaller.workers.len(), 4);
        assert!(smaller.faults.iter().all(|f| f.target() != "w4"));
        let aimed_at =
            |plan: &Plan, target: &str| plan.faults.iter().filter(|f| f.target() == target).count();
        assert_eq!(aimed_at(&smaller, "w3"), aimed_at(&plan, "w4"));
        assert_eq!(aimed_at(&smaller, "w0"), aimed_at(&plan, "w0"));
        assert_eq!(aimed_at(&smaller, "lock"), aimed_at(&plan, "lock"));
        assert_eq!(
            smaller.faults.len(),
            plan.faults.len() - aimed_at(&plan, "w1")
        );
        let mut one = plan.clone();
        while one.workers.len() > 1 {
            one = without_worker(&one, 0).unwrap();
        }
        assert!(without_worker(&one, 0).is_none());
    }

    #[test]
    fn only_the_cast_acts_with_numbers_kept_and_faults_on_the_others_dropped() {
        let mut plan = plan();
        // A lease-edge attack on a worker about to be silenced, so its keeping is tested.
        plan.faults.insert(
            0,
            Fault::LeaseEdge {
                at_ns: 1_000_000_000,
                target: "w2".into(),
                duration_ns: 1_000_000_000,
                own_offset_ns: 0,
                rival_offset_ns: 0,
                anchor: fencer_harness::EdgeAnchor::Sent,
            },
        );
        let cast = only_workers_act(&plan, &[1, 3]).unwrap();
        cast.check().unwrap();
        assert_eq!(cast.workers.len(), plan.workers.len(), "numbers kept");
        for (index, worker) in cast.workers.iter().enumerate() {
            let acts = !worker.cycles.is_empty();
            assert_eq!(acts, index == 1 || index == 3, "w{index}");
        }
        // Only a lease-edge attack on a silenced worker stays: it still holds the cast's calls.
        let silenced = |f: &&Fault| ["w0", "w2", "w4"].contains(&f.target());
        let edge = |f: &&Fault| f.kind() == FaultKind::LeaseEdge;
        assert!(cast.faults.iter().filter(silenced).all(|f| edge(&f)));
        assert!(cast.faults.iter().filter(silenced).count() >= 1);
        assert_eq!(
            cast.faults.iter().filter(silenced).count(),
            plan.faults.iter().filter(silenced).filter(edge).count()
        );
        let kept = |target: &str| plan.faults.iter().filter(|f| f.target() == target).count();
        let now = |target: &str| cast.faults.iter().filter(|f| f.target() == target).count();
        assert_eq!(now("w1"), kept("w1"));
        assert_eq!(now("lock"), kept("lock"));
        assert_eq!(PlanSize::of(&cast).workers, 2);
        // Silencing nobody, or everybody, is no candidate.
        assert!(only_workers_act(&plan, &[0, 1, 2, 3, 4]).is_none());
        assert!(only_workers_act(&plan, &[9]).is_none());
    }

    #[test]
    fn the_story_keeps_the_casts_cycles_around_the_evidence_and_moves_the_faults_with_them() {
        const S: u64 = 1_000_000_000;
        let mut plan = plan();
        plan.workers[1].cycles[2].delay_ns = S;
        let pause = |at_s: u64, target: &str, duration_s: u64| Fault::Pause {
            at_ns: at_s * S,
            target: target.into(),
            duration_ns: duration_s * S,
        };
        plan.faults = vec![
            Fault::ClockJump {
                at_ns: 5 * S,
                target: "w0".into(),
                jump_ns: -3 * S as i64,
            },
            pause(10, "w1", 5),
            pause(40, "w1", 5),
            pause(50, "w2", 5),
            Fault::DelayWrite {
                at_ns: 60 * S,
                target: "w1".into(),
                duration_ns: S,
            },
            pause(75, "w0", 5),
        ];
        let seconds = |list: &[u64]| list.iter().map(|s| s * S).collect::<Vec<_>>();
        let evidence = Evidence {
            workers: vec![0, 1],
            first_cited_ns: Vec::new(),
            span_ns: Some((50 * S, 70 * S)),
            cycle_starts_ns: vec![
                seconds(&[0, 20, 40, 60, 80, 100]),
                seconds(&[0, 30, 45, 65, 90, 110]),
                seconds(&[0, 10, 20, 30, 40, 50]),
            ],
            // w0 was granted the lock it asked for at 42 s; w1 nothing in its third cycle.
            grants_ns: vec![seconds(&[1, 42]), seconds(&[2]), Vec::new()],
            granted_ns: Vec::new(),
            latencies_drawn: true,
        };
        let story = around_evidence(&plan, &evidence, StoryCut::ALL[0]).unwrap();
        story.check().unwrap();
        // Each keeps the cycles under way at 50 s and at 70 s: its third and fourth.
        assert_eq!(story.workers[0].cycles[1..], plan.workers[0].cycles[3..4]);
        assert_eq!(story.workers[1].cycles[1..], plan.workers[1].cycles[3..4]);
        assert!(story.workers[2..].iter().all(|w| w.cycles.is_empty()));
        // Everything counts from w0's granted ask at 42 s; w1 first asks at 45 s + 1 s.
        assert_eq!(story.workers[0].cycles[0].delay_ns, 0);
        assert_eq!(story.workers[1].cycles[0].delay_ns, 4 * S);
        assert_eq!(
            story.faults,
            vec![
                // A clock step lasts, so it is kept, at once.
                Fault::ClockJump {
                    at_ns: 0,
                    target: "w0".into(),
                    jump_ns: -3 * S as i64,
                },
                // Under way at 42 s: it starts at once. Over by then, on a silenced worker,
                // or after the last cited event: dropped.
                pause(0, "w1", 5),
                Fault::DelayWrite {
                    at_ns: 18 * S,
                    target: "w1".into(),
                    duration_ns: S,
                },
            ]
        );
        // The last cited event, at 70 s, is 28 s in; the run stops a TTL and a call timeout
        // later, or where the plan itself stopped it if that is sooner.
        let settings = &plan.settings;
        let after_ns = settings.ttl_ns + settings.call_timeout_ns;
        assert_eq!(story.stop_at_ns, Some(28 * S + after_ns));
        plan.stop_at_ns = Some(72 * S);
        let stopped = around_evidence(&plan, &evidence, StoryCut::ALL[0]).unwrap();
        assert_eq!(stopped.stop_at_ns, Some(30 * S));
        assert!(around_evidence(&plan, &Evidence::default(), StoryCut::ALL[0]).is_none());
    }

    #[test]
    fn each_cut_keeps_what_still_reaches_the_cast_and_starts_it_where_its_part_began() {
        const S: u64 = 1_000_000_000;
        let mut plan = plan();
        plan.workers[1].cycles[3].delay_ns = 2 * S;
        let edge = Fault::LeaseEdge {
            at_ns: 44 * S,
            target: "w2".into(),
            duration_ns: 30 * S,
            own_offset_ns: -1_000_000,
            rival_offset_ns: 2_000_000,
            anchor: fencer_harness::EdgeAnchor::Sent,
        };
        plan.faults = vec![
            // Aimed at w1 while it waited in the cycle its own part begins in, before the
            // story's first grant: the cancellation still lands on that cycle's work.
            Fault::Cancel {
                at_ns: 40 * S,
                target: "w1".into(),
            },
            // Over before the first grant: nothing of it is left.
            Fault::Pause {
                at_ns: 30 * S,
                target: "w1".into(),
                duration_ns: S,
            },
            // On a worker the cut silences, yet it holds every holder's calls at the edge.
            edge.clone(),
        ];
        let seconds = |list: &[u64]| list.iter().map(|s| s * S).collect::<Vec<_>>();
        let evidence = Evidence {
            workers: vec![0, 1],
            // w1's part begins at 66 s, in its cycle begun at 65 s (at the instant a cycle
            // begins, the one before is still the one under way).
            first_cited_ns: vec![50 * S, 66 * S],
            span_ns: Some((50 * S, 70 * S)),
            cycle_starts_ns: vec![
                seconds(&[0, 20, 40, 60, 80, 100]),
                seconds(&[0, 30, 38, 65, 90, 110]),
                seconds(&[0, 10, 20, 30, 40, 50]),
            ],
            grants_ns: vec![seconds(&[1, 42]), seconds(&[2, 70]), Vec::new()],
            granted_ns: Vec::new(),
            latencies_drawn: true,
        };
        let cut = |from, start_at| {
            let story = around_evidence(&plan, &evidence, StoryCut { from, start_at }).unwrap();
            story.check().unwrap();
            story
        };
        // From the story's start, w1 keeps the cycle it was in at 50 s (its third) and asks
        // when its acquire there was granted... none was, so when it first asked: 38 s + its
        // delay; everything counts from that ask, 4 s before w0's grant.
        let from_start = cut(CutFrom::StoryStart, StartAt::Grant);
        assert_eq!(
            from_start.workers[1].cycles[1..],
            plan.workers[1].cycles[3..4]
        );
        let w1_first_ask_ns = 38 * S + plan.workers[1].cycles[2].delay_ns;
        assert_eq!(from_start.workers[1].cycles[0].delay_ns, 0);
        assert_eq!(
            from_start.workers[0].cycles[0].delay_ns,
            42 * S - w1_first_ask_ns
        );
        // From its own part, w1 keeps only its fourth cycle, asking when it was granted there
        // (70 s, after its first cited event at 66 s, so that one, less its place in time).
        let own_part = cut(CutFrom::OwnPart, StartAt::Grant);
        assert_eq!(own_part.workers[1].cycles.len(), 1);
        assert_eq!(
            own_part.workers[1].cycles[0].think_ns,
            plan.workers[1].cycles[3].think_ns
        );
        assert_eq!(own_part.workers[0].cycles[0].delay_ns, 0);
        assert_eq!(own_part.workers[1].cycles[0].delay_ns, 24 * S);
        // Starting at its first ask there (65 s + 2 s), since it asked after the story began.
        let first_ask = cut(CutFrom::OwnPart, StartAt::FirstAskInStory);
        assert_eq!(first_ask.workers[1].cycles[0].delay_ns, 25 * S);
        // The lease-edge attack on silenced w2 is kept in every cut, moved with the cast; the
        // cancellation only where w1's kept cycles began before it; the pause in none.
        for story in [&from_start, &own_part, &first_ask] {
            assert!(story.workers[2].cycles.is_empty());
            assert!(story.faults.iter().all(|f| f.kind() != FaultKind::Pause));
            assert!(
                story
                    .faults
                    .iter()
                    .any(|f| f.kind() == FaultKind::LeaseEdge)
            );
        }
        assert_eq!(
            from_start.faults,
            vec![
                Fault::Cancel {
                    at_ns: 40 * S - w1_first_ask_ns,
                    target: "w1".into(),
                },
                edge.clone().starting_at(44 * S - w1_first_ask_ns),
            ]
        );
        assert_eq!(own_part.faults, vec![edge.starting_at(2 * S)]);
    }

    #[test]
    fn a_reseeded_plan_differs_only_in_its_seed() {
        let plan = plan();
        let again = reseeded(plan.clone(), 3);
        assert_eq!(again.settings.seed, plan.settings.seed + 3);
        assert_eq!(again.workers, plan.workers);
        assert_eq!(again.faults, plan.faults);
        assert_eq!(reseeded(plan.clone(), 0), plan);
    }

    #[test]
    fn fault_magnitudes_halve_toward_zero_whatever_their_sign() {
        let jump = Fault::ClockJump {
            at_ns: 5,
            target: "lock".into(),
            jump_ns: -9,
        };
        assert_eq!(magnitudes(&jump), ["jump_ns"]);
        let Some(Fault::ClockJump { jump_ns, at_ns, .. }) = halved(&jump, "jump_ns") else {
            panic!("a jump halves to a jump");
        };
        assert_eq!((jump_ns, at_ns), (-4, 5));
        let pause = Fault::Pause {
            at_ns: 1,
            target: "w0".into(),
            duration_ns: 0,
        };
        assert_eq!(halved(&pause, "duration_ns"), None);
        assert_eq!(retarget(&pause, "w3".into()).target(), "w3");
    }

    #[test]
    fn a_synthetic_predicate_shrinks_to_its_minimum_deterministically() {
        // "Fails" while some pause on w2 lasts at least 1 s and w2 has a cycle: the minimum
        // keeps exactly one fault, one cycle, and as few workers as the renumbering allows.
        let predicate = |plan: &Plan| {
            plan.workers.len() >= 3
                && !plan.workers[2].cycles.is_empty()
                && plan.faults.iter().any(|f| {
                    matches!(f, Fault::Pause { target, duration_ns, .. }
                        if target == "w2" && *duration_ns >= 1_000_000_000)
                })
        };
        let mut original = plan();
        original.faults.push(Fault::Pause {
            at_ns: u64::MAX / 4,
            target: "w2".into(),
            duration_ns: 9_000_000_000,
        });
        assert!(predicate(&original));
        let limits = ShrinkLimits {
            max_candidates: 10_000,
            budget: Duration::from_secs(60),
        };
        let first = shrink(&original, predicate, limits);
        assert!(predicate(&first.plan));
        assert_eq!(first.stopped_by, None);
        let size = PlanSize::of(&first.plan);
        // Three workers in the plan (the renumbering keeps w2 third), one of them acting.
        assert_eq!(first.plan.workers.len(), 3);
        assert_eq!(
            size,
            PlanSize {
                faults: 1,
                cycles: 1,
                workers: 1
            }
        );
        assert!(size.fits_in(PlanSize::of(&original)));
        let Fault::Pause { duration_ns, .. } = &first.plan.faults[0] else {
            panic!("{:?}", first.plan.faults);
        };
        assert!((1_000_000_000..2_000_000_000).contains(duration_ns));
        let again = shrink(&original, predicate, limits);
        assert_eq!(again.plan, first.plan);
        assert_eq!(again.candidates, first.candidates);
    }

    #[test]
    fn a_real_time_story_runs_again_as_it_is_and_a_simulated_one_with_other_seeds() {
        const S: u64 = 1_000_000_000;
        let plan = plan();
        let seconds = |list: &[u64]| list.iter().map(|s| s * S).collect::<Vec<_>>();
        let evidence = |latencies_drawn| Evidence {
            workers: vec![0, 1],
            first_cited_ns: Vec::new(),
            span_ns: Some((25 * S, 35 * S)),
            cycle_starts_ns: vec![seconds(&[0, 10, 20, 30, 40, 50]); plan.workers.len()],
            grants_ns: vec![seconds(&[1, 11, 21, 31, 41, 51]); plan.workers.len()],
            granted_ns: Vec::new(),
            latencies_drawn,
        };
        let mut stories: Vec<Plan> = Vec::new();
        for cut in StoryCut::ALL {
            let story = around_evidence(&plan, &evidence(false), cut).unwrap();
            if !stories.contains(&story) {
                stories.push(story);
            }
        }
        let limits = ShrinkLimits {
            max_candidates: 10_000,
            budget: Duration::from_secs(60),
        };
        // A story that never fails again: every cut is tried, in real time the same plan again,
        // in a simulation with each of the other seeds once, before the cast-only plan.
        for (latencies_drawn, tries) in [(false, REAL_TIME_STORY_TRIES), (true, STORY_RESEEDS + 1)]
        {
            let mut tried: Vec<Plan> = Vec::new();
            shrink_toward(
                &plan,
                &evidence(latencies_drawn),
                |candidate| {
                    tried.push(candidate.clone());
                    false
                },
                limits,
            );
            let story_runs = stories.len() * tries as usize;
            for (run, candidate) in tried[..story_runs].iter().enumerate() {
                let attempt = (run / stories.len()) as u64;
                let step = u64::from(latencies_drawn);
                let expected = reseeded(stories[run % stories.len()].clone(), attempt * step);
                assert_eq!(
                    candidate, &expected,
                    "run {run}, latencies drawn: {latencies_drawn}"
                );
            }
            assert!(!stories.contains(&tried[story_runs]));
        }
        // In real time a story that fails only on its third run is still the one kept.
        let mut runs_of_first = 0;
        let shrunk = shrink_toward(
            &plan,
            &evidence(false),
            |candidate| {
                runs_of_first += usize::from(candidate == &stories[0]);
                candidate == &stories[0] && runs_of_first == 3
            },
            limits,
        );
        assert_eq!(shrunk.plan, stories[0]);
    }

    #[test]
    fn a_real_time_shrink_keeps_the_order_of_grants_and_a_simulated_one_zeroes_every_wait() {
        const S: u64 = 1_000_000_000;
        const MS: u64 = 1_000_000;
        let plan = plan();
        // Both workers asked at 21 s; w0 was granted 1 ms later, w1 only at 21.3 s.
        let evidence = |latencies_drawn| Evidence {
            workers: vec![0, 1],
            first_cited_ns: Vec::new(),
            span_ns: Some((25 * S, 35 * S)),
            cycle_starts_ns: vec![(0..6).map(|c| c * 10 * S).collect(); plan.workers.len()],
            grants_ns: vec![vec![21 * S, 31 * S], vec![21 * S, 33 * S]],
            granted_ns: vec![
                vec![21 * S + MS, 31 * S + MS],
                vec![21 * S + 300 * MS, 34 * S],
            ],
            latencies_drawn,
        };
        let limits = ShrinkLimits {
            max_candidates: 10_000,
            budget: Duration::from_secs(60),
        };
        // Every candidate with two workers acting fails: the shrink goes as far as it may.
        let two_act = |candidate: &Plan| {
            candidate
                .workers
                .iter()
                .filter(|w| !w.cycles.is_empty())
                .count()
                >= 2
        };
        let first_cycles = |latencies_drawn| {
            let shrunk = shrink_toward(&plan, &evidence(latencies_drawn), two_act, limits);
            let firsts: Vec<_> = shrunk
                .plan
                .workers
                .iter()
                .map(|w| w.cycles[0].clone())
                .collect();
            firsts
        };
        // Real time: w1 asks once w0's grant was answered, and keeps that wait while the rest
        // of the cycle goes; a simulation replays its order and zeroes it all.
        let real_time = first_cycles(false);
        let delays: Vec<u64> = real_time.iter().map(|c| c.delay_ns).collect();
        assert_eq!(delays, [0, MS + ASK_ORDER_MARGIN_NS]);
        assert!(
            real_time
                .iter()
                .all(|c| c.think_ns + c.prepare_ns + c.hold_ns == 0)
        );
        let simulated = first_cycles(true);
        assert!(
            simulated
                .iter()
                .all(|c| c.delay_ns + c.think_ns + c.prepare_ns + c.hold_ns == 0)
        );
    }

    #[test]
    fn the_candidate_limit_bounds_the_work() {
        let limits = ShrinkLimits {
            max_candidates: 5,
            budget: Duration::from_secs(60),
        };
        let shrunk = shrink(&plan(), |_| false, limits);
        assert_eq!(shrunk.candidates, 5);
        assert_eq!(shrunk.stopped_by, Some("candidate limit"));
        assert_eq!(shrunk.plan, plan());
    }
}
