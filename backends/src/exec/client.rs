//! The client role (protocol 2): a worker's lock client library run as a child of its own,
//! talking to the lock service itself. fencer asks it to acquire, check, release and cancel
//! and records its answers as the worker's calls; the child tells fencer unprompted when its
//! library learns a lease is lost or renewed, or sees the lock service refuse the library's own
//! renewal, and those notices are recorded as they arrive.
//!
//! [`ExecClient`] is one worker's child; [`ExecLibrary`] is the [`LockLibrary`] its worker
//! calls. The server address the child is told is whatever the caller passes: the real tier
//! hands it a proxy of that worker's own, so network faults reach exactly its traffic.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use fencer_harness::{
    CallError, Lease, LibraryContext, LockClient, LockLibrary, Owned, OwnerToken, roles,
};
use tokio::sync::oneshot;

use super::child::ExecChild;
use super::command::ExecCommand;
use super::connection::{hello_timeout, on_background};
use super::error::ExecError;
use super::protocol::{ClientHello, NoticeKind, Outcome, Request, ttl_ms};

/// What a client child is started with: the worker it serves, where the lock service is, and
/// what its environment gets besides fencer's own (libfaketime's variables, when its clock is
/// to be stepped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    /// The worker (`w0`).
    pub worker: String,
    /// The lock service's URL as the child is to connect to it.
    pub server: String,
    /// Variables added to the child's environment.
    pub env: Vec<(String, String)>,
}

/// One worker's client child, greeted and running until dropped (which kills its process
/// group).
pub struct ExecClient {
    child: ExecChild,
    /// Pauses under way: a worker pause and a pause aimed at the child itself may overlap,
    /// and the child thaws only when the last one ends.
    pauses: Mutex<u32>,
}

impl std::fmt::Debug for ExecClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.child.label())
    }
}

impl ExecClient {
    /// Starts `command_line` (what follows `exec:`) for `spec` and greets it as a client: it
    /// must answer protocol 2 with the client role, within the hello timeout. The error is one
    /// line, for before the run.
    pub async fn start(command_line: &str, spec: ClientSpec) -> Result<ExecClient, ExecError> {
        let command = ExecCommand::parse(command_line)?;
        let timeout = hello_timeout()?;
        let child = on_background(async move {
            let hello = ClientHello {
                role: "client",
                worker: &spec.worker,
                server: &spec.server,
            };
            ExecChild::start(&command, &spec.env, Some(hello), timeout).await
        })
        .await?;
        Ok(ExecClient {
            child,
            pauses: Mutex::new(0),
        })
    }

    /// Names the child (command and pid) in messages.
    pub fn label(&self) -> &str {
        self.child.label()
    }

    /// Freezes the child's process group (SIGSTOP); pauses nest.
    pub async fn pause(&self) -> Result<(), ExecError> {
        let first = {
            let mut pauses = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
            *pauses += 1;
            *pauses == 1
        };
        if first {
            self.child.signal("-STOP").await?;
        }
        Ok(())
    }

    /// Ends one pause; the last one thaws the child (SIGCONT).
    pub async fn resume(&self) -> Result<(), ExecError> {
        let last = {
            let mut pauses = self.pauses.lock().unwrap_or_else(|p| p.into_inner());
            *pauses = pauses.saturating_sub(1);
            *pauses == 0
        };
        if last {
            self.child.signal("-CONT").await?;
        }
        Ok(())
    }
}

/// What a lease of an [`ExecLibrary`] keeps: the owner the child named for it, which its
/// check, release and cancel name again.
struct ChildLease {
    owner: String,
}

/// The [`LockLibrary`] of one worker whose library is a client child: every call is one
/// request, every reply checked to be one the request allows (anything else is a protocol
/// error: the child is killed, the call is `unknown`).
pub struct ExecLibrary {
    client: Arc<ExecClient>,
    cx: LibraryContext,
    /// Held while a late grant is given back: the releases are recorded as one process
    /// (`wN:give-back`), which has one call open at a time.
    giving_back: Arc<tokio::sync::Mutex<()>>,
}

impl ExecLibrary {
    /// The library of the worker of `cx`, over its child `client`, whose notices are recorded
    /// for that worker from now on. A child already bound to another worker's library is
    /// refused: its notices would be recorded for the wrong one.
    pub fn new(client: Arc<ExecClient>, cx: &LibraryContext) -> Result<ExecLibrary, ExecError> {
        let notices = cx.clone();
        let bound = client
            .child
            .on_notice(Arc::new(move |kind, owner, message| match kind {
                NoticeKind::Lost => notices.notify_lost(
                    owner,
                    message.unwrap_or("the client library says the lease is lost"),
                ),
                NoticeKind::Renewed => notices.notify_renewed(owner),
                NoticeKind::RenewRefused => notices.notify_renew_refused(
                    owner,
                    message.unwrap_or("the client library says its renewal was refused"),
                ),
            }));
        if !bound {
            return Err(ExecError::Rebound {
                child: client.label().to_string(),
            });
        }
        Ok(ExecLibrary {
            client,
            cx: cx.clone(),
            giving_back: Arc::default(),
        })
    }

