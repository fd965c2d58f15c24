//! The simulation tier's executor: fencer's own discrete-event loop, run inside tokio's paused
//! runtime.
//!
//! Tasks wait in one FIFO queue and timers in one heap ordered by `(deadline, registration)`;
//! when every task waits, the loop moves its clock straight to the earliest deadline and wakes
//! the timers due then. Nothing reads the OS clock, nothing depends on a timer wheel's slots,
//! and a deadline that is cancelled before it comes (a call's timeout, nearly always) costs a
//! heap entry, never a wake-up, so a simulated call costs what its own work costs.
//!
//! Code outside fencer keeps working with tokio's own tools: `tokio::sync` works on any
//! executor, and `tokio::time` needs tokio's clock to agree with this one. Tokio's clock is
//! moved to fencer's before every poll of an adapter's future, and while an adapter's call is
//! pending or a task spawned with `tokio::spawn` is alive, time moves through tokio (a tokio
//! sleep until fencer's next deadline, so a tokio timer that comes first fires first). Only
//! when nothing foreign can be waiting does the loop move the clock on its own.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// A spawned task's future, with its output already handed to its join handle.
pub(crate) type TaskFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Locks `mutex`, ignoring poison: every lock here guards plain data that a panic elsewhere
/// cannot leave half-written.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The queue of tasks to poll, shared with their wakers (which may be called from any thread).
struct Ready {
    queue: Mutex<VecDeque<Queued>>,
    /// Tokio's waker for the loop, while it waits in tokio.
    driver: Mutex<Option<Waker>>,
    /// The loop is running, so a wake needs no tokio wake-up.
    running: AtomicBool,
}

impl Ready {
    fn push(&self, entry: Queued) {
        lock(&self.queue).push_back(entry);
        if !self.running.load(Ordering::Acquire)
            && let Some(driver) = lock(&self.driver).as_ref()
        {
            driver.wake_by_ref();
        }
    }
}

/// What the ready queue holds: a task to poll, or a step to run in the place a task woken at
/// that moment would have.
enum Queued {
    Task(Arc<Task>),
    Step(Arc<dyn Step>),
}

/// Work the ready queue runs in its turn, where a task's poll would otherwise do only this: a
/// hand-over (wake another task, start a timer) that must happen exactly where in the order
/// that task's poll would have, at the cost of a call instead of a poll.
pub(crate) trait Step: Send + Sync {
    /// Does the step's work, outside any task's poll.
    fn run(self: Arc<Self>);
}

/// The executor's ready queue as a step sees it: where a step woken from anywhere (a timer, an
/// adapter's future, another thread) queues itself to run in its turn.
#[derive(Clone)]
pub(crate) struct StepQueue(Arc<Ready>);

impl StepQueue {
    /// Queues `step` to run in its turn, where a task woken now would be polled.
    pub(crate) fn push(&self, step: Arc<dyn Step>) {
        self.0.push(Queued::Step(step));
    }
}

/// A spawned task, and what its join handle and wakers need of it.
pub(crate) struct Task {
    future: Mutex<Option<TaskFuture>>,
    /// In the ready queue already (a second wake adds nothing).
    queued: AtomicBool,
    aborted: AtomicBool,
    finished: AtomicBool,
    join_waker: Mutex<Option<Waker>>,
    ready: Arc<Ready>,
    /// Its place in the executor's task list (`usize::MAX` for the future `block_on` runs).
    slot: usize,
}

impl Task {
    fn schedule(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        self.ready.push(Queued::Task(Arc::clone(self)));
    }

    /// Asks the task to stop: it is dropped at its next turn instead of polled.
    pub(crate) fn abort(self: &Arc<Self>) {
        self.aborted.store(true, Ordering::Release);
        self.schedule();
    }

