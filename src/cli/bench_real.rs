//! `fencer bench-real --lock URL --store URL`: operations per second of real adapters, called
//! directly and through fencer, and fencer's own cost per operation.

use std::sync::Arc;

use fencer_backends::registry::{lock_from_url, store_from_url};
use fencer_harness::runtime::real_runtime;
use fencer_run::bench_real::{Echo, measure};
use fencer_run::real::unique_tag;

use super::output::outln;
use super::{Failure, Outcome};

/// Measures `cycles` acquire → write → release cycles against `lock_url` and `store_url`.
pub fn bench_real(lock_url: &str, store_url: &str, cycles: u64) -> Outcome {
    if cycles == 0 {
        return Err(Failure::BadInput("cycles must be at least 1".into()));
    }
    let lock = lock_from_url(lock_url).map_err(Failure::bad_input)?;
    let store = store_from_url(store_url).map_err(Failure::bad_input)?;
    let runtime = real_runtime()
        .map_err(|error| Failure::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime
        .block_on(async {
            lock.ping().await?;
            store.ping().await
        })
        .map_err(Failure::bad_input)?;
    let tag = unique_tag(0);
    // A call the servers failed is theirs to look into; one the echo backend failed, fencer's.
    let real = runtime
        .block_on(measure(lock.adapter, store.adapter, cycles, &tag))
        .map_err(Failure::bad_input)?;
    let echo = Arc::new(Echo::default());
    let harness = runtime
        .block_on(measure(echo.clone(), echo, cycles.max(10_000), "echo"))
        .map_err(Failure::internal)?;
    outln!(
        "lock {}, store {}: {cycles} cycles of acquire, write, release on one connection",
        lock.shown_url,
        store.shown_url
    );
    outln!(
        "adapters called directly:  {:>9.0} ops/s",
        real.direct_ops_per_s
    );
    outln!(
        "through fencer (recorded): {:>9.0} ops/s ({:+.1} us per op)",
        real.recorded_ops_per_s,
        real.overhead_us_per_op()
    );
    outln!(
        "fencer alone (echo backend): {:.2} us per op recorded vs {:.2} us direct",
        1e6 / harness.recorded_ops_per_s,
        1e6 / harness.direct_ops_per_s
    );
    Ok(0)
}
