//! The recorded path of every client call: invoke event, the simulated wire (latency, lost
//! replies), the adapter, a deadline, and the completion event.
//!
//! Each request is delivered by its own task, so a request already sent keeps travelling and is
//! applied even if its sender is frozen, times out or gives up — exactly the cases where a
//! reply is lost and the caller must record `info`. An adapter that panics or never answers
//! becomes an `info` completion, never a crashed or hung harness.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use tokio::sync::oneshot;

use crate::adapter::{
    Acquired, CallError, FencedStore, FencingToken, LockService, Owned, OwnerToken, ReadValue,
    Written,
};
use crate::clock::LocalClock;
use crate::event::{Event, EventType, Op};
use crate::freeze::ProcessFaults;
use crate::recorder::Recorder;

/// One-way message latency drawn uniformly from `[min_ns, max_ns]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LatencyModel {
    /// Fastest one-way delivery, in nanoseconds.
    pub min_ns: u64,
    /// Slowest one-way delivery, in nanoseconds.
    pub max_ns: u64,
}

impl LatencyModel {
    /// No added latency (the real tier: the wire is real).
    pub const NONE: LatencyModel = LatencyModel {
        min_ns: 0,
        max_ns: 0,
    };
}

/// The simulated wire between processes and backends, shared by all of a run's calls.
#[derive(Debug)]
pub struct Network {
    latency: LatencyModel,
    rng: Mutex<ChaCha8Rng>,
    call_timeout: Duration,
}

impl Network {
    /// A wire drawing latencies from `rng` (the run's latency stream); callers give up on a reply
    /// after `call_timeout`.
    pub fn new(latency: LatencyModel, rng: ChaCha8Rng, call_timeout: Duration) -> Network {
        assert!(latency.min_ns <= latency.max_ns, "latency range inverted");
        Network {
            latency,
            rng: Mutex::new(rng),
            call_timeout,
        }
    }

    fn one_way(&self) -> Duration {
        if self.latency.max_ns == 0 {
            return Duration::ZERO;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        Duration::from_nanos(rng.random_range(self.latency.min_ns..=self.latency.max_ns))
    }
}

/// Everything a process needs to make recorded calls: its name, its clock, its faults.
#[derive(Clone, Debug)]
pub struct Process {
    name: Arc<str>,
    clock: LocalClock,
    faults: Arc<ProcessFaults>,
    recorder: Arc<Recorder>,
    network: Arc<Network>,
}

impl Process {
    /// A process named `name` (appears as `process` in the history).
    pub fn new(
        name: impl Into<Arc<str>>,
        clock: LocalClock,
        faults: Arc<ProcessFaults>,
        recorder: Arc<Recorder>,
        network: Arc<Network>,
    ) -> Process {
        Process {
            name: name.into(),
            clock,
            faults,
            recorder,
            network,
        }
    }

    /// A sibling process (e.g. `w0:renew`) sharing this one's clock and faults: a renewal task
    /// lives and freezes with its worker.
    pub fn sibling(&self, suffix: &str) -> Process {
        Process {
            name: format!("{}:{suffix}", self.name).into(),
            ..self.clone()
        }
    }

    /// The process name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process's local clock.
    pub fn clock(&self) -> &LocalClock {
        &self.clock
    }

    /// The faults the nemesis applies to this process.
    pub fn faults(&self) -> &Arc<ProcessFaults> {
        &self.faults
    }

    fn event(&self, kind: EventType, f: Op) -> Event {
        Event::new(&*self.name, kind, f)
    }

    /// Records `invoke`, delivers `apply` over the wire, waits for the reply within the call
    /// timeout and records the completion. `annotate` fills the completion's columns from a
    /// reply and says whether it was `ok` or `fail`.
    async fn call<T, Apply>(
        &self,
        invoke: Event,
        apply: Apply,
        annotate: fn(&T, &mut Event) -> EventType,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        Apply: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let f = invoke.f;
        let mut guard = OpenCall {
            process: self,
            completion: Some(invoke.clone()),
        };
        self.recorder.record_on(invoke, &self.clock);
        let deadline = tokio::time::Instant::now() + self.network.call_timeout;
        let reply = self.deliver(f, apply).await;
        let reply = match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(result)) => result,
            Ok(Err(_lost)) => {
                // The reply will never come, but the caller cannot know that before its deadline.
                tokio::time::sleep_until(deadline).await;
                Err(CallError::Unknown("timeout".into()))
            }
            Err(_elapsed) => Err(CallError::Unknown("timeout".into())),
        };
        let mut completion = guard.completion.take().expect("completed once");
        completion.kind = match &reply {
            Ok(value) => annotate(value, &mut completion),
            Err(CallError::NotApplied(why)) => {
                completion.error = Some(why.clone());
                EventType::Fail
            }
            Err(CallError::Unknown(why)) => {
                completion.error = Some(why.clone());
                EventType::Info
            }
        };
        self.recorder.record_on(completion, &self.clock);
        reply
    }

    /// Sends `apply` on its own task: request latency, the adapter (panics caught), then the
    /// reply latency unless the nemesis loses the reply.
    async fn deliver<T, Apply>(
        &self,
        f: Op,
        apply: Apply,
    ) -> oneshot::Receiver<Result<T, CallError>>
    where
        T: Send + 'static,
        Apply: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let (reply_tx, reply_rx) = oneshot::channel();
        // A delayed request is held on the wire, not by its sender: the sender's deadline still
        // runs, so it records `info` while the request is still on its way.
        let held =
            Duration::from_nanos(self.faults.request_delay_at(f, self.clock.truth().now_ns()));
        let request_latency = self.network.one_way() + held;
        let reply_latency = self.network.one_way();
        let faults = Arc::clone(&self.faults);
        let truth = self.clock.truth();
        tokio::spawn(async move {
            if !request_latency.is_zero() {
                tokio::time::sleep(request_latency).await;
            }
            let result = match AssertUnwindSafe(apply).catch_unwind().await {
                Ok(result) => result,
                Err(panic) => Err(CallError::Unknown(format!(
                    "adapter panicked: {}",
                    panic_message(&panic)
                ))),
            };
            if faults.reply_lost_at(f, truth.now_ns()) {
                return;
            }
            if !reply_latency.is_zero() {
                tokio::time::sleep(reply_latency).await;
            }
            // The caller may have given up already; the reply then simply goes nowhere.
            let _ = reply_tx.send(result);
        });
        reply_rx
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// Records an `info` completion if a call is dropped (cancelled) before it completed, so no
/// invoke is ever left open and a cancelled call is never mistaken for one that did not happen.
struct OpenCall<'a> {
    process: &'a Process,
    completion: Option<Event>,
}

