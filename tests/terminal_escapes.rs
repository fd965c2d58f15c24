//! Strings from a history reach the terminal escaped: a lock name, key or value holding
//! `\x1b[2J` (clear the screen) or `\r` (overwrite the line so far) is printed by `check`,
//! `explain`, a bad-input error and the gate's summary as visible escapes, never raw.

mod cli_support;
use cli_support::{MUTANT, fencer, fencer_ci, text};

use std::path::{Path, PathBuf};

use fencer::{StoreBackend, Validity, check, simulate};
use fencer_harness::PackedHistory;
use fencer_results::save::{FinishedRun, save_run};
use fencer_run::demo;

const LOCK: &str = "lock\x1b[2J\r-1";
const KEY: &str = "key\x1b[2J\r";
const VALUE_END: &str = "\x1b[31m\r";

/// How [`LOCK`] and [`KEY`] read once escaped.
const LOCK_SHOWN: &str = "lock\\u{1b}[2J\\r-1";
const KEY_SHOWN: &str = "key\\u{1b}[2J\\r";

/// The unfenced demo (one stale write accepted) with every lock, key and value of its history
/// made hostile, checked and saved as `root/run`.
fn hostile_run(root: &Path) -> PathBuf {
    let plan = demo::plan(StoreBackend::SqliteUnfenced);
    let mut history = simulate(&plan).unwrap();
    for event in &mut history.events {
        if event.lock.is_some() {
            event.lock = Some(LOCK.into());
        }
        if event.key.is_some() {
            event.key = Some(KEY.into());
        }
        if let Some(value) = &mut event.value {
            value.push_str(VALUE_END);
        }
    }
    let verdict = check(&history);
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(verdict.anomalies[0].explanation.contains(LOCK));
    let dir = root.join("run");
    let run = FinishedRun {
        command: "run",
        plan: &plan,
        history: &PackedHistory::pack(&history),
        verdict: &verdict,
        cycle_starts_ns: &[],
        interrupted_at_ns: None,
    };
    save_run(&run, &dir, None).unwrap();
    dir
}

fn assert_escaped(printed: &str) {
    assert!(!printed.contains('\x1b'), "a raw escape: {printed:?}");
    assert!(
        !printed.contains('\r'),
        "a raw carriage return: {printed:?}"
    );
}

#[test]
fn check_prints_a_hostile_history_escaped() {
    let root = tempfile::tempdir().unwrap();
    hostile_run(root.path());
    let output = fencer(&["check", "run/history.jsonl"], root.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert_escaped(&printed);
    assert!(printed.contains(&format!("lock {LOCK_SHOWN}")), "{printed}");
}

#[test]
fn explain_tells_a_hostile_history_escaped() {
    let root = tempfile::tempdir().unwrap();
    hostile_run(root.path());
    let output = fencer(&["explain", "run"], root.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert_escaped(&printed);
    assert!(printed.contains(&format!("lock {LOCK_SHOWN}")), "{printed}");
    assert!(printed.contains(&format!("key {KEY_SHOWN}")), "{printed}");
    // Every line the story numbers is still one line.
    assert!(printed.contains("\n  1. "), "{printed}");
}

#[test]
fn an_error_quoting_a_hostile_history_line_is_escaped() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("history.jsonl"),
        "{\"index\":0,\"time_ns\":0,\"process\":\"w0\",\"type\":\"invoke\",\"f\":\"acquire\\u001b[2J\\r\"}\n",
    )
    .unwrap();
    let output = fencer(&["check", "history.jsonl"], root.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(254), "{printed}");
    assert_escaped(&printed);
    assert!(printed.contains("acquire\\u{1b}[2J\\r"), "{printed}");
}

#[test]
fn the_gate_summary_prints_hostile_labels_escaped() {
    let root = tempfile::tempdir().unwrap();
    let args = [
        &["gate", "--seeds", "0..20"][..],
        &MUTANT,
        &["--no-shrink", "--no-regressions", "--out", "g"],
    ]
    .concat();
    let gate = fencer_ci(&args, root.path());
    assert_eq!(gate.status.code(), Some(1), "{}", text(&gate));
    // A shard's gate.json as a hostile hand (or a tampered artifact) left it.
    let path = root.path().join("g/gate.json");
    let mut summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    summary["failures"][0]["label"] = format!("seed 0 {LOCK}").into();
    std::fs::write(&path, serde_json::to_vec_pretty(&summary).unwrap()).unwrap();
    let merged = fencer(&["merge", "g"], root.path());
    let printed = text(&merged);
    assert_eq!(merged.status.code(), Some(1), "{printed}");
    assert_escaped(&printed);
    assert!(
        printed.contains(&format!("seed 0 {LOCK_SHOWN}")),
        "{printed}"
    );
}
