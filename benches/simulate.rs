//! Simulation throughput on one core, in two configurations: the default workload (5 workers,
//! all faults, the SQLite store), in history events per second and simulated time per wall
//! second; and the bare call path (the mutex workload, 3 workers, no faults), in time per
//! client call, which is what fencer's own machinery around a call costs.
//!
//! Run with `cargo bench --bench simulate`; `fencer bench` prints the same figures without
//! criterion, and `benches/callgrind-per-call.sh` counts the instructions per call.

use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fencer::{History, Plan, Settings, Workload, check, simulate};
use fencer_harness::EventType;

/// Client calls in `history`: its invokes.
fn calls(history: &History) -> u64 {
    history
        .events
        .iter()
        .filter(|event| event.kind == EventType::Invoke)
        .count() as u64
}

/// Prints the wall time one client call of `plan` takes, over a few runs outside criterion's
/// sampling (criterion itself reports calls per second).
fn print_time_per_call(name: &str, plan: &Plan, calls_per_run: u64) {
    const RUNS: u32 = 5;
    let started = Instant::now();
    for _ in 0..RUNS {
        std::hint::black_box(simulate(plan).expect("the plan runs"));
    }
    let per_call = started.elapsed() / (RUNS * calls_per_run as u32);
    eprintln!("{name}: {per_call:?} per client call ({calls_per_run} calls per run)");
}

fn default_workload(c: &mut Criterion) {
    let plan = Plan::generate(&Settings::default());
    let history = simulate(&plan).expect("default plan runs");
    let events = history.events.len() as u64;
    let simulated_s = history.events.last().map_or(0.0, |e| e.time_s());
    eprintln!("default plan: {events} events, {simulated_s:.1} simulated seconds per run");

    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(events));
    group.sample_size(20);
    group.bench_function("default-5-workers-all-faults", |b| {
        b.iter(|| simulate(&plan).expect("default plan runs"))
    });
    group.finish();
    print_time_per_call("default-5-workers-all-faults", &plan, calls(&history));

    let mut group = c.benchmark_group("check");
    group.throughput(Throughput::Elements(events));
    group.bench_function("default-history", |b| b.iter(|| check(&history)));
    group.finish();
}

fn bare_call_path(c: &mut Criterion) {
    let plan = Plan::generate(&Settings {
        workload: Workload::Mutex,
        workers: 3,
        nemesis: Default::default(),
        ..Settings::default()
    });
    let history = simulate(&plan).expect("mutex plan runs");
    let calls = calls(&history);
    eprintln!("mutex plan: {calls} client calls per run");

    let mut group = c.benchmark_group("simulate");
    group.throughput(Throughput::Elements(calls));
    group.sample_size(20);
    group.bench_function("mutex-3-workers-no-faults", |b| {
        b.iter(|| simulate(&plan).expect("mutex plan runs"))
    });
    group.finish();
    print_time_per_call("mutex-3-workers-no-faults", &plan, calls);
}

criterion_group!(benches, default_workload, bare_call_path);
criterion_main!(benches);