    /// The task ran to its end or was dropped.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Wakes `waker` when the task finishes; `false` (and nothing registered) if it has.
    pub(crate) fn wake_when_finished(&self, waker: &Waker) -> bool {
        let mut slot = lock(&self.join_waker);
        if self.is_finished() {
            return false;
        }
        match slot.as_ref() {
            Some(known) if known.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        true
    }

    fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        if let Some(waker) = lock(&self.join_waker).take() {
            waker.wake();
        }
    }
}

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.schedule();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.schedule();
    }
}

/// Pending timers: a heap of `(deadline, registration)` and a slot per registration holding
/// the waker. A slot freed early (the sleep was dropped) leaves its heap entry behind, to be
/// discarded when it comes up (within a call timeout of simulated time, for a call's
/// deadline): cancelling is free.
#[derive(Default)]
struct Timers {
    heap: BinaryHeap<Reverse<TimerEntry>>,
    slots: Vec<TimerSlot>,
    free: Vec<u32>,
    registrations: u64,
}

/// A heap entry: the deadline in the high 64 bits, the registration in the next 40 and the
/// slot in the low 24, so entries order by deadline, then registration, as one integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TimerEntry(u128);

/// Registrations a run may make, and sleeps it may hold at once: the widths of a
/// [`TimerEntry`]'s fields.
const REGISTRATION_BITS: u32 = 40;
const SLOT_BITS: u32 = 24;

impl TimerEntry {
    fn new(deadline_ns: u64, registration: u64, slot: u32) -> TimerEntry {
        assert!(
            registration < 1 << REGISTRATION_BITS && slot < 1 << SLOT_BITS,
            "at most 2^40 sleeps in a run and 2^24 at once"
        );
        let low = registration << SLOT_BITS | u64::from(slot);
        TimerEntry(u128::from(deadline_ns) << 64 | u128::from(low))
    }

    fn deadline_ns(self) -> u64 {
        (self.0 >> 64) as u64
    }

    fn registration(self) -> u64 {
        (self.0 as u64) >> SLOT_BITS
    }

    fn slot(self) -> usize {
        (self.0 as usize) & ((1 << SLOT_BITS) - 1)
    }
}

/// One registered sleep: the registration it belongs to (0 when free) and its waker.
#[derive(Default)]
struct TimerSlot {
    registration: u64,
    waker: Option<Waker>,
    /// Freed as it fires: nobody holds its key to release it.
    once: bool,
}

/// A registered sleep, as its future holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    slot: u32,
    registration: u64,
}

impl Timers {
    fn register(&mut self, deadline_ns: u64, waker: &Waker) -> TimerKey {
        self.register_as(deadline_ns, waker, false)
    }

    fn register_as(&mut self, deadline_ns: u64, waker: &Waker, once: bool) -> TimerKey {
        self.registrations += 1;
        let registration = self.registrations;
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(TimerSlot::default());
                u32::try_from(self.slots.len() - 1).expect("fewer than 2³² sleeps at once")
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.registration = registration;
        entry.waker = Some(waker.clone());
        entry.once = once;
        self.heap
            .push(Reverse(TimerEntry::new(deadline_ns, registration, slot)));
        TimerKey { slot, registration }
    }

    fn rearm(&mut self, key: TimerKey, waker: &Waker) {
        let entry = &mut self.slots[key.slot as usize];
        if entry.registration != key.registration {
            return;
        }
        match &entry.waker {
            Some(known) if known.will_wake(waker) => {}
            _ => entry.waker = Some(waker.clone()),
        }
    }

    fn release(&mut self, key: TimerKey) -> Option<Waker> {
        let entry = &mut self.slots[key.slot as usize];
        if entry.registration != key.registration {
            return None;
        }
        entry.registration = 0;
        self.free.push(key.slot);
        entry.waker.take()
    }

