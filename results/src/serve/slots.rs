//! How many connections the viewer holds at once, and which one gives way when it is full.
//!
//! Each connection has a thread and a slot. A connection first waits for its request head;
//! once the head has arrived it is served. When every slot is taken, a new connection takes the
//! slot of the oldest one still waiting (its socket is shut down, so its thread ends at once):
//! idle connections, however many are opened, cannot keep a reader out, who sends a request
//! head the moment the connection is up. Only when every slot is serving is a newcomer refused.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The slots of one server.
pub struct Slots {
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// Connections waiting for their request head, oldest first, each with a handle to shut
    /// it down.
    waiting: VecDeque<(u64, TcpStream)>,
    serving: usize,
}

impl State {
    /// Removes the waiting connection `id`; false if it is not waiting (it gave way).
    fn stop_waiting(&mut self, id: u64) -> bool {
        match self.waiting.iter().position(|(waiting, _)| *waiting == id) {
            Some(at) => {
                self.waiting.remove(at);
                true
            }
            None => false,
        }
    }
}

impl Slots {
    /// Room for `capacity` connections at once.
    pub fn new(capacity: usize) -> Arc<Slots> {
        Arc::new(Slots {
            capacity,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A thread that panicked while holding the lock left the counts whole: every change
        // to them is a single step.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives `stream` a slot, taking the oldest waiting connection's when all are taken;
    /// `None` when every slot is serving (or the stream cannot be given a shutdown handle).
    pub fn admit(self: &Arc<Self>, stream: &TcpStream) -> Option<Waiting> {
        let handle = stream.try_clone().ok()?;
        let mut state = self.state();
        if state.waiting.len() + state.serving >= self.capacity {
            let (_, oldest) = state.waiting.pop_front()?;
            let _ = oldest.shutdown(Shutdown::Both);
        }
        let id = state.next_id;
        state.next_id += 1;
        state.waiting.push_back((id, handle));
        Some(Waiting {
            slots: Arc::clone(self),
            id,
        })
    }
}

/// A connection waiting for its request head; its slot is given up when this is dropped.
pub struct Waiting {
    slots: Arc<Slots>,
    id: u64,
}

impl Waiting {
    /// The head has arrived: the connection is served, unless it already gave way.
    pub fn into_serving(self) -> Option<Serving> {
        let mut state = self.slots.state();
        if !state.stop_waiting(self.id) {
            return None;
        }
        state.serving += 1;
        drop(state);
        Some(Serving {
            slots: Arc::clone(&self.slots),
        })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.slots.state().stop_waiting(self.id);
    }
}

/// A connection being answered; its slot is given up when this is dropped.
pub struct Serving {
    slots: Arc<Slots>,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.slots.state().serving -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;

    use super::*;

    /// A connected pair: the server's end and the client's.
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    #[test]
    fn a_newcomer_takes_the_oldest_waiting_slot_and_never_a_serving_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let slots = Slots::new(2);
        let (first, mut first_client) = pair(&listener);
        let (second, _second_client) = pair(&listener);
        let first_waiting = slots.admit(&first).unwrap();
        let serving = slots.admit(&second).unwrap().into_serving().unwrap();
        let (third, _third_client) = pair(&listener);
        let third_waiting = slots.admit(&third).expect("the waiting slot gives way");
        // The oldest waiting connection was shut down, and can no longer be served.
        let mut byte = [0u8; 1];
        assert_eq!(first_client.read(&mut byte).unwrap(), 0);
        assert!(first_waiting.into_serving().is_none());
        // Every slot serving or waiting on the newest: one more still takes the waiting slot...
        let (fourth, _fourth_client) = pair(&listener);
        let fourth_serving = slots.admit(&fourth).unwrap().into_serving().unwrap();
        assert!(third_waiting.into_serving().is_none());
        // ...and with both serving, a newcomer is refused until one is done.
        let (fifth, _fifth_client) = pair(&listener);
        assert!(slots.admit(&fifth).is_none());
        drop(fourth_serving);
        assert!(slots.admit(&fifth).is_some());
        drop(serving);
    }
}
