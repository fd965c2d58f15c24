//! `gate.json`: what one gate (or one shard of it) did, in a form `fencer merge` can add up and
//! JUnit can be written from without re-running anything.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::divergence::Divergence;
use crate::seeds::{SeedRange, Shard};
use crate::shrink::PlanSize;
use fencer_checkers::coverage::CoverageTally;
use fencer_checkers::{AnomalyClass, Validity, Verdict};
use fencer_run::LeftOut;
use fencer_run::reach::add_left_out;
use fencer_run::settings::Settings;

/// Seeds per JUnit test case for passing seeds: one test case per chunk keeps a 100 000-seed
/// report readable while still saying which ranges ran.
pub const CHUNK_SEEDS: u64 = 100;

/// How one run of a gate ended, as counted in [`GateSummary::validity`]: its verdict, or why
/// it has none. Declared in name order, so counts list the same way in every `gate.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tally {
    /// The run failed to produce a history.
    Error,
    /// The verdict proved an anomaly.
    Invalid,
    /// The same plan recorded two different histories.
    Nondeterministic,
    /// No anomaly proven, but unknown outcomes could hide one.
    Unknown,
    /// No anomaly, and the evidence was enough to say so.
    Valid,
}

impl Tally {
    /// The kebab-case name, as in `gate.json`.
    pub fn name(self) -> &'static str {
        match self {
            Tally::Error => "error",
            Tally::Invalid => "invalid",
            Tally::Nondeterministic => "nondeterministic",
            Tally::Unknown => "unknown",
            Tally::Valid => "valid",
        }
    }
}

impl From<Validity> for Tally {
    fn from(validity: Validity) -> Tally {
        match validity {
            Validity::Valid => Tally::Valid,
            Validity::Invalid => Tally::Invalid,
            Validity::Unknown => Tally::Unknown,
        }
    }
}

/// Why a failing run failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Its verdict proved an anomaly.
    Invalid,
    /// It recorded two different histories from one plan.
    Nondeterministic,
    /// It could not run.
    Error,
}

impl FailureKind {
    /// The kebab-case name, as in `gate.json`.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Invalid => "invalid",
            FailureKind::Nondeterministic => "nondeterministic",
            FailureKind::Error => "error",
        }
    }
}

/// Why a gate stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateEnd {
    /// Every seed of its range ran.
    Finished,
    /// It stopped at the first failing seed (every lower seed still ran).
    FirstFailure,
    /// `--time` ran out before the range was done.
    OutOfTime,
    /// Ctrl-C.
    Interrupted,
}

impl GateEnd {
    /// The kebab-case name, as in `gate.json`.
    pub fn name(self) -> &'static str {
        match self {
            GateEnd::Finished => "finished",
            GateEnd::FirstFailure => "first-failure",
            GateEnd::OutOfTime => "out-of-time",
            GateEnd::Interrupted => "interrupted",
        }
    }
}

/// Version of the `gate.json` format.
pub const SUMMARY_FORMAT: u32 = 1;