    /// The earliest deadline still registered, discarding entries of released sleeps.
    fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse(entry)) = self.heap.peek() {
            if self.slots[entry.slot()].registration == entry.registration() {
                return Some(entry.deadline_ns());
            }
            self.heap.pop();
        }
        None
    }

    /// The waker of the next sleep due by `now_ns`, in deadline and registration order.
    fn next_due(&mut self, now_ns: u64) -> Option<Waker> {
        while let Some(&Reverse(entry)) = self.heap.peek() {
            if entry.deadline_ns() > now_ns {
                return None;
            }
            self.heap.pop();
            let slot = entry.slot();
            let timer = &mut self.slots[slot];
            if timer.registration == entry.registration()
                && let Some(waker) = timer.waker.take()
            {
                if timer.once {
                    timer.registration = 0;
                    self.free.push(slot as u32);
                }
                return Some(waker);
            }
        }
        None
    }
}

/// Which simulation executor something belongs to: each one started in the process has its
/// own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExecutorId(u64);

impl ExecutorId {
    fn next() -> ExecutorId {
        static STARTED: AtomicU64 = AtomicU64::new(0);
        ExecutorId(STARTED.fetch_add(1, Ordering::Relaxed))
    }
}

/// The executor's state, on the thread that runs it.
pub(crate) struct Sim {
    id: ExecutorId,
    ready: Arc<Ready>,
    tasks: RefCell<Vec<Option<Arc<Task>>>>,
    free_tasks: RefCell<Vec<usize>>,
    timers: RefCell<Timers>,
    /// Nanoseconds since `base`.
    now_ns: Cell<u64>,
    /// Tokio's instant at 0 ns.
    base: Instant,
    /// The tokio runtime underneath, asked whether any task of its own is alive.
    tokio: tokio::runtime::Handle,
    /// Where tokio's clock stands, in nanoseconds since `base`.
    tokio_ns: Cell<u64>,
    /// The last instant converted by [`Sim::ns_at`], and its result: nearly every conversion
    /// is of the run's epoch.
    last_converted: Cell<(Instant, u64)>,
    /// Adapter calls whose future is pending: they may wait on a tokio timer.
    foreign_pending: Cell<usize>,
    /// The loop waits in tokio, so tokio's clock is the one that moves.
    waiting: Cell<bool>,
}

thread_local! {
    static SIM: RefCell<Option<Rc<Sim>>> = const { RefCell::new(None) };
}

/// Whether a simulation executor runs on this thread.
pub(crate) fn running() -> bool {
    SIM.with_borrow(Option::is_some)
}

/// Runs `f` with the executor of this thread, if one is running here.
pub(crate) fn with<R>(f: impl FnOnce(&Sim) -> R) -> Option<R> {
    SIM.with_borrow(|sim| sim.as_deref().map(f))
}

impl Sim {
    /// This executor's identity.
    pub(crate) fn id(&self) -> ExecutorId {
        self.id
    }

    /// Nanoseconds since the executor started.
    pub(crate) fn now_ns(&self) -> u64 {
        if self.waiting.get() {
            // Read from a tokio task while the loop waits in tokio: tokio's clock may have
            // moved on.
            self.catch_up_with_tokio();
        }
        self.now_ns.get()
    }

    /// The tokio instant now.
    pub(crate) fn now(&self) -> Instant {
        self.base_plus(self.now_ns())
    }

