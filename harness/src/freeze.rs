//! Process pauses, as SIGSTOP would give them: a frozen process makes no progress at all, at
//! whatever await point it happens to be, while messages it already sent keep travelling.
//!
//! [`Freezable`] wraps a process's future (the worker and its renewal task share one
//! [`ProcessFaults`]) and simply refuses to poll it until the freeze ends. Nothing inside the
//! worker has to cooperate, so a pause can land between a lease check and the write it guards.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::time::{Sleep, sleep_until};

use crate::adapter::OwnerToken;
use crate::clock::TrueClock;
use crate::event::Op;

/// One fault the nemesis can put on a process, for as long as the fault lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerFault {
    /// The process (and its renewal task) makes no progress at all.
    Freeze,
    /// Replies to the process's calls of this op are lost after the backend applied them.
    LoseReplies(Op),
    /// Requests of this op the process sends are held in flight for `delay_ns` before they
    /// reach the backend; the caller's deadline still runs.
    DelayRequests {
        /// The call whose requests are held.
        op: Op,
        /// How long each request is held.
        delay_ns: u64,
    },
    /// The process's lease is attacked at its edge: its renews, releases and writes are held
    /// by the caller until the lease's published expiry plus `own_offset_ns`, and acquires by
    /// rivals (or its own, while another process holds the lease) until that holder's expiry
    /// plus `rival_offset_ns`. Races between a call and the lease's own expiry, which random
    /// faults almost never line up, then happen on every lease the fault catches.
    LeaseEdge {
        /// Where the process's own calls land relative to its lease's expiry (negative:
        /// before it).
        own_offset_ns: i64,
        /// Where rivals' acquires land relative to the holder's expiry.
        rival_offset_ns: i64,
        /// Which moment of the last confirmed grant or renew the expiry is counted from.
        anchor: EdgeAnchor,
    },
    /// The work the process is doing under its lease is abandoned by its caller, now; the
    /// process lives on (an instant fault: nothing to heal).
    Cancel,
}

/// Which moment of a lease's last confirmed grant or renew a lease-edge attack counts the
/// lease's expiry from.
///
/// The service set the expiry somewhere between the request's send and its reply: at once on
/// arrival for a service that applies a call in one step, at the last round trip for an adapter
/// whose call takes several. Counting from the send finds the first kind's expiry within the
/// request's latency, counting from the reply the second kind's within the reply's, so an
/// attack aimed at either can land inside a call's own steps without knowing how many it has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeAnchor {
    /// The TTL counted from the true time the request was sent: the earliest the service
    /// can have set the expiry, and the bound a client counting from its send keeps to.
    #[default]
    Sent,
    /// The TTL counted from the true time the reply came back: the latest the service can
    /// have set it.
    Answered,
}

impl EdgeAnchor {
    /// True for [`EdgeAnchor::Sent`], the anchor of every attack planned before there was a
    /// choice (a plan leaves it out).
    pub fn is_sent(&self) -> bool {
        *self == EdgeAnchor::Sent
    }
}

/// Where a process's lease ends, as its last confirmed grant or renew says: the TTL counted
/// from the request's send and from its reply, on the true clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseEdges {
    /// The send's true time plus the TTL.
    pub sent_ns: u64,
    /// The reply's true time plus the TTL.
    pub answered_ns: u64,
}

impl LeaseEdges {
    /// The edge `anchor` counts from.
    pub fn at(self, anchor: EdgeAnchor) -> u64 {
        match anchor {
            EdgeAnchor::Sent => self.sent_ns,
            EdgeAnchor::Answered => self.answered_ns,
        }
    }
}

/// The calls a fault can single out, each with its own windows.
const CALLS: [Op; 5] = [Op::Acquire, Op::Renew, Op::Release, Op::Write, Op::Read];

fn call_slot(op: Op) -> Option<usize> {
    CALLS.iter().position(|call| *call == op)
}

