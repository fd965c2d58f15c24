//! `fencer check` on hand-written histories: the workload decides which checkers run (flag,
//! else `run.json` beside the history), `--strict` turns warnings into failures, and bad
//! input exits 254 naming what was expected.

mod cli_support;
use cli_support::{fencer, text};

use fencer_harness::{Event, EventType, History, Op};

/// Numbers `events` and spaces them 1 ms apart.
fn history(events: Vec<Event>) -> Vec<u8> {
    let events = events
        .into_iter()
        .enumerate()
        .map(|(index, event)| Event {
            index: index as u64,
            time_ns: index as u64 * 1_000_000,
            ..event
        })
        .collect();
    History { events }.to_jsonl()
}

fn event(process: &str, kind: EventType, f: Op, fill: impl FnOnce(&mut Event)) -> Event {
    let mut event = Event::new(process, kind, f);
    fill(&mut event);
    event
}

fn grant(owner: &str, token: u64) -> Event {
    event("lock", EventType::Log, Op::Acquire, |e| {
        e.lock = Some("L".into());
        e.owner = Some(owner.into());
        e.token = Some(token);
        e.ttl_ns = Some(10_000_000_000);
        e.local_ns = Some(0);
        e.expires_ns = Some(10_000_000_000);
    })
}

fn write(process: &str, kind: EventType, token: u64, write_id: &str) -> Event {
    event(process, kind, Op::Write, |e| {
        e.key = Some("k".into());
        e.token = Some(token);
        e.write_id = Some(write_id.into());
        e.value = Some(write_id.into());
        if kind == EventType::Log {
            e.process = "store".into();
        }
    })
}

/// w1 holds token 1; the lock is granted to token 2; w1's write reaches the store before any
/// write with token 2: fencing's documented limit.
fn superseded() -> Vec<u8> {
    let release = event("lock", EventType::Log, Op::Release, |e| {
        e.lock = Some("L".into());
        e.owner = Some("o1".into());
        e.holder = Some("o1".into());
        e.holder_token = Some(1);
    });
    history(vec![
        grant("o1", 1),
        release,
        grant("o2", 2),
        write("w1", EventType::Invoke, 1, "w1-0"),
        write("store", EventType::Log, 1, "w1-0"),
        write("w1", EventType::Ok, 1, "w1-0"),
        write("w2", EventType::Invoke, 2, "w2-0"),
        write("store", EventType::Log, 2, "w2-0"),
        write("w2", EventType::Ok, 2, "w2-0"),
    ])
}

#[test]
fn a_superseded_write_warns_and_fails_only_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("h.jsonl"), superseded()).unwrap();
    let lenient = fencer(&["check", "h.jsonl"], dir.path());
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    assert!(
        text(&lenient).contains("warnings: 1 superseded-write-accepted"),
        "{}",
        text(&lenient)
    );
    let strict = fencer(&["check", "h.jsonl", "--strict"], dir.path());
    assert_eq!(strict.status.code(), Some(1), "{}", text(&strict));
    assert!(
        text(&strict).contains("invalid: 1 superseded-write-accepted"),
        "{}",
        text(&strict)
    );
}

#[test]
fn the_workload_comes_from_the_flag_else_run_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("history.jsonl"), superseded()).unwrap();
    // The mutex workload has no store: the store checkers do not run, strict or not.
    std::fs::write(
        dir.path().join("run.json"),
        br#"{"settings": {"workload": "mutex"}}"#,
    )
    .unwrap();
    let from_record = fencer(&["check", "history.jsonl", "--strict"], dir.path());
    assert_eq!(from_record.status.code(), Some(0), "{}", text(&from_record));
    assert!(
        text(&from_record).contains("(mutex, strict)"),
        "{}",
        text(&from_record)
    );
    let flag = fencer(
        &[
            "check",
            "history.jsonl",
            "--strict",
            "--workload",
            "fenced-register",
        ],
        dir.path(),
    );
    assert_eq!(flag.status.code(), Some(1), "{}", text(&flag));

    std::fs::write(
        dir.path().join("run.json"),
        br#"{"settings": {"workload": "queue"}}"#,
    )
    .unwrap();
    let bad_record = fencer(&["check", "history.jsonl"], dir.path());
    assert_eq!(bad_record.status.code(), Some(254), "{}", text(&bad_record));
    assert!(
        text(&bad_record).contains("run.json: settings.workload: unknown workload"),
        "{}",
        text(&bad_record)
    );
    let bad_flag = fencer(
        &["check", "history.jsonl", "--workload", "queue"],
        dir.path(),
    );
    assert_eq!(bad_flag.status.code(), Some(254), "{}", text(&bad_flag));
}

