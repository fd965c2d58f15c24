//! fencer's core: the history vocabulary, the adapter traits a backend implements, per-node
//! clocks, and the simulation runtime whose every call is recorded.
//!
//! Everything else in fencer depends on this crate and on nothing sideways: workloads decide
//! what processes do, the nemesis decides what goes wrong, checkers judge the [`History`].

pub mod adapter;
mod call_columns;
mod caller;
pub mod client;
pub mod clock;
pub mod event;
mod event_line;
mod event_writer;
pub mod freeze;
pub mod fxhash;
pub mod history;
mod identities;
pub mod library;
pub mod packed;
pub mod recorder;
pub mod restart;
pub mod rng;
pub mod roles;
pub mod runtime;
mod sim;
pub mod task;
pub mod terminal;
pub mod time;
mod wire;
pub mod words;
pub mod workload;

pub use adapter::{
    Acquired, AppliedWrite, BadOwnerToken, CallError, ExpiryRule, FencedStore, FencingToken,
    LockChange, LockLogEntry, LockService, Owned, OwnerToken, ReadValue, RestartError, Written,
};
pub use caller::{caller_clock, caller_process};
pub use client::{LockClient, Process, StoreClient};
pub use clock::{LocalClock, NodeClock, TrueClock};
pub use event::{Event, EventType, EventView, FaultEdge, Op};
pub use freeze::{EdgeAnchor, Freezable, LeaseBoard, LeaseEdges, ProcessFaults, WorkerFault};
pub use history::{History, HistoryError};
pub use library::{Lease, LibraryContext, LibraryFactory, LibrarySettings, LockLibrary};
pub use packed::{PackedHistory, Row, RowRef, Rows, Strings, Sym};
pub use recorder::Recorder;
pub use restart::{RestartGate, Restartable};
pub use rng::{Stream, stream_rng};
pub use wire::{LatencyModel, Network};
pub use workload::{UnknownWorkload, Workload};
