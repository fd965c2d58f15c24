//! What fencing buys, measured over many seeds: the reference backend is clean under every
//! fault, the unfenced store is caught accepting stale writes, and the renew-failure policy
//! changes how often.

use fencer::{Plan, Settings, StoreBackend, Validity, check, simulate};
use fencer_nemesis::FaultKind;
use fencer_workloads::RenewFailurePolicy;

fn stale_writes(settings: &Settings) -> usize {
    let history = simulate(&Plan::generate(settings)).unwrap();
    let verdict = check(&history);
    verdict
        .anomaly_counts
        .get("stale-write-accepted")
        .copied()
        .unwrap_or(0)
}

#[test]
fn reference_backend_shows_zero_anomalies_over_1000_seeds_with_all_faults() {
    for seed in 0..1_000 {
        let settings = Settings {
            seed,
            ops_per_worker: 10,
            ..Settings::default()
        };
        let history = simulate(&Plan::generate(&settings)).unwrap();
        let verdict = check(&history);
        assert_eq!(
            verdict.validity,
            Validity::Valid,
            "seed {seed}: {}\n{:#?}",
            verdict.summary_line(),
            verdict.anomalies.first()
        );
    }
}

#[test]
fn unfenced_store_is_caught_and_the_stop_policy_reduces_stale_writes() {
    let seeds = 0..200u64;
    let pauses = |seed, store: StoreBackend, on_renew_failure| Settings {
        seed,
        ops_per_worker: 10,
        nemesis: [FaultKind::Pause].into_iter().collect(),
        store: fencer::BackendName::from(store),
        on_renew_failure,
        ..Settings::default()
    };
    let mut detecting_seeds = Vec::new();
    let (mut with_stop, mut with_continue) = (0, 0);
    for seed in seeds.clone() {
        let stop = stale_writes(&pauses(
            seed,
            StoreBackend::SqliteUnfenced,
            RenewFailurePolicy::Stop,
        ));
        let cont = stale_writes(&pauses(
            seed,
            StoreBackend::SqliteUnfenced,
            RenewFailurePolicy::Continue,
        ));
        if stop + cont > 0 {
            detecting_seeds.push(seed);
        }
        with_stop += stop;
        with_continue += cont;
        for policy in [RenewFailurePolicy::Stop, RenewFailurePolicy::Continue] {
            assert_eq!(
                stale_writes(&pauses(seed, StoreBackend::Sqlite, policy)),
                0,
                "seed {seed}: the fenced store accepted a stale write under {policy:?}"
            );
        }
    }
    println!(
        "sqlite-unfenced with pauses over seeds {seeds:?}: stale-write-accepted {with_stop} \
         (on-renew-failure stop) vs {with_continue} (continue); seeds that detect: {detecting_seeds:?}"
    );
    assert!(
        with_stop > 0,
        "the unfenced store must be caught even with the stop policy"
    );
    assert!(
        with_continue > with_stop,
        "continuing after renew failures must cause more stale writes ({with_continue} vs {with_stop})"
    );
}