    /// The owner the child named for `lease`, or why the lease is not one of this library's.
    fn named(lease: &Lease) -> Result<&str, CallError> {
        lease
            .guard
            .as_ref()
            .and_then(|guard| guard.downcast_ref::<ChildLease>())
            .map(|lease| lease.owner.as_str())
            .ok_or_else(|| CallError::NotApplied("not a lease of this exec client".into()))
    }

    fn child(&self) -> &ExecChild {
        &self.client.child
    }

    /// Asks the child to release the lease it holds as `name`.
    async fn release_named(&self, name: String) -> Result<Owned, CallError> {
        let request = Request::Release {
            lock: &self.cx.settings().lock,
            owner: name,
        };
        let answered = self.child().call(&request).await?;
        match answered.outcome {
            Outcome::Done => Ok(Owned::Done),
            Outcome::NotOwner => Ok(Owned::NotOwner),
            other => Err(self.broke("release", &other, answered.line, "done or not-owner")),
        }
    }

    /// The protocol error of a reply that cannot answer `op`: the child is killed.
    fn broke(&self, op: &str, outcome: &Outcome, line: u64, expected: &str) -> CallError {
        self.child()
            .broke(super::mismatch(op, outcome, line, expected))
    }
}

#[async_trait]
impl LockLibrary for ExecLibrary {
    /// Asks the child to acquire, from a task of the worker's library: when the worker stops
    /// waiting (its acquire recorded `info`) and the child's library is granted the lock after
    /// all, the task gives the lease back, a release recorded as `wN:give-back`, as a caller
    /// that gave up on an acquire must, or the child would hold the lock for nobody (a
    /// library that keeps a session or a watchdog alive holds it to the end of the run).
    async fn acquire(
        &self,
        _lock: &LockClient,
        owner: OwnerToken,
    ) -> Result<Option<Lease>, CallError> {
        let settings = self.cx.settings();
        let (answer, answered) = oneshot::channel();
        let library = ExecLibrary {
            client: Arc::clone(&self.client),
            cx: self.cx.clone(),
            giving_back: Arc::clone(&self.giving_back),
        };
        let give_back = self.cx.task_client(roles::GIVE_BACK_TASK);
        self.cx.spawn(async move {
            let lock = &library.cx.settings().lock;
            let request = Request::Acquire {
                lock,
                owner: owner.to_string(),
                ttl_ms: ttl_ms(library.cx.settings().ttl),
            };
            let reply = library.child().call(&request).await;
            let Err(Ok(late)) = answer.send(reply) else {
                return;
            };
            if let Outcome::Acquired { owner: name, .. } = late.outcome {
                let _one_at_a_time = library.giving_back.lock().await;
                let _ = give_back
                    .process()
                    .library_release(lock, owner, library.release_named(name))
                    .await;
            }
        });
        let named = Mutex::new(None);
        let granted = self
            .cx
            .process()
            .library_acquire(&settings.lock, owner, settings.ttl, async {
                let answered = answered.await.unwrap_or_else(|_| {
                    Err(CallError::Unknown(format!(
                        "{}: the acquire's task ended unanswered",
                        self.client.label()
                    )))
                })?;
                match answered.outcome {
                    Outcome::Acquired {
                        owner: name,
                        fencing_token,
                    } => {
                        *named.lock().unwrap_or_else(|p| p.into_inner()) = Some(name);
                        Ok(Some(fencing_token))
                    }
                    Outcome::Busy => Ok(None),
                    other => Err(self.broke("acquire", &other, answered.line, "acquired or busy")),
                }
            })
            .await?;
        let named = named.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok(match (granted, named) {
            (Some(fencing_token), Some(owner_name)) => {
                Some(Lease::new(owner, fencing_token).with_guard(ChildLease { owner: owner_name }))
            }
            _ => None,
        })
    }

    async fn check(&self, _lock: &LockClient, lease: &Lease) -> Result<bool, CallError> {
        let request = Request::Check {
            lock: &self.cx.settings().lock,
            owner: ExecLibrary::named(lease)?,
        };
        let answered = self.child().call(&request).await?;
        match answered.outcome {
            Outcome::Held => Ok(true),
            Outcome::NotHeld => Ok(false),
            other => Err(self.broke("check", &other, answered.line, "held or not-held")),
        }
    }

    async fn release(&self, _lock: &LockClient, lease: Lease) -> Result<Owned, CallError> {
        let name = ExecLibrary::named(&lease)?.to_string();
        self.cx
            .process()
            .library_release(
                &self.cx.settings().lock,
                lease.owner,
                self.release_named(name),
            )
            .await
    }

    /// Tells the child to forget the lease without releasing it, and waits a call timeout for
    /// its `done`; a child that does not answer in time keeps whatever it does, which the
    /// history's later notices show.
    async fn cancel(&self, lease: Lease) {
        let Ok(owner) = ExecLibrary::named(&lease) else {
            return;
        };
        let request = Request::Cancel {
            lock: &self.cx.settings().lock,
            owner,
        };
        let answered = fencer_harness::time::timeout(
            self.cx.settings().call_timeout,
            self.child().call(&request),
        )
        .await;
        if let Ok(Ok(answered)) = answered
            && answered.outcome != Outcome::Done
        {
            self.broke("cancel", &answered.outcome, answered.line, "done");
        }
    }
}
