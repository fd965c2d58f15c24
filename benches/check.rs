//! Checking throughput on big histories, JSONL parse included: read a history file, run every
//! checker, on one core. Issue 3's budget: 1,000,000 events in 1 s, 10,000,000 in 15 s.
//!
//! The histories are made by fencer itself: a few default simulations (5 workers x 100 cycles,
//! all faults, seeds 0..4) are laid end to end until the size is reached, each copy with its own
//! lock, key, owner tokens and write ids so copies do not interfere, then written once to a
//! temporary file. `cargo bench --bench check` measures 1M events; set `FENCER_BENCH_10M=1` to
//! also measure 10M (slow to generate, about 2 GB on disk).

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fencer::{History, Plan, Settings, Validity, Verdict, check, simulate};
use fencer_harness::Event;

/// Default simulations of seeds `0..4`, one per seed.
fn seed_histories() -> Vec<History> {
    (0..4)
        .map(|seed| {
            let plan = Plan::generate(&Settings {
                seed,
                ..Settings::default()
            });
            simulate(&plan).expect("default plan runs")
        })
        .collect()
}

/// Renames every name a copy shares with other copies.
fn renamed(value: &mut Option<String>, copy: usize) {
    if let Some(name) = value {
        *name = format!("c{copy}-{name}");
    }
}

/// Writes `sources` end to end (cycling) to `path` until `events` events; returns how many.
fn write_big_history(sources: &[History], events: usize, path: &Path) -> usize {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("temp file"));
    let mut written = 0usize;
    let mut offset_ns = 0u64;
    let mut copy = 0usize;
    while written < events {
        let source = &sources[copy % sources.len()];
        let mut last_ns = offset_ns;
        let take = (events - written).min(source.events.len());
        let chunk = History {
            events: source.events[..take]
                .iter()
                .map(|event| {
                    let mut event: Event = event.clone();
                    event.index += written as u64;
                    event.time_ns += offset_ns;
                    last_ns = event.time_ns;
                    for name in [
                        &mut event.lock,
                        &mut event.key,
                        &mut event.owner,
                        &mut event.holder,
                        &mut event.write_id,
                    ] {
                        renamed(name, copy);
                    }
                    event
                })
                .collect(),
        };
        chunk.write_jsonl(&mut out).expect("temp file is writable");
        written += take;
        offset_ns = last_ns + 1_000_000_000;
        copy += 1;
    }
    written
}

fn check_file(path: &Path) -> Verdict {
    let history = History::read_jsonl_file(path).expect("generated history reads back");
    check(&history)
}

fn big_histories(c: &mut Criterion) {
    let sources = seed_histories();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sizes = vec![1_000_000];
    if std::env::var_os("FENCER_BENCH_10M").is_some() {
        sizes.push(10_000_000);
    }
    let mut group = c.benchmark_group("check-jsonl");
    group.sample_size(10);
    for events in sizes {
        let path = dir.path().join(format!("history-{events}.jsonl"));
        let written = write_big_history(&sources, events, &path);
        assert_eq!(written, events);
        // A cut-off copy leaves calls open at its end; that is allowed and must stay valid.
        let verdict = check_file(&path);
        assert_eq!(
            verdict.validity,
            Validity::Valid,
            "{}",
            verdict.summary_line()
        );
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function(format!("{events}-events"), |b| b.iter(|| check_file(&path)));
    }
    group.finish();
}

criterion_group!(benches, big_histories);
criterion_main!(benches);
