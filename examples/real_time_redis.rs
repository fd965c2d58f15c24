//! Real-time seeds through `fencer::Harness` against a Redis server, with the real tier's
//! README settings (300 ms leases renewed every 100 ms, 100 ms call timeout, a fault every
//! 300 ms on average: pauses, skews and lost renew, acquire and write replies) and the
//! Harness's 3 workers; the lock and the store each open their own connection, as a user's
//! adapters built from URLs do. Prints each seed's recorded duration and verdict, then the
//! median, so the cost of one real-time seed in CI can be measured:
//!
//! ```sh
//! cargo run --release --example real_time_redis -- [redis://127.0.0.1:6379] [cycles per worker] [seeds]
//! ```
//!
//! Defaults: `FENCER_REDIS_URL` or the local server, 20 cycles per worker (the Harness's
//! default), seeds 0..7.

use std::time::{Duration, Instant};

use fencer::backends::registry::{lock_from_url, store_from_url};
use fencer::{FaultKind, Harness};

fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| {
        std::env::var("FENCER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    });
    let number = |text: Option<String>, default: u64, what: &str| {
        text.map_or(default, |text| {
            text.parse()
                .unwrap_or_else(|_| panic!("{what}: expected a number, found `{text}`"))
        })
    };
    let ops = number(args.next(), 20, "cycles per worker") as usize;
    let seeds = number(args.next(), 7, "seeds");
    let lock = lock_from_url(&url).unwrap_or_else(|error| panic!("{error}"));
    let store = store_from_url(&url).unwrap_or_else(|error| panic!("{error}"));
    let harness = Harness::from_shared(lock.adapter, store.adapter)
        .name("real_time_redis")
        .real_time()
        .ttl(Duration::from_millis(300))
        .renew_every(Duration::from_millis(100))
        .call_timeout(Duration::from_millis(100))
        .fault_gap(Duration::from_millis(300))
        .ops(ops)
        .nemesis([
            FaultKind::Pause,
            FaultKind::Skew,
            FaultKind::DropRenew,
            FaultKind::DropAcquire,
            FaultKind::DropWrite,
        ])
        .seeds(0..seeds);
    let started = Instant::now();
    let report = harness.run();
    let wall_s = started.elapsed().as_secs_f64();
    let mut recorded_s = Vec::new();
    for run in &report.runs {
        match &run.outcome {
            Ok((history, verdict)) => {
                // The run's true clock starts with its first worker, so the last event's time
                // is how long the run took.
                let last_ns = history.events.iter().map(|e| e.time_ns).max().unwrap_or(0);
                let seconds = last_ns as f64 / 1e9;
                recorded_s.push(seconds);
                println!(
                    "seed {}: {seconds:.2} s, {}",
                    run.seed,
                    verdict.summary_line()
                );
            }
            Err(error) => println!("seed {}: could not run: {error}", run.seed),
        }
    }
    recorded_s.sort_by(f64::total_cmp);
    if let Some(median) = recorded_s.get(recorded_s.len() / 2) {
        println!(
            "{} seeds of 3 workers x {ops} cycles: median {median:.2} s per seed, {:.2} s wall \
             per seed (checking included); {}",
            report.runs.len(),
            wall_s / report.runs.len() as f64,
            report.summary()
        );
    }
}
