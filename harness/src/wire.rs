//! The wire between processes and backends: a request's trip to its adapter, the adapter's
//! call, and the reply's trip back, or its loss.
//!
//! A request sent is on its way whatever its sender does next: it is applied even if the
//! sender is frozen, gives up at its deadline or is cancelled, exactly the cases where a reply
//! is lost and the caller must record `info`. An adapter that panics or never answers becomes
//! an `info` completion, never a crashed or hung harness.
//!
//! In the simulation a call is a [`Flight`] the executor carries with two timers and no task
//! of its own. At the send, the request's arrival is registered as a timer that runs the
//! flight as a [step](crate::sim::Step): the adapter is called there, in the timer's place
//! among the run's wake-ups. Whether the reply comes back, and when, is then known, and the
//! caller's one wake-up is registered for that moment: the reply's arrival, or the caller's
//! deadline when the reply is lost or would come too late. A request held on the wire past
//! the deadline has the caller wake at its deadline from the start. Only an adapter whose
//! call does not finish at once costs more: the flight is woken again by it, and the caller's
//! wake-up is moved from its deadline to the reply's arrival when the reply comes in time.
//!
//! In the real tier a request is carried by a task of its own and the caller waits for it
//! with a tokio deadline.

use std::future::{Future, poll_fn};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::adapter::CallError;
use crate::caller::Caller;
use crate::event::Op;
use crate::freeze::ProcessFaults;
use crate::sim::{ForeignPending, Sim, StepQueue, TimerKey};
use crate::time::{Sleep, duration_ns};

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

/// An adapter's call, as a request carries it: started when it reaches the backend.
pub(crate) type Request<T> = Pin<Box<dyn Future<Output = Result<T, CallError>> + Send>>;

/// A call about to go out: what it is and who sends it, at which true time.
pub(crate) struct Sending<'a> {
    /// The call.
    pub(crate) f: Op,
    /// The sender's faults: held requests, lost replies.
    pub(crate) faults: &'a Arc<ProcessFaults>,
    /// The sender, as the adapter sees it.
    pub(crate) caller: &'a Arc<Caller>,
    /// The true time the request is sent, for the faults' windows.
    pub(crate) sent_ns: u64,
    /// Whether the adapter reads `tokio::time`, so tokio's clock must be at the simulation's
    /// when it is called.
    pub(crate) reads_tokio_time: bool,
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

    /// How long a caller waits for a reply before recording `info`.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// A request's and its reply's latencies, drawn in that order.
    fn round_trip_ns(&self) -> (u64, u64) {
        if self.latency.max_ns == 0 {
            return (0, 0);
        }
        let range = self.latency.min_ns..=self.latency.max_ns;
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        (rng.random_range(range.clone()), rng.random_range(range))
    }

    /// Sends `request`: it reaches the backend after the wire's latency (and whatever a delay
    /// fault of the sender holds it), its reply comes back after the wire's latency unless the
    /// sender's faults lose it, and the caller waits for it until its deadline.
    pub(crate) fn send<T: Send + 'static>(
        &self,
        sending: Sending<'_>,
        request: Request<T>,
    ) -> Reply<T> {
        let Sending {
            f,
            faults,
            caller,
            sent_ns,
            reads_tokio_time,
        } = sending;
        // A delayed request is held on the wire, not by its sender: the sender's deadline still
        // runs, so it records `info` while the request is still on its way.
        let held_ns = faults.request_delay_at(f, sent_ns);
        let (request_latency_ns, reply_latency_ns) = self.round_trip_ns();
        let request_latency_ns = request_latency_ns.saturating_add(held_ns);
        let timeout_ns = duration_ns(self.call_timeout);
        let state = Mutex::new(FlightState {
            request: Some(request),
            adapter_pending: ForeignPending::default(),
            reply: None,
            wake_at_ns: None,
            caller_waker: None,
            caller_timer: None,
            gone: false,
        });
        let trip = Trip {
            f,
            faults: Arc::clone(faults),
            caller: Arc::clone(caller),
            reply_latency_ns,
            reads_tokio_time,
        };
        let mut parts = Some((state, trip));
        let simulated = crate::sim::with(|sim| {
            let (state, trip) = parts.take().expect("taken once");
            let now_ns = sim.now_ns();
            let flight = Arc::new(Flight {
                state,
                trip,
                queue: Some(sim.step_queue()),
                true_behind_ns: now_ns.saturating_sub(sent_ns),
                deadline_ns: now_ns.saturating_add(timeout_ns),
            });
            if request_latency_ns >= timeout_ns {
                // Held past the deadline: the caller's one wake-up is its deadline.
                flight.state().wake_at_ns = Some(flight.deadline_ns);
            }
            if request_latency_ns == 0 {
                sim.step_queue()
                    .push(Arc::clone(&flight) as Arc<dyn crate::sim::Step>);
            } else {
                let arrives_ns = now_ns.saturating_add(request_latency_ns);
                sim.wake_once_at(arrives_ns, &Waker::from(Arc::clone(&flight)));
            }
            flight
        });
        if let Some(flight) = simulated {
            return Reply {
                flight: Some(flight),
                deadline: None,
            };
        }
        let (state, trip) = parts.take().expect("not taken outside the simulation");
        let flight = Arc::new(Flight {
            state,
            trip,
            queue: None,
            true_behind_ns: 0,
            deadline_ns: u64::MAX,
        });
        crate::task::spawn(Arc::clone(&flight).carry(request_latency_ns));
        Reply {
            flight: Some(flight),
            deadline: Some(crate::time::sleep(self.call_timeout)),
        }
    }
}

