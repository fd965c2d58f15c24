//! Where two histories of the same plan part ways: what `--check-determinism` reports, so a
//! non-deterministic backend is pinned to its first differing event rather than to a hash.

use fencer_harness::History;
use serde::{Deserialize, Serialize};

/// The first event at which two runs of one plan differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// 0-based event index (= 0-based line of `history.jsonl`).
    pub index: usize,
    /// SHA-256 of the first run's history.
    pub first_sha256: String,
    /// SHA-256 of the second run's history.
    pub second_sha256: String,
    /// The first run's event at `index`, as its JSONL line (`<end of history>` if it had none).
    pub first_line: String,
    /// The second run's event at `index`, as its JSONL line.
    pub second_line: String,
}

/// Compares two histories event by event; `None` when they are byte-identical.
pub fn first_divergence(first: &History, second: &History) -> Option<Divergence> {
    let (first_bytes, second_bytes) = (first.to_jsonl(), second.to_jsonl());
    if first_bytes == second_bytes {
        return None;
    }
    let line = |bytes: &[u8], index: usize| {
        bytes
            .split(|&b| b == b'\n')
            .nth(index)
            .filter(|line| !line.is_empty())
            .map_or_else(
                || "<end of history>".to_string(),
                |line| String::from_utf8_lossy(line).into_owned(),
            )
    };
    let index = first_bytes
        .split(|&b| b == b'\n')
        .zip(second_bytes.split(|&b| b == b'\n'))
        .position(|(a, b)| a != b)
        .unwrap_or(first.events.len().min(second.events.len()));
    Some(Divergence {
        index,
        first_sha256: fencer_harness::history::sha256_hex(&first_bytes),
        second_sha256: fencer_harness::history::sha256_hex(&second_bytes),
        first_line: line(&first_bytes, index),
        second_line: line(&second_bytes, index),
    })
}

impl Divergence {
    /// Two lines for a terminal: where, and both versions of the event.
    pub fn describe(&self) -> String {
        format!(
            "histories diverge at event {}:\n  first run:  {}\n  second run: {}",
            self.index, self.first_line, self.second_line
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_run::{Plan, Settings, simulate};

    #[test]
    fn identical_histories_do_not_diverge_and_a_changed_event_is_named() {
        let plan = Plan::generate(&Settings {
            ops_per_worker: 3,
            ..Settings::default()
        });
        let first = simulate(&plan).unwrap();
        assert_eq!(first_divergence(&first, &simulate(&plan).unwrap()), None);

        let mut changed = first.clone();
        changed.events[7].time_ns += 1;
        let divergence = first_divergence(&first, &changed).unwrap();
        assert_eq!(divergence.index, 7);
        assert_ne!(divergence.first_line, divergence.second_line);
        assert_ne!(divergence.first_sha256, divergence.second_sha256);

        let mut shorter = first.clone();
        shorter.events.truncate(4);
        let divergence = first_divergence(&first, &shorter).unwrap();
        assert_eq!(divergence.index, 4);
        assert_eq!(divergence.second_line, "<end of history>");
    }
}
