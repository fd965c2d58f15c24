//! `fencer bench`: the simulation's throughput on this machine, without criterion — the
//! figures quoted in docs/performance.md.

use std::time::Instant;

use fencer_run::simulate_packed;

use crate::{Plan, Settings};

use super::output::outln;
use super::{Failure, Outcome};

/// Simulates `seeds` seeds of `base` one after another on this thread and prints events per
/// second, time compression, how wall time splits between simulating, checking (the verdict
/// and the race windows reached, as every gate run and saved run has them) and serialising,
/// and what a recorded event costs in memory.
///
/// The memory figure is the recorder's retained heap per event: the bytes the history holds
/// when the run hands it over (rows and distinct strings, by allocated capacity, spare
/// capacity included), summed over seeds and divided by their events. It is what a run keeps
/// per event for checking and saving; the process's peak resident memory adds the checkers'
/// and writers' working sets and the allocator's overhead, which `/usr/bin/time -v` shows.
pub fn bench(base: &Settings, seeds: u64) -> Outcome {
    base.validate().map_err(Failure::bad_input)?;
    let (mut events, mut simulated_s) = (0usize, 0.0f64);
    let (mut simulate_s, mut check_s, mut serialise_s) = (0.0f64, 0.0f64, 0.0f64);
    let mut report_s = 0.0f64;
    let mut retained_bytes = 0usize;
    for seed in 0..seeds {
        let plan = Plan::generate(&Settings {
            seed,
            ..base.clone()
        });
        let started = Instant::now();
        let history =
            simulate_packed(&plan).map_err(|error| Failure::Internal(error.to_string()))?;
        let simulated = Instant::now();
        let verdict = fencer_run::checking::judge(&plan.settings, &history, false);
        let coverage = fencer_checkers::coverage::coverage(&history, plan.settings.ttl_ns);
        let checked = Instant::now();
        let bytes = history.to_jsonl();
        let serialised = Instant::now();
        let reports =
            fencer_results::report::report_files(&history, &serde_json::json!({}), &verdict);
        report_s += serialised.elapsed().as_secs_f64();
        std::hint::black_box((verdict, coverage, bytes, reports));
        simulate_s += (simulated - started).as_secs_f64();
        check_s += (checked - simulated).as_secs_f64();
        serialise_s += (serialised - checked).as_secs_f64();
        events += history.len();
        retained_bytes += history.heap_bytes();
        simulated_s += history
            .rows()
            .last()
            .map_or(0.0, |row| row.time_ns as f64 / 1e9);
    }
    let total_s = simulate_s + check_s + serialise_s;
    outln!("bench: {seeds} seeds, {events} events, {simulated_s:.0} simulated s");
    outln!(
        "simulate: {:.0} events/s, {:.0} simulated s per wall s ({:.3} s)",
        events as f64 / simulate_s,
        simulated_s / simulate_s,
        simulate_s
    );
    outln!(
        "check: {:.0} events/s ({:.3} s); serialise JSONL: {:.0} events/s ({:.3} s)",
        events as f64 / check_s,
        check_s,
        events as f64 / serialise_s,
        serialise_s
    );
    outln!(
        "reports (timeline.html + plots, not in end to end): {:.0} events/s ({:.3} s)",
        events as f64 / report_s,
        report_s
    );
    outln!(
        "memory: {:.0} bytes per event retained by the recorder (rows and strings, by capacity)",
        retained_bytes as f64 / events.max(1) as f64
    );
    outln!(
        "end to end: {:.0} events/s, {:.1} runs/s",
        events as f64 / total_s,
        seeds as f64 / total_s
    );
    Ok(0)
}