#[test]
fn a_lost_increment_is_found_in_a_lock_counter_history() {
    let counter = |process: &str, kind: EventType, f: Op, id: Option<&str>, value: u64| {
        event(process, kind, f, |e| {
            e.key = Some("counter-1".into());
            e.write_id = id.map(str::to_string);
            e.value = (value > 0).then(|| value.to_string());
            e.token = (f == Op::Write).then_some(1);
        })
    };
    let events = vec![
        counter("w0", EventType::Invoke, Op::Read, None, 0),
        counter("w0", EventType::Ok, Op::Read, None, 0),
        counter("w1", EventType::Invoke, Op::Read, None, 0),
        counter("w1", EventType::Ok, Op::Read, None, 0),
        counter("w0", EventType::Invoke, Op::Write, Some("w0-0"), 1),
        counter("w0", EventType::Ok, Op::Write, Some("w0-0"), 1),
        counter("w1", EventType::Invoke, Op::Write, Some("w1-0"), 1),
        counter("w1", EventType::Ok, Op::Write, Some("w1-0"), 1),
        counter("final", EventType::Invoke, Op::Read, None, 0),
        counter("final", EventType::Ok, Op::Read, Some("w1-0"), 1),
    ];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("h.jsonl"), history(events)).unwrap();
    let output = fencer(
        &["check", "h.jsonl", "--workload", "lock-counter"],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("invalid: 1 lost-update"),
        "{}",
        text(&output)
    );
}

#[test]
fn run_strict_fails_exactly_when_the_lenient_run_warns() {
    let dir = tempfile::tempdir().unwrap();
    let lenient = fencer(&["run", "--seed", "1", "--out", "lenient"], dir.path());
    assert_eq!(lenient.status.code(), Some(0), "{}", text(&lenient));
    let warned = text(&lenient).contains("; warnings: ");
    let strict = fencer(
        &["run", "--seed", "1", "--strict", "--out", "strict"],
        dir.path(),
    );
    assert_eq!(
        strict.status.code(),
        Some(if warned { 1 } else { 0 }),
        "{}",
        text(&strict)
    );
    assert_eq!(
        std::fs::read(dir.path().join("lenient/history.jsonl")).unwrap(),
        std::fs::read(dir.path().join("strict/history.jsonl")).unwrap(),
        "--strict changes the verdict, never the run"
    );
}

#[test]
fn a_search_out_of_budget_exits_2_and_says_why() {
    // No store log: register linearizability needs the search; two overlapping writes and a
    // read keep it busy for more than 0 ms.
    let events = vec![
        write("w1", EventType::Invoke, 1, "a"),
        write("w2", EventType::Invoke, 2, "b"),
        write("w1", EventType::Ok, 1, "a"),
        write("w2", EventType::Ok, 2, "b"),
        event("r", EventType::Invoke, Op::Read, |e| {
            e.key = Some("k".into())
        }),
        event("r", EventType::Ok, Op::Read, |e| {
            e.key = Some("k".into());
            e.write_id = Some("a".into());
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("h.jsonl"), history(events)).unwrap();
    let settled = fencer(&["check", "h.jsonl"], dir.path());
    assert_eq!(settled.status.code(), Some(0), "{}", text(&settled));
    let spent = fencer(&["check", "h.jsonl", "--search-budget-ms", "0"], dir.path());
    assert_eq!(spent.status.code(), Some(2), "{}", text(&spent));
    assert!(
        text(&spent).contains("inconclusive: nonlinearizable-register"),
        "{}",
        text(&spent)
    );
}

#[test]
fn an_empty_history_is_unknown_and_a_write_naming_nothing_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.jsonl"), b"").unwrap();
    let empty = fencer(&["check", "empty.jsonl"], dir.path());
    assert_eq!(empty.status.code(), Some(2), "{}", text(&empty));
    assert!(
        text(&empty).contains("the history holds no events"),
        "{}",
        text(&empty)
    );
    let nameless = event("w1", EventType::Invoke, Op::Write, |e| {
        e.key = Some("k".into());
        e.token = Some(1);
    });
    std::fs::write(dir.path().join("h.jsonl"), history(vec![nameless])).unwrap();
    let refused = fencer(&["check", "h.jsonl"], dir.path());
    assert_eq!(refused.status.code(), Some(254), "{}", text(&refused));
    assert!(
        text(&refused)
            .contains("h.jsonl:1: expected a write invoke to carry a write_id or a value"),
        "{}",
        text(&refused)
    );
}

#[test]
fn a_reused_write_id_and_a_worker_s_log_entry_are_refused_at_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    // As a history converted from a tool whose "ids" are the values written: two writes of 1.
    let reused = history(vec![
        write("w1", EventType::Invoke, 1, "1"),
        write("w1", EventType::Ok, 1, "1"),
        write("w2", EventType::Invoke, 2, "1"),
        write("w2", EventType::Ok, 2, "1"),
    ]);
    std::fs::write(dir.path().join("reused.jsonl"), reused).unwrap();
    let refused = fencer(&["check", "reused.jsonl"], dir.path());
    assert_eq!(refused.status.code(), Some(254), "{}", text(&refused));
    assert!(
        text(&refused).contains("reused.jsonl:3: expected write id 1 to name one write"),
        "{}",
        text(&refused)
    );
    // A lock log entry attributed to a worker is no server's word.
    let mut forged = grant("o1", 1);
    forged.process = "w1".into();
    let logged = history(vec![
        write("w1", EventType::Invoke, 1, "a"),
        write("w1", EventType::Ok, 1, "a"),
        forged,
    ]);
    std::fs::write(dir.path().join("logged.jsonl"), logged).unwrap();
    let refused = fencer(&["check", "logged.jsonl"], dir.path());
    assert_eq!(refused.status.code(), Some(254), "{}", text(&refused));
    assert!(
        text(&refused).contains(
            "logged.jsonl:3: expected a server's log entry to come from the server (lock, \
             store), found one from w1"
        ),
        "{}",
        text(&refused)
    );
}