/// Where every process of a run holds a lease until, and which leases the nemesis is attacking
/// at their edge: one slot per process, shared by all of a run's [`ProcessFaults`], because an
/// acquire is aimed at the edge of *another* process's lease.
///
/// The recorded client path keeps each slot: a confirmed grant or renew sets the lease's edge
/// to the true time the request was sent plus its TTL (where the service's expiry is, but for
/// the request's latency, whatever the process's own clock says), and a confirmed release or
/// a refused renew by the same owner clears it.
#[derive(Debug)]
pub struct LeaseBoard {
    slots: Vec<EdgeSlot>,
    /// Lease-edge attacks started and not yet healed: with none, no call needs a clock read.
    attacks: AtomicUsize,
}

#[derive(Debug, Default)]
struct EdgeSlot {
    /// The process's current lease: its owner token and its edges on the true clock.
    lease: Mutex<Option<(OwnerToken, LeaseEdges)>>,
    attacked_until_ns: AtomicU64,
    own_offset_ns: AtomicI64,
    rival_offset_ns: AtomicI64,
    /// The attack's [`EdgeAnchor`], [`EdgeAnchor::Answered`] when set.
    answered_anchor: AtomicBool,
}

impl EdgeSlot {
    fn attacked_at(&self, now_ns: u64) -> bool {
        now_ns < self.attacked_until_ns.load(Ordering::Relaxed)
    }

    fn lease(&self) -> std::sync::MutexGuard<'_, Option<(OwnerToken, LeaseEdges)>> {
        self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn edges(&self) -> Option<LeaseEdges> {
        self.lease().map(|(_, edges)| edges)
    }

    fn anchor(&self) -> EdgeAnchor {
        if self.answered_anchor.load(Ordering::Relaxed) {
            EdgeAnchor::Answered
        } else {
            EdgeAnchor::Sent
        }
    }

    /// Where the lease ends as `attack` (the slot whose attack applies) counts it.
    fn edge_for(&self, attack: &EdgeSlot) -> Option<u64> {
        Some(self.edges()?.at(attack.anchor()))
    }
}

impl LeaseBoard {
    /// A board for `processes` processes, slots `0..processes`.
    pub fn new(processes: usize) -> Arc<LeaseBoard> {
        Arc::new(LeaseBoard {
            slots: (0..processes).map(|_| EdgeSlot::default()).collect(),
            attacks: AtomicUsize::new(0),
        })
    }
}

/// `base` moved by `offset_ns`, within `u64`.
fn offset(base: u64, offset_ns: i64) -> u64 {
    base.saturating_add_signed(offset_ns)
}

/// Faults the nemesis applies to one process, read by its futures and its client calls, and
/// the process's slot on its run's [`LeaseBoard`].
///
/// Every window is an end time on the true clock: a fault is on while `now < until`. Windows
/// only ever grow while a fault is on (a longer one set meanwhile wins), so overlapping faults
/// never shorten one another.
#[derive(Debug)]
pub struct ProcessFaults {
    frozen_until_ns: AtomicU64,
    replies_lost_until_ns: [AtomicU64; CALLS.len()],
    requests_delayed_until_ns: [AtomicU64; CALLS.len()],
    request_delay_ns: [AtomicU64; CALLS.len()],
    board: Arc<LeaseBoard>,
    slot: usize,
    /// How many times the process's work was cancelled, watched by its worker.
    cancels: tokio::sync::watch::Sender<u64>,
}

impl Default for ProcessFaults {
    /// A process alone on its own board: no rival's lease to aim at.
    fn default() -> Self {
        ProcessFaults::on_board(&LeaseBoard::new(1), 0)
    }
}

impl ProcessFaults {
    /// The faults of the process in `slot` of `board` (its run's other processes hold the
    /// other slots).
    pub fn on_board(board: &Arc<LeaseBoard>, slot: usize) -> ProcessFaults {
        assert!(slot < board.slots.len(), "slot {slot} is not on the board");
        ProcessFaults {
            frozen_until_ns: AtomicU64::new(0),
            replies_lost_until_ns: Default::default(),
            requests_delayed_until_ns: Default::default(),
            request_delay_ns: Default::default(),
            board: Arc::clone(board),
            slot,
            cancels: tokio::sync::watch::Sender::new(0),
        }
    }

    fn own_slot(&self) -> &EdgeSlot {
        &self.board.slots[self.slot]
    }

