//! Where two histories of the same plan part ways: what `--check-determinism` reports, so a
//! non-deterministic backend is pinned to its first differing event rather than to a hash.

use fencer_harness::PackedHistory;
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

/// Compares two histories event by event, as their JSONL lines (one line of each at a time,
/// never a whole history's bytes); `None` when they are byte-identical.
pub fn first_divergence(first: &PackedHistory, second: &PackedHistory) -> Option<Divergence> {
    let line = |history: &PackedHistory, index: usize| {
        (index < history.len()).then(|| history.jsonl_line(index))
    };
    let index = (0..first.len().max(second.len()))
        .find(|&index| line(first, index) != line(second, index))?;
    let shown = |history: &PackedHistory| {
        line(history, index).unwrap_or_else(|| "<end of history>".to_string())
    };
    Some(Divergence {
        index,
        first_sha256: first.sha256_hex(),
        second_sha256: second.sha256_hex(),
        first_line: shown(first),
        second_line: shown(second),
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
    use fencer_harness::PackedHistory;
    use fencer_run::{Plan, Settings, simulate};

    #[test]
    fn identical_histories_do_not_diverge_and_a_changed_event_is_named() {
        let plan = Plan::generate(&Settings {
            ops_per_worker: 3,
            ..Settings::default()
        });
        let first = simulate(&plan).unwrap();
        let again = PackedHistory::pack(&simulate(&plan).unwrap());
        let packed = PackedHistory::pack(&first);
        assert_eq!(first_divergence(&packed, &again), None);

        let mut changed = first.clone();
        changed.events[7].time_ns += 1;
        let divergence = first_divergence(&packed, &PackedHistory::pack(&changed)).unwrap();
        assert_eq!(divergence.index, 7);
        assert_ne!(divergence.first_line, divergence.second_line);
        assert_ne!(divergence.first_sha256, divergence.second_sha256);
        assert_eq!(divergence.first_sha256, first.sha256_hex());
        assert_eq!(divergence.second_sha256, changed.sha256_hex());

        let mut shorter = first.clone();
        shorter.events.truncate(4);
        let divergence = first_divergence(&packed, &PackedHistory::pack(&shorter)).unwrap();
        assert_eq!(divergence.index, 4);
        assert_eq!(divergence.second_line, "<end of history>");
    }
}
