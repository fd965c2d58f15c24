//! One running child: started in a process group of its own with stdin and stdout as pipes
//! and stderr passed through, greeted with a hello, frozen, thawed and killed as a whole group,
//! and reaped by a task that tells every waiting call how the child ended.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencer_harness::CallError;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use super::calls::{Answered, Calls, NoticeSink, Violation, read_replies, write_requests};
use super::command::ExecCommand;
use super::connection::on_background;
use super::error::ExecError;
use super::protocol::{
    CLIENT_PROTOCOL_VERSION, ClientHello, Hello, Outcome, PROTOCOL_VERSION, Request, Role,
};

/// How long a child that ended (or closed its stdout) is given to finish the other half, so
/// replies it wrote before exiting still reach their calls and its exit status is known.
const GRACE: Duration = Duration::from_secs(1);

/// A child that answered its hello. Dropping it kills the child's process group.
pub struct ExecChild {
    pid: u32,
    label: String,
    hello: Hello,
    calls: Arc<Calls>,
    /// Asks the reaper to kill the group, saying why; dropped, it asks too.
    kill: mpsc::UnboundedSender<String>,
    /// True once the child is reaped and every call settled.
    reaped: watch::Receiver<bool>,
    /// Shared with the reaper: whether the child's end is news (see [`Reaping::newsworthy`]).
    newsworthy: Arc<AtomicBool>,
}

impl std::fmt::Debug for ExecChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

impl ExecChild {
    /// Starts `command` (with `env` added to its environment) and waits up to `hello_timeout`
    /// for its hello: a lock or store child's when `client` is `None`, a client child's (told
    /// `client` in its hello) otherwise. Its tasks run on the runtime this is called on, which
    /// must outlive the child. The error is one line: the command could not start, or the child
    /// exited, broke the protocol, spoke another version or stayed silent first (it is killed
    /// then).
    pub async fn start(
        command: &ExecCommand,
        env: &[(String, String)],
        client: Option<ClientHello<'_>>,
        hello_timeout: Duration,
    ) -> Result<Self, ExecError> {
        let shown = command.shown();
        let mut child = Command::new(command.program())
            .args(command.args())
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: a pause freezes whatever it forked, and a terminal's Ctrl-C is
            // fencer's to handle (fencer then kills the group).
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| ExecError::Spawn {
                command: shown.clone(),
                source: Arc::new(error),
            })?;
        let pid = child.id().ok_or_else(|| ExecError::ExitedAtOnce {
            command: shown.clone(),
        })?;
        let label = format!("exec child `{shown}` (pid {pid})");
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(stdin), Some(stdout), Some(stderr)) => (stdin, stdout, stderr),
                _ => return Err(ExecError::NoPipes { child: label }),
            };
        let (calls, queue) = Calls::new(label.clone());
        tokio::spawn(write_requests(stdin, queue, Arc::clone(&calls)));
        let (read_result, read_done) = oneshot::channel();
        let reader_calls = Arc::clone(&calls);
        tokio::spawn(async move {
            let _ = read_result.send(read_replies(stdout, reader_calls).await);
        });
        let stderr_passed = tokio::spawn(pass_through(stderr, pid));
        let (kill, kill_requests) = mpsc::unbounded_channel();
        let (reaped_tx, reaped) = watch::channel(false);
        let newsworthy = Arc::new(AtomicBool::new(false));
        tokio::spawn(reap(
            Reaping {
                child,
                pid,
                label: label.clone(),
                calls: Arc::clone(&calls),
                read_done,
                newsworthy: Arc::clone(&newsworthy),
            },
            kill_requests,
            reaped_tx,
        ));
        let hello = match greet(&calls, &label, client, hello_timeout).await {
            Ok(hello) => {
                newsworthy.store(true, Ordering::Relaxed);
                hello
            }
            Err(why) => {
                // Killed and reaped before the error is returned, whatever state it is in.
                let _ = kill.send(why.to_string());
                let mut reaped = reaped;
                let _ = reaped.wait_for(|reaped| *reaped).await;
                return Err(match why {
                    ExecError::EndedBeforeHello { why, .. } => ExecError::EndedBeforeHello {
                        why,
                        last_line: last_stderr_line(stderr_passed).await,
                    },
                    other => other,
                });
            }
        };
        Ok(ExecChild {
            pid,
            label,
            hello,
            calls,
            kill,
            reaped,
            newsworthy,
        })
    }

    /// What the child said about itself.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Names the child (command and pid) in messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Sends the child's notices to `sink` from now on (a client child's, bound to the library
    /// of its worker); false if they go somewhere already.
    pub fn on_notice(&self, sink: NoticeSink) -> bool {
        self.calls.on_notice(sink)
    }

    /// Sends `request` and waits for its reply.
    pub async fn call(&self, request: &Request<'_>) -> Result<Answered, CallError> {
        self.calls.call(request).await
    }

    /// Why the child can no longer be called, once it cannot.
    pub fn ended(&self) -> Option<String> {
        self.calls.ended()
    }

    /// The child broke the protocol (`violation` says where): it is killed, since what it
    /// writes next cannot be trusted to mean what it says. Returns the error for the call that
    /// found it.
    pub fn broke(&self, violation: String) -> CallError {
        let why = format!("{} broke the protocol: {violation}", self.label);
        eprintln!("fencer: {why}; killing it");
        let _ = self.kill.send(why.clone());
        CallError::Unknown(why)
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to the child's process group; nothing to do once the
    /// child ended.
    pub async fn signal(&self, signal: &'static str) -> Result<(), ExecError> {
        if self.ended().is_some() {
            return Ok(());
        }
        on_background(signal_group(self.pid, signal)).await
    }

    /// Kills the process group (`why` is what waiting and later calls are told) and waits
    /// until it is reaped.
    pub async fn kill(&self, why: String) {
        let _ = self.kill.send(why);
        let mut reaped = self.reaped.clone();
        let _ = reaped.wait_for(|reaped| *reaped).await;
    }
}