    /// Puts `fault` on the process until true time `until_ns`.
    pub fn start(&self, fault: WorkerFault, until_ns: u64) {
        match fault {
            WorkerFault::Freeze => {
                self.frozen_until_ns.fetch_max(until_ns, Ordering::Relaxed);
            }
            WorkerFault::LoseReplies(op) => {
                if let Some(slot) = call_slot(op) {
                    self.replies_lost_until_ns[slot].fetch_max(until_ns, Ordering::Relaxed);
                }
            }
            WorkerFault::DelayRequests { op, delay_ns } => {
                if let Some(slot) = call_slot(op) {
                    self.requests_delayed_until_ns[slot].fetch_max(until_ns, Ordering::Relaxed);
                    self.request_delay_ns[slot].fetch_max(delay_ns, Ordering::Relaxed);
                }
            }
            WorkerFault::Cancel => {
                self.cancels.send_modify(|cancels| *cancels += 1);
            }
            WorkerFault::LeaseEdge {
                own_offset_ns,
                rival_offset_ns,
                anchor,
            } => {
                // The newest attack's offsets hold for the rest of the combined window.
                self.board.attacks.fetch_add(1, Ordering::Relaxed);
                let slot = self.own_slot();
                slot.attacked_until_ns
                    .fetch_max(until_ns, Ordering::Relaxed);
                slot.own_offset_ns.store(own_offset_ns, Ordering::Relaxed);
                slot.rival_offset_ns
                    .store(rival_offset_ns, Ordering::Relaxed);
                slot.answered_anchor
                    .store(anchor == EdgeAnchor::Answered, Ordering::Relaxed);
            }
        }
    }

    /// Ends `fault` that was set to last until `until_ns`, unless a later one of the same kind
    /// was set meanwhile. Pauses and lost replies end by themselves when their window passes;
    /// a request delay also forgets its length, so the next window starts afresh.
    pub fn heal(&self, fault: WorkerFault, until_ns: u64) {
        match fault {
            WorkerFault::DelayRequests { op, .. } => {
                if let Some(slot) = call_slot(op)
                    && self.requests_delayed_until_ns[slot]
                        .compare_exchange(until_ns, 0, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    self.request_delay_ns[slot].store(0, Ordering::Relaxed);
                }
            }
            WorkerFault::LeaseEdge { .. } => {
                let _ = self.board.attacks.fetch_update(
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                    |attacks| attacks.checked_sub(1),
                );
                let _ = self.own_slot().attacked_until_ns.compare_exchange(
                    until_ns,
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            WorkerFault::Freeze | WorkerFault::LoseReplies(_) | WorkerFault::Cancel => {}
        }
    }

    /// Watches the cancellations of the process's work: what a worker selects on while it
    /// works under a lease.
    pub fn cancellations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.cancels.subscribe()
    }

    /// Records that the process holds the lease of `owner` until `edges` (a grant or renew
    /// was confirmed), for lease-edge faults to aim at.
    pub fn publish_lease(&self, owner: OwnerToken, edges: LeaseEdges) {
        *self.own_slot().lease() = Some((owner, edges));
    }

    /// Records that the lease of `owner` is over (released, or a renew refused); a lease the
    /// process holds under another owner token stays.
    pub fn end_lease(&self, owner: OwnerToken) {
        let mut lease = self.own_slot().lease();
        if lease.is_some_and(|(held, _)| held == owner) {
            *lease = None;
        }
    }

    /// Where the process's current lease ends, in true time counted from the send of its last
    /// confirmed grant or renew, if it holds one.
    pub fn lease_edge_ns(&self) -> Option<u64> {
        Some(self.own_slot().edges()?.sent_ns)
    }

    /// True while some lease-edge attack on the run's board has started and not healed: only
    /// then can [`ProcessFaults::edge_hold_until`] hold a call.
    pub fn lease_edge_attacked(&self) -> bool {
        self.board.attacks.load(Ordering::Relaxed) > 0
    }

    /// Until when (true time) a call of `f` the process is about to make at true time `now_ns`
    /// is held back by a lease-edge attack; `None` when it goes out now.
    ///
    /// An attack is on the race for a lease, whichever side its target is on. The holder's
    /// renews, releases and writes wait for its own lease's edge plus the own offset, when the
    /// holder is attacked or some process that holds no lease (a rival) is; an acquire waits
    /// for the edge of a lease another process holds (the earliest, if several claim one) plus
    /// the rival offset, when either that holder or the acquiring process is attacked. So a
    /// lease runs up to its edge, and the race for it is run there.
    pub fn edge_hold_until(&self, f: Op, now_ns: u64) -> Option<u64> {
        let own = self.own_slot();
        let until_ns = match f {
            Op::Renew | Op::Release | Op::Write => {
                own.edges()?;
                let attack = if own.attacked_at(now_ns) {
                    own
                } else {
                    self.board
                        .slots
                        .iter()
                        .enumerate()
                        .find(|&(slot, rival)| {
                            slot != self.slot
                                && rival.attacked_at(now_ns)
                                && rival.edges().is_none()
                        })
                        .map(|(_, rival)| rival)?
                };
                offset(
                    own.edge_for(attack)?,
                    attack.own_offset_ns.load(Ordering::Relaxed),
                )
            }
            Op::Acquire => {
                let attacking_self = own.attacked_at(now_ns);
                self.board
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|&(slot, _)| slot != self.slot)
                    .filter_map(|(_, holder)| {
                        let attack = if holder.attacked_at(now_ns) {
                            holder
                        } else if attacking_self {
                            own
                        } else {
                            return None;
                        };
                        let edge_ns = holder.edge_for(attack).filter(|&edge| edge > now_ns)?;
                        Some(offset(
                            edge_ns,
                            attack.rival_offset_ns.load(Ordering::Relaxed),
                        ))
                    })
                    .min()?
            }
            _ => return None,
        };
        (until_ns > now_ns).then_some(until_ns)
    }

