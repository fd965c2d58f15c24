//! The recorded path of every client call: invoke event, the wire (the `wire` module: latency,
//! lost replies, the adapter, the caller's deadline), and the completion event.
//!
//! Before a call goes out, a lease-edge attack may hold its caller until just before or after
//! the lease's expiry ([`ProcessFaults::edge_hold_until`]); the invoke is recorded when the
//! call is really sent. While the adapter runs, [`crate::caller_clock`] gives it the calling
//! process's own clock (which the nemesis skews), so a client-side library under test reads
//! the time its process believes, not the true time.

use std::sync::Arc;
use std::time::Duration;

// A request carries its lock name, key, write id and value to the adapter as a `CompactString`:
// inline when short, as they are, so sending a request allocates nothing for them.
use compact_str::CompactString;

use crate::adapter::{
    Acquired, CallError, FencedStore, FencingToken, LockService, Owned, OwnerToken, ReadValue,
    Written,
};
use crate::caller::Caller;
use crate::clock::LocalClock;
use crate::event::{EventType, Op};
use crate::freeze::ProcessFaults;
use crate::packed::{Number, Row};
use crate::recorder::{RecordedRow, Recorder, RowStrings, Word};
use crate::wire::{Network, Request, Sending};

/// Everything a process needs to make recorded calls: its name, its clock, its faults.
#[derive(Clone, Debug)]
pub struct Process {
    /// Its name and clock, shared as they are handed to the adapter on every call.
    caller: Arc<Caller>,
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
            caller: Arc::new(Caller::new(name.into(), clock)),
            faults,
            recorder,
            network,
        }
    }

    /// A sibling process (e.g. `w0:renew`) sharing this one's clock and faults: a renewal task
    /// lives and freezes with its worker.
    pub fn sibling(&self, suffix: &str) -> Process {
        self.renamed(format!("{}:{suffix}", self.name()).into())
    }

    /// This process under another name, with the same clock and faults.
    fn renamed(&self, name: Arc<str>) -> Process {
        Process {
            caller: Arc::new(Caller::new(name, self.clock().clone())),
            ..self.clone()
        }
    }

    /// Notes, beside the history, that this process's worker (number `worker`) begins its
    /// next cycle now: what lets a failing plan be cut to the cycles around its evidence.
    pub fn record_cycle_start(&self, worker: usize) {
        self.recorder.record_cycle_start(worker);
    }

    /// The process name.
    pub fn name(&self) -> &str {
        &self.caller.process
    }

    /// The process's local clock.
    pub fn clock(&self) -> &LocalClock {
        &self.caller.clock
    }

    /// The faults the nemesis applies to this process.
    pub fn faults(&self) -> &Arc<ProcessFaults> {
        &self.faults
    }

    /// Holds the caller while a lease-edge attack says a call of `f` must wait for the edge;
    /// the edge is read again on waking, since a renewal may have moved it meanwhile.
    async fn hold_for_lease_edge(&self, f: Op) {
        let truth = self.clock().truth();
        while let Some(until_ns) = self.faults.edge_hold_until(f, truth.now_ns()) {
            crate::time::sleep_until(truth.instant_at(until_ns)).await;
        }
    }

    /// Records the invoke of an `f` carrying `call`, sends `request` over the wire, waits for
    /// the reply within the call timeout and records the completion. `annotate` fills the
    /// completion's columns from a reply (its strings interned into the history's table) and
    /// says whether it was `ok` or `fail`. Returns the reply and the true time the request was
    /// sent.
    async fn call<T: Send + 'static>(
        &self,
        f: Op,
        call: CallText<'_>,
        request: Request<T>,
        reads_tokio_time: bool,
        annotate: fn(&T, &mut Row, &mut RowStrings<'_>) -> EventType,
    ) -> (Result<T, CallError>, u64) {
        // Held before it is sent: a call cancelled while held never happened. Only an attack
        // can hold it, so without one there is nothing to wait for. An ownership check's call
        // is not held: the write the attack aims at the edge waits on its answer, and holding
        // it would only push the race a TTL on.
        if self.faults.lease_edge_attacked() && !crate::roles::is_check_task(self.name()) {
            self.hold_for_lease_edge(f).await;
        }
        let mut guard = OpenCall {
            process: self,
            f,
            call,
            invoke: None,
            open: true,
        };
        let sent_ns = self.clock().truth().now_ns();
        guard.invoke = self
            .recorder
            .record_row_on(self.clock(), sent_ns, |strings, _| {
                call.invoke_row(f, &self.caller, strings)
            });
        let sending = Sending {
            f,
            faults: &self.faults,
            caller: &self.caller,
            sent_ns,
            reads_tokio_time,
        };
        let reply = self.network.send(sending, request).await;
        guard.complete(|row, strings| match &reply {
            Ok(value) => annotate(value, row, strings),
            Err(CallError::NotApplied(why)) => {
                row.error = Some(strings.intern(why));
                EventType::Fail
            }
            Err(CallError::Unknown(why)) => {
                row.error = Some(strings.intern(why));
                EventType::Info
            }
        });
        (reply, sent_ns)
    }
}

