//! A command and the one child running it: started on first need (the check before a run, or
//! the first call), kept until it ends, started again only by a restart fault.
//!
//! A child's pipes and its reaper run on one background runtime of their own (a thread
//! fencer starts once), not on the caller's: adapters are built before the runtime that calls
//! them, a harness may call them from several runtimes, and a child started inside a run's
//! runtime would cost the run its start-up time and die with that runtime. Callers only wait
//! on channels, which work from any runtime.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use fencer_harness::CallError;
use tokio::runtime::Handle;

use super::calls::Answered;
use super::child::ExecChild;
use super::command::ExecCommand;
use super::error::{CommandError, ExecError};
use super::protocol::{Request, Role};

/// How long a child has to answer its hello unless `FENCER_EXEC_HELLO_TIMEOUT_MS` says
/// otherwise.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The environment variable that sets the hello timeout, in milliseconds.
pub const HELLO_TIMEOUT_VAR: &str = "FENCER_EXEC_HELLO_TIMEOUT_MS";

/// Connections [`ExecConnection::shared`] handed out and still in use.
static SHARED: Mutex<Vec<Weak<ExecConnection>>> = Mutex::new(Vec::new());

/// The runtime every child's pipes, stderr and reaper run on (see the module doc).
fn background() -> Result<&'static Handle, ExecError> {
    static BACKGROUND: OnceLock<Result<Handle, ExecError>> = OnceLock::new();
    let failed = |what| {
        move |error| ExecError::Background {
            what,
            source: Arc::new(error),
        }
    };
    BACKGROUND
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(failed("runtime"))?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("fencer-exec".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .map_err(failed("thread"))?;
            Ok(handle)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Runs `work` on the background runtime and waits for it from whatever runtime calls.
pub(crate) async fn on_background<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, ExecError>> + Send + 'static,
) -> Result<T, ExecError> {
    background()?
        .spawn(work)
        .await
        .map_err(|error| ExecError::Task(error.to_string()))?
}

/// A command run as a child speaking the exec protocol, shared by an [`super::ExecLock`] and an
/// [`super::ExecStore`] that name the same command.
pub struct ExecConnection {
    command: ExecCommand,
    /// The child, once started (running, or ended and kept so calls learn why).
    live: tokio::sync::Mutex<Option<Arc<ExecChild>>>,
    /// Pauses under way ([`ExecConnection::pause`]).
    pauses: Mutex<u32>,
}

impl std::fmt::Debug for ExecConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExecConnection(exec:{})", self.command.shown())
    }
}

impl ExecConnection {
    /// Checks `command_line` (what follows `exec:`) without starting it.
    pub fn open(command_line: &str) -> Result<ExecConnection, CommandError> {
        Ok(ExecConnection {
            command: ExecCommand::parse(command_line)?,
            live: tokio::sync::Mutex::new(None),
            pauses: Mutex::new(0),
        })
    }

    /// As [`ExecConnection::open`], but the connection another caller in this process holds for
    /// the same command if there is one: a lock and a store built separately from one command
    /// then talk to one child, as the CLI's `--lock exec:X --store exec:X` promises.
    pub fn shared(command_line: &str) -> Result<Arc<ExecConnection>, CommandError> {
        let command = ExecCommand::parse(command_line)?;
        let mut shared = SHARED.lock().unwrap_or_else(|poison| poison.into_inner());
        shared.retain(|connection| connection.strong_count() > 0);
        if let Some(found) = shared
            .iter()
            .filter_map(Weak::upgrade)
            .find(|connection| connection.command == command)
        {
            return Ok(found);
        }
        let connection = Arc::new(ExecConnection {
            command,
            live: tokio::sync::Mutex::new(None),
            pauses: Mutex::new(0),
        });
        shared.push(Arc::downgrade(&connection));
        Ok(connection)
    }

    /// `exec:` and the command, for messages.
    pub fn shown(&self) -> String {
        format!("exec:{}", self.command.shown())
    }

