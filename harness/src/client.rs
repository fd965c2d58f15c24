//! The recorded path of every client call: invoke event, the simulated wire (latency, lost
//! replies), the adapter, a deadline, and the completion event.
//!
//! Each request is delivered by a task of its own, not its sender's, so a request already sent
//! keeps travelling and is applied even if its sender is frozen, times out or gives up —
//! exactly the cases where a reply is lost and the caller must record `info`. An adapter that
//! panics or never answers becomes an `info` completion, never a crashed or hung harness.
//!
//! The delivery tasks are a run's couriers: a courier carries one request at a time and then
//! waits, idle, for the next one, so a call costs a wake-up instead of a task to set up and
//! tear down. Handing a request to an idle courier queues it exactly where spawning a task
//! would, so which request is applied when is the same either way. In the simulation a courier
//! is polled once per call, to apply the request: starting the request's trip and handing its
//! reply back are [steps](crate::sim::Step) the executor runs in the courier's place in the
//! order, so every wake-up and timer comes exactly where the courier's own turns would put it.
//!
//! Before a call goes out, a lease-edge attack may hold its caller until just before or after
//! the lease's expiry ([`ProcessFaults::edge_hold_until`]); the invoke is recorded when the
//! call is really sent. While the adapter runs, [`caller_clock`] gives it the calling
//! process's own clock (which the nemesis skews), so a client-side library under test reads
//! the time its process believes, not the true time.

use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::adapter::{
    Acquired, CallError, FencedStore, FencingToken, LockService, Owned, OwnerToken, ReadValue,
    Written,
};
use crate::clock::LocalClock;
use crate::event::{EventType, Op};
use crate::freeze::ProcessFaults;
use crate::packed::{Number, Row};
use crate::recorder::{KnownSym, Recorder, RowStrings, Table, Word};

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
    /// Couriers waiting for a request to carry.
    idle: Mutex<Vec<Arc<Courier>>>,
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
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Hands `delivery`, which reaches the backend after `latency`, to an idle courier, or to
    /// a new one when every courier is busy.
    fn dispatch(self: &Arc<Self>, delivery: Delivery, latency: Duration) {
        let idle = self.idle_couriers().pop();
        match idle {
            Some(courier) => courier.assign(delivery, latency),
            None => {
                let courier = Arc::new(Courier::new(Arc::downgrade(self)));
                crate::task::spawn(courier.carry(delivery));
            }
        }
    }

    fn idle_couriers(&self) -> MutexGuard<'_, Vec<Arc<Courier>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn one_way(&self) -> Duration {
        if self.latency.max_ns == 0 {
            return Duration::ZERO;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        Duration::from_nanos(rng.random_range(self.latency.min_ns..=self.latency.max_ns))
    }
}

impl Drop for Network {
    /// Sends the idle couriers home: with the run's wire gone, no request will come.
    fn drop(&mut self) {
        for courier in self.idle_couriers().drain(..) {
            courier.send_home();
        }
    }
}

/// A request on its way: the wire's latency and the adapter; it ends with the reply's trip
/// back still to make when the simulation is to time that trip ([`Courier::carry`]).
type Delivery = Pin<Box<dyn Future<Output = Option<ReplyTrip>> + Send>>;

/// A reply that reaches its caller at `arrives_ns` (the simulation's clock).
struct ReplyTrip {
    arrives_ns: u64,
    reply: Arc<dyn Returned>,
}

/// A task that carries requests over the wire, one at a time.
struct Courier {
    state: Mutex<CourierState>,
    network: Weak<Network>,
    /// Queues this courier's step when woken: set on its first timed reply.
    relay: OnceLock<Waker>,
}

/// What a courier waits for, and how to wake it.
#[derive(Default)]
struct CourierState {
    /// The next request, handed over by [`Network::dispatch`].
    next: Option<Delivery>,
    /// The courier task's waker, while it waits for a request.
    waker: Option<Waker>,
    /// The network is gone: no request will come.
    home: bool,
    /// What the courier's next step does.
    step: Option<CourierStep>,
}

/// The hand-overs a courier makes as steps rather than turns of its own.
enum CourierStep {
    /// Starts the next request's trip: the courier is woken when it reaches the backend.
    Start {
        /// When it does, on the simulation's clock.
        arrives_ns: u64,
    },
    /// Hands a reply back to its caller, and the courier back to the network's idle ones.
    Return(Arc<dyn Returned>),
}