/// How many call timeouts a call on a lock client library may take before fencer records it
/// `info`: one library call may make a few round trips to the lock service, each bounded by
/// the call timeout, and one that never answers must not hang its worker.
pub const LIBRARY_CALL_TIMEOUTS: u32 = 4;

impl Process {
    /// Records a call of `f` made on the process's lock client library rather than sent over
    /// the wire: its invoke now, `work` awaited, and the completion `annotate` makes of the
    /// answer. A panic in `work`, or no answer within [`LIBRARY_CALL_TIMEOUTS`] call timeouts,
    /// is the call's unknown outcome (`info`), and dropping the call records it `cancelled`.
    async fn call_library<T>(
        &self,
        f: Op,
        call: CallText<'_>,
        work: impl std::future::Future<Output = Result<T, CallError>>,
        annotate: impl FnOnce(&T, &mut Row, &mut RowStrings<'_>) -> EventType,
    ) -> Result<T, CallError> {
        use futures::FutureExt;
        let mut guard = OpenCall {
            process: self,
            f,
            call,
            invoke: None,
            open: true,
        };
        let sent_ns = self.clock().truth().now_ns();
        guard.invoke = self
            .recorder
            .record_row_on(self.clock(), sent_ns, |strings, _| {
                call.invoke_row(f, &self.caller, strings)
            });
        let limit = self.network.call_timeout() * LIBRARY_CALL_TIMEOUTS;
        let answer =
            crate::time::timeout(limit, std::panic::AssertUnwindSafe(work).catch_unwind()).await;
        let (reply, timed_out) = match answer {
            Ok(Ok(reply)) => (reply, false),
            Ok(Err(panic)) => (
                Err(CallError::Unknown(format!(
                    "lock client library panicked: {}",
                    crate::wire::panic_message(&*panic)
                ))),
                false,
            ),
            Err(_elapsed) => (Err(CallError::Unknown("timeout".into())), true),
        };
        guard.complete(|row, strings| match &reply {
            Ok(value) => annotate(value, row, strings),
            Err(_) if timed_out => {
                row.error = Some(strings.word(Word::Timeout));
                EventType::Info
            }
            Err(CallError::NotApplied(why)) => {
                row.error = Some(strings.intern(why));
                EventType::Fail
            }
            Err(CallError::Unknown(why)) => {
                row.error = Some(strings.intern(why));
                EventType::Info
            }
        });
        reply
    }

    /// Records the process asking its lock client library whether the lease of `owner` on
    /// `lock` is still held, `check` being the library's answer: `ok` when it answered held,
    /// `fail` (`not-held`) when it answered not. The library makes any lock-service calls of
    /// its check as another process ([`crate::roles::check_task`]), since this one has the
    /// check open meanwhile.
    pub async fn check(
        &self,
        lock: &str,
        owner: OwnerToken,
        check: impl std::future::Future<Output = Result<bool, CallError>>,
    ) -> Result<bool, CallError> {
        let call = CallText::lease(lock, owner);
        self.call_library(Op::Check, call, check, |held, row, strings| {
            if *held {
                EventType::Ok
            } else {
                row.error = Some(strings.word(Word::NotHeld));
                EventType::Fail
            }
        })
        .await
    }

    /// Records an acquire the process made on a lock client library that fencer does not see
    /// talk to the lock service (an `exec:` child does that itself): the library's answer to
    /// taking `lock` for `ttl` as `owner`, `Some` lease with its fencing token if the library
    /// hands one out, `None` when the lock was busy.
    pub async fn library_acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
        acquire: impl std::future::Future<Output = Result<Option<Option<FencingToken>>, CallError>>,
    ) -> Result<Option<Option<FencingToken>>, CallError> {
        let call = CallText::lease_for(lock, owner, ttl);
        self.call_library(
            Op::Acquire,
            call,
            acquire,
            |reply, row, strings| match reply {
                Some(fencing_token) => {
                    if let Some(token) = fencing_token {
                        row.set(Number::Token, *token);
                    }
                    EventType::Ok
                }
                None => {
                    row.error = Some(strings.word(Word::Busy));
                    EventType::Fail
                }
            },
        )
        .await
    }

    /// Records a release the process made on a lock client library that talks to the lock
    /// service itself, as [`Process::library_acquire`] does an acquire.
    pub async fn library_release(
        &self,
        lock: &str,
        owner: OwnerToken,
        release: impl std::future::Future<Output = Result<Owned, CallError>>,
    ) -> Result<Owned, CallError> {
        let call = CallText::lease(lock, owner);
        self.call_library(Op::Release, call, release, annotate_owned)
            .await
    }

    /// Records what the process's lock client library told it unprompted about the lease of
    /// `owner` on `lock`: that it is lost ([`Op::Lost`], with the library's `message`), or
    /// that its auto-renewal extended it ([`Op::Renewed`]).
    pub fn notice(&self, f: Op, lock: &str, owner: OwnerToken, message: Option<&str>) {
        debug_assert!(f.is_notice(), "{f:?} is not a notice");
        let now_ns = self.clock().truth().now_ns();
        self.recorder
            .record_row_on(self.clock(), now_ns, |strings, _| {
                let call = CallText::lease(lock, owner);
                let mut row = call.invoke_row(f, &self.caller, strings);
                row.kind = EventType::Notice;
                row.error = message.map(|message| strings.intern(message));
                row
            });
    }
}

