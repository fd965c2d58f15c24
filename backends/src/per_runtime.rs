//! A connection, client or session kept for the tokio runtime that opened it.
//!
//! An adapter is built before the runtime that will call it exists (from a plain `#[test]`, or
//! once for many seeds), and a handle opened on a runtime dies with it: the task driving its
//! socket is gone. So each real backend keeps its handle together with the id of the runtime
//! that opened it, and a call from any other runtime opens a new one.

use std::future::Future;

use tokio::runtime::{Handle, Id};
use tokio::sync::Mutex;

/// The handle opened on the runtime making the current call, if there is one.
pub struct PerRuntime<T> {
    live: Mutex<Option<(Id, T)>>,
}

impl<T> Default for PerRuntime<T> {
    fn default() -> PerRuntime<T> {
        PerRuntime {
            live: Mutex::new(None),
        }
    }
}

impl<T: Clone> PerRuntime<T> {
    /// The handle opened on this runtime if `usable` says it still is, else a new one from
    /// `open` (called only then), kept for the next call. Callers wait for one another, so concurrent first calls
    /// open one handle, not one each. Must be called inside a tokio runtime.
    pub async fn get_or_open<E, F>(
        &self,
        usable: impl FnOnce(&T) -> bool,
        open: impl FnOnce() -> F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let runtime = Handle::current().id();
        let mut live = self.live.lock().await;
        if let Some((opened_on, handle)) = live.as_ref()
            && *opened_on == runtime
            && usable(handle)
        {
            return Ok(handle.clone());
        }
        let handle = open().await?;
        *live = Some((runtime, handle.clone()));
        Ok(handle)
    }

    /// Drops the kept handle (it broke), so the next call opens a new one.
    // etcd's HTTP client heals its own pooled connections and never needs this.
    #[cfg_attr(not(any(feature = "redis", feature = "zookeeper")), allow(dead_code))]
    pub async fn forget(&self) {
        *self.live.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    #[test]
    fn a_handle_is_kept_per_runtime_until_unusable_or_forgotten() {
        let kept = PerRuntime::default();
        let opened = std::cell::Cell::new(0u32);
        // Opens handle n as the number n, counting opens.
        let open = || {
            opened.set(opened.get() + 1);
            std::future::ready(Ok::<u32, Infallible>(opened.get()))
        };
        let first = fencer_harness::runtime::real_runtime().unwrap();
        first.block_on(async {
            assert_eq!(kept.get_or_open(|_| true, open).await, Ok(1));
            assert_eq!(kept.get_or_open(|_| true, open).await, Ok(1));
            assert_eq!(kept.get_or_open(|_| false, open).await, Ok(2));
            kept.forget().await;
            assert_eq!(kept.get_or_open(|_| true, open).await, Ok(3));
        });
        let second = fencer_harness::runtime::real_runtime().unwrap();
        second.block_on(async {
            assert_eq!(kept.get_or_open(|_| true, open).await, Ok(4));
        });
    }
}