/// What a flight knows of its call from the send on.
struct Trip {
    f: Op,
    faults: Arc<ProcessFaults>,
    caller: Arc<Caller>,
    reply_latency_ns: u64,
    reads_tokio_time: bool,
}

/// One call on the wire, shared by its caller's [`Reply`] and whatever carries the request.
struct Flight<T> {
    state: Mutex<FlightState<T>>,
    trip: Trip,
    /// Where the flight queues itself when woken (the simulation's ready queue; `None` in the
    /// real tier, where a task carries it).
    queue: Option<StepQueue>,
    /// How far the true clock is behind the simulation's (0 in the real tier).
    true_behind_ns: u64,
    /// When the caller gives up, on the simulation's clock (the real tier's caller waits with
    /// a deadline of its own).
    deadline_ns: u64,
}

/// The call's progress, from the send to the caller taking its reply.
struct FlightState<T> {
    /// The adapter's call, until it has answered.
    request: Option<Request<T>>,
    /// Counts the adapter's call as pending while it waits on something outside fencer.
    adapter_pending: ForeignPending,
    /// The reply once the adapter has answered (unless it is lost), and when it reaches the
    /// caller (the simulation's clock; the real tier hands it over as it arrives).
    reply: Option<(u64, Result<T, CallError>)>,
    /// When the caller is to be woken, once known: the reply's arrival or the caller's
    /// deadline, whichever comes first.
    wake_at_ns: Option<u64>,
    /// The caller's waker, from its latest poll.
    caller_waker: Option<Waker>,
    /// The caller's wake-up at `wake_at_ns`, once registered.
    caller_timer: Option<TimerKey>,
    /// The caller no longer waits: what comes back goes nowhere.
    gone: bool,
}