impl Drop for ExecChild {
    fn drop(&mut self) {
        // The reaper kills the group when the kill channel closes, but fencer may exit before
        // it gets to: the group is killed here too, at once (the leader is not reaped yet, so
        // its process group id cannot have been reused). Fencer's own stop is no news.
        self.newsworthy.store(false, Ordering::Relaxed);
        if !*self.reaped.borrow() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.pid)])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The handshake: a lock or store child must answer hello with a version fencer speaks and at
/// least one role; a client child (`client` is what it is told) with protocol 2 and the client
/// role.
async fn greet(
    calls: &Calls,
    label: &str,
    client: Option<ClientHello<'_>>,
    timeout: Duration,
) -> Result<Hello, ExecError> {
    let as_client = client.is_some();
    let hello = Request::Hello {
        protocol: if as_client {
            CLIENT_PROTOCOL_VERSION
        } else {
            PROTOCOL_VERSION
        },
        client,
    };
    let answered = match tokio::time::timeout(timeout, calls.call(&hello)).await {
        Err(_elapsed) => {
            return Err(ExecError::HelloTimeout {
                child: label.to_string(),
                timeout,
            });
        }
        Ok(Err(error)) => {
            return Err(match calls.ended() {
                Some(why) => ExecError::EndedBeforeHello {
                    why,
                    last_line: None,
                },
                None => ExecError::HelloRefused {
                    child: label.to_string(),
                    error,
                },
            });
        }
        Ok(Ok(answered)) => answered,
    };
    match answered.outcome {
        Outcome::Hello(hello) if as_client && hello.protocol != CLIENT_PROTOCOL_VERSION => {
            Err(ExecError::NotAClient {
                child: label.to_string(),
                protocol: hello.protocol,
            })
        }
        Outcome::Hello(hello) if as_client && !hello.serves(Role::Client) => {
            Err(ExecError::NotServing {
                child: label.to_string(),
                role: Role::Client,
                served: hello.roles.iter().map(|role| role.name()).collect(),
            })
        }
        Outcome::Hello(hello)
            if ![PROTOCOL_VERSION, CLIENT_PROTOCOL_VERSION].contains(&hello.protocol) =>
        {
            Err(ExecError::OtherProtocol {
                child: label.to_string(),
                protocol: hello.protocol,
            })
        }
        Outcome::Hello(hello) if hello.roles.is_empty() => Err(ExecError::NoRoles {
            child: label.to_string(),
        }),
        Outcome::Hello(hello) => Ok(hello),
        other => Err(ExecError::NotHello {
            child: label.to_string(),
            found: other.name(),
            line: answered.line,
        }),
    }
}