/// The columns a client call's invoke carries, borrowed from its caller: packed straight into
/// the history's row, and its completion is that row plus the reply, so recording a call builds
/// no event and copies no string.
#[derive(Clone, Copy, Debug, Default)]
struct CallText<'a> {
    lock: Option<&'a str>,
    key: Option<&'a str>,
    owner: Option<OwnerToken>,
    token: Option<FencingToken>,
    write_id: Option<&'a str>,
    value: Option<&'a str>,
    ttl_ns: Option<u64>,
}

impl<'a> CallText<'a> {
    /// A call about the lease of `owner` on `lock`.
    fn lease(lock: &'a str, owner: OwnerToken) -> CallText<'a> {
        CallText {
            lock: Some(lock),
            owner: Some(owner),
            ..CallText::default()
        }
    }

    /// A call about the lease of `owner` on `lock` for `ttl`.
    fn lease_for(lock: &'a str, owner: OwnerToken, ttl: Duration) -> CallText<'a> {
        CallText {
            ttl_ns: Some(u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX)),
            ..CallText::lease(lock, owner)
        }
    }

    /// The invoke's row of a call of `f` as `process`, its strings interned into `strings` in
    /// the order [`Row::pack`] interns an event's (so a table's strings are numbered alike
    /// either way).
    fn invoke_row(&self, f: Op, caller: &Caller, strings: &mut RowStrings<'_>) -> Row {
        let lock = self
            .lock
            .map(|text| strings.intern_named(&caller.lock, text));
        let key = self.key.map(|text| strings.intern_named(&caller.key, text));
        let owner = self.owner.map(|owner| strings.intern_owner(owner));
        let write_id = self.write_id.map(|text| strings.intern(text));
        let value = self.value.map(|text| strings.intern(text));
        let mut row = Row::blank(strings.intern_known(&caller.process_sym, &caller.process));
        row.f = f;
        (row.lock, row.key, row.owner) = (lock, key, owner);
        (row.write_id, row.value) = (write_id, value);
        if let Some(token) = self.token {
            row.set(Number::Token, token);
        }
        if let Some(ttl_ns) = self.ttl_ns {
            row.set(Number::TtlNs, ttl_ns);
        }
        row
    }
}

/// A call whose invoke may be recorded and whose completion is not yet: it records the
/// completion once, and an `info` one if the call is dropped (cancelled) before it completed,
/// so no invoke is ever left open and a cancelled call is never mistaken for one that did not
/// happen.
struct OpenCall<'a> {
    process: &'a Process,
    f: Op,
    call: CallText<'a>,
    /// Where the invoke's row was recorded; `None` when the recorder was full and dropped it.
    invoke: Option<RecordedRow>,
    open: bool,
}

impl OpenCall<'_> {
    /// Records the completion: the invoke's row (packed again if the history was taken
    /// meanwhile, its string table with it), its type and columns set by `reply`.
    fn complete(&mut self, reply: impl FnOnce(&mut Row, &mut RowStrings<'_>) -> EventType) {
        self.open = false;
        let OpenCall {
            process,
            f,
            call,
            invoke,
            ..
        } = *self;
        process.recorder.record_row_on(
            process.clock(),
            process.clock().truth().now_ns(),
            |strings, recorded| {
                let mut row = invoke
                    .and_then(|invoke| recorded.row(invoke))
                    .unwrap_or_else(|| call.invoke_row(f, &process.caller, strings));
                row.kind = reply(&mut row, strings);
                row
            },
        );
    }
}

impl Drop for OpenCall<'_> {
    fn drop(&mut self) {
        if self.open {
            self.complete(|row, strings| {
                row.error = Some(strings.word(Word::Cancelled));
                EventType::Info
            });
        }
    }
}

/// A process's recorded handle on a lock service.
#[derive(Clone)]
pub struct LockClient {
    process: Process,
    service: Arc<dyn LockService>,
    /// The service's [`LockService::reads_tokio_time`], asked once.
    reads_tokio_time: bool,
}

impl LockClient {
    /// Calls `service` as `process`.
    pub fn new(process: Process, service: Arc<dyn LockService>) -> LockClient {
        LockClient {
            process,
            reads_tokio_time: service.reads_tokio_time(),
            service,
        }
    }

    /// The calling process.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// The same service called as a process named `name` that shares this client's clock
    /// and faults: a worker's renewal task, which lives and freezes with its worker.
    pub fn for_task(&self, name: &str) -> LockClient {
        LockClient {
            process: self.process.renamed(name.into()),
            service: Arc::clone(&self.service),
            reads_tokio_time: self.reads_tokio_time,
        }
    }