impl<T> Flight<T> {
    fn state(&self) -> MutexGuard<'_, FlightState<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T: Send + 'static> Flight<T> {
    /// Polls the adapter's call once, as the calling process, with tokio's clock at the
    /// simulation's if the adapter reads it; a panic is the call's unknown outcome.
    fn poll_request(
        &self,
        request: &mut Request<T>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<T, CallError>> {
        if self.trip.reads_tokio_time {
            crate::sim::with(Sim::sync_tokio_clock);
        }
        let polled = Caller::scope(&self.trip.caller, || {
            std::panic::catch_unwind(AssertUnwindSafe(|| request.as_mut().poll(cx)))
        });
        polled.unwrap_or_else(|panic| {
            Poll::Ready(Err(CallError::Unknown(format!(
                "adapter panicked: {}",
                panic_message(&*panic)
            ))))
        })
    }

    /// Whether the reply to a call answered at true time `now_ns` is lost.
    fn reply_lost_at(&self, now_ns: u64) -> bool {
        self.trip.faults.reply_lost_at(self.trip.f, now_ns)
    }

    /// The adapter answered `result` at the simulation's `now_ns`: the reply is on its way
    /// back unless the sender's faults lose it, and the caller is woken when it arrives, or at
    /// its deadline if that comes first. A caller frozen past both still takes the reply, as
    /// a paused process finds the answer waiting when it runs again.
    fn land(&self, sim: &Sim, result: Result<T, CallError>) {
        let now_ns = sim.now_ns();
        let lost = self.reply_lost_at(now_ns.saturating_sub(self.true_behind_ns));
        let arrives_ns = now_ns.saturating_add(self.trip.reply_latency_ns);
        let mut state = self.state();
        state.adapter_pending.set(false);
        if state.gone {
            drop(state);
            drop(result);
            return;
        }
        let wake_at_ns = if lost {
            self.deadline_ns
        } else {
            state.reply = Some((arrives_ns, result));
            arrives_ns.min(self.deadline_ns)
        };
        let replaced = state.wake_caller_at(sim, wake_at_ns);
        drop(state);
        if let Some(key) = replaced {
            sim.release_timer(key);
        }
    }

    /// The real tier's carrier: the request's trip, the adapter's call, the reply's trip.
    async fn carry(self: Arc<Self>, request_latency_ns: u64) {
        if request_latency_ns > 0 {
            crate::time::sleep(Duration::from_nanos(request_latency_ns)).await;
        }
        let Some(mut request) = self.state().request.take() else {
            return;
        };
        let result = poll_fn(|cx| self.poll_request(&mut request, cx)).await;
        drop(request);
        if self.reply_lost_at(self.trip.faults_clock_now()) {
            return;
        }
        if self.trip.reply_latency_ns > 0 {
            crate::time::sleep(Duration::from_nanos(self.trip.reply_latency_ns)).await;
        }
        let mut state = self.state();
        if state.gone {
            return;
        }
        state.reply = Some((0, result));
        let waker = state.caller_waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Trip {
    /// The true time now, as the sender's faults count it.
    fn faults_clock_now(&self) -> u64 {
        self.caller.clock.truth().now_ns()
    }
}

impl<T> FlightState<T> {
    /// Sets when the caller's wait ends and registers its wake-up then, if the caller has
    /// waited already (otherwise its first poll registers it); returns the wake-up this one
    /// replaces, for the caller to release once the state is unlocked.
    fn wake_caller_at(&mut self, sim: &Sim, wake_at_ns: u64) -> Option<TimerKey> {
        self.wake_at_ns = Some(wake_at_ns);
        let replaced = self.caller_timer.take();
        if let Some(waker) = &self.caller_waker {
            self.caller_timer = Some(sim.register_timer(wake_at_ns, waker));
        }
        replaced
    }
}

impl<T: Send + 'static> crate::sim::Step for Flight<T> {
    /// The request reaches the backend (or the adapter's pending call was woken): the
    /// adapter is called, and once it has answered, the reply is sent back.
    fn run(self: Arc<Self>) {
        let Some(mut request) = self.state().request.take() else {
            return;
        };
        let waker = Waker::from(Arc::clone(&self));
        let polled = self.poll_request(&mut request, &mut Context::from_waker(&waker));
        crate::sim::with(|sim| match polled {
            Poll::Ready(result) => {
                drop(request);
                self.land(sim, result);
            }
            Poll::Pending => {
                let mut state = self.state();
                state.request = Some(request);
                state.adapter_pending.set(true);
                // The caller waits for its deadline, unless the reply comes before it. No
                // wake-up is registered before the wait's end is known, so none is replaced.
                if state.wake_at_ns.is_none() && !state.gone {
                    state.wake_caller_at(sim, self.deadline_ns);
                }
            }
        })
        .expect("a flight is run as a step of the simulation on its thread");
    }
}

impl<T: Send + 'static> Wake for Flight<T> {
    fn wake(self: Arc<Self>) {
        let queue = self
            .queue
            .clone()
            .expect("only a simulated flight is woken as a step");
        queue.push(self);
    }
}

/// A caller's wait for the reply to the request it sent: the reply, or
/// `CallError::Unknown("timeout")` at its deadline (also when the reply was lost: the caller
/// cannot know sooner that none will come).
pub(crate) struct Reply<T> {
    /// The call, until the wait has ended.
    flight: Option<Arc<Flight<T>>>,
    /// The real tier's deadline; in the simulation the flight wakes the caller.
    deadline: Option<Sleep>,
}

fn timed_out<T>() -> Result<T, CallError> {
    Err(CallError::Unknown("timeout".into()))
}

impl<T: Send + 'static> Future for Reply<T> {
    type Output = Result<T, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let flight = this
            .flight
            .as_ref()
            .expect("a reply is not awaited once it is ready");
        let polled = match &mut this.deadline {
            Some(deadline) => flight.poll_real(deadline, cx),
            None => crate::sim::with(|sim| flight.poll_simulated(sim, cx))
                .expect("a simulated call is awaited on its executor's thread"),
        };
        if polled.is_ready() {
            // The wait is over: nothing is left for the drop to undo.
            this.flight = None;
        }
        polled
    }
}

