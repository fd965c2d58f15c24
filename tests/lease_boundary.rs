//! Each lock service's boundary rule at the very instant a lease expires: a renew logged at
//! the reading its lease expires is legal where the service keeps the lease live through that
//! instant (Redis, PostgreSQL) and an `expired-lease-renewed` where the lease ends there
//! (fencer's simulated service), and one reading later it is late everywhere.

use std::time::Duration;

use fencer::{
    CheckOptions, ExpiryRule, History, LockChange, LockLogEntry, OwnerToken, Validity, check_with,
};
use fencer_harness::Event;

const MS: i64 = 1_000_000;

/// A grant expiring at `expires_ns` and a renew of it logged at `renew_at_ns`, read back
/// after the run under `rule` as fencer records a service's log, checked strictly (the
/// finding is a warning otherwise).
fn renewal(rule: ExpiryRule, expires_ns: i64, renew_at_ns: i64) -> fencer::Verdict {
    let owner = OwnerToken(0xa);
    let entries = [
        LockLogEntry {
            seq: 1,
            lock: "L".into(),
            at_ns: expires_ns - 300 * MS,
            change: LockChange::Granted {
                owner,
                fencing_token: 1,
                ttl: Duration::from_millis(300),
                expires_ns,
            },
        },
        LockLogEntry {
            seq: 2,
            lock: "L".into(),
            at_ns: renew_at_ns,
            change: LockChange::Renewed {
                owner,
                holder: owner,
                holder_token: 1,
                ttl: Duration::from_millis(300),
                expires_ns: renew_at_ns + 300 * MS,
            },
        },
    ];
    let events: Vec<Event> = entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| Event {
            index: index as u64,
            time_ns: 1_362_000_000,
            ..rule.applied_to(entry).into_event()
        })
        .collect();
    let options = CheckOptions {
        strict: true,
        ..CheckOptions::default()
    };
    check_with(&History { events }, &options)
}

fn renewed_late(verdict: &fencer::Verdict) -> bool {
    verdict
        .anomalies
        .iter()
        .any(|anomaly| anomaly.class.name() == "expired-lease-renewed")
}

#[test]
fn redis_keeps_a_lease_through_its_expiry_millisecond() {
    let rule = fencer::backends::redis_lock::EXPIRY;
    let expires_ns = 332_152 * MS;
    // TIME reads 332.152400 s, PEXPIRETIME said 332.152 s: Redis still holds the key.
    let at_expiry = renewal(rule, expires_ns, expires_ns + 400_000);
    assert_eq!(at_expiry.validity, Validity::Valid, "{at_expiry:?}");
    let at_the_instant = renewal(rule, expires_ns, expires_ns);
    assert_eq!(
        at_the_instant.validity,
        Validity::Valid,
        "{at_the_instant:?}"
    );
    // The next millisecond is past it: the key was gone.
    let past = renewal(rule, expires_ns, expires_ns + MS);
    assert!(renewed_late(&past), "{past:?}");
    assert_eq!(past.validity, Validity::Invalid);
}

#[test]
fn postgresql_keeps_a_lease_through_its_expiry_microsecond() {
    let rule = fencer::backends::postgres_lock::EXPIRY;
    let expires_ns = 332_152_400_000;
    assert!(!renewed_late(&renewal(rule, expires_ns, expires_ns)));
    assert!(renewed_late(&renewal(rule, expires_ns, expires_ns + 1_000)));
}

#[test]
fn fencers_own_service_ends_a_lease_at_its_expiry() {
    let rule = ExpiryRule::ENDS_AT_EXPIRY;
    let expires_ns = 332_152 * MS;
    let before = renewal(rule, expires_ns, expires_ns - 1);
    assert_eq!(before.validity, Validity::Valid, "{before:?}");
    let at_the_instant = renewal(rule, expires_ns, expires_ns);
    assert!(renewed_late(&at_the_instant), "{at_the_instant:?}");
}
