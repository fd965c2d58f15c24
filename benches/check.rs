//! Checking throughput on big histories, JSONL parse included: read a history file, run every
//! checker, on one core (docs/performance.md has the figures and the budget).
//!
//! The histories are made by fencer itself, by the same command a reader would run:
//! `fencer run --seed 1 --workers 50 --ops 28 --wait poll` (1,024,202 events; fenced-register,
//! all faults, fifty polling workers contending for one lock) and `--ops 265` for about
//! 10,000,000, in a temporary directory. `cargo bench --bench check` measures 1M events; set
//! `FENCER_BENCH_10M=1` to also measure 10M (its simulation alone takes a minute and several
//! GB).
//!
//! Criterion reports time and events/s. Peak memory is the process's: the simulation runs in a
//! child process, so the bench's own peak resident set after the first check is the check's,
//! which it prints (Linux); `/usr/bin/time -v fencer check` shows the same figure as "Maximum
//! resident set size".

use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fencer::{CheckOptions, Validity, Verdict};
use fencer_checkers::check_packed;
use fencer_harness::PackedHistory;

/// Runs `fencer run` with 50 workers doing `ops` cycles each into `dir`; returns the history.
fn simulate_into(dir: &Path, ops: usize) -> PathBuf {
    let out = dir.join(format!("run-{ops}"));
    let status = Command::new(env!("CARGO_BIN_EXE_fencer"))
        .args([
            "run",
            "--seed",
            "1",
            "--workers",
            "50",
            "--wait",
            "poll",
            "--ops",
        ])
        .arg(ops.to_string())
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("fencer runs");
    assert!(status.success(), "fencer run --ops {ops}: {status}");
    out.join("history.jsonl")
}

fn check_file(path: &Path) -> Verdict {
    let history = PackedHistory::read_jsonl_file(path).expect("generated history reads back");
    check_packed(&history, &CheckOptions::default())
}

/// The process's peak resident set so far, in KiB (`VmHWM`), where Linux tells it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn big_histories(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ops = vec![28];
    if std::env::var_os("FENCER_BENCH_10M").is_some() {
        ops.push(265);
    }
    let mut group = c.benchmark_group("check-jsonl");
    group.sample_size(10);
    for ops in ops {
        let path = simulate_into(dir.path(), ops);
        let verdict = check_file(&path);
        assert_eq!(
            verdict.validity,
            Validity::Valid,
            "{}",
            verdict.summary_line()
        );
        let events = verdict.events;
        if let Some(peak_kib) = peak_rss_kib() {
            println!(
                "check-jsonl/{events}-events: peak resident set {} MiB",
                peak_kib / 1024
            );
        }
        group.throughput(Throughput::Elements(events));
        group.bench_function(format!("{events}-events"), |b| b.iter(|| check_file(&path)));
    }
    group.finish();
}

criterion_group!(benches, big_histories);
criterion_main!(benches);
