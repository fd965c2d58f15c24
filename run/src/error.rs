//! Why a run could not produce a history, in either tier.

use fencer_backends::BackendError;
use fencer_nemesis::{FaultFailed, TargetError};

use crate::plan::InvalidPlan;

/// Why a plan could not be run to a history. Bad input is the caller's to fix (exit 254);
/// anything else is fencer's own failure or a server's (exit 255).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan cannot run (bad settings or fault schedule): the message says what was
    /// expected.
    #[error("plan: {0}")]
    Plan(#[from] InvalidPlan),
    /// A fault aims at something this run does not have.
    #[error("plan: {0}")]
    Target(#[from] TargetError),
    /// A server fencer started could not take a fault: the history would claim a fault that
    /// did not happen, so the run stops.
    #[error("{0}")]
    Fault(#[from] FaultFailed),
    /// A backend cannot be built or does not answer: the message says what to fix.
    #[error("{0}")]
    Backend(#[from] BackendError),
    /// The run reached a ceiling of one run ([`crate::RunLimits`]: events recorded, simulated
    /// time) and was stopped: the settings ask for more than a run may do.
    #[error("{0}")]
    Limit(String),
    /// The run was asked to stop ([`crate::interrupt::request`], Ctrl-C): its workers were
    /// stopped where they were and every server it started was torn down. What it had
    /// recorded by then comes along when the run got as far as recording (a run stuck for
    /// minutes is what a person interrupts, and its events are how to learn why); the run did
    /// not finish, so it is no verdict on its plan.
    #[error("interrupted: the run was stopped and every server and cluster it started torn down")]
    Interrupted(Option<Box<crate::launch::Unfinished>>),
    /// A component of fencer itself failed: a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl RunError {
    /// True when the caller's input is at fault (a plan or settings to edit), not fencer.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            RunError::Plan(_) | RunError::Target(_) | RunError::Backend(_) | RunError::Limit(_)
        )
    }
}