impl<T: Send + 'static> Flight<T> {
    /// The caller's poll in the real tier: the reply once the carrier has handed it over,
    /// or the deadline.
    fn poll_real(&self, deadline: &mut Sleep, cx: &mut Context<'_>) -> Poll<Result<T, CallError>> {
        let mut state = self.state();
        if let Some((_, reply)) = state.reply.take() {
            state.gone = true;
            return Poll::Ready(reply);
        }
        if Pin::new(deadline).poll(cx).is_ready() {
            state.gone = true;
            return Poll::Ready(timed_out());
        }
        match &state.caller_waker {
            Some(known) if known.will_wake(cx.waker()) => {}
            _ => state.caller_waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The caller's poll in the simulation: the reply once it has arrived, else a timeout
    /// once the deadline has passed; the reply wins when both have come, as a ready reply
    /// wins over a deadline already past.
    fn poll_simulated(&self, sim: &Sim, cx: &mut Context<'_>) -> Poll<Result<T, CallError>> {
        let now_ns = sim.now_ns();
        let mut state = self.state();
        let arrived = matches!(state.reply, Some((arrives_ns, _)) if arrives_ns <= now_ns);
        if arrived || now_ns >= self.deadline_ns {
            let reply = state.reply.take().filter(|_| arrived);
            let timer = state.caller_timer.take();
            state.gone = true;
            state.caller_waker = None;
            drop(state);
            if let Some(key) = timer {
                sim.release_timer(key);
            }
            return Poll::Ready(reply.map_or_else(timed_out, |(_, reply)| reply));
        }
        match &state.caller_waker {
            Some(known) if known.will_wake(cx.waker()) => {}
            _ => {
                state.caller_waker = Some(cx.waker().clone());
                if let Some(key) = state.caller_timer {
                    sim.rearm_timer(key, cx.waker());
                }
            }
        }
        if state.caller_timer.is_none()
            && let Some(wake_at_ns) = state.wake_at_ns
        {
            state.caller_timer = Some(sim.register_timer(wake_at_ns, cx.waker()));
        }
        Poll::Pending
    }
}

impl<T> Drop for Reply<T> {
    /// The caller stopped waiting before its wait ended: a reply still on its way goes
    /// nowhere.
    fn drop(&mut self) {
        let Some(flight) = self.flight.take() else {
            return;
        };
        let (reply, timer, waker) = {
            let mut state = flight.state();
            state.gone = true;
            (
                state.reply.take(),
                state.caller_timer.take(),
                state.caller_waker.take(),
            )
        };
        if let Some(key) = timer {
            crate::sim::with(|sim| sim.release_timer(key));
        }
        drop((reply, waker));
    }
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".into()
    }
}