/// One gate's (or shard's, or merged shards') results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateSummary {
    /// [`SUMMARY_FORMAT`].
    pub format: u32,
    /// fencer's version.
    pub fencer_version: String,
    /// The settings every seed started from (its `seed` is not used).
    pub settings: Settings,
    /// Whether each seed also chose its fault mix (`--swarm`).
    pub swarm: bool,
    /// The seed range asked for.
    pub seeds: SeedRange,
    /// The shards covered (one for a single gate; all of them after a full merge).
    pub shards: Vec<Shard>,
    /// False when the gate was interrupted or ran out of time before its range was done.
    pub complete: bool,
    /// Why the gate stopped.
    pub ended: GateEnd,
    /// Saved regression plans replayed before the seeds.
    pub regressions_run: u64,
    /// New seeds simulated.
    pub seeds_run: u64,
    /// Events over all runs.
    pub events: u64,
    /// Runs by how they ended.
    pub validity: BTreeMap<Tally, u64>,
    /// Anomalies over all runs, by class.
    pub anomalies: BTreeMap<String, u64>,
    /// Warnings over all runs, by class: findings that fail a run only under `--strict`
    /// (fencing's documented limit, liveness), so a passing gate still shows them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub warnings: BTreeMap<String, u64>,
    /// Faults the runs' plans drew that their backends cannot take, added up by family,
    /// target and reason: what this gate did not test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
    /// Passing seeds per [`CHUNK_SEEDS`]-wide range of seed values, for JUnit.
    pub chunks: Vec<Chunk>,
    /// Every failing run, in seed order (regressions first).
    pub failures: Vec<FailureRecord>,
    /// The first [`MAX_UNKNOWN_RECORDS`] runs whose verdict was unknown, with what their checks
    /// could not decide (their count is in `validity`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknowns: Vec<UnknownRecord>,
    /// Wall time spent running plans, shrinking excluded (the longest shard's, after a
    /// merge): what runs/s is measured over.
    pub wall_s: f64,
    /// Wall time spent shrinking failures (the longest shard's, after a merge).
    #[serde(default)]
    pub shrink_s: f64,
    /// The race windows the runs reached: for each kind and width, in how many runs (absent
    /// from summaries written before coverage was counted, and then zero runs).
    #[serde(default)]
    pub coverage: CoverageTally,
    /// Runs in which no acquire was answered as granted ([`Verdict::no_lease_granted`]): a
    /// valid verdict there tested nothing a lock protects, so the gate says how many there
    /// were (omitted from JSON when none).
    #[serde(default, skip_serializing_if = "fencer_checkers::coverage::is_zero")]
    pub runs_without_grant: u64,
}

impl GateSummary {
    /// A summary of nothing run yet over `seeds` of `shards`: every count zero, complete until
    /// told otherwise. Both a fresh gate and a merge of shards start from it.
    pub fn empty(settings: Settings, swarm: bool, seeds: SeedRange, shards: Vec<Shard>) -> Self {
        GateSummary {
            format: SUMMARY_FORMAT,
            fencer_version: env!("CARGO_PKG_VERSION").to_string(),
            settings,
            swarm,
            seeds,
            shards,
            complete: true,
            ended: GateEnd::Finished,
            regressions_run: 0,
            seeds_run: 0,
            events: 0,
            validity: BTreeMap::new(),
            anomalies: BTreeMap::new(),
            warnings: BTreeMap::new(),
            left_out: Vec::new(),
            chunks: Vec::new(),
            failures: Vec::new(),
            unknowns: Vec::new(),
            wall_s: 0.0,
            shrink_s: 0.0,
            coverage: CoverageTally::default(),
            runs_without_grant: 0,
        }
    }
}

/// Seeds of one chunk `[first_seed, first_seed + CHUNK_SEEDS)` that ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// First seed value of the chunk.
    pub first_seed: u64,
    /// The lowest seed of the chunk that ran: with [`Chunk::highest_seed`], the range a JUnit
    /// test case names (a gate of seeds 0..20, or one stopped early, runs less than a chunk).
    pub lowest_seed: u64,
    /// The highest seed of the chunk that ran.
    pub highest_seed: u64,
    /// Seeds of the chunk that ran.
    pub seeds_run: u64,
    /// Of those, how many failed (each also has a [`FailureRecord`]).
    pub failed: u64,
    /// Of those, how many were unknown.
    pub unknown: u64,
}

/// One failing run: what failed, why, and how to get it back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// The seed, for generated plans.
    pub seed: Option<u64>,
    /// `seed 17`, or the regression file's name.
    pub label: String,
    /// Why it failed.
    pub kind: FailureKind,
    /// The first anomaly class (what shrinking preserves), for invalid runs.
    pub class: Option<AnomalyClass>,
    /// Anomaly counts of the run.
    pub anomaly_counts: BTreeMap<String, usize>,
    /// The first anomaly's explanation, the divergence, or the error.
    pub explanation: String,
    /// The kept run directory.
    pub run_dir: Option<String>,
    /// Commands that reproduce the failure, one line each.
    pub replay: Vec<String>,
    /// Where the first diverging event is, for non-deterministic runs.
    pub divergence: Option<Divergence>,
    /// What shrinking achieved.
    pub shrunk: Option<ShrinkRecord>,
}

