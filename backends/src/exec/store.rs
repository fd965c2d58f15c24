//! [`FencedStore`] over an exec child, with its applied log when the child offers one.

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{AppliedWrite, CallError, FencedStore, FencingToken, ReadValue, Written};

use super::connection::ExecConnection;
use super::protocol::{APPLIED_LOG, Outcome, Request, Role};

/// The store role of an exec child.
pub struct ExecStore {
    connection: Arc<ExecConnection>,
}

impl ExecStore {
    /// The fenced store the child of `connection` serves.
    pub fn new(connection: Arc<ExecConnection>) -> ExecStore {
        ExecStore { connection }
    }
}

#[async_trait]
impl FencedStore for ExecStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let request = Request::Write {
            key,
            fencing_token,
            write_id,
            value,
        };
        let (answered, child) = self.connection.call(Role::Store, &request).await?;
        match answered.outcome {
            Outcome::Applied => Ok(Written::Applied),
            Outcome::Rejected { current_token } => Ok(Written::Rejected { current_token }),
            other => Err(child.broke(super::mismatch(
                request.op(),
                &other,
                answered.line,
                "applied or rejected",
            ))),
        }
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let request = Request::Read { key };
        let (answered, child) = self.connection.call(Role::Store, &request).await?;
        match answered.outcome {
            Outcome::Value {
                fencing_token,
                write_id,
                value,
            } => Ok(ReadValue {
                fencing_token,
                write_id,
                value,
            }),
            other => Err(child.broke(super::mismatch(
                request.op(),
                &other,
                answered.line,
                "value",
            ))),
        }
    }

    /// The child's applied log if its hello offered one; `None` (checkers fall back to client
    /// replies) if it did not, or if asking failed, which is said on stderr.
    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let child = self.connection.child().await.ok()?;
        if !child.hello().offers(APPLIED_LOG) {
            return None;
        }
        let request = Request::AppliedLog;
        let answered = match self.connection.call(Role::Store, &request).await {
            Ok((answered, _)) => answered,
            Err(error) => {
                eprintln!("fencer: no applied log from {}: {error}", child.label());
                return None;
            }
        };
        match answered.outcome {
            Outcome::AppliedLog { writes } => {
                Some(writes.into_iter().map(AppliedWrite::from).collect())
            }
            other => {
                child.broke(super::mismatch(
                    request.op(),
                    &other,
                    answered.line,
                    APPLIED_LOG,
                ));
                None
            }
        }
    }
}
