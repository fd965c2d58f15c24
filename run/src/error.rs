//! Why a run could not produce a history, in either tier.

/// Why a plan could not be run to a history. Bad input is the caller's to fix (exit 254);
/// anything else is fencer's own failure (exit 255).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan cannot run (bad settings or fault targets): the message says what was expected.
    #[error("plan: {0}")]
    Plan(String),
    /// A component of fencer itself failed: a bug.
    #[error("internal error: {0}")]
    Internal(String),
}