/// What the reaper owns.
struct Reaping {
    child: Child,
    pid: u32,
    label: String,
    calls: Arc<Calls>,
    /// The reader's end: `Some(violation)`, or `None` at the end of stdout.
    read_done: oneshot::Receiver<Option<Violation>>,
    /// Whether the child's end is worth a line of its own: only between its hello (before, it
    /// is the error [`ExecChild::start`] returns) and fencer stopping it.
    newsworthy: Arc<AtomicBool>,
}

impl Reaping {
    /// Says on stderr how the child ended (`why`) and what fencer does about it, once the run
    /// relies on it.
    fn notice(&self, why: &str, then: &str) {
        if self.newsworthy.load(Ordering::Relaxed) {
            eprintln!("fencer: {why}; {then}");
        }
    }
}

/// Waits for the child to exit, to be asked to kill it, or for its stdout to end or break;
/// then settles every call with why the child is gone.
async fn reap(
    mut reaping: Reaping,
    mut kill_requests: mpsc::UnboundedReceiver<String>,
    reaped: watch::Sender<bool>,
) {
    let label = reaping.label.clone();
    let why = tokio::select! {
        biased;
        status = reaping.child.wait() => {
            let _ = tokio::time::timeout(GRACE, &mut reaping.read_done).await;
            let why = format!("{label} exited ({})", shown_status(status));
            reaping.notice(&why, "it is not started again");
            why
        }
        request = kill_requests.recv() => {
            kill_group(&mut reaping).await;
            let _ = tokio::time::timeout(GRACE, &mut reaping.read_done).await;
            request.unwrap_or_else(|| format!("{label} was stopped"))
        }
        read = &mut reaping.read_done => match read {
            Ok(Some(violation)) => {
                let why = format!("{label} broke the protocol: {violation}");
                reaping.notice(&why, "killing it");
                kill_group(&mut reaping).await;
                why
            }
            _ => match tokio::time::timeout(GRACE, reaping.child.wait()).await {
                Ok(status) => {
                    let why = format!("{label} exited ({})", shown_status(status));
                    reaping.notice(&why, "it is not started again");
                    why
                }
                Err(_elapsed) => {
                    let why = format!("{label} closed its stdout");
                    reaping.notice(&why, "killing it");
                    kill_group(&mut reaping).await;
                    why
                }
            },
        },
    };
    reaping.calls.end(&why);
    let _ = reaped.send(true);
}

fn shown_status(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(status) => status.to_string(),
        Err(error) => format!("status unknown: {error}"),
    }
}

/// SIGKILL to the whole group (before the leader is reaped, so its id is still the group's),
/// then the leader reaped.
async fn kill_group(reaping: &mut Reaping) {
    let _ = signal_group(reaping.pid, "-KILL").await;
    let _ = reaping.child.start_kill();
    let _ = reaping.child.wait().await;
}

/// `kill SIGNAL -- -PGID`: every process of the child's group.
async fn signal_group(pid: u32, signal: &'static str) -> Result<(), ExecError> {
    let status = Command::new("kill")
        .args([signal, "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|error| ExecError::SignalUnsent {
            signal,
            source: Arc::new(error),
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(ExecError::SignalFailed {
            signal,
            pid,
            status,
        })
    }
}

/// Copies the child's stderr to fencer's, a line at a time, each marked with its pid. Returns
/// the last line that held more than white space, at the end of the stream.
async fn pass_through(stderr: impl AsyncRead + Unpin, pid: u32) -> Option<String> {
    let mut lines = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut last = None;
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return last,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                eprintln!("exec[{pid}]: {text}");
                let said = text.trim();
                if !said.is_empty() {
                    last = Some(said.to_string());
                }
            }
        }
    }
}

/// The last line a child that ended before its hello wrote on stderr: most often why it
/// could not start (a library not installed, an import that failed), which then belongs in
/// fencer's one-line error. Its stderr ends with its process group, killed by now; a
/// grandchild that kept the pipe open is not waited for longer than [`GRACE`].
async fn last_stderr_line(passed: tokio::task::JoinHandle<Option<String>>) -> Option<String> {
    tokio::time::timeout(GRACE, passed).await.ok()?.ok()?
}
