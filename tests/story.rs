//! `fencer explain`'s story of a verdict, on the scripted demo runs: the evidence numbered on
//! both clocks, the defence that failed and the remedy; nothing to tell for a valid run.

use fencer::{StoreBackend, check, simulate};
use fencer_checkers::story::tell;
use fencer_run::demo;

#[test]
fn the_demo_story_numbers_the_evidence_and_blames_fencing() {
    let history = simulate(&demo::plan(StoreBackend::SqliteUnfenced)).unwrap();
    let verdict = check(&history);
    let story = tell(&history, &verdict, "stop", 5);
    assert!(
        story.starts_with("verdict: invalid: 1 stale-write-accepted\n"),
        "{story}"
    );
    assert!(
        story.contains("Anomaly 1 of 1: stale-write-accepted"),
        "{story}"
    );
    assert!(story.contains("  1. "), "{story}");
    assert!(
        story.contains("the store applied write w0-0 (value \"late A result\") with token 1"),
        "{story}"
    );
    assert!(story.contains("(w0's clock"), "{story}");
    assert!(
        story.contains(
            "Defence that failed: fencing: the store accepted token 1 after it had accepted token 2."
        ),
        "{story}"
    );
    assert!(
        story.contains("Remedy: check the fence inside the store's write"),
        "{story}"
    );
    let steps = story
        .lines()
        .filter(|line| line.starts_with("  ") && line.contains(". "))
        .count();
    assert!(steps >= verdict.anomalies[0].events.len(), "{story}");
}

#[test]
fn a_valid_run_has_nothing_to_explain() {
    let history = simulate(&demo::plan(StoreBackend::Sqlite)).unwrap();
    let verdict = check(&history);
    let story = tell(&history, &verdict, "stop", 5);
    assert!(story.contains("No anomaly to explain"), "{story}");
    assert!(!story.contains("Remedy"), "{story}");
}
