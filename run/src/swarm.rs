//! Swarm testing (as TigerBeetle's simulator does it): with `--swarm`, the seed also chooses
//! which of the enabled fault families are on and how often faults come, so one seed range
//! covers many fault mixes — some bugs hide when every fault is on at once (a pause that would
//! expose a stale write is masked by a clock step that expires the lease first).
//!
//! The choice is drawn from its own ChaCha stream ([`Stream::Swarm`]) and written into the
//! settings, so the plan records the concrete mix and replay needs nothing else.

use fencer_harness::{Stream, stream_rng};
use rand::RngExt;

use crate::settings::{MAX_SETTING_NS, Settings};

/// Factors applied to the mean fault gap: from four times as often to a quarter as often.
pub const GAP_FACTORS: [(u64, u64); 5] = [(1, 4), (1, 2), (1, 1), (2, 1), (4, 1)];

/// `settings` with this seed's fault mix: each enabled family kept with probability ½ (the
/// mix may be empty: a fault-free run is a useful baseline), and the mean gap scaled by one of
/// [`GAP_FACTORS`] (never past [`MAX_SETTING_NS`], the longest gap a run takes).
pub fn swarm_settings(settings: &Settings) -> Settings {
    let mut rng = stream_rng(settings.seed, Stream::Swarm, 0);
    let nemesis = settings
        .nemesis
        .iter()
        .copied()
        .filter(|_| rng.random_bool(0.5))
        .collect();
    let (numerator, denominator) = GAP_FACTORS[rng.random_range(0..GAP_FACTORS.len())];
    Settings {
        nemesis,
        mean_fault_gap_ns: (settings.mean_fault_gap_ns.saturating_mul(numerator) / denominator)
            .clamp(1, MAX_SETTING_NS),
        ..settings.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn seeds_choose_varied_mixes_within_the_enabled_families_reproducibly() {
        use fencer_nemesis::FaultKind;
        let base = Settings {
            nemesis: [FaultKind::Pause, FaultKind::Skew, FaultKind::DropRenew]
                .into_iter()
                .collect(),
            ..Settings::default()
        };
        let mut mixes = BTreeSet::new();
        let mut gaps = BTreeSet::new();
        for seed in 0..64 {
            let settings = Settings {
                seed,
                ..base.clone()
            };
            let swarm = swarm_settings(&settings);
            assert_eq!(swarm, swarm_settings(&settings));
            assert!(swarm.nemesis.is_subset(&base.nemesis));
            assert_eq!(swarm.seed, seed);
            mixes.insert(swarm.nemesis.iter().map(|k| k.name()).collect::<Vec<_>>());
            gaps.insert(swarm.mean_fault_gap_ns);
        }
        assert_eq!(mixes.len(), 8, "every subset of three families: {mixes:?}");
        assert_eq!(gaps.len(), GAP_FACTORS.len());
        let only_pause = Settings {
            nemesis: [FaultKind::Pause].into_iter().collect(),
            ..base
        };
        for seed in 0..16 {
            let swarm = swarm_settings(&Settings {
                seed,
                ..only_pause.clone()
            });
            assert!(swarm.nemesis.iter().all(|k| k.name() == "pause"));
        }
    }

    #[test]
    fn a_scaled_gap_never_exceeds_the_longest_a_run_takes() {
        let base = Settings {
            mean_fault_gap_ns: MAX_SETTING_NS,
            ..Settings::default()
        };
        assert_eq!(base.validate(), Ok(vec![]));
        for seed in 0..32 {
            let swarm = swarm_settings(&Settings {
                seed,
                ..base.clone()
            });
            assert!(swarm.mean_fault_gap_ns <= MAX_SETTING_NS, "seed {seed}");
            assert!(swarm.validate().is_ok(), "seed {seed}");
        }
    }
}