    /// The tokio instant at `ns` nanoseconds since the executor started.
    pub(crate) fn base_plus(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns)
    }

    /// `instant` in nanoseconds since the executor started (0 before it).
    pub(crate) fn ns_at(&self, instant: Instant) -> u64 {
        let (last, last_ns) = self.last_converted.get();
        if last == instant {
            return last_ns;
        }
        let ns = u64::try_from(instant.saturating_duration_since(self.base).as_nanos())
            .unwrap_or(u64::MAX);
        self.last_converted.set((instant, ns));
        ns
    }

    /// How many sleeps were registered so far, and how many are held now: what a test of a
    /// path's timers counts.
    #[cfg(test)]
    pub(crate) fn timer_counts(&self) -> (u64, usize) {
        let timers = self.timers.borrow();
        let held = timers.slots.iter().filter(|slot| slot.registration != 0);
        (timers.registrations, held.count())
    }

    pub(crate) fn register_timer(&self, deadline_ns: u64, waker: &Waker) -> TimerKey {
        self.timers.borrow_mut().register(deadline_ns, waker)
    }

    pub(crate) fn rearm_timer(&self, key: TimerKey, waker: &Waker) {
        self.timers.borrow_mut().rearm(key, waker);
    }

    /// Wakes `waker` at `deadline_ns`, a timer nobody can release: it frees itself as it
    /// fires.
    pub(crate) fn wake_once_at(&self, deadline_ns: u64, waker: &Waker) {
        self.timers
            .borrow_mut()
            .register_as(deadline_ns, waker, true);
    }

    /// The ready queue, for a step to queue itself on when woken.
    pub(crate) fn step_queue(&self) -> StepQueue {
        StepQueue(Arc::clone(&self.ready))
    }

    pub(crate) fn release_timer(&self, key: TimerKey) {
        // The waker is dropped after the borrow ends: dropping it may drop a task.
        let waker = self.timers.borrow_mut().release(key);
        drop(waker);
    }

    /// Adds `future` to the tasks, queued for its first poll.
    pub(crate) fn spawn(&self, future: TaskFuture) -> Arc<Task> {
        let mut tasks = self.tasks.borrow_mut();
        let slot = self.free_tasks.borrow_mut().pop().unwrap_or(tasks.len());
        let task = Arc::new(Task {
            future: Mutex::new(Some(future)),
            queued: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            join_waker: Mutex::new(None),
            ready: Arc::clone(&self.ready),
            slot,
        });
        if slot == tasks.len() {
            tasks.push(Some(Arc::clone(&task)));
        } else {
            tasks[slot] = Some(Arc::clone(&task));
        }
        drop(tasks);
        task.schedule();
        task
    }

    fn poll_task(&self, task: &Arc<Task>) {
        let waker = Waker::from(Arc::clone(task));
        let mut cx = Context::from_waker(&waker);
        let mut future = lock(&task.future);
        let done = match future.as_mut() {
            None => return,
            Some(_) if task.aborted.load(Ordering::Acquire) => true,
            Some(running) => running.as_mut().poll(&mut cx).is_ready(),
        };
        if done {
            let ended = future.take();
            drop(future);
            drop(ended);
            self.tasks.borrow_mut()[task.slot] = None;
            self.free_tasks.borrow_mut().push(task.slot);
            task.finish();
        }
    }

    fn next_ready(&self) -> Option<Queued> {
        let entry = lock(&self.ready.queue).pop_front()?;
        if let Queued::Task(task) = &entry {
            task.queued.store(false, Ordering::Release);
        }
        Some(entry)
    }

    /// Moves the clock to `now_ns` and wakes every sleep due by then.
    fn advance_to(&self, now_ns: u64) {
        self.now_ns.set(self.now_ns.get().max(now_ns));
        // Woken one at a time, outside the borrow: a wake may drop a task, and its sleeps.
        loop {
            let due = self.timers.borrow_mut().next_due(self.now_ns.get());
            match due {
                Some(waker) => waker.wake(),
                None => return,
            }
        }
    }

    /// Whether something outside this executor may be waiting on tokio's clock.
    fn tokio_may_wait(&self) -> bool {
        self.foreign_pending.get() > 0 || self.tokio.metrics().num_alive_tasks() > 0
    }

    /// Moves tokio's paused clock up to this one, so code reading `tokio::time` sees fencer's
    /// time.
    pub(crate) fn sync_tokio_clock(&self) {
        let behind_ns = self.now_ns.get().saturating_sub(self.tokio_ns.get());
        if behind_ns == 0 {
            return;
        }
        // `advance` moves the clock at once, then yields; the yield's wake-up is not needed.
        let advance = pin!(tokio::time::advance(Duration::from_nanos(behind_ns)));
        let _ = advance.poll(&mut Context::from_waker(Waker::noop()));
        self.tokio_ns.set(self.now_ns.get());
    }

    /// Reads where tokio's clock has moved while the loop waited in tokio.
    fn catch_up_with_tokio(&self) {
        let tokio_ns = self.ns_at(Instant::now());
        self.tokio_ns.set(tokio_ns);
        if tokio_ns > self.now_ns.get() {
            let next = self.timers.borrow_mut().next_deadline();
            self.advance_to(next.map_or(tokio_ns, |deadline| deadline.min(tokio_ns)));
        }
    }

    /// Drops every task still pending, in spawn-slot order, and every timer.
    fn shut_down(&self) {
        let tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        for task in tasks.into_iter().flatten() {
            let future = lock(&task.future).take();
            drop(future);
            task.finish();
        }
        let queued = std::mem::take(&mut *lock(&self.ready.queue));
        drop(queued);
        let timers = std::mem::take(&mut *self.timers.borrow_mut());
        drop(timers);
    }
}

