//! The `exec:` backend: a lock service or fenced store written in any language, run by fencer
//! as a child process that speaks JSON lines over its stdin and stdout
//! (docs/exec-protocol.md).
//!
//! One module per job: `command` splits the command line ([`ExecCommand`]), [`protocol`] holds
//! the messages, `calls` frames them and matches replies to requests, `child` starts, signals
//! and reaps the process, `connection` keeps the one child (on a background runtime) and
//! shares it between a lock and a store naming the same command ([`ExecConnection`]), `lock`
//! and `store` are the two traits ([`ExecLock`], [`ExecStore`]), `client` is protocol 2's
//! client role (one child per worker as its lock client library: [`ExecClient`],
//! [`ExecLibrary`]), and `faults` lets the real tier pause and restart the child.

mod calls;
mod child;
mod client;
mod command;
mod connection;
mod error;
mod faults;
mod lock;
pub mod protocol;
mod store;
#[cfg(test)]
mod tests;

pub use client::{ClientSpec, ExecClient, ExecLibrary};
pub use command::ExecCommand;
pub use connection::{ExecConnection, HELLO_TIMEOUT_VAR};
pub use error::{CommandError, ExecError};
pub use lock::ExecLock;
pub use protocol::Role;
pub use store::ExecStore;

/// The protocol error of a reply whose `result` (`outcome`, stdout line `line`) cannot answer an
/// `op` request, which allows `expected`.
fn mismatch(op: &str, outcome: &protocol::Outcome, line: u64, expected: &str) -> String {
    format!(
        "stdout line {line}: `{}` does not answer {op} (expected {expected})",
        outcome.name()
    )
}