    /// Recorded [`LockService::acquire`].
    pub async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let call = CallText::lease_for(lock, owner, ttl);
        let service = Arc::clone(&self.service);
        let lock = CompactString::new(lock);
        let request = Box::pin(async move { service.acquire(lock.as_str(), owner, ttl).await });
        let (reply, sent_ns) = self
            .process
            .call(
                Op::Acquire,
                call,
                request,
                self.reads_tokio_time,
                annotate_acquired,
            )
            .await;
        if let Ok(Acquired::Granted { .. }) = reply {
            self.process
                .faults
                .publish_lease(owner, self.edges(sent_ns, ttl));
        }
        reply
    }

    /// Recorded [`LockService::renew`].
    pub async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let call = CallText::lease_for(lock, owner, ttl);
        let service = Arc::clone(&self.service);
        let lock = CompactString::new(lock);
        let request = Box::pin(async move { service.renew(lock.as_str(), owner, ttl).await });
        let (reply, sent_ns) = self
            .process
            .call(
                Op::Renew,
                call,
                request,
                self.reads_tokio_time,
                annotate_owned,
            )
            .await;
        match reply {
            Ok(Owned::Done) => self
                .process
                .faults
                .publish_lease(owner, self.edges(sent_ns, ttl)),
            Ok(Owned::NotOwner) => self.process.faults.end_lease(owner),
            Err(_) => {}
        }
        reply
    }

    /// Recorded [`LockService::release`].
    pub async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let call = CallText::lease(lock, owner);
        let service = Arc::clone(&self.service);
        let lock = CompactString::new(lock);
        let request = Box::pin(async move { service.release(lock.as_str(), owner).await });
        let (reply, _) = self
            .process
            .call(
                Op::Release,
                call,
                request,
                self.reads_tokio_time,
                annotate_owned,
            )
            .await;
        if reply.is_ok() {
            self.process.faults.end_lease(owner);
        }
        reply
    }
}

/// Where a lease granted or renewed by a request sent at true time `sent_ns` ends: the
/// service's expiry, but for the request's latency.
impl LockClient {
    /// The edges of a lease a call sent at true time `sent_ns` confirmed now, for `ttl`.
    fn edges(&self, sent_ns: u64, ttl: Duration) -> crate::freeze::LeaseEdges {
        let ttl_ns = ttl.as_nanos() as u64;
        crate::freeze::LeaseEdges {
            sent_ns: sent_ns.saturating_add(ttl_ns),
            answered_ns: self.process.clock().truth().now_ns().saturating_add(ttl_ns),
        }
    }
}

fn annotate_acquired(reply: &Acquired, row: &mut Row, strings: &mut RowStrings<'_>) -> EventType {
    match reply {
        Acquired::Granted { fencing_token } => {
            row.set(Number::Token, *fencing_token);
            EventType::Ok
        }
        Acquired::Busy => {
            row.error = Some(strings.word(Word::Busy));
            EventType::Fail
        }
    }
}

fn annotate_owned(reply: &Owned, row: &mut Row, strings: &mut RowStrings<'_>) -> EventType {
    match reply {
        Owned::Done => EventType::Ok,
        Owned::NotOwner => {
            row.error = Some(strings.word(Word::NotOwner));
            EventType::Fail
        }
    }
}

/// A process's recorded handle on a fenced store.
#[derive(Clone)]
pub struct StoreClient {
    process: Process,
    store: Arc<dyn FencedStore>,
    /// The store's [`FencedStore::reads_tokio_time`], asked once.
    reads_tokio_time: bool,
}

impl StoreClient {
    /// Calls `store` as `process`.
    pub fn new(process: Process, store: Arc<dyn FencedStore>) -> StoreClient {
        StoreClient {
            process,
            reads_tokio_time: store.reads_tokio_time(),
            store,
        }
    }

    /// The same store called as a process named `name` that shares this client's clock and
    /// faults: work the worker abandoned that still sends its write.
    pub fn for_task(&self, name: &str) -> StoreClient {
        StoreClient {
            process: self.process.renamed(name.into()),
            store: Arc::clone(&self.store),
            reads_tokio_time: self.reads_tokio_time,
        }
    }

