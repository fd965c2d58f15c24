//! fencer's own simulations judged as a user's backend would be: with the lock service's log
//! (and the store's) taken out, the checkers work from client replies alone. The reference
//! must stay free of anomalies, and the lock mutants must still be caught.

use fencer::{Plan, Settings, Validity, Verdict, Workload, simulate};
use fencer_gate::mutants::Mutant;
use fencer_harness::{EventType, History, Op, PackedHistory};

/// Which server logs to take out of a history.
#[derive(Clone, Copy, Debug)]
enum Strip {
    /// None: the history as recorded.
    Nothing,
    /// The lock service's grants, renewals and releases.
    LockLog,
    /// Every server log entry, the store's too.
    AllLogs,
}

fn strip(history: History, what: Strip) -> History {
    let events = history
        .events
        .into_iter()
        .filter(|event| {
            event.kind != EventType::Log || matches!(what, Strip::LockLog) && event.f == Op::Write
        })
        .enumerate()
        .map(|(index, event)| fencer_harness::Event {
            index: index as u64,
            ..event
        })
        .collect();
    History { events }
}

fn judged(settings: &Settings, what: Strip, strict: bool) -> Verdict {
    let history = simulate(&Plan::generate(settings)).expect("the plan runs");
    fencer_run::checking::judge(
        settings,
        &PackedHistory::pack(&strip(history, what)),
        strict,
    )
}

fn small(workload: Workload, seed: u64) -> Settings {
    Settings {
        seed,
        ops_per_worker: 20,
        workload,
        ..Settings::default()
    }
}

/// Warnings a correct backend must never earn (fencing's documented limit may occur).
const NEVER_WARNED: [&str; 2] = ["expired-lease-renewed", "stuck-lock"];

/// (unknown, invalid or wrongly warned) seeds of the reference under every fault, with its
/// logs, without the lock's, and without any.
fn reference_over(seeds: std::ops::Range<u64>) -> (Vec<String>, Vec<String>) {
    let mut unknown = Vec::new();
    let mut invalid = Vec::new();
    for workload in Workload::ALL {
        for what in [Strip::Nothing, Strip::LockLog, Strip::AllLogs] {
            for seed in seeds.clone() {
                let verdict = judged(&small(workload, seed), what, false);
                let line = format!(
                    "{} {what:?} seed {seed}: {}",
                    workload.name(),
                    verdict.summary_line()
                );
                let warned = NEVER_WARNED
                    .iter()
                    .any(|class| verdict.warning_counts.contains_key(*class));
                match verdict.validity {
                    Validity::Invalid => invalid.push(line),
                    _ if warned => invalid.push(line),
                    Validity::Valid => {}
                    Validity::Unknown => unknown.push(line),
                }
            }
        }
    }
    (unknown, invalid)
}

/// At most 1 % of the runs of `seeds` seeds (every workload, each judged three ways) may end
/// unknown: reasoning from replies must settle what a correct backend did.
fn assert_rarely_unknown(unknown: &[String], seeds: usize) {
    let runs = Workload::ALL.len() * 3 * seeds;
    assert!(
        unknown.len() * 100 <= runs,
        "{} of {runs} runs unknown: {unknown:#?}",
        unknown.len()
    );
}

#[test]
fn the_reference_judged_from_replies_shows_no_anomaly() {
    let (unknown, invalid) = reference_over(0..40);
    eprintln!("{} unknown: {unknown:#?}", unknown.len());
    assert!(invalid.is_empty(), "{invalid:#?}");
    assert_rarely_unknown(&unknown, 40);
}

/// The false-alarm gate for reply-only reasoning: 300 seeds of every workload, each with its
/// logs, without the lock's and without any. About 90 seconds in release.
#[test]
#[ignore = "long: run with cargo test --release -- --ignored"]
fn the_reference_judged_from_replies_shows_no_anomaly_over_300_seeds() {
    let (unknown, invalid) = reference_over(0..300);
    eprintln!("{} unknown: {unknown:#?}", unknown.len());
    assert!(invalid.is_empty(), "{invalid:#?}");
    assert_rarely_unknown(&unknown, 300);
}

/// The first seed (below `cap`) whose stripped history is invalid, and its classes.
fn caught_from_replies(mutant: &Mutant, what: Strip, cap: u64) -> Option<(u64, Vec<String>)> {
    (0..cap).find_map(|seed| {
        let verdict = judged(&mutant.settings(seed), what, mutant.strict);
        (verdict.validity == Validity::Invalid)
            .then(|| (seed, verdict.anomaly_counts.keys().cloned().collect()))
    })
}

/// Each `(mutant, class)` is caught from client replies alone within 200 seeds, as that class.
fn assert_caught_from_replies(cases: &[(&str, &str)]) {
    for &(name, expected) in cases {
        let mutant = Mutant::named(name).unwrap();
        let (seed, classes) = caught_from_replies(mutant, Strip::AllLogs, 200)
            .unwrap_or_else(|| panic!("{name} not caught from replies within 200 seeds"));
        eprintln!("{name}: seed {seed}: {classes:?}");
        assert!(
            classes.iter().any(|class| class == expected),
            "{name} caught at seed {seed} as {classes:?}"
        );
    }
}

/// Lock mutants whose replies contradict each other need no log: a lease that never lapses
/// keeps acquires busy long after its holder stopped renewing, and a renew told ok but never
/// applied lets a rival be granted inside the lease the holder was promised. The other lock
/// mutants' classes (`lock-reply-mismatch` for a busy answer while the lock was free,
/// `expired-lease-renewed`) are judged against the lock log only.
#[test]
fn lock_mutants_whose_replies_contradict_each_other_are_caught_without_logs() {
    assert_caught_from_replies(&[
        ("sticky-lock", "stuck-lock"),
        ("clock-throttled-renew", "overlapping-leases"),
    ]);
}

#[test]
fn lock_mutants_are_caught_from_client_replies() {
    assert_caught_from_replies(&[
        ("unsafe-release", "foreign-release"),
        ("unchecked-renew", "foreign-release"),
        ("resurrecting-renew", "foreign-release"),
    ]);
}
