//! The history reader and the plan parser against arbitrary input: random bytes, and random
//! mutations of histories and plans fencer wrote itself — of their bytes (flipped, cut,
//! inserted; lines dropped, doubled, swapped; tokens swapped for hostile ones) and of their
//! JSON values (a field given another event's value or a hostile one, elements and members
//! dropped, doubled or moved; histories renumbered after, so the checkers see events no run
//! recorded, and plans that still parse run). Every case must end in a verdict or a refusal
//! at a line (what `fencer check` and `fencer run --plan` turn into exit 254) or, for a plan
//! that runs, a refusal as bad input, within bounded time, never a panic.
//!
//! Deterministic: one seeded ChaCha generator draws every case, so a failure names its case
//! and reproduces exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fencer_checkers::{CheckOptions, Validity, check_packed};
use fencer_harness::{HistoryError, PackedHistory, Workload};
use fencer_nemesis::FaultKind;
use fencer_run::checking::judge;
use fencer_run::settings::{Settings, StoreBackend};
use fencer_run::{Backends, Launch, Plan, RunLimits};
use fencer_workloads::RenewFailurePolicy;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// Mutated cases per original file, and cases of random bytes per reader.
const MUTATED_CASES: usize = 150;
const RANDOM_CASES: usize = 100;

/// The longest one case may take (checking, or running a mutated plan, included).
const CASE_BUDGET: Duration = Duration::from_secs(3);

/// Small runs fencer makes itself: a valid one, a lock-counter one, and one that shows
/// anomalies (an unfenced store under pauses, the first such seed), with their histories.
fn originals(backends: &Backends) -> Vec<(Plan, Vec<u8>)> {
    let small = Settings {
        seed: 2,
        workers: 2,
        ops_per_worker: 3,
        ..Settings::default()
    };
    let run = |settings: &Settings| {
        let plan = Plan::generate(settings);
        let history = Launch::new(backends).run(&plan).unwrap().history;
        let verdict = judge(&plan.settings, &history, false);
        (plan, history.to_jsonl(), verdict.validity)
    };
    let broken = (0..64)
        .map(|seed| {
            run(&Settings {
                seed,
                workers: 3,
                ops_per_worker: 4,
                store: StoreBackend::SqliteUnfenced.into(),
                on_renew_failure: RenewFailurePolicy::Continue,
                nemesis: [FaultKind::Pause].into_iter().collect(),
                ..small.clone()
            })
        })
        .find(|(_, _, validity)| *validity == Validity::Invalid)
        .expect("the unfenced store shows an anomaly on some seed");
    let counter = Settings {
        workload: Workload::LockCounter,
        ..small.clone()
    };
    [run(&small), run(&counter), broken]
        .into_iter()
        .map(|(plan, history, _)| (plan, history))
        .collect()
}

/// Numbers and words a hostile or corrupted file may hold where fencer writes its own.
const HOSTILE: [&str; 24] = [
    "0",
    "-1",
    "1.5",
    "1e400",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "null",
    "true",
    "[]",
    "{}",
    "\"\"",
    "\"w0\"",
    "\"w9\"",
    "\"lock\"",
    "\"ok\"",
    "\"fail\"",
    "\"info\"",
    "\"invoke\"",
    "\"write\"",
    "\"release\"",
    "\"\\u0000\"",
    "\"\u{fffd}\"",
];

/// Where tokens start: digits, a minus sign, a quote.
fn token_start(byte: u8) -> bool {
    byte.is_ascii_digit() || byte == b'-' || byte == b'"'
}

