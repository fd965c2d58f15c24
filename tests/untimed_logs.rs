//! No explanation names a time for an entry of a log read back after the run.
//!
//! A real service's lock log and a store's applied log are read back once the run is over, so
//! every entry's `time_ns` is the moment of reading, the same for all. Every run of fencer's
//! own test corpus (each mutant of the zoo at the seed that catches it, each workload's
//! reference) is turned into the history such a backend would give: its logs taken out and
//! appended after the last event at a read-back time no event has, the store entries without a
//! clock of their own. Each explanation, and `fencer explain`'s story, is then read for that
//! time: naming it would state a fact the history does not hold.

use std::collections::BTreeSet;

use fencer::{Settings, Workload};
use fencer_checkers::story::tell;
use fencer_gate::mutants::{ZOO, hunt};
use fencer_harness::words::secs;
use fencer_harness::{Event, EventType, History, Op};
use fencer_run::checking::check_options;
use fencer_workloads::WaitMode;

/// Seeds a mutant is hunted over, as `fencer mutants` does by default.
const CAP: u64 = 200;

/// `history` as a backend whose logs are read back after the run gives it: every log entry
/// after every other event, in its own order, at one read-back time; a store entry without
/// a clock reading (an applied log has none). Returns the history and that time.
fn read_back(history: &History) -> (History, u64) {
    let (logs, calls): (Vec<&Event>, Vec<&Event>) = history
        .events
        .iter()
        .partition(|event| event.kind == EventType::Log);
    let last_ns = calls.last().map_or(0, |event| event.time_ns);
    // A time whose rendering no event of the run shares, so finding it in a sentence can only
    // mean a log entry's time was told.
    let taken: BTreeSet<String> = history
        .events
        .iter()
        .map(|event| secs(event.time_ns))
        .collect();
    let mut read_ns = last_ns + 1_234_567_891;
    while taken.contains(&secs(read_ns)) {
        read_ns += 7_000_000;
    }
    let events = calls
        .into_iter()
        .cloned()
        .chain(logs.into_iter().map(|log| Event {
            time_ns: read_ns,
            local_ns: if log.f == Op::Write {
                None
            } else {
                log.local_ns
            },
            ..log.clone()
        }))
        .enumerate()
        .map(|(index, event)| Event {
            index: index as u64,
            ..event
        })
        .collect();
    (History { events }, read_ns)
}

/// Checks `settings`' run as read back, asserts no sentence about it names the read-back
/// time, and returns the classes it explained.
fn explained_without_read_back_time(settings: &Settings, name: &str) -> BTreeSet<String> {
    let history = fencer::simulate(&fencer_run::plan::Plan::generate(settings)).unwrap();
    let (history, read_ns) = read_back(&history);
    let read_at = secs(read_ns);
    let verdict = fencer::check_with(&history, &check_options(settings, true));
    for anomaly in &verdict.anomalies {
        assert!(
            !anomaly.explanation.contains(&read_at),
            "{name}: {} names the read-back time {read_at}: {}",
            anomaly.class,
            anomaly.explanation
        );
    }
    let story = tell(&history, &verdict, "stop", usize::MAX);
    assert!(
        !story.contains(&read_at),
        "{name}: the story names the read-back time {read_at}:\n{story}"
    );
    assert!(
        !verdict.summary_line().contains(&read_at),
        "{name}: {}",
        verdict.summary_line()
    );
    verdict
        .anomalies
        .iter()
        .map(|anomaly| anomaly.class.name().to_string())
        .collect()
}

#[test]
fn no_explanation_of_the_corpus_names_the_time_a_log_was_read_back() {
    let mut explained = BTreeSet::new();
    for mutant in &ZOO {
        let caught = hunt(mutant, WaitMode::Poll, CAP)
            .unwrap()
            .caught
            .unwrap_or_else(|| panic!("{} not caught within {CAP} seeds", mutant.name));
        explained.extend(explained_without_read_back_time(
            &mutant.settings(caught.seed),
            mutant.name,
        ));
    }
    for workload in [
        Workload::FencedRegister,
        Workload::LockCounter,
        Workload::Mutex,
    ] {
        for seed in 0..2 {
            let settings = Settings {
                seed,
                workload,
                ops_per_worker: 12,
                ..Settings::default()
            };
            explained.extend(explained_without_read_back_time(&settings, workload.name()));
        }
    }
    // Every explanation that cites a log entry was written at least once: a class the corpus
    // stopped reaching would leave its template untested.
    for class in [
        "duplicate-effect",
        "expired-lease-renewed",
        "foreign-release",
        "lock-reply-mismatch",
        "overlapping-leases",
        "stale-write-accepted",
        "token-regression",
    ] {
        assert!(
            explained.contains(class),
            "no {class} explained: {explained:?}"
        );
    }
}