    /// Forgets a pause that ended at `until_ns`, unless a longer one was set meanwhile.
    fn clear_freeze(&self, until_ns: u64) {
        if until_ns != 0 {
            let _ = self.frozen_until_ns.compare_exchange(
                until_ns,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// True time the current pause ends (0 or past when not paused).
    pub fn frozen_until_ns(&self) -> u64 {
        self.frozen_until_ns.load(Ordering::Relaxed)
    }

    /// True if the reply to a call of `f` sent at true time `now_ns` is lost.
    pub fn reply_lost_at(&self, f: Op, now_ns: u64) -> bool {
        call_slot(f)
            .is_some_and(|slot| now_ns < self.replies_lost_until_ns[slot].load(Ordering::Relaxed))
    }

    /// How long a request of `f` sent at true time `now_ns` is held in flight (0: delivered
    /// promptly).
    pub fn request_delay_at(&self, f: Op, now_ns: u64) -> u64 {
        match call_slot(f) {
            Some(slot) if now_ns < self.requests_delayed_until_ns[slot].load(Ordering::Relaxed) => {
                self.request_delay_ns[slot].load(Ordering::Relaxed)
            }
            _ => 0,
        }
    }
}

/// A future that makes no progress while its process is frozen.
pub struct Freezable<F> {
    /// Boxed, so spawning the wrapped future moves a pointer rather than the whole future.
    inner: Pin<Box<F>>,
    faults: std::sync::Arc<ProcessFaults>,
    truth: TrueClock,
    thaw: Option<Sleep>,
}

impl<F: Future> Freezable<F> {
    /// Wraps `inner` so it obeys the freezes in `faults`.
    pub fn new(inner: F, faults: std::sync::Arc<ProcessFaults>, truth: TrueClock) -> Self {
        Freezable {
            inner: Box::pin(inner),
            faults,
            truth,
            thaw: None,
        }
    }
}

impl<F: Future> Future for Freezable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        loop {
            let until_ns = this.faults.frozen_until_ns();
            // Reading the clock costs a lock in tokio; most polls happen with no pause pending.
            if until_ns == 0 || this.truth.now_ns() >= until_ns {
                this.faults.clear_freeze(until_ns);
                this.thaw = None;
                return this.inner.as_mut().poll(cx);
            }
            let deadline = this.truth.instant_at(until_ns);
            let rearm = match &this.thaw {
                Some(sleep) => sleep.deadline() != deadline,
                None => true,
            };
            if rearm {
                this.thaw = Some(sleep_until(deadline));
            }
            let thaw = this.thaw.as_mut().expect("armed above");
            if Pin::new(thaw).poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn frozen_future_resumes_only_after_the_pause() {
        let runtime = crate::runtime::simulation_runtime();
        runtime.block_on(async {
            let truth = TrueClock::start();
            let faults = Arc::new(ProcessFaults::default());
            let nemesis_faults = Arc::clone(&faults);
            crate::task::spawn(async move {
                crate::time::sleep(Duration::from_millis(500)).await;
                nemesis_faults.start(WorkerFault::Freeze, 5_000_000_000);
            });
            let finished_at = Freezable::new(
                async move {
                    crate::time::sleep(Duration::from_secs(1)).await;
                    truth.now_ns()
                },
                faults,
                truth,
            )
            .await;
            // The sleep could only be observed once the 5 s pause ended.
            assert_eq!(finished_at, 5_000_000_000);
        });
    }

    #[test]
    fn requests_are_delayed_only_inside_the_window_and_heal_keeps_a_later_one() {
        for op in [Op::Write, Op::Acquire, Op::Renew, Op::Release] {
            delays_only_inside_the_window(op);
        }
    }

    fn delays_only_inside_the_window(op: Op) {
        let faults = ProcessFaults::default();
        let delay = |delay_ns| WorkerFault::DelayRequests { op, delay_ns };
        let other = if op == Op::Write {
            Op::Acquire
        } else {
            Op::Write
        };
        faults.start(delay(7), 10);
        assert_eq!(faults.request_delay_at(op, 9), 7);
        assert_eq!(faults.request_delay_at(other, 9), 0);
        assert_eq!(faults.request_delay_at(op, 10), 0);
        faults.start(delay(3), 20);
        // Healing the first window must not end the second, longer one.
        faults.heal(delay(7), 10);
        assert_eq!(faults.request_delay_at(op, 15), 7);
        faults.heal(delay(3), 20);
        assert_eq!(faults.request_delay_at(op, 15), 0);
    }

    fn attack(own_offset_ns: i64, rival_offset_ns: i64) -> WorkerFault {
        WorkerFault::LeaseEdge {
            own_offset_ns,
            rival_offset_ns,
            anchor: EdgeAnchor::Sent,
        }
    }

    #[test]
    fn an_attack_counts_the_expiry_from_the_send_or_the_reply_as_its_anchor_says() {
        let board = LeaseBoard::new(2);
        let holder = ProcessFaults::on_board(&board, 0);
        let rival = ProcessFaults::on_board(&board, 1);
        holder.publish_lease(
            OwnerToken(7),
            LeaseEdges {
                sent_ns: 1_000,
                answered_ns: 1_012,
            },
        );
        holder.start(attack(-5, 3), 500);
        assert_eq!(holder.edge_hold_until(Op::Release, 100), Some(995));
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), Some(1_003));
        holder.start(
            WorkerFault::LeaseEdge {
                own_offset_ns: -5,
                rival_offset_ns: 3,
                anchor: EdgeAnchor::Answered,
            },
            500,
        );
        assert_eq!(holder.edge_hold_until(Op::Release, 100), Some(1_007));
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), Some(1_015));
        assert_eq!(holder.lease_edge_ns(), Some(1_000), "the send's edge");
    }

    #[test]
    fn an_attacked_holder_s_own_calls_wait_for_its_edge_plus_its_offset() {
        let board = LeaseBoard::new(2);
        let holder = ProcessFaults::on_board(&board, 0);
        holder.publish_lease(
            OwnerToken(7),
            LeaseEdges {
                sent_ns: 1_000,
                answered_ns: 1_000,
            },
        );
        assert!(!holder.lease_edge_attacked());
        assert_eq!(holder.edge_hold_until(Op::Renew, 0), None, "no attack yet");
        holder.start(attack(-30, 50), 500);
        assert!(holder.lease_edge_attacked());
        for f in [Op::Renew, Op::Release, Op::Write] {
            assert_eq!(holder.edge_hold_until(f, 100), Some(970), "{f:?}");
        }
        assert_eq!(holder.edge_hold_until(Op::Read, 100), None);
        assert_eq!(
            holder.edge_hold_until(Op::Renew, 970),
            None,
            "the edge came"
        );
        assert_eq!(
            holder.edge_hold_until(Op::Renew, 500),
            None,
            "the window closed"
        );
        holder.end_lease(OwnerToken(8));
        assert_eq!(
            holder.edge_hold_until(Op::Renew, 100),
            Some(970),
            "another owner's end is not this lease's"
        );
        holder.end_lease(OwnerToken(7));
        assert_eq!(holder.lease_edge_ns(), None);
        assert_eq!(
            holder.edge_hold_until(Op::Renew, 100),
            None,
            "no lease, no edge"
        );
        holder.heal(attack(-30, 50), 500);
        assert!(!holder.lease_edge_attacked());
    }

    #[test]
    fn a_rival_s_acquire_waits_for_the_attacked_holder_s_edge() {
        let board = LeaseBoard::new(3);
        let holder = ProcessFaults::on_board(&board, 0);
        let rival = ProcessFaults::on_board(&board, 1);
        let bystander = ProcessFaults::on_board(&board, 2);
        holder.publish_lease(
            OwnerToken(7),
            LeaseEdges {
                sent_ns: 1_000,
                answered_ns: 1_000,
            },
        );
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), None, "no attack");
        holder.start(attack(-30, 50), 2_000);
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), Some(1_050));
        assert_eq!(bystander.edge_hold_until(Op::Acquire, 100), Some(1_050));
        assert_eq!(
            holder.edge_hold_until(Op::Acquire, 100),
            None,
            "its own lease is no rival's"
        );
        assert_eq!(rival.edge_hold_until(Op::Acquire, 999), Some(1_050));
        assert_eq!(
            rival.edge_hold_until(Op::Acquire, 1_000),
            None,
            "an expired lease is nobody's edge"
        );
        holder.heal(attack(-30, 50), 2_000);
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), None);
        // An attacked acquirer aims at whoever holds the lease, with its own rival offset, and
        // holds the holder's calls back to the edge, with its own offset.
        rival.start(attack(10, -20), 2_000);
        assert_eq!(rival.edge_hold_until(Op::Acquire, 100), Some(980));
        assert_eq!(bystander.edge_hold_until(Op::Acquire, 100), None);
        assert_eq!(holder.edge_hold_until(Op::Renew, 100), Some(1_010));
        // Once the rival holds a lease of its own, it attacks that one instead.
        rival.publish_lease(
            OwnerToken(9),
            LeaseEdges {
                sent_ns: 3_000,
                answered_ns: 3_000,
            },
        );
        assert_eq!(holder.edge_hold_until(Op::Renew, 100), None);
        assert_eq!(rival.edge_hold_until(Op::Renew, 100), Some(3_010));
    }

    #[test]
    fn a_process_alone_on_its_board_has_no_rival_edge() {
        let alone = ProcessFaults::default();
        alone.start(attack(10, 10), 1_000);
        alone.publish_lease(
            OwnerToken(1),
            LeaseEdges {
                sent_ns: 500,
                answered_ns: 500,
            },
        );
        assert_eq!(alone.lease_edge_ns(), Some(500));
        assert_eq!(alone.edge_hold_until(Op::Acquire, 0), None);
        assert_eq!(alone.edge_hold_until(Op::Write, 0), Some(510));
    }

    #[test]
    fn replies_are_lost_only_inside_the_window_and_only_for_their_own_op() {
        let faults = ProcessFaults::default();
        faults.start(WorkerFault::LoseReplies(Op::Renew), 10);
        assert!(faults.reply_lost_at(Op::Renew, 9));
        assert!(!faults.reply_lost_at(Op::Renew, 10));
        faults.start(WorkerFault::LoseReplies(Op::Acquire), 10);
        assert!(faults.reply_lost_at(Op::Acquire, 9));
        assert!(!faults.reply_lost_at(Op::Write, 9));
        faults.start(WorkerFault::LoseReplies(Op::Write), 20);
        assert!(faults.reply_lost_at(Op::Write, 19));
        assert!(!faults.reply_lost_at(Op::Release, 19));
        // Ops that are not calls have no window at all.
        faults.start(WorkerFault::LoseReplies(Op::Pause), 20);
        assert!(!faults.reply_lost_at(Op::Pause, 1));
    }
}
