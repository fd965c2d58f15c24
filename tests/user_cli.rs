//! A program's own backends through fencer's command line, as a `tests/` file with
//! `harness = false` is one: run with `FENCER_USER_CLI=1` this binary *is* the user's program
//! (its `main` hands over to `fencer::Cli` with two backends of its own); run by `cargo test`
//! it runs that program as a user would and checks what it did — a gate over a store with a
//! one-line bug fails, keeps the run, shrinks it, saves the regression and writes JUnit, the
//! kept run replays byte for byte, the saved regression fails the next gate first, and `--help`
//! lists the program's backends. A correct store passes.

// The example user project's backends, shared so the test runs exactly what it documents.
#[path = "../examples/user-project/src/backends.rs"]
mod backends;

use std::path::Path;
use std::process::{Command, ExitCode, Output};

/// Set in the environment of the program under test.
const AS_PROGRAM: &str = "FENCER_USER_CLI";

fn main() -> ExitCode {
    if std::env::var_os(AS_PROGRAM).is_some() {
        return backends::cli().program("user-cli").main();
    }
    let tests: [(&str, fn()); 3] = [
        (
            "help_lists_the_programs_own_backends",
            help_lists_the_programs_own_backends,
        ),
        (
            "a_gate_on_a_correct_store_passes",
            a_gate_on_a_correct_store_passes,
        ),
        (
            "a_gate_finds_the_leaky_store_shrinks_saves_and_replays_it",
            a_gate_finds_the_leaky_store_shrinks_saves_and_replays_it,
        ),
    ];
    let mut failed = 0;
    for (name, test) in tests {
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("test {name} ... ok"),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        tests.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs this binary as the user's program with `args` in `cwd`.
fn program(args: &[&str], cwd: &Path) -> Output {
    Command::new(std::env::current_exe().expect("the test binary"))
        .args(args)
        .env(AS_PROGRAM, "1")
        .env("CI", "true")
        .current_dir(cwd)
        .output()
        .expect("the program runs")
}

fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

const SMALL: [&str; 6] = ["--ops", "10", "--workers", "3", "--nemesis", "pause"];

fn help_lists_the_programs_own_backends() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--help"][..], &["gate", "--help"], &["run", "--help"]] {
        let output = program(args, dir.path());
        let text = printed(&output);
        assert_eq!(output.status.code(), Some(0), "{text}");
        assert!(
            text.contains("--lock memory-lock  (simulated time) leases in memory"),
            "{text}"
        );
        assert!(text.contains("--store leaky-store"), "{text}");
    }
}

fn a_gate_on_a_correct_store_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "gate",
        "--lock",
        "memory-lock",
        "--store",
        "memory-store",
        "--seeds",
        "0..20",
        "--out",
        "gate",
    ];
    args.extend(SMALL);
    // The memory lock offers no restart hook: its restarts are left out, and said to be.
    *args.last_mut().unwrap() = "pause,restart";
    let output = program(&args, dir.path());
    let text = printed(&output);
    assert!(matches!(output.status.code(), Some(0 | 2)), "{text}");
    assert!(!text.contains("FAIL "), "{text}");
    assert!(!dir.path().join("fencer-regressions").exists(), "{text}");
    assert!(
        text.contains("left out") && text.contains("restart faults on lock"),
        "{text}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("gate/gate.json")).unwrap()).unwrap();
    assert_eq!(summary["left_out"][0]["family"], "restart", "{summary}");
}

fn a_gate_finds_the_leaky_store_shrinks_saves_and_replays_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "gate",
        "--lock",
        "memory-lock",
        "--store",
        "leaky-store",
        "--seeds",
        "0..50",
        "--out",
        "gate",
        "--junit",
        "junit.xml",
        "--shrink-time",
        "20s",
    ];
    args.extend(SMALL);
    let output = program(&args, dir.path());
    let text = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("stale-write-accepted"), "{text}");
    assert!(
        text.contains("reproduce: user-cli run --seed ")
            && text.contains("--store leaky-store --lock memory-lock"),
        "{text}"
    );
    assert!(text.contains("minimal plan: "), "{text}");

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("gate/gate.json")).unwrap()).unwrap();
    let failure = &summary["failures"][0];
    assert_eq!(failure["class"], "stale-write-accepted", "{summary}");
    let shrunk = &failure["shrunk"];
    assert!(
        shrunk["after"]["faults"].as_u64().unwrap() <= shrunk["before"]["faults"].as_u64().unwrap(),
        "{summary}"
    );
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert!(junit.contains("<failure"), "{junit}");
    let saved: Vec<_> = std::fs::read_dir(dir.path().join("fencer-regressions"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        saved.len() == 1 && saved[0].starts_with("stale-write-accepted-memory-lock-leaky-store-"),
        "{saved:?}"
    );

    // The kept run replays byte for byte in the user's program.
    let run_dir = failure["run_dir"].as_str().unwrap();
    let output = program(&["replay", run_dir], dir.path());
    let text = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("identical: "), "{text}");

    // The next gate replays the saved regression first and fails on it.
    let mut args = vec![
        "gate",
        "--lock",
        "memory-lock",
        "--store",
        "leaky-store",
        "--seeds",
        "0..1",
        "--out",
        "again",
    ];
    args.extend(SMALL);
    let output = program(&args, dir.path());
    let text = printed(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL regression "), "{text}");
}