/// `bytes` after one random change of its bytes: the reader's defences against garbage.
fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut ChaCha8Rng) {
    let len = bytes.len();
    let at = |rng: &mut ChaCha8Rng| rng.random_range(0..=len);
    match rng.random_range(0..8) {
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            bytes[i] = rng.random();
        }
        1 => {
            let start = at(rng);
            let end = (start + rng.random_range(0..64)).min(len);
            bytes.drain(start..end);
        }
        2 => {
            let start = at(rng);
            let junk: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
            bytes.splice(start..start, junk);
        }
        3 => bytes.truncate(at(rng)),
        4 | 5 => {
            // A number or string token swapped for a hostile one.
            let starts: Vec<usize> = (0..len).filter(|&i| token_start(bytes[i])).collect();
            if starts.is_empty() {
                return;
            }
            let start = starts[rng.random_range(0..starts.len())];
            let end = if bytes[start] == b'"' {
                bytes[start + 1..]
                    .iter()
                    .position(|&b| b == b'"')
                    .map_or(len, |offset| start + offset + 2)
            } else {
                bytes[start + 1..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(len, |offset| start + offset + 1)
            };
            let word = HOSTILE[rng.random_range(0..HOSTILE.len())];
            bytes.splice(start..end, word.bytes());
        }
        _ => {
            // Whole lines dropped, doubled or swapped.
            let mut lines: Vec<Vec<u8>> = bytes
                .split_inclusive(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            if lines.is_empty() {
                return;
            }
            let i = rng.random_range(0..lines.len());
            let j = rng.random_range(0..lines.len());
            match rng.random_range(0..3) {
                0 => drop(lines.remove(i)),
                1 => {
                    let line = lines[i].clone();
                    lines.insert(j, line);
                }
                _ => lines.swap(i, j),
            }
            *bytes = lines.concat();
        }
    }
}

/// JSON values a hostile or corrupted file may hold where fencer writes its own.
fn hostile_value(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..12) {
        0 => Value::from(0),
        1 => Value::from(-1),
        2 => Value::from(u64::MAX),
        3 => Value::from(i64::MIN),
        4 => Value::from(0.5),
        5 => Value::Null,
        6 => Value::Bool(true),
        7 => Value::Array(Vec::new()),
        8 => Value::Object(serde_json::Map::new()),
        _ => {
            let word = [
                "", "w0", "w9", "lock", "store", "ok", "invoke", "write", "x\u{0}",
            ];
            Value::from(word[rng.random_range(0..word.len())])
        }
    }
}

/// A nearby value of the same kind: a number halved, doubled or moved by one, or a value of
/// the same type from `donors` (for an event's field, other events' values of that field: a
/// token, an owner, a process, an op).
fn plausible_value(value: &Value, donors: &[Value], rng: &mut ChaCha8Rng) -> Value {
    match value {
        Value::Number(number) if rng.random_bool(0.7) => {
            let n = number.as_u64().unwrap_or(1);
            Value::from(match rng.random_range(0..4) {
                0 => n / 2,
                1 => n.saturating_mul(2),
                2 => n.saturating_add(1),
                _ => n.saturating_sub(1),
            })
        }
        _ => {
            let alike: Vec<&Value> = donors
                .iter()
                .filter(|donor| std::mem::discriminant(*donor) == std::mem::discriminant(value))
                .collect();
            match alike.len() {
                0 => value.clone(),
                n => alike[rng.random_range(0..n)].clone(),
            }
        }
    }
}

/// Every node of `value` (leaves included), for picking one.
fn nodes(value: &Value, out: &mut Vec<Value>) {
    out.push(value.clone());
    match value {
        Value::Array(items) => items.iter().for_each(|item| nodes(item, out)),
        Value::Object(members) => members.values().for_each(|member| nodes(member, out)),
        _ => {}
    }
}

/// `value` after one change at a random node: replaced by a hostile or a plausible value, or
/// for an array or object, an element or member dropped, doubled or moved.
fn mutate_value(value: &mut Value, donors: &[Value], rng: &mut ChaCha8Rng) {
    let count = {
        let mut all = Vec::new();
        nodes(value, &mut all);
        all.len()
    };
    let mut target = rng.random_range(0..count);
    mutate_node(value, &mut target, donors, rng);
}

/// Walks to node number `target` (counting as [`nodes`] does) and changes it.
fn mutate_node(value: &mut Value, target: &mut usize, donors: &[Value], rng: &mut ChaCha8Rng) {
    if *target == 0 {
        match value {
            Value::Array(items) if !items.is_empty() && rng.random_bool(0.5) => {
                let i = rng.random_range(0..items.len());
                match rng.random_range(0..3) {
                    0 => drop(items.remove(i)),
                    1 => {
                        let item = items[i].clone();
                        items.insert(i, item);
                    }
                    _ => {
                        let j = rng.random_range(0..items.len());
                        items.swap(i, j);
                    }
                }
            }
            Value::Object(members) if !members.is_empty() && rng.random_bool(0.5) => {
                let key = members
                    .keys()
                    .nth(rng.random_range(0..members.len()))
                    .cloned();
                members.remove(&key.expect("picked among the keys"));
            }
            _ if rng.random_bool(0.3) => *value = hostile_value(rng),
            _ => *value = plausible_value(value, donors, rng),
        }
        *target = usize::MAX;
        return;
    }
    *target -= 1;
    match value {
        Value::Array(items) => {
            for item in items {
                mutate_node(item, target, donors, rng);
            }
        }
        Value::Object(members) => {
            for member in members.values_mut() {
                mutate_node(member, target, donors, rng);
            }
        }
        _ => {}
    }
}

