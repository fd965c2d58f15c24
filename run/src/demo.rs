//! The stale-holder experiment, scripted: TTL 10 s; A acquires and stalls 12 s between its last
//! lease check and its write; B acquires after the expiry and writes; A wakes, writes its stale
//! result and releases. Run once against an unfenced store and once against the fenced one —
//! the same schedule, only the store's check differs — and report what each run recorded.

use fencer_harness::{EventType, History, Op};
use fencer_nemesis::Fault;
use fencer_workloads::{CyclePlan, WorkerPlan};

use crate::plan::{PLAN_FORMAT, Plan};
use crate::settings::{Settings, StoreBackend};

const SECOND_NS: u64 = 1_000_000_000;

/// A's result, written late.
pub const A_VALUE: &str = "late A result";
/// B's result.
pub const B_VALUE: &str = "B result";

/// The scripted plan against `store`: A is `w0`, B is `w1`.
pub fn plan(store: StoreBackend) -> Plan {
    let settings = Settings {
        workers: 2,
        ops_per_worker: 1,
        nemesis: Default::default(),
        store: store.into(),
        ..Settings::default()
    };
    let a = CyclePlan {
        delay_ns: 0,
        think_ns: SECOND_NS,
        prepare_ns: SECOND_NS,
        hold_ns: 0,
        value: Some(A_VALUE.into()),
    };
    let b = CyclePlan {
        delay_ns: 10 * SECOND_NS + SECOND_NS / 2,
        think_ns: 0,
        prepare_ns: 0,
        hold_ns: 5 * SECOND_NS,
        value: Some(B_VALUE.into()),
    };
    Plan {
        format: PLAN_FORMAT,
        settings,
        workers: vec![
            WorkerPlan { cycles: vec![a] },
            WorkerPlan { cycles: vec![b] },
        ],
        // A passed its lease check at 1.0 s and stalls while preparing its write.
        faults: vec![Fault::Pause {
            at_ns: SECOND_NS + SECOND_NS / 2,
            target: "w0".into(),
            duration_ns: 12 * SECOND_NS,
        }],
        left_out: Vec::new(),
        stop_at_ns: None,
    }
}

/// What the lock service did with B's lease, read from a run's lock log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLease {
    /// B's lease was only ever touched by B: owner comparison held.
    Survives,
    /// A stale owner released or renewed B's lease.
    TouchedByA,
    /// B never got a lease (the script did not play out).
    NeverGranted,
}

/// Reads B's lease fate from the lock log of `history`.
pub fn b_lease(history: &History) -> BLease {
    let b_owner = history
        .events
        .iter()
        .find(|e| e.is(EventType::Ok, Op::Acquire) && e.process == "w1")
        .and_then(|e| e.owner.clone());
    let Some(b_owner) = b_owner else {
        return BLease::NeverGranted;
    };
    let touched_by_other = history.events.iter().any(|e| {
        e.kind == EventType::Log
            && matches!(e.f, Op::Release | Op::Renew)
            && e.holder.as_deref() == Some(&b_owner)
            && e.owner.as_deref() != Some(&b_owner)
    });
    if touched_by_other {
        BLease::TouchedByA
    } else {
        BLease::Survives
    }
}

/// The protected value at the end of a run: the last write the store's log says it applied.
pub fn final_value(history: &History) -> Option<&str> {
    history
        .events
        .iter()
        .rev()
        .find(|e| e.is(EventType::Log, Op::Write))
        .and_then(|e| e.value.as_deref())
}

/// Names a value for the report (`late A result`, `B result`, or what else was there).
pub fn describe_value(value: Option<&str>) -> &str {
    value.unwrap_or("nothing written")
}

/// The three report lines, computed from the two runs' histories.
pub fn report_lines(unfenced: &History, fenced: &History) -> [String; 3] {
    let lease = match (b_lease(unfenced), b_lease(fenced)) {
        (BLease::Survives, BLease::Survives) => "B lease survives",
        (BLease::NeverGranted, _) | (_, BLease::NeverGranted) => "B never acquired the lease",
        _ => "B lease released or renewed by stale A",
    };
    [
        format!("owner comparison: {lease}"),
        format!(
            "unprotected resource: {}",
            describe_value(final_value(unfenced))
        ),
        format!("fenced resource: {}", describe_value(final_value(fenced))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::simulate;

    #[test]
    fn demo_reproduces_the_articles_three_lines() {
        let unfenced = simulate(&plan(StoreBackend::SqliteUnfenced)).unwrap();
        let fenced = simulate(&plan(StoreBackend::Sqlite)).unwrap();
        assert_eq!(
            report_lines(&unfenced, &fenced),
            [
                "owner comparison: B lease survives",
                "unprotected resource: late A result",
                "fenced resource: B result",
            ]
        );
    }

    #[test]
    fn demo_lines_change_when_the_recorded_state_does() {
        // Without the pause A writes first and B overwrites: both stores end with B's result,
        // proving the lines are read from the run, not printed from constants.
        let mut calm = plan(StoreBackend::SqliteUnfenced);
        calm.faults.clear();
        let unfenced = simulate(&calm).unwrap();
        assert_eq!(final_value(&unfenced), Some(B_VALUE));
        let mut unsafe_lock = plan(StoreBackend::Sqlite);
        unsafe_lock.settings.lock = crate::settings::LockBackend::SimUnsafeRelease.into();
        let fenced = simulate(&unsafe_lock).unwrap();
        assert_eq!(b_lease(&fenced), BLease::TouchedByA);
    }
}
