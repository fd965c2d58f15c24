//! Simulation throughput: history events per second for the default workload (5 workers, all
//! faults) on one core, and how much simulated time passes per wall second.
//!
//! Run with `cargo bench --bench simulate`; `fencer bench` prints the same figures without
//! criterion.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fencer::{Plan, Settings, check, simulate};

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

    let mut group = c.benchmark_group("check");
    group.throughput(Throughput::Elements(events));
    group.bench_function("default-history", |b| b.iter(|| check(&history)));
    group.finish();
}

criterion_group!(benches, default_workload);
criterion_main!(benches);
