//! Why an `exec:` command cannot be run, or its child cannot serve: one variant per way, each
//! saying what was expected and whose it is to fix (the command line, the child's code, the
//! machine).

use std::sync::Arc;
use std::time::Duration;

use fencer_harness::CallError;

use super::connection::HELLO_TIMEOUT_VAR;
use super::protocol::{CLIENT_PROTOCOL_VERSION, PROTOCOL_VERSION, Role};

/// Why the command line after `exec:` cannot be split into words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Nothing follows `exec:`.
    #[error("exec: needs a command after it, e.g. exec:python3 my_lock_service.py")]
    Empty,
    /// A quote opened and never closed.
    #[error("exec:{line} has an unfinished {quote} quote")]
    UnfinishedQuote {
        /// The command line.
        line: String,
        /// The quote left open.
        quote: char,
    },
    /// A backslash with nothing after it to escape.
    #[error("exec:{line} ends in a lone backslash")]
    LoneBackslash {
        /// The command line.
        line: String,
    },
}

/// Why an exec child is not there to serve: it could not be started or greeted, it ended, it
/// serves the other role, or a signal to it failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ExecError {
    /// The command line cannot be split into words.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// fencer could not start the runtime or thread its children's pipes run on.
    #[error("cannot start the exec {what}: {source}")]
    Background {
        /// `runtime` or `thread`.
        what: &'static str,
        /// What the OS said.
        source: Arc<std::io::Error>,
    },
    /// The task that starts or signals a child on that runtime failed.
    #[error("exec runtime task failed: {0}")]
    Task(String),
    /// The hello timeout's environment variable is not a number of milliseconds.
    #[error("{HELLO_TIMEOUT_VAR}={text}: expected a number of milliseconds")]
    HelloTimeoutVar {
        /// What the variable holds.
        text: String,
    },
    /// The program could not be started.
    #[error("cannot start exec:{command}: {source}")]
    Spawn {
        /// The command, as shown.
        command: String,
        /// What the OS said.
        source: Arc<std::io::Error>,
    },
    /// The program exited before fencer learnt its pid.
    #[error("exec:{command} exited at once")]
    ExitedAtOnce {
        /// The command, as shown.
        command: String,
    },
    /// The child's stdin, stdout or stderr pipe was not opened.
    #[error("{child}: its pipes were not opened")]
    NoPipes {
        /// The child (command and pid).
        child: String,
    },
    /// The child said nothing within the hello timeout.
    #[error(
        "{child} did not answer hello within {timeout:?} (see docs/exec-protocol.md; \
         FENCER_EXEC_HELLO_TIMEOUT_MS allows a slower start)"
    )]
    HelloTimeout {
        /// The child (command and pid).
        child: String,
        /// How long it was given.
        timeout: Duration,
    },
    /// The child ended before it answered hello. Its last line on stderr is kept: a child
    /// that cannot start says why there, and the error is the one line a user reads.
    #[error("{why} before answering hello{}", last_words(.last_line))]
    EndedBeforeHello {
        /// How it ended.
        why: String,
        /// The last line the child wrote on stderr that held more than white space.
        last_line: Option<String>,
    },
    /// The child answered hello with an error.
    #[error("{child} answered hello with an error: {error}")]
    HelloRefused {
        /// The child (command and pid).
        child: String,
        /// Its answer.
        error: CallError,
    },
    /// The child speaks another version of the protocol.
    #[error(
        "{child} speaks exec protocol {protocol}; this fencer speaks {PROTOCOL_VERSION} and \
         {CLIENT_PROTOCOL_VERSION}"
    )]
    OtherProtocol {
        /// The child (command and pid).
        child: String,
        /// The version it named.
        protocol: u64,
    },
    /// A child named as a client (`--client exec:…`) answered hello with another version:
    /// it was written for the lock or store role.
    #[error(
        "{child} speaks exec protocol {protocol}, but a client child (--client exec:…) must \
         speak protocol {CLIENT_PROTOCOL_VERSION} and serve the client role (see \
         docs/exec-protocol.md; a protocol 1 child serves --lock or --store)"
    )]
    NotAClient {
        /// The child (command and pid).
        child: String,
        /// The version it named.
        protocol: u64,
    },
    /// The child's hello names no role.
    #[error("{child} names no roles in its hello: expected \"lock\", \"store\" or both")]
    NoRoles {
        /// The child (command and pid).
        child: String,
    },
    /// The child answered hello with something else.
    #[error("{child} answered hello with `{found}` on stdout line {line}: expected \"hello\"")]
    NotHello {
        /// The child (command and pid).
        child: String,
        /// The result it gave.
        found: &'static str,
        /// Its stdout line, from 1.
        line: u64,
    },
    /// The child ended: `why` says how (exited, killed, broke the protocol).
    #[error("{why}")]
    Ended {
        /// How it ended, in the words every later call is refused with.
        why: String,
    },
    /// The child serves only the other role.
    #[error(
        "{child} does not serve the {} role (its hello names {}): check --{}",
        .role.name(),
        .served.join(", "),
        .role.name()
    )]
    NotServing {
        /// The child (command and pid).
        child: String,
        /// The role it was named for.
        role: Role,
        /// The roles its hello names.
        served: Vec<&'static str>,
    },
    /// A client child's notices are already recorded for a worker's library.
    #[error("{child} already serves a worker's library: one client child per worker")]
    Rebound {
        /// The child (command and pid).
        child: String,
    },
    /// `kill` could not be run.
    #[error("kill {signal}: {source}")]
    SignalUnsent {
        /// The signal (`-STOP`, `-CONT`).
        signal: &'static str,
        /// What the OS said.
        source: Arc<std::io::Error>,
    },
    /// `kill` ran and failed (the group is gone).
    #[error("kill {signal} -- -{pid} failed: {status}")]
    SignalFailed {
        /// The signal (`-STOP`, `-CONT`).
        signal: &'static str,
        /// The process group.
        pid: u32,
        /// How `kill` exited.
        status: std::process::ExitStatus,
    },
}

/// `; its last line on stderr: …` when the child wrote one.
fn last_words(last_line: &Option<String>) -> String {
    last_line
        .as_ref()
        .map(|line| format!("; its last line on stderr: {line}"))
        .unwrap_or_default()
}