/// Runs an adapter's `future` as code outside fencer: tokio's clock is moved to the
/// simulation's before each poll, and while the future is pending, time moves through tokio.
/// Outside the simulation executor it is `future` itself.
pub(crate) async fn foreign<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut pending = ForeignPending { pending: false };
    std::future::poll_fn(|cx| {
        with(Sim::sync_tokio_clock);
        let polled = future.as_mut().poll(cx);
        pending.set(polled.is_pending());
        polled
    })
    .await
}

/// Counts a foreign future as pending while it is: while one is, time moves through tokio,
/// where the future may wait on a tokio timer.
#[derive(Debug, Default)]
pub(crate) struct ForeignPending {
    pending: bool,
}

impl ForeignPending {
    /// Whether the future is pending now.
    pub(crate) fn set(&mut self, pending: bool) {
        if pending != self.pending {
            self.pending = pending;
            with(|sim| {
                let count = sim.foreign_pending.get();
                sim.foreign_pending
                    .set(if pending { count + 1 } else { count - 1 });
            });
        }
    }
}

impl Drop for ForeignPending {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Runs `main` and every task it spawns to completion of `main` on a new executor on this
/// thread, inside the tokio runtime `block_on` is called from; tasks still pending then are
/// dropped.
pub(crate) fn block_on<F: Future>(tokio: &tokio::runtime::Runtime, main: F) -> F::Output {
    let ready = Arc::new(Ready {
        queue: Mutex::new(VecDeque::new()),
        driver: Mutex::new(None),
        running: AtomicBool::new(false),
    });
    let main_task = Arc::new(Task {
        future: Mutex::new(None),
        queued: AtomicBool::new(false),
        aborted: AtomicBool::new(false),
        finished: AtomicBool::new(false),
        join_waker: Mutex::new(None),
        ready: Arc::clone(&ready),
        slot: usize::MAX,
    });
    let base = tokio.block_on(async { Instant::now() });
    let sim = Rc::new(Sim {
        id: ExecutorId::next(),
        ready,
        tasks: RefCell::new(Vec::new()),
        free_tasks: RefCell::new(Vec::new()),
        timers: RefCell::new(Timers::default()),
        now_ns: Cell::new(0),
        base,
        tokio: tokio.handle().clone(),
        tokio_ns: Cell::new(0),
        last_converted: Cell::new((base, 0)),
        foreign_pending: Cell::new(0),
        waiting: Cell::new(false),
    });
    let previous = SIM.replace(Some(Rc::clone(&sim)));
    let _restore = Restore {
        sim: Rc::clone(&sim),
        previous,
    };
    main_task.schedule();
    let driver = Driver {
        main: pin!(main),
        main_waker: Waker::from(Arc::clone(&main_task)),
        main_task,
        alarm: None,
        sim,
    };
    // One poll of the driver runs many tasks' polls: tokio's per-poll budget must not apply.
    tokio.block_on(tokio::task::unconstrained(driver))
}

/// Puts back the thread's previous executor (none, nearly always) and drops what is left.
struct Restore {
    sim: Rc<Sim>,
    previous: Option<Rc<Sim>>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.sim.shut_down();
        SIM.set(self.previous.take());
    }
}

