//! How large a register history the fallback linearizability search settles within its
//! budget: generates linearizable histories with no store log (`ops` calls per process,
//! `concurrency` processes overlapping at random, a few writes with unknown outcome) and
//! checks each with the default 10 s budget, one core.
//!
//! `cargo run --release -p fencer-checkers --example search_scale -- [OPS...]`
//! (default 100 1000 10000 for concurrency 2, 5, 10, 20).

use std::time::Instant;

use fencer_checkers::{AnomalyClass, CheckOptions, check_with};
use fencer_harness::{Event, EventType, History, Op};

/// xorshift64*: a fixed, dependency-free stream so every run generates the same histories.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// A linearizable history: each process alternates write/read calls lasting 1–20 ms with
/// 0–10 ms gaps; each call takes effect at a random instant inside its interval; one write in
/// `info_one_in` gets no reply (`info`) although it took effect.
fn history(ops_per_process: usize, concurrency: usize, info_one_in: u64, seed: u64) -> History {
    let mut rng = Rng(seed | 1);
    // (time, order, event, effect): effect = the write id that takes effect at that time.
    struct Call {
        invoke_ns: u64,
        effect_ns: u64,
        reply_ns: u64,
        process: usize,
        write: Option<String>,
        info: bool,
    }
    let mut calls = Vec::new();
    for process in 0..concurrency {
        let mut now_ns = rng.below(10_000_000);
        for n in 0..ops_per_process {
            let duration_ns = 1_000_000 + rng.below(19_000_000);
            let effect_ns = now_ns + 1 + rng.below(duration_ns - 1);
            let write = (n % 2 == 0).then(|| format!("w{process}-{n}"));
            let info = write.is_some() && rng.below(info_one_in) == 0;
            calls.push(Call {
                invoke_ns: now_ns,
                effect_ns,
                reply_ns: now_ns + duration_ns,
                process,
                write,
                info,
            });
            now_ns += duration_ns + rng.below(10_000_000);
        }
    }
    // Register value at each read's effect instant.
    let mut effects: Vec<(u64, usize)> = (0..calls.len())
        .map(|index| (calls[index].effect_ns, index))
        .collect();
    effects.sort_unstable();
    let mut seen = vec![None; calls.len()];
    let mut value: Option<String> = None;
    for (_, index) in effects {
        match &calls[index].write {
            Some(id) => value = Some(id.clone()),
            None => seen[index] = value.clone(),
        }
    }
    let mut events: Vec<(u64, u8, Event)> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let process = format!("p{}", call.process);
        let mut invoke = Event::new(
            process.clone(),
            EventType::Invoke,
            if call.write.is_some() {
                Op::Write
            } else {
                Op::Read
            },
        );
        invoke.key = Some("k".into());
        invoke.write_id = call.write.clone();
        let mut reply = Event {
            kind: if call.info {
                EventType::Info
            } else {
                EventType::Ok
            },
            ..invoke.clone()
        };
        if call.write.is_none() {
            reply.write_id = seen[index].clone();
        }
        events.push((call.invoke_ns, 1, invoke));
        events.push((call.reply_ns, 0, reply));
    }
    events.sort_by_key(|(time, order, event)| (*time, *order, event.process.clone()));
    History {
        events: events
            .into_iter()
            .enumerate()
            .map(|(index, (time_ns, _, event))| Event {
                index: index as u64,
                time_ns,
                ..event
            })
            .collect(),
    }
}

fn main() {
    let ops: Vec<usize> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("ops per process as a number"))
        .collect();
    let ops = if ops.is_empty() {
        vec![100, 1000, 10_000]
    } else {
        ops
    };
    println!("ops/process x concurrency = calls (1 write in N unknown): result in seconds");
    for info_one_in in [u64::MAX, 50] {
        for concurrency in [2, 5, 10, 20, 50] {
            for &per_process in &ops {
                let history = history(per_process, concurrency, info_one_in, 7);
                let calls = history.events.len() / 2;
                let started = Instant::now();
                let verdict = check_with(&history, &CheckOptions::default());
                let elapsed = started.elapsed().as_secs_f64();
                let report = verdict
                    .checkers
                    .iter()
                    .find(|report| report.checker == AnomalyClass::NonlinearizableRegister)
                    .expect("the register checker runs on fenced-register histories");
                let unknown = if info_one_in == u64::MAX {
                    "none".to_string()
                } else {
                    info_one_in.to_string()
                };
                println!(
                    "{per_process} x {concurrency} = {calls} (N = {unknown}): {} in {elapsed:.3}s",
                    report.validity
                );
            }
        }
    }
}