/// At most this many unknown runs are described in a summary.
pub const MAX_UNKNOWN_RECORDS: usize = 100;

/// A run whose verdict was unknown: nothing proven wrong, and what could not be decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownRecord {
    /// The seed, for generated plans.
    pub seed: Option<u64>,
    /// `seed 17`, or the regression file's name.
    pub label: String,
    /// Each check that could not conclude, why, and the events behind it.
    pub inconclusive: String,
}

/// Before and after sizes of a shrink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShrinkRecord {
    /// The minimal plan's path.
    pub plan: String,
    /// The run directory of the run that confirmed the minimal plan (its timeline), when it
    /// was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The minimal plan's faults and stop in a reader's words
    /// ([`crate::plan_words::faults_in_words`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub after_in_words: String,
    /// The anomaly class it still shows.
    pub class: String,
    /// Size of the original plan.
    pub before: PlanSize,
    /// Size of the minimal plan.
    pub after: PlanSize,
    /// Events in the original history.
    pub events_before: usize,
    /// Events in the minimal plan's history.
    pub events_after: usize,
    /// Candidates simulated.
    pub candidates: usize,
    /// Why shrinking stopped early, if it did.
    pub stopped_by: Option<String>,
    /// In real time, how often the minimal plan showed the class when run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reran: Option<Reran>,
}

/// A real-time minimal plan run again: how many runs, and how many showed the class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reran {
    /// Runs that completed.
    pub runs: usize,
    /// Those that showed the class.
    pub showed: usize,
}

impl GateSummary {
    /// Failing runs (invalid, non-deterministic or crashed).
    pub fn failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// The exit code, as `fencer run`'s: 255 when a run crashed or was non-deterministic
    /// (the harness cannot be trusted), 1 for an anomaly, 2 for an unknown verdict or an
    /// incomplete gate, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.failures.iter().any(|f| f.kind != FailureKind::Invalid) {
            255
        } else if self.failed() {
            Validity::Invalid.exit_code()
        } else if !self.complete || self.validity.get(&Tally::Unknown).is_some_and(|&n| n > 0) {
            Validity::Unknown.exit_code()
        } else {
            Validity::Valid.exit_code()
        }
    }

    /// Runs per wall second.
    pub fn runs_per_s(&self) -> f64 {
        if self.wall_s > 0.0 {
            (self.seeds_run + self.regressions_run) as f64 / self.wall_s
        } else {
            0.0
        }
    }

    /// Pretty JSON, newline-terminated.
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("summaries always serialise");
        bytes.push(b'\n');
        bytes
    }

    /// Counts one checked run: its tally and events, its anomalies and warnings by class,
    /// and, when unknown, what its checks could not decide.
    pub fn count_checked(
        &mut self,
        seed: Option<u64>,
        label: &str,
        verdict: &Verdict,
        events: usize,
    ) {
        self.count_run(seed, verdict.validity.into(), events);
        self.note_unknown(seed, label, verdict);
        self.runs_without_grant += u64::from(verdict.no_lease_granted);
        for (class, count) in &verdict.anomaly_counts {
            *self.anomalies.entry(class.clone()).or_default() += *count as u64;
        }
        for (class, count) in &verdict.warning_counts {
            *self.warnings.entry(class.clone()).or_default() += *count as u64;
        }
    }

    /// Describes the run `label` (seed `seed`) if its verdict is unknown, up to
    /// [`MAX_UNKNOWN_RECORDS`] of them.
    pub fn note_unknown(&mut self, seed: Option<u64>, label: &str, verdict: &Verdict) {
        if verdict.validity != Validity::Unknown || self.unknowns.len() >= MAX_UNKNOWN_RECORDS {
            return;
        }
        let inconclusive: Vec<String> = verdict
            .unknown_because
            .iter()
            .cloned()
            .chain(verdict.inconclusive().map(|(class, why)| match why {
                Some(why) => format!("{class}: {}", why.describe()),
                None => class.name().to_string(),
            }))
            .collect();
        self.unknowns.push(UnknownRecord {
            seed,
            label: label.to_string(),
            inconclusive: inconclusive.join("; "),
        });
    }

    /// Records one run of seed `seed` (None for a regression plan) into the counts.
    pub fn count_run(&mut self, seed: Option<u64>, tally: Tally, events: usize) {
        *self.validity.entry(tally).or_default() += 1;
        self.events += events as u64;
        let Some(seed) = seed else {
            self.regressions_run += 1;
            return;
        };
        self.seeds_run += 1;
        let first_seed = seed - seed % CHUNK_SEEDS;
        let chunk = match self.chunks.iter().position(|c| c.first_seed == first_seed) {
            Some(position) => &mut self.chunks[position],
            None => {
                self.chunks.push(Chunk {
                    first_seed,
                    lowest_seed: seed,
                    highest_seed: seed,
                    seeds_run: 0,
                    failed: 0,
                    unknown: 0,
                });
                self.chunks.last_mut().expect("just pushed")
            }
        };
        chunk.lowest_seed = chunk.lowest_seed.min(seed);
        chunk.highest_seed = chunk.highest_seed.max(seed);
        chunk.seeds_run += 1;
        match tally {
            Tally::Valid => {}
            Tally::Unknown => chunk.unknown += 1,
            Tally::Invalid | Tally::Nondeterministic | Tally::Error => chunk.failed += 1,
        }
    }
}

