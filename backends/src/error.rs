//! Why a backend could not be built or reached, before any call of a run was made.

use fencer_harness::CallError;

/// A backend that cannot be used: its address is wrong, or its server does not answer. The
/// message says what was expected and where (URLs shown with their password hidden).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The URL names no backend this build has, or one of its parts is malformed.
    #[error("{0}")]
    BadUrl(String),
    /// The server could not be reached, refused the login, or did not answer in time.
    #[error("{0}")]
    Unreachable(String),
}

impl From<CallError> for BackendError {
    /// A failed connection or probe: whether it was applied does not matter before a run.
    fn from(error: CallError) -> BackendError {
        match error {
            CallError::NotApplied(why) | CallError::Unknown(why) => BackendError::Unreachable(why),
        }
    }
}