/// A plan's text after one to four random changes: of its bytes, or of its JSON values
/// (written back as fencer writes plans, so many still parse and some still run).
fn mutated_plan(original: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(original).expect("fencer's plan parses");
    let mut donors = Vec::new();
    nodes(&value, &mut donors);
    for _ in 0..rng.random_range(1..=3) {
        mutate_value(&mut value, &donors, rng);
    }
    let mut bytes = serde_json::to_vec_pretty(&value).expect("a value serialises");
    if rng.random_bool(0.3) {
        mutate_bytes(&mut bytes, rng);
    }
    bytes
}

/// A history's text after one to four random changes: of its bytes, of one event's fields
/// (another event's value for the field, or a hostile one), or of its lines (dropped, doubled,
/// swapped), then mostly renumbered and put back in time order, so the reader's rules pass and
/// the checkers see a history no run recorded.
fn mutated_history(original: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut events: Vec<Value> = original
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("fencer's history parses"))
        .collect();
    let mut donors: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for event in &events {
        if let Value::Object(members) = event {
            for (key, value) in members {
                donors.entry(key.clone()).or_default().push(value.clone());
            }
        }
    }
    for _ in 0..rng.random_range(1..=4) {
        let i = rng.random_range(0..events.len());
        let j = rng.random_range(0..events.len());
        match rng.random_range(0..10) {
            0 => drop(events.remove(i)),
            1 => {
                let event = events[i].clone();
                events.insert(j, event);
            }
            2 => events.swap(i, j),
            _ => {
                if let Value::Object(members) = &mut events[i] {
                    let key = members
                        .keys()
                        .nth(rng.random_range(0..members.len()))
                        .cloned();
                    let key = key.expect("an event has fields");
                    if rng.random_bool(0.1) {
                        members.remove(&key);
                    } else if rng.random_bool(0.1) {
                        members.insert(key, hostile_value(rng));
                    } else {
                        let donor = plausible_value(&members[&key], &donors[&key], rng);
                        members.insert(key, donor);
                    }
                }
            }
        }
        if events.is_empty() {
            break;
        }
    }
    if rng.random_bool(0.8) {
        let mut last_ns = 0;
        for (index, event) in events.iter_mut().enumerate() {
            if let Value::Object(members) = event {
                members.insert("index".into(), Value::from(index));
                let time_ns = members.get("time_ns").and_then(Value::as_u64).unwrap_or(0);
                last_ns = last_ns.max(time_ns);
                members.insert("time_ns".into(), Value::from(last_ns));
            }
        }
    }
    let mut bytes = Vec::new();
    for event in &events {
        serde_json::to_writer(&mut bytes, event).expect("a value serialises");
        bytes.push(b'\n');
    }
    if rng.random_bool(0.1) {
        mutate_bytes(&mut bytes, rng);
    }
    bytes
}

/// `original` after one to four random changes of its bytes.
fn mutated_bytes(original: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        mutate_bytes(&mut bytes, rng);
    }
    bytes
}

/// Random bytes, mostly JSON's alphabet so some of them get past the first character.
fn random_bytes(rng: &mut ChaCha8Rng) -> Vec<u8> {
    const ALPHABET: &[u8] = b"{}[]\":, \n0123456789-.eE\\truefalsnl";
    (0..rng.random_range(0..512))
        .map(|_| {
            if rng.random_bool(0.8) {
                ALPHABET[rng.random_range(0..ALPHABET.len())]
            } else {
                rng.random()
            }
        })
        .collect()
}

/// The 1-based line numbers an error may name in `bytes`: a line of it, or the one after.
fn lines_of(bytes: &[u8]) -> std::ops::RangeInclusive<usize> {
    1..=bytes.iter().filter(|&&b| b == b'\n').count() + 1
}