/// Why shard summaries cannot be combined.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// They are not the shards of one gate (or one shard is given twice, or none at all).
    #[error("{0}")]
    Mismatch(String),
}

/// Combines shard summaries into one: counts added, chunks and failures merged in seed order,
/// complete only if every shard was. Refuses summaries of different gates.
pub fn merge(parts: &[(String, GateSummary)]) -> Result<GateSummary, MergeError> {
    let Some((_, first)) = parts.first() else {
        return Err(MergeError::Mismatch(
            "expected at least one gate directory".into(),
        ));
    };
    let mut merged = GateSummary {
        format: first.format,
        fencer_version: first.fencer_version.clone(),
        ..GateSummary::empty(first.settings.clone(), first.swarm, first.seeds, Vec::new())
    };
    let mut chunks: BTreeMap<u64, Chunk> = BTreeMap::new();
    for (origin, part) in parts {
        let same_gate = Settings {
            seed: 0,
            ..part.settings.clone()
        } == Settings {
            seed: 0,
            ..first.settings.clone()
        } && part.swarm == first.swarm
            && part.seeds == first.seeds;
        if !same_gate {
            return Err(MergeError::Mismatch(format!(
                "{origin}: expected a shard of the same gate as {} (same settings, --swarm and \
                 --seeds)",
                parts[0].0
            )));
        }
        if let Some(shard) = part
            .shards
            .iter()
            .find(|shard| merged.shards.contains(shard))
        {
            return Err(MergeError::Mismatch(format!(
                "{origin}: shard {shard} appears twice"
            )));
        }
        merged.shards.extend(part.shards.iter().copied());
        merged.complete &= part.complete;
        if part.ended != GateEnd::Finished && merged.ended == GateEnd::Finished {
            merged.ended = part.ended;
        }
        merged.regressions_run += part.regressions_run;
        merged.runs_without_grant += part.runs_without_grant;
        merged.seeds_run += part.seeds_run;
        merged.events += part.events;
        for (tally, count) in &part.validity {
            *merged.validity.entry(*tally).or_default() += count;
        }
        for (name, count) in &part.anomalies {
            *merged.anomalies.entry(name.clone()).or_default() += count;
        }
        for (name, count) in &part.warnings {
            *merged.warnings.entry(name.clone()).or_default() += count;
        }
        add_left_out(&mut merged.left_out, &part.left_out);
        for chunk in &part.chunks {
            let entry = chunks.entry(chunk.first_seed).or_insert(Chunk {
                seeds_run: 0,
                failed: 0,
                unknown: 0,
                ..chunk.clone()
            });
            entry.lowest_seed = entry.lowest_seed.min(chunk.lowest_seed);
            entry.highest_seed = entry.highest_seed.max(chunk.highest_seed);
            entry.seeds_run += chunk.seeds_run;
            entry.failed += chunk.failed;
            entry.unknown += chunk.unknown;
        }
        merged.failures.extend(part.failures.iter().cloned());
        merged.unknowns.extend(part.unknowns.iter().cloned());
        merged.coverage.merge(&part.coverage);
        merged.wall_s = merged.wall_s.max(part.wall_s);
        merged.shrink_s = merged.shrink_s.max(part.shrink_s);
    }
    merged.shards.sort_by_key(|shard| shard.index);
    merged.chunks = chunks.into_values().collect();
    merged
        .failures
        .sort_by_key(|failure| (failure.seed.is_some(), failure.seed));
    merged
        .unknowns
        .sort_by_key(|unknown| (unknown.seed.is_some(), unknown.seed));
    merged.unknowns.truncate(MAX_UNKNOWN_RECORDS);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(shard: Shard, seeds: &[(u64, Tally)]) -> GateSummary {
        let mut summary = GateSummary {
            fencer_version: "test".into(),
            wall_s: 1.0,
            ..GateSummary::empty(
                Settings::default(),
                false,
                "0..300".parse().unwrap(),
                vec![shard],
            )
        };
        for &(seed, validity) in seeds {
            summary.count_run(Some(seed), validity, 10);
        }
        summary
    }

    #[test]
    fn runs_that_granted_no_lease_are_counted_and_merged() {
        let one = summary("1/2".parse().unwrap(), &[(0, Tally::Valid)]);
        let mut two = summary("2/2".parse().unwrap(), &[(1, Tally::Valid)]);
        // The unknown verdict's history (a write, no acquire) granted no lease.
        let verdict = unknown_verdict();
        assert!(verdict.no_lease_granted);
        two.count_checked(Some(3), "seed 3", &verdict, 4);
        assert_eq!(two.runs_without_grant, 1);
        let json = |summary: &GateSummary| serde_json::to_string(summary).unwrap();
        assert!(json(&two).contains("\"runs_without_grant\":1"));
        assert!(!json(&one).contains("runs_without_grant"));
        let merged = merge(&[("a".into(), one), ("b".into(), two)]).unwrap();
        assert_eq!(merged.runs_without_grant, 1);
    }

    #[test]
    fn merging_shards_adds_counts_and_chunks() {
        let one = summary(
            "1/2".parse().unwrap(),
            &[(0, Tally::Valid), (150, Tally::Invalid)],
        );
        let mut two = summary(
            "2/2".parse().unwrap(),
            &[(1, Tally::Unknown), (151, Tally::Valid)],
        );
        two.complete = false;
        two.ended = GateEnd::Interrupted;
        let merged = merge(&[("a".into(), one.clone()), ("b".into(), two)]).unwrap();
        assert_eq!(merged.seeds_run, 4);
        assert_eq!(merged.events, 40);
        assert!(!merged.complete);
        assert_eq!(merged.ended, GateEnd::Interrupted);
        assert_eq!(
            merged.chunks,
            [
                Chunk {
                    first_seed: 0,
                    lowest_seed: 0,
                    highest_seed: 1,
                    seeds_run: 2,
                    failed: 0,
                    unknown: 1
                },
                Chunk {
                    first_seed: 100,
                    lowest_seed: 150,
                    highest_seed: 151,
                    seeds_run: 2,
                    failed: 1,
                    unknown: 0
                },
            ]
        );
        assert_eq!(merged.exit_code(), 2);
        let error = merge(&[("a".into(), one.clone()), ("a2".into(), one)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("appears twice"), "{error}");
    }

    #[test]
    fn merging_shards_adds_up_the_faults_they_left_out() {
        let restarts = |faults| LeftOut {
            family: fencer_nemesis::FaultKind::Restart,
            target: "lock".into(),
            faults,
            why: "`user-lock` offers no restart hook".into(),
        };
        let mut one = summary("1/2".parse().unwrap(), &[(0, Tally::Valid)]);
        one.left_out = vec![restarts(2)];
        let mut two = summary("2/2".parse().unwrap(), &[(1, Tally::Valid)]);
        two.left_out = vec![restarts(3)];
        let merged = merge(&[("a".into(), one), ("b".into(), two)]).unwrap();
        assert_eq!(merged.left_out, [restarts(5)]);
        let json = String::from_utf8(merged.to_json()).unwrap();
        assert!(json.contains("\"left_out\""), "{json}");
        let nothing_left = summary("1/1".parse().unwrap(), &[]);
        let json = String::from_utf8(nothing_left.to_json()).unwrap();
        assert!(!json.contains("left_out"), "{json}");
    }

    #[test]
    fn merging_shards_adds_up_their_warnings() {
        let mut one = summary("1/2".parse().unwrap(), &[(0, Tally::Valid)]);
        one.warnings.insert("stuck-lock".into(), 2);
        let mut two = summary("2/2".parse().unwrap(), &[(1, Tally::Valid)]);
        two.warnings.insert("stuck-lock".into(), 3);
        two.warnings.insert("superseded-write-accepted".into(), 1);
        let merged = merge(&[("a".into(), one), ("b".into(), two)]).unwrap();
        assert_eq!(merged.warnings["stuck-lock"], 5);
        assert_eq!(merged.warnings["superseded-write-accepted"], 1);
        assert_eq!(merged.exit_code(), 0);
        let quiet = summary("1/1".parse().unwrap(), &[]);
        let json = String::from_utf8(quiet.to_json()).unwrap();
        assert!(!json.contains("warnings"), "{json}");
    }

    /// A verdict that cannot conclude: a store log entry without a token cannot be ordered.
    fn unknown_verdict() -> Verdict {
        use fencer_harness::{Event, EventType, History, Op};
        let write = |kind, process: &str| Event {
            key: Some("k".into()),
            token: Some(2),
            write_id: Some("w2-0".into()),
            value: Some("v".into()),
            ..Event::new(process, kind, Op::Write)
        };
        let mut events = vec![
            write(EventType::Invoke, "w2"),
            Event {
                seq: Some(1),
                ..write(EventType::Log, "store")
            },
            write(EventType::Ok, "w2"),
            Event {
                key: Some("k".into()),
                ..Event::new("store", EventType::Log, Op::Write)
            },
        ];
        for (index, event) in events.iter_mut().enumerate() {
            event.index = index as u64;
            event.time_ns = index as u64;
        }
        fencer_checkers::check(&History { events })
    }

    #[test]
    fn unknown_runs_are_described_and_merged_in_seed_order() {
        let verdict = unknown_verdict();
        assert_eq!(verdict.validity, Validity::Unknown);
        let mut one = summary("1/2".parse().unwrap(), &[(7, Tally::Unknown)]);
        one.note_unknown(Some(7), "seed 7", &verdict);
        let mut two = summary("2/2".parse().unwrap(), &[(2, Tally::Unknown)]);
        two.note_unknown(Some(2), "seed 2", &verdict);
        let merged = merge(&[("a".into(), one), ("b".into(), two)]).unwrap();
        let labels: Vec<&str> = merged.unknowns.iter().map(|u| u.label.as_str()).collect();
        assert_eq!(labels, ["seed 2", "seed 7"]);
        assert_eq!(
            merged.unknowns[0].inconclusive,
            "stale-write-accepted: 1 store log entry lacks a key or token: event 3"
        );
        let xml = crate::junit::junit_xml(&merged);
        assert!(
            xml.contains("seed 7: unknown: stale-write-accepted: 1 store log entry lacks"),
            "{xml}"
        );
    }

    #[test]
    fn an_empty_history_s_unknown_is_described_by_its_reason() {
        let verdict = fencer_checkers::check(&fencer_harness::History::default());
        let mut gate = summary("1/1".parse().unwrap(), &[(0, Tally::Unknown)]);
        gate.note_unknown(Some(0), "seed 0", &verdict);
        assert!(
            gate.unknowns[0]
                .inconclusive
                .starts_with("the history holds no events"),
            "{}",
            gate.unknowns[0].inconclusive
        );
    }

    #[test]
    fn shards_of_different_gates_do_not_merge() {
        let one = summary("1/2".parse().unwrap(), &[]);
        let mut other = summary("2/2".parse().unwrap(), &[]);
        other.settings.workers = 3;
        let error = merge(&[("a".into(), one), ("b".into(), other)])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("b: expected a shard of the same gate"),
            "{error}"
        );
    }
}
