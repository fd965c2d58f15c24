//! A user-written lock client library tested with fencer: a lease with a watchdog that renews
//! it in the background, an ownership check, and a lost-lease signal for its caller, written
//! against the lock service fencer records. With `cached_check` on, its ownership check answers
//! from a flag it set at the grant instead of asking the service (`isAcquired`), so a worker
//! paused past its TTL still hears "held" after a rival was granted the lock, and fencer's
//! `stale-ownership-check` sees it. `cargo run --example custom_client` panics if unnoticed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fencer::{
    Acquired, CallError, Harness, Lease, LibraryContext, LockClient, LockLibrary, Owned,
    OwnerToken, async_trait,
};

/// The library: what each worker's process holds.
pub struct WatchdogLock {
    cx: LibraryContext,
    /// The bug: the ownership check answers from the lease's flag instead of the service.
    cached_check: bool,
}

/// What a lease keeps: its watchdog (stopped when the lease is dropped or released) and the
/// flag the watchdog clears when a renewal is refused.
struct Held {
    watchdog: fencer::task::JoinHandle<()>,
    alive: Arc<AtomicBool>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // The renewal dies with its caller.
        self.watchdog.abort();
    }
}

impl WatchdogLock {
    /// The library of the worker `cx` describes.
    pub fn new(cx: &LibraryContext, cached_check: bool) -> WatchdogLock {
        WatchdogLock {
            cx: cx.clone(),
            cached_check,
        }
    }

    /// Renews `owner`'s lease every renewal period until refused, then tells the worker.
    fn watch(&self, owner: OwnerToken, alive: Arc<AtomicBool>) -> fencer::task::JoinHandle<()> {
        let cx = self.cx.clone();
        let client = cx.task_client("renew");
        self.cx.spawn(async move {
            let settings = cx.settings().clone();
            loop {
                fencer::time::sleep(settings.renew_every).await;
                match client.renew(&settings.lock, owner, settings.ttl).await {
                    Ok(Owned::Done) | Err(CallError::Unknown(_)) => {}
                    Ok(Owned::NotOwner) | Err(CallError::NotApplied(_)) => {
                        alive.store(false, Ordering::Relaxed);
                        cx.notify_lost(owner, "renewal refused");
                        return;
                    }
                }
            }
        })
    }
}

#[async_trait]
impl LockLibrary for WatchdogLock {
    async fn acquire(
        &self,
        lock: &LockClient,
        owner: OwnerToken,
    ) -> Result<Option<Lease>, CallError> {
        let settings = self.cx.settings();
        match lock.acquire(&settings.lock, owner, settings.ttl).await? {
            Acquired::Busy => Ok(None),
            Acquired::Granted { fencing_token } => {
                let alive = Arc::new(AtomicBool::new(true));
                let watchdog = self.watch(owner, Arc::clone(&alive));
                let held = Held { watchdog, alive };
                Ok(Some(
                    Lease::new(owner, Some(fencing_token)).with_guard(held),
                ))
            }
        }
    }

    async fn check(&self, lock: &LockClient, lease: &Lease) -> Result<bool, CallError> {
        if self.cached_check {
            let held = lease
                .guard
                .as_ref()
                .and_then(|guard| guard.downcast_ref::<Held>());
            return Ok(held.is_some_and(|held| held.alive.load(Ordering::Relaxed)));
        }
        let settings = self.cx.settings();
        // An owner-checked renew: the service answers for its current holder.
        match lock.renew(&settings.lock, lease.owner, settings.ttl).await {
            Ok(Owned::Done) => Ok(true),
            Ok(Owned::NotOwner) | Err(CallError::NotApplied(_)) => {
                self.cx.notify_lost(lease.owner, "ownership check refused");
                Ok(false)
            }
            Err(CallError::Unknown(_)) => Ok(false),
        }
    }

    async fn release(&self, lock: &LockClient, lease: Lease) -> Result<Owned, CallError> {
        let owner = lease.owner;
        // Dropping the lease stops its watchdog before the release goes out.
        drop(lease);
        lock.release(&self.cx.settings().lock, owner).await
    }
}

/// The harness a test (or `main`) runs: the library on every worker, fencer's reference lease
/// service and fenced store behind it, pauses and drops of renew replies.
pub fn harness(cached_check: bool) -> Harness {
    Harness::for_client(move |cx| WatchdogLock::new(cx, cached_check))
        .name("custom_client")
        .workers(3)
        .ops(20)
        .seeds(0..20)
}

#[allow(dead_code)]
fn main() {
    harness(false).run().assert_valid();
    let report = harness(true).save_failures_to(None).run();
    let caught = report.failures().any(|run| {
        run.outcome
            .as_ref()
            .is_ok_and(|(_, verdict)| verdict.anomaly_counts.contains_key("stale-ownership-check"))
    });
    assert!(caught, "fencer did not notice the cached ownership check");
    println!("the correct client passed 20 seeds; the cached check was caught");
}