    /// Recorded [`FencedStore::write`].
    pub async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let call = CallText {
            key: Some(key),
            token: Some(fencing_token),
            write_id: Some(write_id),
            value: Some(value),
            ..CallText::default()
        };
        let store = Arc::clone(&self.store);
        let (key, write_id, value) = (
            CompactString::new(key),
            CompactString::new(write_id),
            CompactString::new(value),
        );
        let request = Box::pin(async move {
            store
                .write(
                    key.as_str(),
                    fencing_token,
                    write_id.as_str(),
                    value.as_str(),
                )
                .await
        });
        let (reply, _) = self
            .process
            .call(
                Op::Write,
                call,
                request,
                self.reads_tokio_time,
                |reply: &Written, row, strings| match reply {
                    Written::Applied => EventType::Ok,
                    Written::Rejected { current_token } => {
                        row.set(Number::CurrentToken, *current_token);
                        row.error = Some(strings.word(Word::Rejected));
                        EventType::Fail
                    }
                },
            )
            .await;
        reply
    }

    /// Recorded [`FencedStore::read`].
    pub async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let call = CallText {
            key: Some(key),
            ..CallText::default()
        };
        let store = Arc::clone(&self.store);
        let key = CompactString::new(key);
        let request = Box::pin(async move { store.read(key.as_str()).await });
        let (reply, _) = self
            .process
            .call(
                Op::Read,
                call,
                request,
                self.reads_tokio_time,
                |reply: &ReadValue, row, strings| {
                    row.set(Number::Token, reply.fencing_token);
                    row.write_id = reply.write_id.as_deref().map(|text| strings.intern(text));
                    row.value = reply.value.as_deref().map(|text| strings.intern(text));
                    EventType::Ok
                },
            )
            .await;
        reply
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::clock::{NodeClock, TrueClock};
    use crate::freeze::{LeaseBoard, WorkerFault};
    use crate::runtime::simulation_runtime;
    use crate::{LatencyModel, caller_clock, caller_process};

    const MS: u64 = 1_000_000;

    /// Remembers what [`caller_clock`] and [`caller_process`] said inside each call.
    #[derive(Default)]
    struct Witness {
        seen: Mutex<Vec<(Option<String>, Option<i64>)>>,
    }

    impl Witness {
        fn note(&self) {
            let clock = caller_clock().map(|clock| clock.now_ns());
            self.seen.lock().unwrap().push((caller_process(), clock));
        }
    }

    #[async_trait]
    impl LockService for Witness {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            self.note();
            Ok(Acquired::Granted { fencing_token: 1 })
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            self.note();
            Ok(Owned::Done)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            self.note();
            Ok(Owned::Done)
        }
    }

    fn process(
        name: &str,
        truth: TrueClock,
        recorder: &Arc<Recorder>,
        faults: ProcessFaults,
    ) -> Process {
        let network = Network::new(
            LatencyModel {
                min_ns: MS,
                max_ns: MS,
            },
            crate::rng::stream_rng(0, crate::rng::Stream::Latency, 0),
            Duration::from_secs(1),
        );
        Process::new(
            name,
            LocalClock::new(truth, NodeClock::with_offset(0)),
            Arc::new(faults),
            Arc::clone(recorder),
            Arc::new(network),
        )
    }

    /// A run's true clock and recorder, and `w0`'s client of `lock` under `faults`: made
    /// inside the simulation runtime, as a run makes them.
    fn w0_calling(
        lock: Arc<dyn LockService>,
        faults: ProcessFaults,
    ) -> (TrueClock, Arc<Recorder>, LockClient) {
        let truth = TrueClock::start();
        let recorder = Arc::new(Recorder::new(truth));
        let client = LockClient::new(process("w0", truth, &recorder, faults), lock);
        (truth, recorder, client)
    }

    #[test]
    fn an_adapter_reads_the_calling_worker_s_skewed_clock() {
        let witness = Arc::new(Witness::default());
        simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let w0 = process("w0", truth, &recorder, ProcessFaults::default());
            let client = LockClient::new(w0.clone(), Arc::clone(&witness) as Arc<dyn LockService>);
            let ttl = Duration::from_secs(1);
            client.acquire("L", OwnerToken(1), ttl).await.unwrap();
            // The nemesis steps w0's clock back 5 s; the adapter's next call sees it.
            w0.clock().jump(-5_000_000_000);
            LockClient::new(
                w0.sibling("renew"),
                Arc::clone(&witness) as Arc<dyn LockService>,
            )
            .renew("L", OwnerToken(1), ttl)
            .await
            .unwrap();
        });
        assert_eq!(caller_clock().map(|_| ()), None, "no caller outside a call");
        let seen = witness.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                // Each request spends 1 ms on the wire before the adapter runs.
                (Some("w0".to_string()), Some(MS as i64)),
                (
                    Some("w0:renew".to_string()),
                    Some((3 * MS) as i64 - 5_000_000_000)
                ),
            ]
        );
    }

    /// Grants the first acquire, then answers renews as scripted.
    struct Scripted {
        renews: Mutex<Vec<Result<Owned, CallError>>>,
    }

    #[async_trait]
    impl LockService for Scripted {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            Ok(Acquired::Granted { fencing_token: 1 })
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            self.renews.lock().unwrap().remove(0)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
    }

    #[test]
    fn the_client_path_keeps_the_lease_s_edge_from_confirmed_calls_only() {
        let edges = simulate_edges(vec![
            Ok(Owned::Done),
            Err(CallError::Unknown("timeout".into())),
            Ok(Owned::NotOwner),
        ]);
        // 1 ms each way: granted by the acquire sent at 0, renewed by the one sent at 2 ms; an
        // unknown renew leaves the edge, a refused one ends the lease, as a release does.
        assert_eq!(
            edges,
            [
                Some(1_000 * MS),
                Some(1_002 * MS),
                Some(1_002 * MS),
                None,
                None
            ]
        );
    }

    fn simulate_edges(renews: Vec<Result<Owned, CallError>>) -> Vec<Option<u64>> {
        simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let w0 = process("w0", truth, &recorder, ProcessFaults::default());
            let lock: Arc<dyn LockService> = Arc::new(Scripted {
                renews: Mutex::new(renews),
            });
            let client = LockClient::new(w0.clone(), lock);
            let (owner, ttl) = (OwnerToken(1), Duration::from_secs(1));
            let mut edges = Vec::new();
            client.acquire("L", owner, ttl).await.unwrap();
            edges.push(w0.faults().lease_edge_ns());
            for _ in 0..3 {
                let _ = client.renew("L", owner, ttl).await;
                edges.push(w0.faults().lease_edge_ns());
            }
            w0.faults().publish_lease(
                owner,
                crate::LeaseEdges {
                    sent_ns: 5_000 * MS,
                    answered_ns: 5_000 * MS,
                },
            );
            client.release("L", owner).await.unwrap();
            edges.push(w0.faults().lease_edge_ns());
            edges
        })
    }

    /// Counts the acquires that reached it; panics on every release.
    #[derive(Default)]
    struct Counting {
        acquires: Mutex<u32>,
    }

    #[async_trait]
    impl LockService for Counting {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            *self.acquires.lock().unwrap() += 1;
            Ok(Acquired::Granted { fencing_token: 1 })
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            panic!("release is broken")
        }
    }

    /// `(process, type, f, time_ns, error)` of every event.
    fn outline(history: &crate::History) -> Vec<(String, EventType, Op, u64, Option<String>)> {
        history
            .events
            .iter()
            .map(|e| (e.process.clone(), e.kind, e.f, e.time_ns, e.error.clone()))
            .collect()
    }

    #[test]
    fn a_request_already_sent_is_applied_after_its_caller_is_cancelled() {
        let counting = Arc::new(Counting::default());
        let lock = Arc::clone(&counting) as Arc<dyn LockService>;
        let history = simulation_runtime().block_on(async move {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let w0 = process("w0", truth, &recorder, ProcessFaults::default());
            let client = LockClient::new(w0, lock);
            let caller = crate::task::spawn(async move {
                let _ = client
                    .acquire("L", OwnerToken(1), Duration::from_secs(1))
                    .await;
            });
            // The caller sends its request, then is cancelled while it is on the 1 ms wire.
            crate::task::yield_now().await;
            caller.abort();
            let _ = caller.await;
            crate::time::sleep(Duration::from_millis(10)).await;
            recorder.take_history()
        });
        assert_eq!(
            *counting.acquires.lock().unwrap(),
            1,
            "the request still landed"
        );
        assert_eq!(
            outline(&history),
            [
                ("w0".into(), EventType::Invoke, Op::Acquire, 0, None),
                (
                    "w0".into(),
                    EventType::Info,
                    Op::Acquire,
                    0,
                    Some("cancelled".into())
                ),
            ]
        );
    }

    #[test]
    fn a_call_open_while_its_history_is_taken_completes_with_its_own_columns() {
        let lock = Arc::new(Counting::default()) as Arc<dyn LockService>;
        let (taken, rest) = simulation_runtime().block_on(async move {
            let (_, recorder, client) = w0_calling(lock, ProcessFaults::default());
            let caller = crate::task::spawn(async move {
                client
                    .acquire("L", OwnerToken(7), Duration::from_secs(1))
                    .await
            });
            // The invoke is recorded and the request is on the 1 ms wire when the history,
            // with the string table its row points into, is taken.
            crate::task::yield_now().await;
            let taken = recorder.take_history();
            caller.await.unwrap().unwrap();
            (taken, recorder.take_history())
        });
        let invoke = &taken.events[0];
        assert_eq!(
            (invoke.kind, invoke.owner.as_deref()),
            (EventType::Invoke, Some("00000000000000000000000000000007"))
        );
        // 1 ms each way: the grant comes back at 2 ms, as the next history's first event.
        let granted = crate::Event {
            index: 0,
            time_ns: 2 * MS,
            kind: EventType::Ok,
            local_ns: Some((2 * MS) as i64),
            token: Some(1),
            ..invoke.clone()
        };
        assert_eq!(rest.events, [granted]);
    }

    #[test]
    fn a_lost_reply_times_out_at_the_caller_s_deadline_though_the_request_was_applied() {
        let counting = Arc::new(Counting::default());
        let lock = Arc::clone(&counting) as Arc<dyn LockService>;
        let (reply, history) = simulation_runtime().block_on(async move {
            let faults = ProcessFaults::default();
            faults.start(WorkerFault::LoseReplies(Op::Acquire), u64::MAX);
            let (_, recorder, client) = w0_calling(lock, faults);
            let reply = client
                .acquire("L", OwnerToken(1), Duration::from_secs(5))
                .await;
            (reply, recorder.take_history())
        });
        assert_eq!(reply, Err(CallError::Unknown("timeout".into())));
        assert_eq!(*counting.acquires.lock().unwrap(), 1);
        // The call timeout is 1 s: the caller cannot know sooner that no reply will come.
        assert_eq!(
            outline(&history)[1],
            (
                "w0".into(),
                EventType::Info,
                Op::Acquire,
                1_000 * MS,
                Some("timeout".into())
            )
        );
    }

    #[test]
    fn a_panicking_adapter_is_an_info_completion_and_the_wire_keeps_carrying() {
        let lock = Arc::new(Counting::default()) as Arc<dyn LockService>;
        let history = simulation_runtime().block_on(async move {
            let (_, recorder, client) = w0_calling(lock, ProcessFaults::default());
            let released = client.release("L", OwnerToken(1)).await;
            assert_eq!(
                released,
                Err(CallError::Unknown(
                    "adapter panicked: release is broken".into()
                ))
            );
            client
                .acquire("L", OwnerToken(1), Duration::from_secs(5))
                .await
                .unwrap();
            recorder.take_history()
        });
        let kinds: Vec<(EventType, Op)> = history.events.iter().map(|e| (e.kind, e.f)).collect();
        assert_eq!(
            kinds,
            [
                (EventType::Invoke, Op::Release),
                (EventType::Info, Op::Release),
                (EventType::Invoke, Op::Acquire),
                (EventType::Ok, Op::Acquire),
            ]
        );
    }

    /// Grants every acquire after waiting `answer_after` on tokio's clock, as an adapter that
    /// talks to something slow does; counts the acquires it finished.
    struct Slow {
        answer_after: Duration,
        answered: Mutex<u32>,
    }

    #[async_trait]
    impl LockService for Slow {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            tokio::time::sleep(self.answer_after).await;
            *self.answered.lock().unwrap() += 1;
            Ok(Acquired::Granted { fencing_token: 1 })
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
    }

    /// One acquire from `w0` (1 ms each way, 1 s call timeout) to an adapter that answers
    /// after `answer_after`: the reply, when the caller had it, and how many acquires the
    /// adapter finished by 10 s.
    fn call_slow_adapter(answer_after: Duration) -> (Result<Acquired, CallError>, u64, u32) {
        let slow = Arc::new(Slow {
            answer_after,
            answered: Mutex::new(0),
        });
        let lock = Arc::clone(&slow) as Arc<dyn LockService>;
        let (reply, at_ns) = simulation_runtime().block_on(async move {
            let (truth, _, client) = w0_calling(lock, ProcessFaults::default());
            let reply = client
                .acquire("L", OwnerToken(1), Duration::from_secs(5))
                .await;
            let at_ns = truth.now_ns();
            crate::time::sleep_until(truth.instant_at(10_000 * MS)).await;
            (reply, at_ns)
        });
        let answered = *slow.answered.lock().unwrap();
        (reply, at_ns, answered)
    }

    #[test]
    fn an_adapter_that_answers_later_is_waited_for_until_the_caller_s_deadline() {
        // 1 ms there, 300 ms in the adapter, 1 ms back.
        let (reply, at_ns, answered) = call_slow_adapter(Duration::from_millis(300));
        assert_eq!(reply, Ok(Acquired::Granted { fencing_token: 1 }));
        assert_eq!((at_ns, answered), (302 * MS, 1));
        // Past the 1 s deadline: `info` then, though the adapter still finishes its call.
        let (reply, at_ns, answered) = call_slow_adapter(Duration::from_millis(1_500));
        assert_eq!(reply, Err(CallError::Unknown("timeout".into())));
        assert_eq!((at_ns, answered), (1_000 * MS, 1));
    }

    #[test]
    fn a_simulated_call_takes_two_timers_and_leaves_none_behind() {
        let lock = Arc::new(Counting::default()) as Arc<dyn LockService>;
        let (before, after) = simulation_runtime().block_on(async move {
            let (_, _, client) = w0_calling(lock, ProcessFaults::default());
            let counts = || crate::sim::with(|sim| sim.timer_counts()).unwrap();
            let before = counts();
            for owner in 0..10 {
                client
                    .acquire("L", OwnerToken(owner), Duration::from_secs(5))
                    .await
                    .unwrap();
            }
            (before, counts())
        });
        // The request's arrival and the caller's wake-up when the reply is back.
        assert_eq!(after.0 - before.0, 20, "two timers a call");
        assert_eq!(after.1, 0, "every timer freed");
    }

    #[test]
    fn a_request_held_past_the_deadline_is_applied_after_its_caller_gave_up() {
        let counting = Arc::new(Counting::default());
        let lock = Arc::clone(&counting) as Arc<dyn LockService>;
        let witness = Arc::clone(&counting);
        let (reply, at_ns, applied_by_deadline) = simulation_runtime().block_on(async move {
            let faults = ProcessFaults::default();
            faults.start(
                WorkerFault::DelayRequests {
                    op: Op::Acquire,
                    delay_ns: 3_000 * MS,
                },
                u64::MAX,
            );
            let (truth, _, client) = w0_calling(lock, faults);
            let reply = client
                .acquire("L", OwnerToken(1), Duration::from_secs(5))
                .await;
            let at_ns = truth.now_ns();
            let applied_by_deadline = *witness.acquires.lock().unwrap();
            crate::time::sleep(Duration::from_secs(5)).await;
            (reply, at_ns, applied_by_deadline)
        });
        assert_eq!(reply, Err(CallError::Unknown("timeout".into())));
        assert_eq!((at_ns, applied_by_deadline), (1_000 * MS, 0));
        assert_eq!(*counting.acquires.lock().unwrap(), 1, "applied at 3.001 s");
    }

    /// An acquire from `w0` (1 ms each way, 1 s call timeout), its requests held `held_ms`
    /// on the wire, with `w0` frozen from 0.5 ms to `thaw_ms`: the reply and the completion's
    /// time.
    fn call_while_frozen(held_ms: u64, thaw_ms: u64) -> (Result<Acquired, CallError>, u64) {
        let lock = Arc::new(Counting::default()) as Arc<dyn LockService>;
        simulation_runtime().block_on(async move {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let faults = ProcessFaults::default();
            if held_ms > 0 {
                let delay_ns = held_ms * MS;
                faults.start(
                    WorkerFault::DelayRequests {
                        op: Op::Acquire,
                        delay_ns,
                    },
                    u64::MAX,
                );
            }
            let w0 = process("w0", truth, &recorder, faults);
            let faults = Arc::clone(w0.faults());
            let client = LockClient::new(w0, lock);
            let caller = crate::task::spawn(crate::freeze::Freezable::new(
                async move {
                    client
                        .acquire("L", OwnerToken(1), Duration::from_secs(5))
                        .await
                },
                Arc::clone(&faults),
                truth,
            ));
            crate::time::sleep(Duration::from_micros(500)).await;
            faults.start(WorkerFault::Freeze, thaw_ms * MS);
            let reply = caller.await.unwrap();
            let history = recorder.take_history();
            (reply, history.events[1].time_ns)
        })
    }

    #[test]
    fn a_caller_frozen_past_its_deadline_takes_a_reply_that_came_meanwhile() {
        // The grant came back at 2 ms, the deadline passed at 1 s, the caller runs at 5 s.
        let granted = Ok(Acquired::Granted { fencing_token: 1 });
        assert_eq!(call_while_frozen(0, 5_000), (granted, 5_000 * MS));
        // Held 3 s on the wire, the request lands at 3.001 s: a caller running again at 2 s
        // has given up; one running again at 5 s finds the reply (back at 3.002 s).
        let timeout = Err(CallError::Unknown("timeout".into()));
        assert_eq!(call_while_frozen(3_000, 2_000), (timeout, 2_000 * MS));
        let (reply, at_ns) = call_while_frozen(3_000, 5_000);
        assert!(reply.is_ok(), "{reply:?}");
        assert_eq!(at_ns, 5_000 * MS);
    }

    #[test]
    fn a_real_time_call_is_carried_by_a_task_and_times_out_at_its_deadline() {
        let runtime = crate::runtime::real_runtime().unwrap();
        let (granted, hung) = runtime.block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let call = |answer_after| {
                let network = Network::new(
                    LatencyModel::NONE,
                    crate::rng::stream_rng(0, crate::rng::Stream::Latency, 0),
                    Duration::from_millis(200),
                );
                let process = Process::new(
                    "w0",
                    LocalClock::new(truth, NodeClock::with_offset(0)),
                    Arc::new(ProcessFaults::default()),
                    Arc::clone(&recorder),
                    Arc::new(network),
                );
                let slow = Arc::new(Slow {
                    answer_after,
                    answered: Mutex::new(0),
                });
                LockClient::new(process, slow)
            };
            let ttl = Duration::from_secs(5);
            let granted = call(Duration::from_millis(5))
                .acquire("L", OwnerToken(1), ttl)
                .await;
            let started = tokio::time::Instant::now();
            let hung = call(Duration::from_secs(3_600))
                .acquire("L", OwnerToken(2), ttl)
                .await;
            (granted, (hung, started.elapsed()))
        });
        assert_eq!(granted, Ok(Acquired::Granted { fencing_token: 1 }));
        assert_eq!(hung.0, Err(CallError::Unknown("timeout".into())));
        assert!(
            hung.1 >= Duration::from_millis(200) && hung.1 < Duration::from_secs(60),
            "gave up after {:?}",
            hung.1
        );
    }

    #[test]
    fn a_lease_edge_attack_sends_the_holder_s_renew_and_a_rival_s_acquire_at_the_edge() {
        let witness = Arc::new(Witness::default());
        let history = simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let board = LeaseBoard::new(2);
            let holder = process("w0", truth, &recorder, ProcessFaults::on_board(&board, 0));
            let rival = process("w1", truth, &recorder, ProcessFaults::on_board(&board, 1));
            holder.faults().publish_lease(
                OwnerToken(1),
                crate::LeaseEdges {
                    sent_ns: 1_000 * MS,
                    answered_ns: 1_000 * MS,
                },
            );
            holder.faults().start(
                WorkerFault::LeaseEdge {
                    own_offset_ns: -(20 * MS as i64),
                    rival_offset_ns: (30 * MS) as i64,
                    anchor: crate::EdgeAnchor::Sent,
                },
                5_000 * MS,
            );
            let lock = Arc::clone(&witness) as Arc<dyn LockService>;
            let ttl = Duration::from_secs(1);
            let holder = LockClient::new(holder, Arc::clone(&lock));
            let rival = LockClient::new(rival, lock);
            let (renewed, acquired) = tokio::join!(
                holder.renew("L", OwnerToken(1), ttl),
                rival.acquire("L", OwnerToken(2), ttl)
            );
            renewed.unwrap();
            acquired.unwrap();
            recorder.take_history()
        });
        let invokes: Vec<(&str, Op, u64)> = history
            .events
            .iter()
            .filter(|event| event.kind == EventType::Invoke)
            .map(|event| (event.process.as_str(), event.f, event.time_ns))
            .collect();
        // The renew goes 20 ms before the edge at 1 s; once it is confirmed, the lease ends
        // at 1.98 s, and the rival's acquire, held for 1.03 s, waits on for 2.01 s.
        assert_eq!(
            invokes,
            [("w0", Op::Renew, 980 * MS), ("w1", Op::Acquire, 2_010 * MS)]
        );
    }
}
