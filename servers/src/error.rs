//! Why a server fencer starts itself could not be started, or could not take a fault.

/// A private server that failed. The message says what was expected and what to install.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The server's program or a library it needs is not installed: the message names the
    /// Debian package.
    #[error("{0}")]
    NotInstalled(String),
    /// A `private:` URL names no server fencer can start.
    #[error("{0}")]
    BadUrl(String),
    /// The server did not come up, or did not take a signal, a restart or a clock step.
    #[error("{0}")]
    Failed(String),
}

impl From<fencer_backends::BackendError> for ServerError {
    /// fencer's client could not reach the server it started.
    fn from(error: fencer_backends::BackendError) -> ServerError {
        ServerError::Failed(error.to_string())
    }
}