impl std::fmt::Debug for Courier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Courier").finish_non_exhaustive()
    }
}

impl Courier {
    fn new(network: Weak<Network>) -> Courier {
        Courier {
            state: Mutex::default(),
            network,
            relay: OnceLock::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, CourierState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives an idle courier its next request, which reaches the backend after `latency`.
    /// The courier is woken now, as a task woken now would be, and its turn starts the
    /// request's trip; in the simulation that turn is a step that only starts the trip's
    /// timer, so the courier's first poll is the request's arrival.
    fn assign(self: &Arc<Self>, delivery: Delivery, latency: Duration) {
        let arrives_ns = crate::sim::with(|sim| {
            sim.now_ns()
                .saturating_add(crate::time::duration_ns(latency))
        })
        .filter(|_| !latency.is_zero());
        let mut state = self.state();
        state.next = Some(delivery);
        match arrives_ns {
            Some(arrives_ns) => {
                state.step = Some(CourierStep::Start { arrives_ns });
                drop(state);
                let step: Arc<dyn crate::sim::Step> = Arc::clone(self) as _;
                crate::sim::with(|sim| sim.queue_step(step));
            }
            None => {
                let waker = state.waker.take();
                drop(state);
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        }
    }

    fn send_home(&self) {
        let waker = {
            let mut state = self.state();
            state.home = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The next request once one is handed over; `None` once the network is gone.
    fn next_request(&self, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        let mut state = self.state();
        if let Some(next) = state.next.take() {
            return Poll::Ready(Some(next));
        }
        if state.home {
            return Poll::Ready(None);
        }
        match &state.waker {
            Some(known) if known.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Carries `first`, then whatever the network hands over while it is idle; ends when the
    /// network is gone. A reply whose trip back is timed is handed back by a step when it
    /// arrives, which also makes the courier idle again, as its own turn then would have.
    async fn carry(self: Arc<Self>, first: Delivery) {
        let mut delivery = first;
        loop {
            match delivery.await {
                Some(trip) => {
                    let relay = self.relay.get_or_init(|| {
                        let step: Weak<dyn crate::sim::Step> = Arc::downgrade(&self) as _;
                        crate::sim::with(|sim| sim.step_waker(step))
                            .expect("a reply's trip is timed only in the simulation")
                    });
                    self.state().step = Some(CourierStep::Return(trip.reply));
                    crate::sim::with(|sim| sim.wake_once_at(trip.arrives_ns, relay));
                }
                None => match self.network.upgrade() {
                    Some(network) => network.idle_couriers().push(Arc::clone(&self)),
                    None => return,
                },
            }
            match poll_fn(|cx| self.next_request(cx)).await {
                Some(next) => delivery = next,
                None => return,
            }
        }
    }
}

impl crate::sim::Step for Courier {
    fn run(self: Arc<Self>) {
        let (step, waker) = {
            let mut state = self.state();
            let step = state.step.take();
            let waker = match step {
                Some(CourierStep::Start { .. }) => state.waker.clone(),
                _ => None,
            };
            (step, waker)
        };
        match step {
            Some(CourierStep::Start { arrives_ns }) => {
                // A courier is made idle by its own turn, which leaves its waker.
                let waker = waker.expect("an idle courier waits with its waker");
                crate::sim::with(|sim| sim.wake_once_at(arrives_ns, &waker));
            }
            Some(CourierStep::Return(reply)) => {
                reply.arrive();
                match self.network.upgrade() {
                    Some(network) => network.idle_couriers().push(Arc::clone(&self)),
                    None => self.send_home(),
                }
            }
            None => {}
        }
    }
}

/// Where a call's reply waits for its caller.
struct ReplySlot<T> {
    state: Mutex<ReplyState<T>>,
}

struct ReplyState<T> {
    /// The reply, from the moment the backend answers.
    result: Option<Result<T, CallError>>,
    /// The reply reached the caller, or never will ([`ReplyLost`]).
    outcome: Option<Result<(), ReplyLost>>,
    /// The caller's waker, while it waits.
    waker: Option<Waker>,
    /// The caller stopped waiting (its deadline passed or its call was cancelled).
    gone: bool,
}

/// The reply will never come: the courier dropped it (the nemesis lost it).
#[derive(Debug)]
struct ReplyLost;

impl<T> ReplySlot<T> {
    fn state(&self) -> MutexGuard<'_, ReplyState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends the wait with `outcome`, waking the caller.
    fn settle(&self, outcome: Result<(), ReplyLost>) {
        let waker = {
            let mut state = self.state();
            if state.gone || state.outcome.is_some() {
                return;
            }
            state.outcome = Some(outcome);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A reply held until it reaches its caller, whatever its type.
trait Returned: Send + Sync {
    /// The reply reaches its caller.
    fn arrive(&self);
}

impl<T: Send> Returned for ReplySlot<T> {
    fn arrive(&self) {
        self.settle(Ok(()));
    }
}

/// The courier's end of a reply slot: a reply it drops unsent is lost, and the caller learns
/// so at once (it still waits out its deadline: it cannot know the reply will never come).
struct ReplySender<T> {
    slot: Option<Arc<ReplySlot<T>>>,
}

impl<T: Send + 'static> ReplySender<T> {
    /// Holds `result` for the caller, who gets it once [`Returned::arrive`] is called on the
    /// slot this answers.
    fn hold(mut self, result: Result<T, CallError>) -> Arc<ReplySlot<T>> {
        let slot = self.slot.take().expect("held once");
        let mut state = slot.state();
        // For a caller gone already, `result` is dropped on return.
        if !state.gone {
            state.result = Some(result);
        }
        drop(state);
        slot
    }
}

impl<T> Drop for ReplySender<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.settle(Err(ReplyLost));
        }
    }
}

/// A caller's wait for its reply ([`ReplySlot`]).
struct Reply<T> {
    slot: Arc<ReplySlot<T>>,
}

impl<T> Future for Reply<T> {
    type Output = Result<Result<T, CallError>, ReplyLost>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.state();
        match state.outcome.take() {
            Some(Ok(())) => {
                let result = state
                    .result
                    .take()
                    .expect("a reply arrives after it is held");
                Poll::Ready(Ok(result))
            }
            Some(Err(lost)) => Poll::Ready(Err(lost)),
            None => {
                match &state.waker {
                    Some(known) if known.will_wake(cx.waker()) => {}
                    _ => state.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

impl<T> Drop for Reply<T> {
    /// The caller no longer waits: a reply still on its way goes nowhere.
    fn drop(&mut self) {
        let result = {
            let mut state = self.slot.state();
            state.gone = true;
            state.waker = None;
            state.result.take()
        };
        drop(result);
    }
}

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
            caller: Arc::new(Caller {
                process: name.into(),
                process_sym: KnownSym::default(),
                clock,
            }),
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
            caller: Arc::new(Caller {
                process: name,
                process_sym: KnownSym::default(),
                clock: self.clock().clone(),
            }),
            ..self.clone()
        }
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
        if !self.faults.lease_edge_attacked() {
            return;
        }
        let truth = self.clock().truth();
        while let Some(until_ns) = self.faults.edge_hold_until(f, truth.now_ns()) {
            crate::time::sleep_until(truth.instant_at(until_ns)).await;
        }
    }

    /// Records the invoke of an `f` carrying `call`, delivers `apply` over the wire, waits for
    /// the reply within the call timeout and records the completion. `annotate` fills the
    /// completion's columns from a reply (its strings interned into the history's table) and
    /// says whether it was `ok` or `fail`. Returns the reply and the true time the request was
    /// sent.
    async fn call<T, Apply>(
        &self,
        f: Op,
        call: CallText<'_>,
        apply: Apply,
        annotate: fn(&T, &mut Row, &mut RowStrings<'_>) -> EventType,
    ) -> (Result<T, CallError>, u64)
    where
        T: Send + 'static,
        Apply: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        // Held before it is sent: a call cancelled while held never happened.
        self.hold_for_lease_edge(f).await;
        let mut guard = OpenCall {
            process: self,
            f,
            call,
            invoke: None,
            open: true,
        };
        let sent_ns = self.clock().truth().now_ns();
        guard.invoke = self.recorder.record_row_on(self.clock(), |strings, _| {
            call.invoke_row(f, &self.caller, strings)
        });
        let reply = self.deliver(f, apply);
        let reply = match crate::time::timeout(self.network.call_timeout, reply).await {
            Ok(Ok(result)) => result,
            Ok(Err(_lost)) => {
                // The reply will never come, but the caller cannot know that before its deadline.
                let deadline_ns =
                    sent_ns.saturating_add(self.network.call_timeout.as_nanos() as u64);
                crate::time::sleep_until(self.clock().truth().instant_at(deadline_ns)).await;
                Err(CallError::Unknown("timeout".into()))
            }
            Err(_elapsed) => Err(CallError::Unknown("timeout".into())),
        };
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

    /// Sends `apply` with a courier: request latency, the adapter (panics caught), then the
    /// reply latency unless the nemesis loses the reply.
    fn deliver<T, Apply>(&self, f: Op, apply: Apply) -> Reply<T>
    where
        T: Send + 'static,
        Apply: Future<Output = Result<T, CallError>> + Send + 'static,
    {
        let slot = Arc::new(ReplySlot {
            state: Mutex::new(ReplyState {
                result: None,
                outcome: None,
                waker: None,
                gone: false,
            }),
        });
        let sender = ReplySender {
            slot: Some(Arc::clone(&slot)),
        };
        let truth = self.clock().truth();
        // A delayed request is held on the wire, not by its sender: the sender's deadline still
        // runs, so it records `info` while the request is still on its way.
        let held = Duration::from_nanos(self.faults.request_delay_at(f, truth.now_ns()));
        let request_latency = self.network.one_way() + held;
        let reply_latency = self.network.one_way();
        let starts_at = crate::time::now() + request_latency;
        let faults = Arc::clone(&self.faults);
        let caller = Arc::clone(&self.caller);
        let delivery = Box::pin(async move {
            // A courier given the request when idle is woken as it arrives; a new one sleeps.
            if crate::time::now() < starts_at {
                crate::time::sleep_until(starts_at).await;
            }
            let applied =
                crate::sim::foreign(CALLER.scope(caller, AssertUnwindSafe(apply).catch_unwind()));
            let result = match applied.await {
                Ok(result) => result,
                Err(panic) => Err(CallError::Unknown(format!(
                    "adapter panicked: {}",
                    panic_message(&*panic)
                ))),
            };
            if faults.reply_lost_at(f, truth.now_ns()) {
                return None;
            }
            let reply = sender.hold(result);
            if !reply_latency.is_zero() {
                let arrives_ns = crate::sim::with(|sim| {
                    sim.now_ns()
                        .saturating_add(crate::time::duration_ns(reply_latency))
                });
                if let Some(arrives_ns) = arrives_ns {
                    return Some(ReplyTrip { arrives_ns, reply });
                }
                crate::time::sleep(reply_latency).await;
            }
            reply.arrive();
            None
        });
        self.network.dispatch(delivery, request_latency);
        Reply { slot }
    }
}

/// A string a request carries to its adapter (a lock name, key, write id or value), held
/// inline when short, as such strings are, so sending a request allocates nothing for them.
enum CarriedText {
    /// Up to [`CarriedText::INLINE`] bytes, and how many are used.
    Inline(u8, [u8; CarriedText::INLINE]),
    /// Anything longer.
    Boxed(Box<str>),
}

impl CarriedText {
    /// The longest text held inline: the enum stays as small as four words.
    const INLINE: usize = 30;

    fn new(text: &str) -> CarriedText {
        match u8::try_from(text.len()) {
            Ok(len) if text.len() <= CarriedText::INLINE => {
                let mut bytes = [0; CarriedText::INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                CarriedText::Inline(len, bytes)
            }
            _ => CarriedText::Boxed(text.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            CarriedText::Inline(len, bytes) => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).expect("copied whole from a str")
            }
            CarriedText::Boxed(text) => text,
        }
    }
}

/// Who is calling the adapter, while it runs: a process's name and clock, one `Arc` a call
/// hands to its adapter.
#[derive(Debug)]
struct Caller {
    process: Arc<str>,
    /// The process name's sym in the history being recorded.
    process_sym: KnownSym,
    clock: LocalClock,
}

tokio::task_local! {
    static CALLER: Arc<Caller>;
}

/// The calling process's own clock, from inside an adapter call fencer delivers: the clock the
/// nemesis offsets, steps and makes drift for that process (`caller_clock()?.now_ns()` is the
/// time it believes). `None` outside an adapter call, and inside tasks the adapter spawns
/// itself (a task-local value does not follow them: read it first, then hand it on).
///
/// A client-side lock library under test reads its notion of "now" here, so a worker's clock
/// skew reaches the library as it would on a skewed machine.
pub fn caller_clock() -> Option<LocalClock> {
    CALLER.try_with(|caller| caller.clock.clone()).ok()
}

/// The calling process's name (`w0`, `w0:renew`), from inside an adapter call; `None`
/// elsewhere, as for [`caller_clock`].
pub fn caller_process() -> Option<String> {
    CALLER.try_with(|caller| caller.process.to_string()).ok()
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

impl CallText<'_> {
    /// The invoke's row of a call of `f` as `process`, its strings interned into `strings` in
    /// the order [`Row::pack`] interns an event's (so a table's strings are numbered alike
    /// either way).
    fn invoke_row(&self, f: Op, caller: &Caller, strings: &mut RowStrings<'_>) -> Row {
        let lock = self.lock.map(|text| strings.intern(text));
        let key = self.key.map(|text| strings.intern(text));
        let owner = self.owner.map(|owner| strings.intern(owner.hex().as_str()));
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
    /// The invoke's row as recorded and the string table it was packed into; `None` when the
    /// recorder was full and dropped it.
    invoke: Option<(Row, Table)>,
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
        process
            .recorder
            .record_row_on(process.clock(), |strings, table| {
                let mut row = match invoke {
                    Some((row, packed_in)) if packed_in == table => row,
                    _ => call.invoke_row(f, &process.caller, strings),
                };
                row.kind = reply(&mut row, strings);
                row
            });
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

    /// The same service called as a process named `name` that shares this client's clock
    /// and faults: a worker's renewal task, which lives and freezes with its worker.
    pub fn for_task(&self, name: &str) -> LockClient {
        LockClient {
            process: self.process.renamed(name.into()),
            service: Arc::clone(&self.service),
        }
    }

    /// Recorded [`LockService::acquire`].
    pub async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let call = CallText {
            lock: Some(lock),
            owner: Some(owner),
            ttl_ns: Some(ttl.as_nanos() as u64),
            ..CallText::default()
        };
        let service = Arc::clone(&self.service);
        let lock = CarriedText::new(lock);
        let apply = async move { service.acquire(lock.as_str(), owner, ttl).await };
        let (reply, sent_ns) = self
            .process
            .call(
                Op::Acquire,
                call,
                apply,
                |reply: &Acquired, row, strings| match reply {
                    Acquired::Granted { fencing_token } => {
                        row.set(Number::Token, *fencing_token);
                        EventType::Ok
                    }
                    Acquired::Busy => {
                        row.error = Some(strings.word(Word::Busy));
                        EventType::Fail
                    }
                },
            )
            .await;
        if let Ok(Acquired::Granted { .. }) = reply {
            self.process.faults.publish_lease(owner, edge(sent_ns, ttl));
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
        let call = CallText {
            lock: Some(lock),
            owner: Some(owner),
            ttl_ns: Some(ttl.as_nanos() as u64),
            ..CallText::default()
        };
        let service = Arc::clone(&self.service);
        let lock = CarriedText::new(lock);
        let apply = async move { service.renew(lock.as_str(), owner, ttl).await };
        let (reply, sent_ns) = self
            .process
            .call(Op::Renew, call, apply, annotate_owned)
            .await;
        match reply {
            Ok(Owned::Done) => self.process.faults.publish_lease(owner, edge(sent_ns, ttl)),
            Ok(Owned::NotOwner) => self.process.faults.end_lease(owner),
            Err(_) => {}
        }
        reply
    }

    /// Recorded [`LockService::release`].
    pub async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let call = CallText {
            lock: Some(lock),
            owner: Some(owner),
            ..CallText::default()
        };
        let service = Arc::clone(&self.service);
        let lock = CarriedText::new(lock);
        let apply = async move { service.release(lock.as_str(), owner).await };
        let (reply, _) = self
            .process
            .call(Op::Release, call, apply, annotate_owned)
            .await;
        if reply.is_ok() {
            self.process.faults.end_lease(owner);
        }
        reply
    }
}

/// Where a lease granted or renewed by a request sent at true time `sent_ns` ends: the
/// service's expiry, but for the request's latency.
fn edge(sent_ns: u64, ttl: Duration) -> u64 {
    sent_ns.saturating_add(ttl.as_nanos() as u64)
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
        let call = CallText {
            key: Some(key),
            token: Some(fencing_token),
            write_id: Some(write_id),
            value: Some(value),
            ..CallText::default()
        };
        let store = Arc::clone(&self.store);
        let (key, write_id, value) = (
            CarriedText::new(key),
            CarriedText::new(write_id),
            CarriedText::new(value),
        );
        let apply = async move {
            store
                .write(
                    key.as_str(),
                    fencing_token,
                    write_id.as_str(),
                    value.as_str(),
                )
                .await
        };
        let (reply, _) = self
            .process
            .call(
                Op::Write,
                call,
                apply,
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
        let key = CarriedText::new(key);
        let apply = async move { store.read(key.as_str()).await };
        let (reply, _) = self
            .process
            .call(Op::Read, call, apply, |reply: &ReadValue, row, strings| {
                row.set(Number::Token, reply.fencing_token);
                row.write_id = reply.write_id.as_deref().map(|text| strings.intern(text));
                row.value = reply.value.as_deref().map(|text| strings.intern(text));
                EventType::Ok
            })
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
            w0.faults().publish_lease(owner, 5_000 * MS);
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
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let client = LockClient::new(
                process("w0", truth, &recorder, ProcessFaults::default()),
                lock,
            );
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
    fn carried_text_gives_back_what_it_was_given_inline_or_boxed() {
        let longest = "k".repeat(CarriedText::INLINE);
        let longer = "k".repeat(CarriedText::INLINE + 1);
        for text in ["", "L", "ключ-1", longest.as_str(), longer.as_str()] {
            assert_eq!(CarriedText::new(text).as_str(), text);
        }
        assert!(matches!(
            CarriedText::new(&longest),
            CarriedText::Inline(..)
        ));
        assert!(matches!(CarriedText::new(&longer), CarriedText::Boxed(_)));
        assert!(std::mem::size_of::<CarriedText>() <= 32);
    }

    #[test]
    fn a_lost_reply_times_out_at_the_caller_s_deadline_though_the_request_was_applied() {
        let counting = Arc::new(Counting::default());
        let lock = Arc::clone(&counting) as Arc<dyn LockService>;
        let (reply, history) = simulation_runtime().block_on(async move {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let faults = ProcessFaults::default();
            faults.start(WorkerFault::LoseReplies(Op::Acquire), u64::MAX);
            let client = LockClient::new(process("w0", truth, &recorder, faults), lock);
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
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let client = LockClient::new(
                process("w0", truth, &recorder, ProcessFaults::default()),
                lock,
            );
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

    #[test]
    fn couriers_are_reused_when_idle_and_go_home_with_their_network() {
        let lock = Arc::new(Counting::default()) as Arc<dyn LockService>;
        let (idle_after_one, idle_after_two_at_once, couriers_left) = simulation_runtime()
            .block_on(async move {
                let truth = TrueClock::start();
                let recorder = Arc::new(Recorder::new(truth));
                let w0 = process("w0", truth, &recorder, ProcessFaults::default());
                let network = Arc::clone(&w0.network);
                let client = LockClient::new(w0, lock);
                let ttl = Duration::from_secs(5);
                for _ in 0..3 {
                    client.acquire("L", OwnerToken(1), ttl).await.unwrap();
                }
                let idle_after_one = network.idle_couriers().len();
                let (first, second) = tokio::join!(
                    client.acquire("L", OwnerToken(2), ttl),
                    client.acquire("L", OwnerToken(3), ttl)
                );
                first.unwrap();
                second.unwrap();
                let idle_after_two_at_once = network.idle_couriers().len();
                let courier = Arc::downgrade(&network.idle_couriers()[0]);
                drop((client, network));
                // Let the couriers, told the network is gone, run to their end.
                crate::time::sleep(Duration::from_millis(1)).await;
                (
                    idle_after_one,
                    idle_after_two_at_once,
                    courier.strong_count(),
                )
            });
        assert_eq!(idle_after_one, 1, "one call at a time needs one courier");
        assert_eq!(idle_after_two_at_once, 2);
        assert_eq!(couriers_left, 0, "the courier's task ended");
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
            holder.faults().publish_lease(OwnerToken(1), 1_000 * MS);
            holder.faults().start(
                WorkerFault::LeaseEdge {
                    own_offset_ns: -(20 * MS as i64),
                    rival_offset_ns: (30 * MS) as i64,
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
