//! Faults on a private PostgreSQL that fencer starts itself (initdb in a temp dir, run as the
//! `postgres` user under libfaketime, behind fencer's fault proxy, killed on drop even when a
//! test panics), injected by the nemesis as plan events: SIGSTOP, kill and restart, and a
//! forward jump of the server's clock.

#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use fencer_harness::{EventType, Op};
use fencer_nemesis::Fault;
use fencer_servers::PrivateServer;
use support::{nemesis_ops, run_on_private as run, stale_release_plan};

/// A private PostgreSQL behind a proxy, or `None` (after the skip line) when it cannot start.
fn private_postgres(test: &str) -> Option<Arc<PrivateServer>> {
    support::private_server(test, "private:postgres")
}

#[test]
fn postgres_frozen_mid_run_gives_unknown_calls_not_anomalies() {
    let Some(server) = private_postgres("postgres_sigstop") else {
        return;
    };
    // Frozen by the nemesis, as a plan event, through the server's own fault target (the
    // other backends' tests freeze a bare server from a thread).
    let mut plan = stale_release_plan();
    plan.faults = vec![Fault::ServerPause {
        at_ns: 200_000_000,
        target: "lock".into(),
        duration_ns: 700_000_000,
    }];
    let history = support::assert_frozen_run_ended_honestly(Duration::from_secs(20), || {
        run(&server, &plan, "", "pg-sigstop")
    });
    assert_eq!(nemesis_ops(&history), [Op::ServerPause, Op::ServerResume]);
}

#[test]
fn postgres_restart_keeps_lease_generations_so_tokens_stay_monotonic() {
    let Some(server) = private_postgres("postgres_restart") else {
        return;
    };
    let plan = support::lock_restart_plan();
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
    let faketime = fencer_servers::ServerClock::available();
    if support::started_or_skipped(test, "libfaketime", "libfaketime", faketime).is_none() {
        return;
    }
    let Some(server) = private_postgres(test) else {
        return;
    };
    support::assert_clock_jump_is_stopped_only_by_the_fence(&server, "pg-jump");
}