/// Reads `bytes` as a history; checks it when it reads. Panics with `case` on anything but a
/// verdict over every event read or a refusal at one of its lines; true when it read.
fn history_case(bytes: &[u8], workload: Workload, case: &str) -> bool {
    match PackedHistory::read_jsonl(bytes, "h.jsonl") {
        Ok(history) => {
            let options = CheckOptions {
                workload,
                search_budget_ms: 200,
                ..CheckOptions::default()
            };
            let verdict = check_packed(&history, &options);
            assert_eq!(
                verdict.events,
                history.rows().len() as u64,
                "{case}: a verdict over every event read"
            );
            true
        }
        Err(HistoryError::Malformed { path, line, .. }) => {
            assert_eq!(path, "h.jsonl", "{case}");
            assert!(lines_of(bytes).contains(&line), "{case}: line {line}");
            false
        }
        Err(error @ HistoryError::Io { .. }) => panic!("{case}: {error}"),
    }
}

/// Parses `bytes` as a plan; runs it when it parses (within small limits) and judges its
/// history. Panics with `case` on anything but a verdict or bad input; true when it ran.
fn plan_case(bytes: &[u8], backends: &Backends, case: &str) -> bool {
    let plan = match Plan::from_json(bytes, "p.json") {
        Ok(plan) => plan,
        Err(error) => {
            assert_eq!(error.origin, "p.json", "{case}");
            assert!(lines_of(bytes).contains(&error.line), "{case}: {error}");
            return false;
        }
    };
    let launch = Launch {
        limits: RunLimits {
            events: 20_000,
            ..RunLimits::default()
        },
        ..Launch::new(backends)
    };
    match launch.run(&plan) {
        Ok(launched) => {
            let verdict = judge(&launched.plan.settings, &launched.history, false);
            assert_eq!(
                verdict.events,
                launched.history.len() as u64,
                "{case}: a verdict over every event recorded"
            );
            true
        }
        Err(error) => {
            assert!(error.is_bad_input(), "{case}: {error}");
            false
        }
    }
}

/// Runs `case` and asserts it took less than [`CASE_BUDGET`]; what it gave.
fn timed<T>(name: &str, case: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let given = case();
    let took = started.elapsed();
    assert!(took < CASE_BUDGET, "{name} took {took:?}");
    given
}

#[test]
fn mutated_and_random_histories_give_a_verdict_or_an_error_at_a_line() {
    let backends = Backends::new();
    let mut rng = ChaCha8Rng::seed_from_u64(0x6869_7374);
    for (index, (plan, history)) in originals(&backends).iter().enumerate() {
        let workload = plan.settings.workload;
        // A history fencer wrote must read: the mutations are judged against it.
        assert!(history_case(
            history,
            workload,
            &format!("original {index}")
        ));
        for case in 0..MUTATED_CASES {
            let bytes = if case % 4 == 0 {
                mutated_bytes(history, &mut rng)
            } else {
                mutated_history(history, &mut rng)
            };
            let name = format!("history {index} mutation {case}");
            timed(&name, || history_case(&bytes, workload, &name));
        }
    }
    for case in 0..RANDOM_CASES {
        let bytes = random_bytes(&mut rng);
        let name = format!("random history {case}");
        timed(&name, || {
            history_case(&bytes, Workload::FencedRegister, &name)
        });
    }
}

#[test]
fn mutated_and_random_plans_run_to_a_verdict_or_are_refused_at_a_line() {
    let backends = Backends::new();
    let mut rng = ChaCha8Rng::seed_from_u64(0x706c_616e);
    for (index, (plan, _)) in originals(&backends).iter().enumerate() {
        let json = plan.to_json();
        // A plan fencer wrote must run: the mutations are judged against it.
        assert!(plan_case(
            &json,
            &backends,
            &format!("original plan {index}")
        ));
        for case in 0..MUTATED_CASES {
            let bytes = if case % 3 == 0 {
                mutated_bytes(&json, &mut rng)
            } else {
                mutated_plan(&json, &mut rng)
            };
            let name = format!("plan {index} mutation {case}");
            timed(&name, || plan_case(&bytes, &backends, &name));
        }
    }
    for case in 0..RANDOM_CASES {
        let bytes = random_bytes(&mut rng);
        let name = format!("random plan {case}");
        timed(&name, || plan_case(&bytes, &backends, &name));
    }
}