    /// Starts the child if there is none and checks it serves `role`: a command that
    /// cannot start, a child that does not greet, or one that serves only the other role is a
    /// one-line error before the run.
    pub async fn ping(&self, role: Role) -> Result<(), ExecError> {
        let child = self.child().await?;
        if let Some(why) = child.ended() {
            return Err(ExecError::Ended { why });
        }
        if !child.hello().serves(role) {
            return Err(not_serving(&child, role));
        }
        Ok(())
    }

    /// Sends `request` for `role` to the child (started if there is none yet).
    pub(crate) async fn call(
        &self,
        role: Role,
        request: &Request<'_>,
    ) -> Result<(Answered, Arc<ExecChild>), CallError> {
        let child = self
            .child()
            .await
            .map_err(|error| CallError::NotApplied(error.to_string()))?;
        if !child.hello().serves(role) {
            return Err(CallError::NotApplied(not_serving(&child, role).to_string()));
        }
        let answered = child.call(request).await?;
        Ok((answered, child))
    }

    /// The child, started and greeted if there is none. A child that ended stays: calls to it
    /// are refused until a restart fault starts another ([`Self::restart`]).
    pub(crate) async fn child(&self) -> Result<Arc<ExecChild>, ExecError> {
        let mut live = self.live.lock().await;
        if let Some(child) = live.as_ref() {
            return Ok(Arc::clone(child));
        }
        let command = self.command.clone();
        let child = Arc::new(on_background(async move { start(&command).await }).await?);
        *live = Some(Arc::clone(&child));
        Ok(child)
    }

    /// The child if one was started (running or not); never starts one.
    pub(crate) async fn current(&self) -> Option<Arc<ExecChild>> {
        self.live.lock().await.clone()
    }

    /// Freezes the child's process group (SIGSTOP). Pauses nest: a child serving both roles
    /// takes the pauses aimed at each, and thaws only when the last one ends. A child that is
    /// down or ended has nothing to freeze.
    pub(crate) async fn pause(&self) -> Result<(), ExecError> {
        let first = {
            let mut pauses = self
                .pauses
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            *pauses += 1;
            *pauses == 1
        };
        match (first, self.current().await) {
            (true, Some(child)) => child.signal("-STOP").await,
            _ => Ok(()),
        }
    }

    /// Ends one pause; the last one thaws the child (SIGCONT).
    pub(crate) async fn resume(&self) -> Result<(), ExecError> {
        let last = {
            let mut pauses = self
                .pauses
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            *pauses = pauses.saturating_sub(1);
            *pauses == 0
        };
        match (last, self.current().await) {
            (true, Some(child)) => child.signal("-CONT").await,
            _ => Ok(()),
        }
    }

    /// Starts the command again (after a kill), greeted like the first time.
    pub(crate) async fn restart(&self) -> Result<(), ExecError> {
        self.live.lock().await.take();
        self.child().await.map(drop)
    }
}

/// How long a child has to answer its hello: [`HELLO_TIMEOUT`] unless
/// [`HELLO_TIMEOUT_VAR`] says otherwise.
pub(crate) fn hello_timeout() -> Result<Duration, ExecError> {
    match std::env::var(HELLO_TIMEOUT_VAR) {
        Err(_) => Ok(HELLO_TIMEOUT),
        Ok(text) => match text.parse() {
            Ok(ms) => Ok(Duration::from_millis(ms)),
            Err(_) => Err(ExecError::HelloTimeoutVar { text }),
        },
    }
}

/// Starts `command` and greets it (on the background runtime), and says so on stderr.
async fn start(command: &ExecCommand) -> Result<ExecChild, ExecError> {
    let child = ExecChild::start(command, &[], None, hello_timeout()?).await?;
    let hello = child.hello();
    let names = |names: Vec<&str>| {
        if names.is_empty() {
            "nothing".to_string()
        } else {
            names.join(", ")
        }
    };
    eprintln!(
        "fencer: started {}: serves {}; offers {}",
        child.label(),
        names(hello.roles.iter().map(|role| role.name()).collect()),
        names(hello.offers.iter().map(String::as_str).collect()),
    );
    Ok(child)
}

fn not_serving(child: &ExecChild, role: Role) -> ExecError {
    ExecError::NotServing {
        child: child.label().to_string(),
        role,
        served: child.hello().roles.iter().map(|r| r.name()).collect(),
    }
}