impl Drop for OpenCall<'_> {
    fn drop(&mut self) {
        if let Some(mut completion) = self.completion.take() {
            completion.kind = EventType::Info;
            completion.error = Some("cancelled".into());
            self.process
                .recorder
                .record_on(completion, &self.process.clock);
        }
    }
}

/// A process's recorded handle on a lock service.
#[derive(Clone)]
pub struct LockClient {
    process: Process,
    service: Arc<dyn LockService>,
}

impl LockClient {
    /// Calls `service` as `process`.
    pub fn new(process: Process, service: Arc<dyn LockService>) -> LockClient {
        LockClient { process, service }
    }

    /// The calling process.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// Recorded [`LockService::acquire`].
    pub async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let invoke = Event {
            lock: Some(lock.to_string()),
            owner: Some(owner.to_string()),
            ttl_ns: Some(ttl.as_nanos() as u64),
            ..self.process.event(EventType::Invoke, Op::Acquire)
        };
        let service = Arc::clone(&self.service);
        let lock = lock.to_string();
        let apply = async move { service.acquire(&lock, owner, ttl).await };
        self.process
            .call(invoke, apply, |reply: &Acquired, event| match reply {
                Acquired::Granted { fencing_token } => {
                    event.token = Some(*fencing_token);
                    EventType::Ok
                }
                Acquired::Busy => {
                    event.error = Some("busy".into());
                    EventType::Fail
                }
            })
            .await
    }

    /// Recorded [`LockService::renew`].
    pub async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let invoke = Event {
            lock: Some(lock.to_string()),
            owner: Some(owner.to_string()),
            ttl_ns: Some(ttl.as_nanos() as u64),
            ..self.process.event(EventType::Invoke, Op::Renew)
        };
        let service = Arc::clone(&self.service);
        let lock = lock.to_string();
        let apply = async move { service.renew(&lock, owner, ttl).await };
        self.process.call(invoke, apply, annotate_owned).await
    }

    /// Recorded [`LockService::release`].
    pub async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let invoke = Event {
            lock: Some(lock.to_string()),
            owner: Some(owner.to_string()),
            ..self.process.event(EventType::Invoke, Op::Release)
        };
        let service = Arc::clone(&self.service);
        let lock = lock.to_string();
        let apply = async move { service.release(&lock, owner).await };
        self.process.call(invoke, apply, annotate_owned).await
    }
}

fn annotate_owned(reply: &Owned, event: &mut Event) -> EventType {
    match reply {
        Owned::Done => EventType::Ok,
        Owned::NotOwner => {
            event.error = Some("not-owner".into());
            EventType::Fail
        }
    }
}

/// A process's recorded handle on a fenced store.
#[derive(Clone)]
pub struct StoreClient {
    process: Process,
    store: Arc<dyn FencedStore>,
}

impl StoreClient {
    /// Calls `store` as `process`.
    pub fn new(process: Process, store: Arc<dyn FencedStore>) -> StoreClient {
        StoreClient { process, store }
    }

    /// Recorded [`FencedStore::write`].
    pub async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let invoke = Event {
            key: Some(key.to_string()),
            token: Some(fencing_token),
            write_id: Some(write_id.to_string()),
            value: Some(value.to_string()),
            ..self.process.event(EventType::Invoke, Op::Write)
        };
        let store = Arc::clone(&self.store);
        let (key, write_id, value) = (key.to_string(), write_id.to_string(), value.to_string());
        let apply = async move { store.write(&key, fencing_token, &write_id, &value).await };
        self.process
            .call(invoke, apply, |reply: &Written, event| match reply {
                Written::Applied => EventType::Ok,
                Written::Rejected { current_token } => {
                    event.current_token = Some(*current_token);
                    event.error = Some("rejected".into());
                    EventType::Fail
                }
            })
            .await
    }

    /// Recorded [`FencedStore::read`].
    pub async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let invoke = Event {
            key: Some(key.to_string()),
            ..self.process.event(EventType::Invoke, Op::Read)
        };
        let store = Arc::clone(&self.store);
        let key = key.to_string();
        let apply = async move { store.read(&key).await };
        self.process
            .call(invoke, apply, |reply: &ReadValue, event| {
                event.token = Some(reply.fencing_token);
                event.write_id = reply.write_id.clone();
                event.value = reply.value.clone();
                EventType::Ok
            })
            .await
    }
}