/// The loop, as the one future tokio runs.
struct Driver<'a, F: Future> {
    main: Pin<&'a mut F>,
    main_task: Arc<Task>,
    main_waker: Waker,
    /// A tokio sleep until the next deadline, while time moves through tokio.
    alarm: Option<Pin<Box<tokio::time::Sleep>>>,
    sim: Rc<Sim>,
}

impl<F: Future> Future for Driver<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let sim = Rc::clone(&this.sim);
        sim.ready.running.store(true, Ordering::Release);
        if sim.waiting.replace(false) {
            sim.catch_up_with_tokio();
        }
        loop {
            while let Some(entry) = sim.next_ready() {
                let task = match entry {
                    Queued::Task(task) => task,
                    Queued::Step(step) => {
                        step.run();
                        continue;
                    }
                };
                if Arc::ptr_eq(&task, &this.main_task) {
                    let mut main_cx = Context::from_waker(&this.main_waker);
                    if let Poll::Ready(output) = this.main.as_mut().poll(&mut main_cx) {
                        sim.ready.running.store(false, Ordering::Release);
                        return Poll::Ready(output);
                    }
                } else {
                    sim.poll_task(&task);
                }
            }
            let next = sim.timers.borrow_mut().next_deadline();
            match next {
                Some(deadline_ns) if deadline_ns <= sim.now_ns() || !sim.tokio_may_wait() => {
                    sim.advance_to(deadline_ns);
                    continue;
                }
                _ => {}
            }
            // Time moves through tokio: wait there until the next deadline or a foreign wake.
            *lock(&sim.ready.driver) = Some(cx.waker().clone());
            sim.ready.running.store(false, Ordering::Release);
            if !lock(&sim.ready.queue).is_empty() {
                sim.ready.running.store(true, Ordering::Release);
                continue;
            }
            sim.sync_tokio_clock();
            if let Some(deadline_ns) = next {
                let at = sim.base + Duration::from_nanos(deadline_ns);
                match &mut this.alarm {
                    Some(alarm) => alarm.as_mut().reset(at),
                    None => this.alarm = Some(Box::pin(tokio::time::sleep_until(at))),
                }
                let alarm = this.alarm.as_mut().expect("set above");
                if alarm.as_mut().poll(cx).is_ready() {
                    sim.ready.running.store(true, Ordering::Release);
                    // Tokio's clock has reached the deadline: catching up wakes its sleeps.
                    sim.catch_up_with_tokio();
                    continue;
                }
            }
            sim.waiting.set(true);
            return Poll::Pending;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use crate::runtime::simulation_runtime;
    use crate::task::{spawn, yield_now};
    use crate::time::{now, sleep, timeout};

    const MS: u64 = 1_000_000;

    fn elapsed_ns(start: tokio::time::Instant) -> u64 {
        (now() - start).as_nanos() as u64
    }

    /// Who woke when, as `(name, nanoseconds since the start)`.
    type Log = std::sync::Arc<Mutex<Vec<(&'static str, u64)>>>;

    fn note(log: &Log, name: &'static str, start: tokio::time::Instant) {
        log.lock().unwrap().push((name, elapsed_ns(start)));
    }

    /// What `log` holds, once every task that wrote to it is done.
    fn entries(log: Log) -> Vec<(&'static str, u64)> {
        std::sync::Arc::try_unwrap(log)
            .expect("every writer done")
            .into_inner()
            .unwrap()
    }

    #[test]
    fn sleeps_wake_in_deadline_order_then_in_the_order_they_were_registered() {
        let log = simulation_runtime().block_on(async {
            let log = Log::default();
            let start = now();
            let mut tasks = Vec::new();
            for (name, after_ns) in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2), ("z", 0)] {
                let log = Log::clone(&log);
                tasks.push(spawn(async move {
                    sleep(Duration::from_nanos(after_ns)).await;
                    note(&log, name, start);
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            entries(log)
        });
        assert_eq!(log, [("z", 0), ("a", 1), ("b1", 2), ("b2", 2), ("c", 3)]);
    }

    #[test]
    fn one_shot_timers_free_their_slots_as_they_fire() {
        let mut timers = super::Timers::default();
        let waker = std::task::Waker::noop();
        for round in 0..100 {
            timers.register_as(round, waker, true);
            assert!(timers.next_due(round).is_some());
        }
        assert_eq!(timers.slots.len(), 1, "every round reused the one slot");
        assert_eq!(timers.next_deadline(), None);
    }

    /// Logs its name when run as a step; woken, it queues itself as one.
    struct Noted {
        log: Log,
        name: &'static str,
        start: tokio::time::Instant,
        queue: super::StepQueue,
    }

    impl super::Step for Noted {
        fn run(self: std::sync::Arc<Self>) {
            note(&self.log, self.name, self.start);
        }
    }

    impl std::task::Wake for Noted {
        fn wake(self: std::sync::Arc<Self>) {
            self.queue.clone().push(self);
        }
    }

    #[test]
    fn steps_run_where_a_task_woken_at_that_moment_would_be_polled() {
        let log = simulation_runtime().block_on(async {
            let log = Log::default();
            let start = now();
            let queue = super::with(|sim| sim.step_queue()).expect("simulated");
            let step = |name| {
                std::sync::Arc::new(Noted {
                    log: Log::clone(&log),
                    name,
                    start,
                    queue: queue.clone(),
                })
            };
            // A task queued before the step runs before it.
            let first = spawn({
                let log = Log::clone(&log);
                async move { note(&log, "queued first", start) }
            });
            queue.push(step("queued step"));
            // A step woken by a timer runs in the timer's place: after the sleep registered
            // before it, before the one registered after it, at the same instant.
            let before = spawn({
                let log = Log::clone(&log);
                async move {
                    sleep(Duration::from_nanos(7)).await;
                    note(&log, "sleep registered before", start);
                }
            });
            yield_now().await;
            let timed = std::task::Waker::from(step("timed step"));
            super::with(|sim| sim.wake_once_at(7, &timed));
            drop(timed);
            let after = spawn({
                let log = Log::clone(&log);
                async move {
                    sleep(Duration::from_nanos(7)).await;
                    note(&log, "sleep registered after", start);
                }
            });
            for task in [first, before, after] {
                task.await.unwrap();
            }
            entries(log)
        });
        assert_eq!(
            log,
            [
                ("queued first", 0),
                ("queued step", 0),
                ("sleep registered before", 7),
                ("timed step", 7),
                ("sleep registered after", 7),
            ]
        );
    }

    #[test]
    fn released_timers_never_fire_and_the_live_ones_all_do() {
        let mut timers = super::Timers::default();
        let waker = std::task::Waker::noop();
        let live: Vec<_> = (0..10).map(|n| timers.register(5_000 - n, waker)).collect();
        for n in 0..10_000 {
            let cancelled = timers.register(1_000_000 + n, waker);
            timers.release(cancelled);
        }
        assert_eq!(timers.next_deadline(), Some(4_991));
        let mut due = 0;
        while timers.next_due(u64::MAX).is_some() {
            due += 1;
        }
        assert_eq!(due, live.len());
        assert_eq!(timers.next_deadline(), None);
    }

    #[test]
    fn a_deadline_that_is_cancelled_is_never_waited_for() {
        let (ended_ns, outcome) = simulation_runtime().block_on(async {
            let start = now();
            let outcome = timeout(Duration::from_secs(10), sleep(Duration::from_millis(1))).await;
            // Nothing else is left to wait for: the 10 s deadline must not move the clock.
            sleep(Duration::ZERO).await;
            (elapsed_ns(start), outcome)
        });
        assert_eq!(outcome, Ok(()));
        assert_eq!(ended_ns, MS);
        let late = simulation_runtime().block_on(async {
            timeout(Duration::from_millis(1), sleep(Duration::from_secs(10))).await
        });
        assert_eq!(late, Err(crate::time::Elapsed));
    }

    /// An adapter's own `tokio::time` sleeps take their turn among fencer's timers, in a call
    /// fencer delivers and in a task spawned with `tokio::spawn`.
    #[test]
    fn tokio_timers_of_code_outside_fencer_fire_in_their_place_among_the_simulation_s() {
        let log = simulation_runtime().block_on(async {
            let log = Log::default();
            let start = now();
            let mut tasks = Vec::new();
            for (name, after_ms) in [("fencer 3 ms", 3), ("fencer 8 ms", 8)] {
                let log = Log::clone(&log);
                tasks.push(spawn(async move {
                    sleep(Duration::from_millis(after_ms)).await;
                    note(&log, name, start);
                }));
            }
            let adapter_log = Log::clone(&log);
            tasks.push(spawn(super::foreign(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                note(&adapter_log, "adapter 5 ms", start);
            })));
            let spawned_log = Log::clone(&log);
            let spawned = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(6)).await;
                note(&spawned_log, "tokio task 6 ms", start);
            });
            for task in tasks {
                task.await.unwrap();
            }
            spawned.await.unwrap();
            entries(log)
        });
        assert_eq!(
            log,
            [
                ("fencer 3 ms", 3 * MS),
                ("adapter 5 ms", 5 * MS),
                ("tokio task 6 ms", 6 * MS),
                ("fencer 8 ms", 8 * MS)
            ]
        );
    }

    #[test]
    fn a_panicking_task_and_an_aborted_one_end_in_join_errors_and_the_rest_go_on() {
        let (panicked, aborted, went_on) = simulation_runtime().block_on(async {
            let panicking = spawn(async {
                sleep(Duration::from_millis(1)).await;
                panic!("adapter bug");
            });
            let endless = spawn(sleep(Duration::from_secs(3_600)));
            let went_on = spawn(async {
                sleep(Duration::from_millis(2)).await;
                7
            });
            let panicked = panicking.await.unwrap_err();
            endless.abort();
            let aborted = endless.await.unwrap_err();
            (panicked, aborted, went_on.await.unwrap())
        });
        assert!(panicked.is_panic(), "{panicked}");
        assert_eq!(
            panicked.to_string(),
            "task panicked with message \"adapter bug\""
        );
        assert!(aborted.is_cancelled(), "{aborted}");
        assert_eq!(went_on, 7);
    }

    #[test]
    fn yielding_lets_every_ready_task_run_first_and_tasks_left_at_the_end_are_dropped() {
        struct Dropped(std::sync::Arc<Mutex<bool>>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                *self.0.lock().unwrap() = true;
            }
        }
        let dropped = std::sync::Arc::new(Mutex::new(false));
        let order = simulation_runtime().block_on(async {
            let order = std::sync::Arc::new(Mutex::new(Vec::new()));
            let theirs = std::sync::Arc::clone(&order);
            let _ran = spawn(async move { theirs.lock().unwrap().push("spawned") });
            let guard = Dropped(std::sync::Arc::clone(&dropped));
            let _left = spawn(async move {
                let _guard = guard;
                sleep(Duration::from_secs(3_600)).await;
            });
            yield_now().await;
            order.lock().unwrap().push("after the yield");
            std::sync::Arc::try_unwrap(order)
                .unwrap()
                .into_inner()
                .unwrap()
        });
        assert_eq!(order, ["spawned", "after the yield"]);
        assert!(
            *dropped.lock().unwrap(),
            "a task still waiting is dropped at the end"
        );
    }
}
