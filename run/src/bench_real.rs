//! Throughput of a lock service and store, called directly and through fencer's recorded client
//! path, so the harness's own cost per operation can be read off against a real server's.
//!
//! One cycle is acquire → write → release on one connection, one after another (the workload's
//! shape without its think times). Calling the adapters directly gives the backend's own rate;
//! calling them through `LockClient`/`StoreClient` (invoke and completion recorded, the request
//! on its own task, a deadline) gives the rate under fencer. The difference per operation is
//! fencer's overhead.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer_harness::{
    Acquired, CallError, FencedStore, LatencyModel, LocalClock, LockClient, LockService, Network,
    NodeClock, OwnerToken, Process, ProcessFaults, Recorder, StoreClient, Stream, TrueClock,
    stream_rng,
};

use crate::drive::RunNames;

/// Calls per cycle: acquire, write, release.
pub const CALLS_PER_CYCLE: u64 = 3;

/// Operations per second, measured both ways.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Calls per second, adapters called directly.
    pub direct_ops_per_s: f64,
    /// Calls per second through fencer's recorded client path.
    pub recorded_ops_per_s: f64,
}

impl Throughput {
    /// fencer's cost per call: recorded latency minus direct latency, in microseconds.
    pub fn overhead_us_per_op(&self) -> f64 {
        (1e6 / self.recorded_ops_per_s) - (1e6 / self.direct_ops_per_s)
    }
}

/// Runs `cycles` cycles directly, then `cycles` through the recorded path, on the current
/// runtime (a real one). Fails on the first call that does not succeed.
pub async fn measure(
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    cycles: u64,
    tag: &str,
) -> Result<Throughput, BenchError> {
    assert!(cycles > 0, "at least one cycle");
    let names = RunNames::tagged(&format!("{tag}-direct"));
    // Warm up: the connection opens, schemas and scripts are created and cached.
    for cycle in 0..WARMUP_CYCLES {
        direct_cycle(lock.as_ref(), store.as_ref(), &names, cycle).await?;
    }
    let started = Instant::now();
    for cycle in WARMUP_CYCLES..WARMUP_CYCLES + cycles {
        direct_cycle(lock.as_ref(), store.as_ref(), &names, cycle).await?;
    }
    let direct_s = started.elapsed().as_secs_f64();

    let truth = TrueClock::start();
    let recorder = Arc::new(Recorder::new(truth));
    let network = Arc::new(Network::new(
        LatencyModel::NONE,
        stream_rng(0, Stream::Latency, 0),
        Duration::from_secs(5),
    ));
    let process = Process::new(
        "bench",
        LocalClock::new(truth, NodeClock::with_offset(0)),
        Arc::new(ProcessFaults::default()),
        recorder,
        network,
    );
    let lock_client = LockClient::new(process.clone(), lock);
    let store_client = StoreClient::new(process, store);
    let names = RunNames::tagged(&format!("{tag}-recorded"));
    let started = Instant::now();
    for cycle in 0..cycles {
        recorded_cycle(&lock_client, &store_client, &names, cycle).await?;
    }
    let recorded_s = started.elapsed().as_secs_f64();
    let calls = (cycles * CALLS_PER_CYCLE) as f64;
    Ok(Throughput {
        direct_ops_per_s: calls / direct_s,
        recorded_ops_per_s: calls / recorded_s,
    })
}

const TTL: Duration = Duration::from_secs(10);

/// Untimed cycles before the timed ones.
const WARMUP_CYCLES: u64 = 100;

/// A call of a cycle that did not succeed: the measurement stops there, since a rate over
/// failing calls measures the failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BenchError {
    /// An acquire of a lock no one holds was not granted.
    #[error("acquire on a free lock answered {0:?}")]
    NotGranted(Result<Acquired, CallError>),
    /// A write under a fresh grant failed.
    #[error("write: {0}")]
    Write(CallError),
    /// A release of the caller's own lease failed.
    #[error("release: {0}")]
    Release(CallError),
}

fn granted(reply: Result<Acquired, CallError>) -> Result<u64, BenchError> {
    match reply {
        Ok(Acquired::Granted { fencing_token }) => Ok(fencing_token),
        other => Err(BenchError::NotGranted(other)),
    }
}

async fn direct_cycle(
    lock: &dyn LockService,
    store: &dyn FencedStore,
    names: &RunNames,
    cycle: u64,
) -> Result<(), BenchError> {
    let owner = OwnerToken(u128::from(cycle) + 1);
    let token = granted(lock.acquire(&names.lock, owner, TTL).await)?;
    let write_id = format!("b{cycle}");
    store
        .write(&names.key, token, &write_id, &write_id)
        .await
        .map_err(BenchError::Write)?;
    lock.release(&names.lock, owner)
        .await
        .map_err(BenchError::Release)?;
    Ok(())
}

async fn recorded_cycle(
    lock: &LockClient,
    store: &StoreClient,
    names: &RunNames,
    cycle: u64,
) -> Result<(), BenchError> {
    let owner = OwnerToken(u128::from(cycle) + 1);
    let token = granted(lock.acquire(&names.lock, owner, TTL).await)?;
    let write_id = format!("b{cycle}");
    store
        .write(&names.key, token, &write_id, &write_id)
        .await
        .map_err(BenchError::Write)?;
    lock.release(&names.lock, owner)
        .await
        .map_err(BenchError::Release)?;
    Ok(())
}

/// A backend that answers at once (grants every acquire, applies every write): measuring it
/// both ways isolates fencer's own cost per call from any server's.
#[derive(Debug, Default)]
pub struct Echo {
    tokens: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl LockService for Echo {
    async fn acquire(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Acquired, CallError> {
        let fencing_token = self
            .tokens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        Ok(Acquired::Granted { fencing_token })
    }

    async fn renew(
        &self,
        _: &str,
        _: OwnerToken,
        _: Duration,
    ) -> Result<fencer_harness::Owned, CallError> {
        Ok(fencer_harness::Owned::Done)
    }

    async fn release(&self, _: &str, _: OwnerToken) -> Result<fencer_harness::Owned, CallError> {
        Ok(fencer_harness::Owned::Done)
    }
}

#[async_trait::async_trait]
impl FencedStore for Echo {
    async fn write(
        &self,
        _: &str,
        _: u64,
        _: &str,
        _: &str,
    ) -> Result<fencer_harness::Written, CallError> {
        Ok(fencer_harness::Written::Applied)
    }

    async fn read(&self, _: &str) -> Result<fencer_harness::ReadValue, CallError> {
        Ok(fencer_harness::ReadValue::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_costs_something_and_both_rates_are_positive() {
        let runtime = fencer_harness::runtime::real_runtime().unwrap();
        let echo = Arc::new(Echo::default());
        let throughput = runtime
            .block_on(measure(echo.clone(), echo, 200, "echo"))
            .unwrap();
        assert!(throughput.direct_ops_per_s > 0.0);
        assert!(throughput.recorded_ops_per_s > 0.0);
        // Recording spawns a task and appends two events per call; a free call cannot be slower.
        assert!(throughput.recorded_ops_per_s < throughput.direct_ops_per_s);
    }
}
