//! Who is calling an adapter, while it runs: the calling process's name and its own clock,
//! which a client-side lock library under test reads as the time its process believes.

use std::sync::Arc;

use crate::clock::LocalClock;
use crate::recorder::{KnownSym, KnownText};

/// A process as its calls carry it to the adapter: its name and clock, one `Arc` handed over
/// with every request.
#[derive(Debug)]
pub(crate) struct Caller {
    pub(crate) process: Arc<str>,
    /// The process name's sym in the history being recorded.
    pub(crate) process_sym: KnownSym,
    pub(crate) clock: LocalClock,
    /// The lock its lock calls name, and the key its store calls name, with their syms.
    pub(crate) lock: KnownText,
    pub(crate) key: KnownText,
}

impl Caller {
    /// A caller named `process` whose clock is `clock`.
    pub(crate) fn new(process: Arc<str>, clock: LocalClock) -> Caller {
        Caller {
            process,
            process_sym: KnownSym::default(),
            clock,
            lock: KnownText::default(),
            key: KnownText::default(),
        }
    }
}

tokio::task_local! {
    static CALLER: Arc<Caller>;
}

impl Caller {
    /// Runs `body` (one poll of an adapter's call) with `caller` as the caller the adapter
    /// sees through [`caller_clock`] and [`caller_process`].
    pub(crate) fn scope<R>(caller: &Arc<Caller>, body: impl FnOnce() -> R) -> R {
        CALLER.sync_scope(Arc::clone(caller), body)
    }
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
