//! [`LockService`] over an exec child: each call is one request, each reply checked to be one
//! its request allows; with its lock log when the child offers one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{
    Acquired, CallError, ExpiryRule, LockLogEntry, LockService, Owned, OwnerToken,
};

use super::connection::ExecConnection;
use super::protocol::{LOCK_LOG, Outcome, Request, Role, ttl_ms};

/// The lock role of an exec child.
pub struct ExecLock {
    connection: Arc<ExecConnection>,
    /// The boundary rule the child's hello stated, learnt when its lock log is read.
    expiry: Mutex<ExpiryRule>,
}

impl ExecLock {
    /// The lock service the child of `connection` serves.
    pub fn new(connection: Arc<ExecConnection>) -> ExecLock {
        ExecLock {
            connection,
            expiry: Mutex::new(ExpiryRule::ENDS_AT_EXPIRY),
        }
    }

    async fn owned(&self, request: Request<'_>) -> Result<Owned, CallError> {
        let op = request.op();
        let (answered, child) = self.connection.call(Role::Lock, &request).await?;
        match answered.outcome {
            Outcome::Done => Ok(Owned::Done),
            Outcome::NotOwner => Ok(Owned::NotOwner),
            other => Err(child.broke(super::mismatch(
                op,
                &other,
                answered.line,
                "done or not-owner",
            ))),
        }
    }
}

#[async_trait]
impl LockService for ExecLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let request = Request::Acquire {
            lock,
            owner: owner.to_string(),
            ttl_ms: ttl_ms(ttl),
        };
        let (answered, child) = self.connection.call(Role::Lock, &request).await?;
        match answered.outcome {
            Outcome::Granted { fencing_token } => Ok(Acquired::Granted { fencing_token }),
            Outcome::Busy => Ok(Acquired::Busy),
            other => Err(child.broke(super::mismatch(
                request.op(),
                &other,
                answered.line,
                "granted or busy",
            ))),
        }
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        self.owned(Request::Renew {
            lock,
            owner: owner.to_string(),
            ttl_ms: ttl_ms(ttl),
        })
        .await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.owned(Request::Release {
            lock,
            owner: owner.to_string(),
        })
        .await
    }

    /// The child's lock log if its hello offered one, without its `expire` entries (see
    /// [`super::protocol::LoggedLockChange::into_entry`]); `None` (checkers fall back to
    /// client replies) if it did not, or if asking failed, which is said on stderr. An entry
    /// fencer cannot read is a protocol error: the log is then unusable, never guessed at.
    async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
        let child = self.connection.child().await.ok()?;
        if !child.hello().offers(LOCK_LOG) {
            return None;
        }
        if let Some(expiry) = child.hello().lock_log_expiry {
            *self
                .expiry
                .lock()
                .unwrap_or_else(|poison| poison.into_inner()) = expiry.rule();
        }
        let request = Request::LockLog;
        let answered = match self.connection.call(Role::Lock, &request).await {
            Ok((answered, _)) => answered,
            Err(error) => {
                eprintln!("fencer: no lock log from {}: {error}", child.label());
                return None;
            }
        };
        let entries = match answered.outcome {
            Outcome::LockLog { entries } => entries,
            other => {
                child.broke(super::mismatch(
                    request.op(),
                    &other,
                    answered.line,
                    LOCK_LOG,
                ));
                return None;
            }
        };
        let mut log = Vec::with_capacity(entries.len());
        for entry in entries {
            match entry.into_entry() {
                Ok(Some(entry)) => log.push(entry),
                Ok(None) => {}
                Err(why) => {
                    child.broke(format!(
                        "stdout line {}: lock-log entry: {why}",
                        answered.line
                    ));
                    return None;
                }
            }
        }
        Some(log)
    }

    /// The rule the child's hello states (`lock_log_expiry`), learnt with its log; fencer's
    /// own when it states none.
    fn lock_log_expiry(&self) -> ExpiryRule {
        *self
            .expiry
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}
