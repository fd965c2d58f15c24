//! Faults on a private PostgreSQL that fencer starts itself (initdb in a temp dir, run as the
//! `postgres` user under libfaketime, behind fencer's fault proxy, killed on drop even when a
//! test panics), injected by the nemesis as plan events: SIGSTOP, kill and restart, and a
//! forward jump of the server's clock.

#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;

use fencer::connect::{lock_from_url, store_from_url};
use fencer::drive::RunNames;
use fencer::real::run_real_with_servers;
use fencer::servers::PrivateServer;
use fencer::{Validity, check};
use fencer_harness::{EventType, History, Op};
use fencer_nemesis::Fault;
use support::{
    assert_jump_let_a_second_worker_in_early, clock_jump_plan, server_targets, stale_release_plan,
};

/// A private PostgreSQL behind a proxy, or `None` (after the skip line) when it cannot start.
fn private_postgres(test: &str) -> Option<Arc<PrivateServer>> {
    let started = PrivateServer::start("private:postgres").map(Arc::new);
    support::started_or_skipped(test, "a private PostgreSQL", "postgresql", started)
}

/// Runs `plan` with lock and store on `server` (the store `?variant=` given), the server the
/// target of the plan's `lock` faults.
fn run(server: &Arc<PrivateServer>, plan: &fencer::Plan, variant: &str, tag: &str) -> History {
    let lock = lock_from_url(&server.url()).unwrap();
    let store = store_from_url(&format!("{}{variant}", server.url())).unwrap();
    run_real_with_servers(
        plan,
        lock.adapter,
        store.adapter,
        RunNames::tagged(tag),
        server_targets(server, &["lock"]),
    )
    .unwrap()
}

fn nemesis_ops(history: &History) -> Vec<Op> {
    history
        .events
        .iter()
        .filter(|e| e.kind == EventType::Nemesis)
        .map(|e| e.f)
        .collect()
}

#[test]
fn postgres_frozen_mid_run_gives_unknown_calls_not_anomalies() {
    let Some(server) = private_postgres("postgres_sigstop") else {
        return;
    };
    let mut plan = stale_release_plan();
    plan.faults = vec![Fault::ServerPause {
        at_ns: 200_000_000,
        target: "lock".into(),
        duration_ns: 700_000_000,
    }];
    let history = run(&server, &plan, "", "pg-sigstop");
    support::assert_not_invalid(&history);
    assert_eq!(nemesis_ops(&history), [Op::ServerPause, Op::ServerResume]);
    support::assert_some_calls_unknown(&history, "calls sent to a frozen server must end as info");
}

#[test]
fn postgres_restart_keeps_lease_generations_so_tokens_stay_monotonic() {
    let Some(server) = private_postgres("postgres_restart") else {
        return;
    };
    let mut plan = stale_release_plan();
    plan.workers.truncate(1);
    plan.settings.workers = 1;
    plan.workers[0].cycles = (0..6).map(|_| support::cycle(0, 0, 100)).collect();
    plan.faults = vec![Fault::Restart {
        at_ns: 250_000_000,
        target: "lock".into(),
        duration_ns: 300_000_000,
    }];
    let history = run(&server, &plan, "", "pg-restart");
    support::assert_not_invalid(&history);
    assert_eq!(nemesis_ops(&history), [Op::Restart, Op::Recover]);
    let recovered_ns = history
        .events
        .iter()
        .find(|e| e.kind == EventType::Nemesis && e.f == Op::Recover)
        .unwrap()
        .time_ns;
    let granted = support::granted_tokens(&history);
    assert!(
        granted.iter().any(|&(at_ns, _)| at_ns < recovered_ns)
            && granted.iter().any(|&(at_ns, _)| at_ns > recovered_ns),
        "leases granted on both sides of the restart: {granted:?}"
    );
    assert!(
        granted.windows(2).all(|pair| pair[0].1 < pair[1].1),
        "the generation survived the restart: tokens {granted:?}"
    );
}

#[test]
fn a_faketime_jump_expires_a_live_lease_and_only_the_fence_stops_the_stale_write() {
    let test = "postgres_faketime";
    let faketime = fencer::servers::ServerClock::available();
    if support::started_or_skipped(test, "libfaketime", "libfaketime", faketime).is_none() {
        return;
    }
    let Some(server) = private_postgres(test) else {
        return;
    };
    let plan = clock_jump_plan();
    let fenced = run(&server, &plan, "", "pg-jump-fenced");
    let verdict = check(&fenced);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    assert!(nemesis_ops(&fenced).contains(&Op::ClockJump));
    assert_jump_let_a_second_worker_in_early(&fenced, plan.settings.ttl_ns);
    let unfenced = run(&server, &plan, "?variant=unfenced", "pg-jump-unfenced");
    let verdict = check(&unfenced);
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "{}",
        verdict.summary_line()
    );
}
