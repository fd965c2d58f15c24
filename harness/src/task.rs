//! Tasks for fencer's own code: spawned on the simulation executor where one runs on this
//! thread, on tokio everywhere else, with one join handle for both.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::FutureExt;

use crate::sim::{self, Task};

/// What a simulated task leaves its join handle: its output, or the panic that ended it.
type Output<T> = Arc<Mutex<Option<Result<T, JoinError>>>>;

/// Runs `future` as a task of its own.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if !sim::running() {
        return JoinHandle {
            inner: Handle::Tokio(tokio::spawn(future)),
        };
    }
    let output: Output<F::Output> = Arc::new(Mutex::new(None));
    let filled = Arc::clone(&output);
    let body = async move {
        let result = AssertUnwindSafe(future).catch_unwind().await;
        *filled.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(result.map_err(|panic| JoinError::panicked(&*panic)));
    };
    let task = sim::with(|sim| sim.spawn(Box::pin(body))).expect("checked above");
    JoinHandle {
        inner: Handle::Simulated { task, output },
    }
}

/// Lets the other ready tasks run before this one goes on.
pub async fn yield_now() {
    if !sim::running() {
        return tokio::task::yield_now().await;
    }
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// Awaits a spawned task's output. Dropping the handle leaves the task running.
#[derive(Debug)]
pub struct JoinHandle<T> {
    inner: Handle<T>,
}

enum Handle<T> {
    Simulated { task: Arc<Task>, output: Output<T> },
    Tokio(tokio::task::JoinHandle<T>),
}

impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handle::Simulated { .. } => f.write_str("Simulated"),
            Handle::Tokio(_) => f.write_str("Tokio"),
        }
    }
}

impl<T> JoinHandle<T> {
    /// Stops the task: it is dropped instead of polled again, and its handle answers
    /// [`JoinError::is_cancelled`] unless it had finished.
    pub fn abort(&self) {
        match &self.inner {
            Handle::Simulated { task, .. } => task.abort(),
            Handle::Tokio(handle) => handle.abort(),
        }
    }

    /// A handle that can stop the task, kept apart from the one that awaits its output.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            inner: match &self.inner {
                Handle::Simulated { task, .. } => Abort::Simulated(Arc::clone(task)),
                Handle::Tokio(handle) => Abort::Tokio(handle.abort_handle()),
            },
        }
    }

    /// The task has finished (ran to its end, panicked or was aborted).
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Handle::Simulated { task, .. } => task.is_finished(),
            Handle::Tokio(handle) => handle.is_finished(),
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Handle::Tokio(handle) => Pin::new(handle).poll(cx).map_err(JoinError::from),
            Handle::Simulated { task, output } => {
                let take = || output.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(result) = take() {
                    return Poll::Ready(result);
                }
                if task.wake_when_finished(cx.waker()) {
                    return Poll::Pending;
                }
                // Finished: with an output, or dropped before it had one.
                Poll::Ready(take().unwrap_or(Err(JoinError {
                    cancelled: true,
                    message: None,
                })))
            }
        }
    }
}

/// Stops a spawned task without awaiting it: what an owner of many tasks keeps to end them.
pub struct AbortHandle {
    inner: Abort,
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AbortHandle")
    }
}

enum Abort {
    Simulated(Arc<Task>),
    Tokio(tokio::task::AbortHandle),
}

impl AbortHandle {
    /// Stops the task, as [`JoinHandle::abort`] does.
    pub fn abort(&self) {
        match &self.inner {
            Abort::Simulated(task) => task.abort(),
            Abort::Tokio(handle) => handle.abort(),
        }
    }

    /// The task has finished (ran to its end, panicked or was aborted).
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Abort::Simulated(task) => task.is_finished(),
            Abort::Tokio(handle) => handle.is_finished(),
        }
    }
}

/// Why a task gave no output: it panicked, or it was aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinError {
    cancelled: bool,
    /// The panic's message, when it had one.
    message: Option<String>,
}

impl JoinError {
    fn panicked(panic: &(dyn std::any::Any + Send)) -> JoinError {
        let message = panic
            .downcast_ref::<&str>()
            .map(|text| (*text).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned());
        JoinError {
            cancelled: false,
            message,
        }
    }

    /// The task was aborted before it finished.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    /// The task panicked.
    pub fn is_panic(&self) -> bool {
        !self.cancelled
    }
}

impl From<tokio::task::JoinError> for JoinError {
    fn from(error: tokio::task::JoinError) -> JoinError {
        if error.is_cancelled() {
            return JoinError {
                cancelled: true,
                message: None,
            };
        }
        let panic = error.into_panic();
        JoinError::panicked(&*panic)
    }
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.cancelled, &self.message) {
            (true, _) => f.write_str("task was cancelled"),
            (false, Some(message)) => write!(f, "task panicked with message {message:?}"),
            (false, None) => f.write_str("task panicked"),
        }
    }
}

impl std::error::Error for JoinError {}
