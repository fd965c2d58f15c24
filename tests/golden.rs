//! The golden corpus: fixed runs whose history and verdict must not change by accident.
//!
//! Every workload × every backend and worker (the reference and each mutant of the zoo) ×
//! plain, strict and swarm × two seeds runs through the `fencer` binary, as a user would run
//! it; the SHA-256 of each run's `history.jsonl` and `verdict.json` is compared with
//! `tests/golden/corpus.txt`. A change that moves code around must keep every line; a change
//! that means to alter what fencer records or concludes regenerates the file with
//! `FENCER_BLESS=1 cargo test --test golden` and shows the new lines in its diff.
//!
//! One real-tier run against a private Redis fencer starts itself is compared by verdict, not
//! bytes (real time decides the interleaving): its validity and the checkers that ran.

mod cli_support;

use std::fmt::Write as _;
use std::path::Path;

use cli_support::{REAL_TIMING, fencer, text};
use sha2::{Digest, Sha256};

/// The corpus file, relative to the package root.
const CORPUS: &str = "tests/golden/corpus.txt";

/// Backend and worker choices: the reference, then every mutant of the zoo.
const VARIANTS: [(&str, &[&str]); 27] = [
    ("reference", &[]),
    ("sim-unsafe-release", &["--lock", "sim-unsafe-release"]),
    ("sim-unchecked-renew", &["--lock", "sim-unchecked-renew"]),
    (
        "sim-resurrecting-renew",
        &["--lock", "sim-resurrecting-renew"],
    ),
    ("sim-clock-tokens", &["--lock", "sim-clock-tokens"]),
    ("sim-volatile-counter", &["--lock", "sim-volatile-counter"]),
    ("sim-late-renew", &["--lock", "sim-late-renew"]),
    ("sim-busy-while-free", &["--lock", "sim-busy-while-free"]),
    ("sim-sticky-lock", &["--lock", "sim-sticky-lock"]),
    ("sim-revive-expired", &["--lock", "sim-revive-expired"]),
    (
        "sim-clock-throttled-renew",
        &["--lock", "sim-clock-throttled-renew"],
    ),
    ("sim-two-step-release", &["--lock", "sim-two-step-release"]),
    ("sim-two-step-renew", &["--lock", "sim-two-step-renew"]),
    ("sim-expired-renew-ok", &["--lock", "sim-expired-renew-ok"]),
    ("sqlite-unfenced", &["--store", "sqlite-unfenced"]),
    (
        "sqlite-check-then-write",
        &["--store", "sqlite-check-then-write"],
    ),
    ("sqlite-refuses-newer", &["--store", "sqlite-refuses-newer"]),
    ("sqlite-phantom-read", &["--store", "sqlite-phantom-read"]),
    ("sqlite-stale-cache", &["--store", "sqlite-stale-cache"]),
    (
        "sqlite-ignores-rowcount",
        &["--store", "sqlite-ignores-rowcount"],
    ),
    (
        "ignore-renew-failure",
        &["--worker", "ignore-renew-failure"],
    ),
    ("zombie-renewal", &["--worker", "zombie-renewal"]),
    ("blind-retry", &["--worker", "blind-retry"]),
    ("cached-check", &["--client", "cached-check"]),
    ("silent-watchdog", &["--client", "silent-watchdog"]),
    ("sparse-renewal", &["--client", "sparse-renewal"]),
    ("eternal-watchdog", &["--client", "eternal-watchdog"]),
];

const WORKLOADS: [&str; 3] = ["fenced-register", "lock-counter", "mutex"];

const MODES: [(&str, &[&str]); 3] = [
    ("plain", &[]),
    ("strict", &["--strict"]),
    ("swarm", &["--swarm"]),
];

const SEEDS: [u64; 2] = [0, 1];

fn sha256_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(&bytes)
        .iter()
        .fold(String::new(), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// Runs one case and returns its corpus line: `<case> <history sha> <verdict sha>`.
fn run_case(
    dir: &Path,
    workload: &str,
    variant: (&str, &[&str]),
    mode: (&str, &[&str]),
    seed: u64,
) -> String {
    let case = format!("{workload}/{}/{}/seed{seed}", variant.0, mode.0);
    let out = dir.join(case.replace('/', "-"));
    let seed_text = seed.to_string();
    let out_text = out.display().to_string();
    let mut args = vec![
        "run",
        "--seed",
        &seed_text,
        "--workload",
        workload,
        "--ops",
        "12",
        "--out",
        &out_text,
    ];
    args.extend_from_slice(variant.1);
    args.extend_from_slice(mode.1);
    let output = fencer(&args, dir);
    let code = output.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{case}: fencer run ended with {code:?}:\n{}",
        text(&output)
    );
    format!(
        "{case} {} {}",
        sha256_of(&out.join("history.jsonl")),
        sha256_of(&out.join("verdict.json"))
    )
}

#[test]
fn the_corpus_records_and_judges_exactly_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for workload in WORKLOADS {
        for variant in VARIANTS {
            for mode in MODES {
                for seed in SEEDS {
                    lines.push(run_case(dir.path(), workload, variant, mode, seed));
                }
            }
        }
    }
    let found = lines.join("\n") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS);
    if std::env::var_os("FENCER_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &found).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (FENCER_BLESS=1 writes it)", path.display()));
    let changed: Vec<String> = expected
        .lines()
        .zip(found.lines())
        .filter(|(want, got)| want != got)
        .map(|(want, got)| format!("  expected {want}\n  found    {got}"))
        .collect();
    assert_eq!(
        expected.lines().count(),
        found.lines().count(),
        "the corpus has a different number of cases"
    );
    assert!(
        changed.is_empty(),
        "{} of {} golden runs changed (FENCER_BLESS=1 cargo test --test golden rewrites \
         {CORPUS} when the change is meant):\n{}",
        changed.len(),
        lines.len(),
        changed.join("\n")
    );
}

/// The verdict of a run in words that do not depend on real time's interleaving: its
/// validity and each checker that ran with its evidence.
fn verdict_shape(verdict: &serde_json::Value) -> String {
    let checkers: Vec<String> = verdict["checkers"]
        .as_array()
        .expect("a verdict lists its checkers")
        .iter()
        .map(|checker| format!("{} ({})", checker["checker"], checker["evidence"]))
        .collect();
    format!("{} [{}]", verdict["validity"], checkers.join(", "))
}

#[test]
fn a_real_run_on_a_private_redis_judges_as_before() {
    if std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("FENCER_REQUIRE_BACKENDS").is_none(),
            "redis-server is missing and FENCER_REQUIRE_BACKENDS=1"
        );
        eprintln!("FENCER-SKIPPED-BACKEND golden: redis-server missing (Debian redis-server)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("real");
    let out_text = out.display().to_string();
    let mut args = vec!["run", "--lock", "private:redis", "--store", "private:redis"];
    args.extend(REAL_TIMING);
    args.extend([
        "--ops",
        "4",
        "--workers",
        "2",
        "--nemesis",
        "none",
        "--out",
        &out_text,
    ]);
    let output = fencer(&args, dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("verdict.json")).unwrap()).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/real-redis.txt");
    let found = verdict_shape(&verdict);
    if std::env::var_os("FENCER_BLESS").is_some() {
        std::fs::write(&path, found + "\n").unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(found, expected.trim_end());
}
