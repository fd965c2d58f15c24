//! The calls in flight to one child: their ids, the pipe in (one writer task, so request lines
//! never interleave or tear even when a caller gives up half-way), the pipe out (one reader
//! task matching replies to requests by id), and what each waiting call learns when the child
//! goes away: `unknown` if any of its request reached the pipe, `not-applied` if none did.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use fencer_harness::{CallError, OwnerToken};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::protocol::{BadReply, Line, NoticeKind, Outcome, Request, parse_line};

/// Where a client child's notices go as they arrive: what happened, to whose lease (fencer's
/// owner token for it), in the library's words.
pub type NoticeSink = Arc<dyn Fn(NoticeKind, OwnerToken, Option<&str>) + Send + Sync>;

/// A request line waiting for the writer task, with its id.
pub type Queued = (u64, String);

/// A reply that answered a call, with where it came from (for protocol errors found by the
/// caller, who alone knows which results its request allows).
#[derive(Debug)]
pub struct Answered {
    /// What the child said.
    pub outcome: Outcome,
    /// The stdout line it was on, from 1.
    pub line: u64,
}

/// The calls to one child, shared by its callers, its writer and its reader.
pub struct Calls {
    /// Names the child in messages.
    label: String,
    state: Mutex<State>,
    /// Where notices go, once a client child's library is bound to its worker.
    notices: OnceLock<NoticeSink>,
}

struct State {
    next_id: u64,
    waiting: BTreeMap<u64, Waiting>,
    /// Sent requests whose caller stopped waiting, with the owner token an acquire among them
    /// carried: their replies are expected, read for the owner they name, and dropped.
    abandoned: BTreeMap<u64, Option<OwnerToken>>,
    /// The owners a client child named in its `acquired` replies, each with the owner token
    /// fencer sent with that acquire: what its notices are checked against and recorded under.
    owners: BTreeMap<String, OwnerToken>,
    /// Why the child can no longer be called, once it cannot.
    ended: Option<String>,
    /// The writer task's queue; dropped when the child ends, so the writer stops too.
    requests: Option<mpsc::UnboundedSender<Queued>>,
}

struct Waiting {
    /// Whether the writer has started putting the request into the pipe.
    sent: bool,
    /// The owner token an acquire carried.
    owner: Option<OwnerToken>,
    reply: oneshot::Sender<Result<Answered, CallError>>,
}

impl Calls {
    /// No calls yet; the receiver is the writer task's queue ([`write_requests`]).
    pub fn new(label: String) -> (Arc<Calls>, mpsc::UnboundedReceiver<Queued>) {
        let (requests, queue) = mpsc::unbounded_channel();
        let calls = Calls {
            label,
            state: Mutex::new(State {
                next_id: 0,
                waiting: BTreeMap::new(),
                abandoned: BTreeMap::new(),
                owners: BTreeMap::new(),
                ended: None,
                requests: Some(requests),
            }),
            notices: OnceLock::new(),
        };
        (Arc::new(calls), queue)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Sends `request` with the next id and waits for its reply, however long that takes (the
    /// caller's own timeout decides when to stop caring).
    pub async fn call(&self, request: &Request<'_>) -> Result<Answered, CallError> {
        let (reply, replied) = oneshot::channel();
        let id = {
            let mut state = self.state();
            if let Some(why) = &state.ended {
                return Err(CallError::NotApplied(why.clone()));
            }
            let id = state.next_id;
            let queued = state
                .requests
                .as_ref()
                .is_some_and(|requests| requests.send((id, request.line(id))).is_ok());
            if !queued {
                return Err(CallError::NotApplied(format!(
                    "{}: its stdin is closed",
                    self.label
                )));
            }
            // Queued under the lock, so the pipe carries requests in id order.
            state.next_id += 1;
            let owner = match request {
                Request::Acquire { owner, .. } => owner.parse().ok(),
                _ => None,
            };
            state.waiting.insert(
                id,
                Waiting {
                    sent: false,
                    owner,
                    reply,
                },
            );
            id
        };
        let mut waiting = Abandon {
            calls: self,
            id: Some(id),
        };
        let answer = replied.await;
        waiting.id = None;
        answer.unwrap_or_else(|_| {
            Err(CallError::Unknown(format!(
                "{}: the call was dropped unanswered",
                self.label
            )))
        })
    }

    /// Sends the child's notices to `sink` from now on; false if a sink was set already.
    pub fn on_notice(&self, sink: NoticeSink) -> bool {
        self.notices.set(sink).is_ok()
    }

    /// Why the child can no longer be called, if it cannot.
    pub fn ended(&self) -> Option<String> {
        self.state().ended.clone()
    }

    /// The child is gone (`why`): every waiting call learns it, and every later one is refused.
    pub fn end(&self, why: &str) {
        let mut state = self.state();
        if state.ended.is_some() {
            return;
        }
        state.ended = Some(why.to_string());
        state.requests = None;
        for (_, waiting) in std::mem::take(&mut state.waiting) {
            let error = if waiting.sent {
                CallError::Unknown(format!("{why}; the request had been sent"))
            } else {
                CallError::NotApplied(format!("{why}; the request was never sent"))
            };
            let _ = waiting.reply.send(Err(error));
        }
    }

    /// Marks request `id` as going into the pipe; false if nobody waits for it any more (its
    /// caller gave up or the child ended), so it is not written at all.
    fn start_writing(&self, id: u64) -> bool {
        match self.state().waiting.get_mut(&id) {
            Some(waiting) => {
                waiting.sent = true;
                true
            }
            None => false,
        }
    }

    /// Request `id` could not be written and no byte of it reached the pipe.
    fn not_written(&self, id: u64, why: String) {
        if let Some(waiting) = self.state().waiting.remove(&id) {
            let _ = waiting.reply.send(Err(CallError::NotApplied(why)));
        }
    }

    /// Hands stdout line `number` (`text`, without its newline) to the call it answers, or a
    /// notice to the sink; the error is the protocol error it is.
    fn deliver(&self, number: u64, text: &str) -> Result<(), Violation> {
        let line = parse_line(text).map_err(|why| Violation::BadReply {
            number,
            shown: shown_line(text),
            why,
        })?;
        let reply = match line {
            Line::Reply(reply) => reply,
            Line::Notice(notice) => {
                let unexpected = |why: &str| Violation::BadNotice {
                    number,
                    shown: shown_line(text),
                    why: why.to_string(),
                };
                // A notice names a lease an `acquired` reply named first; one that arrives
                // before any (even before the child is bound to its worker) names none.
                let Some(owner) = self.state().owners.get(&notice.owner).copied() else {
                    return Err(unexpected(
                        "no `acquired` reply of this child named that owner",
                    ));
                };
                let Some(sink) = self.notices.get() else {
                    return Err(unexpected("only a client child sends notices"));
                };
                sink(notice.notice, owner, notice.message.as_deref());
                return Ok(());
            }
        };
        let mut state = self.state();
        let (waiting, owner) = match state.waiting.remove(&reply.id) {
            Some(waiting) => {
                let owner = waiting.owner;
                (Some(waiting), owner)
            }
            None => match state.abandoned.remove(&reply.id) {
                Some(owner) => (None, owner),
                None => {
                    return Err(Violation::UnknownId {
                        number,
                        shown: shown_line(text),
                        id: reply.id,
                    });
                }
            },
        };
        // Known before the caller hears of the grant, so a notice right behind it is too.
        if let (Ok(Outcome::Acquired { owner: named, .. }), Some(owner)) = (&reply.answer, owner) {
            state.owners.insert(named.clone(), owner);
        }
        drop(state);
        if let Some(waiting) = waiting {
            let answer = reply.answer.map(|outcome| Answered {
                outcome,
                line: number,
            });
            let _ = waiting.reply.send(answer);
        }
        Ok(())
    }
}

/// How a child's stdout broke the protocol: where, and what is wrong there. The child is
/// killed for it, since what it writes next cannot be trusted to mean what it says.
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// A line that is not a reply.
    #[error(
        "stdout line {number} ({shown}): {why} (stdout carries replies only; write logs to \
         stderr)"
    )]
    BadReply {
        /// The line's number, from 1.
        number: u64,
        /// The line as shown in messages ([`shown_line`]).
        shown: String,
        /// What is wrong with it.
        why: BadReply,
    },
    /// A reply to no request that is waiting.
    #[error(
        "stdout line {number} ({shown}): no request with id {id} is waiting (answered twice, \
         or never sent)"
    )]
    UnknownId {
        /// The line's number, from 1.
        number: u64,
        /// The line as shown in messages ([`shown_line`]).
        shown: String,
        /// The id it answers.
        id: u64,
    },
    /// A notice fencer cannot record: from a child that is no client, or about a lease the
    /// child never reported acquiring.
    #[error("stdout line {number} ({shown}): {why}")]
    BadNotice {
        /// The line's number, from 1.
        number: u64,
        /// The line as shown in messages ([`shown_line`]).
        shown: String,
        /// What is wrong with it.
        why: String,
    },
    /// A line that is not UTF-8.
    #[error("stdout line {number} is not UTF-8")]
    NotUtf8 {
        /// The line's number, from 1.
        number: u64,
    },
    /// Reading stdout failed.
    #[error("cannot read its stdout: {0}")]
    Unreadable(std::io::Error),
}

/// Marks a call whose caller stopped waiting before its reply came.
struct Abandon<'a> {
    calls: &'a Calls,
    id: Option<u64>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut state = self.calls.state();
        if let Some(waiting) = state.waiting.remove(&id)
            && waiting.sent
        {
            state.abandoned.insert(id, waiting.owner);
        }
    }
}

/// A stdout line as shown in a message: at most 200 characters.
fn shown_line(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("`{}…`", &text[..cut]),
        None => format!("`{text}`"),
    }
}

/// Writes queued requests to the child's stdin, each line whole, until the queue closes (the
/// child's handle was dropped). A request whose write fails before its first byte is
/// `not-applied`; one that was partly written stays waiting, for the child's end to settle.
pub async fn write_requests(
    mut stdin: impl AsyncWrite + Unpin,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    calls: Arc<Calls>,
) {
    while let Some((id, line)) = queue.recv().await {
        if !calls.start_writing(id) {
            continue;
        }
        let bytes = line.as_bytes();
        let mut written = 0;
        while written < bytes.len() {
            match stdin.write(&bytes[written..]).await {
                Ok(0) => break,
                Ok(count) => written += count,
                Err(error) if written == 0 => {
                    calls.not_written(
                        id,
                        format!("{}: cannot write to its stdin: {error}", calls.label),
                    );
                    break;
                }
                Err(_) => break,
            }
        }
    }
}

/// Reads replies from the child's stdout and delivers them, until the end of the stream
/// (`None`) or the first protocol error (`Some(what is wrong)`).
pub async fn read_replies(stdout: impl AsyncRead + Unpin, calls: Arc<Calls>) -> Option<Violation> {
    let mut stdout = BufReader::new(stdout);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        match stdout.read_until(b'\n', &mut line).await {
            Ok(0) => return None,
            Ok(_) => {}
            Err(error) => return Some(Violation::Unreadable(error)),
        }
        number += 1;
        let Ok(text) = std::str::from_utf8(&line) else {
            return Some(Violation::NotUtf8 { number });
        };
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        if let Err(violation) = calls.deliver(number, text) {
            return Some(violation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::runtime::real_runtime;
    use tokio::io::AsyncReadExt;

    const READ: Request<'static> = Request::Read { key: "k" };

    /// Calls whose requests go to an in-memory pipe instead of a child; returns the calls, the
    /// child's end of stdin, and the writer of "stdout" with the reader's verdict.
    fn piped() -> (
        Arc<Calls>,
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<Option<Violation>>,
    ) {
        let (calls, queue) = Calls::new("child".into());
        let (stdin, child_stdin) = tokio::io::duplex(4096);
        let (child_stdout, stdout) = tokio::io::duplex(4096);
        tokio::spawn(write_requests(stdin, queue, Arc::clone(&calls)));
        let reader = tokio::spawn(read_replies(stdout, Arc::clone(&calls)));
        (calls, child_stdin, child_stdout, reader)
    }

    #[test]
    fn replies_out_of_order_reach_their_calls_and_strays_are_protocol_errors() {
        real_runtime().unwrap().block_on(async {
            let (calls, mut child_stdin, mut child_stdout, reader) = piped();
            let first = tokio::spawn({
                let calls = Arc::clone(&calls);
                async move { calls.call(&Request::Read { key: "a" }).await }
            });
            let second = tokio::spawn({
                let calls = Arc::clone(&calls);
                async move { calls.call(&Request::Read { key: "b" }).await }
            });
            let mut requests = vec![0; 256];
            let mut seen = String::new();
            while seen.matches('\n').count() < 2 {
                let count = child_stdin.read(&mut requests).await.unwrap();
                seen.push_str(std::str::from_utf8(&requests[..count]).unwrap());
            }
            assert!(seen.starts_with("{\"id\":0,"), "ids in order: {seen}");
            let value = |token: u64| {
                format!("\"result\":\"value\",\"fencing_token\":{token},\"write_id\":null,\"value\":null}}\n")
            };
            let (a_id, b_id) = if seen.starts_with("{\"id\":0,\"op\":\"read\",\"key\":\"a\"") {
                (0, 1)
            } else {
                (1, 0)
            };
            child_stdout
                .write_all(format!("{{\"id\":{b_id},{}", value(2)).as_bytes())
                .await
                .unwrap();
            child_stdout
                .write_all(format!("{{\"id\":{a_id},{}", value(1)).as_bytes())
                .await
                .unwrap();
            let token = |answer: Result<Answered, CallError>| match answer.unwrap().outcome {
                Outcome::Value { fencing_token, .. } => fencing_token,
                other => panic!("{other:?}"),
            };
            assert_eq!(token(first.await.unwrap()), 1);
            assert_eq!(token(second.await.unwrap()), 2);
            child_stdout
                .write_all(format!("{{\"id\":{a_id},{}", value(1)).as_bytes())
                .await
                .unwrap();
            let violation = reader.await.unwrap().unwrap().to_string();
            assert!(
                violation.starts_with("stdout line 3 (`{\"id\":"),
                "{violation}"
            );
            assert!(violation.contains("answered twice"), "{violation}");
        });
    }

    #[test]
    fn a_garbage_line_is_named_and_ending_settles_sent_and_unsent_calls_differently() {
        real_runtime().unwrap().block_on(async {
            let (calls, mut child_stdin, mut child_stdout, reader) = piped();
            let sent = tokio::spawn({
                let calls = Arc::clone(&calls);
                async move { calls.call(&READ).await }
            });
            let mut buffer = [0; 64];
            assert!(child_stdin.read(&mut buffer).await.unwrap() > 0);
            child_stdout.write_all(b"debug: starting\n").await.unwrap();
            let violation = reader.await.unwrap().unwrap().to_string();
            assert!(
                violation.starts_with("stdout line 1 (`debug: starting`): not a JSON object"),
                "{violation}"
            );
            assert!(violation.contains("write logs to stderr"), "{violation}");
            calls.end("the child broke the protocol");
            let Err(CallError::Unknown(why)) = sent.await.unwrap() else {
                panic!("a sent call's outcome is unknown")
            };
            assert!(why.contains("had been sent"), "{why}");
            let Err(CallError::NotApplied(why)) = calls.call(&READ).await else {
                panic!("a later call is not applied")
            };
            assert_eq!(why, "the child broke the protocol");
        });
    }

    #[test]
    fn a_closed_stdin_refuses_the_request_as_not_applied() {
        real_runtime().unwrap().block_on(async {
            let (calls, child_stdin, _child_stdout, _reader) = piped();
            drop(child_stdin);
            let Err(CallError::NotApplied(why)) = calls.call(&READ).await else {
                panic!("nothing reached the child")
            };
            assert!(why.contains("cannot write to its stdin"), "{why}");
        });
    }

    #[test]
    fn error_replies_keep_their_kind_and_message() {
        real_runtime().unwrap().block_on(async {
            let (calls, mut child_stdin, mut child_stdout, _reader) = piped();
            for (reply, expected) in [
                (
                    "\"error\":\"unknown\",\"message\":\"m\"",
                    CallError::Unknown("m".into()),
                ),
                (
                    "\"error\":\"not-applied\"",
                    CallError::NotApplied(String::new()),
                ),
            ] {
                let call = tokio::spawn({
                    let calls = Arc::clone(&calls);
                    async move { calls.call(&READ).await }
                });
                let mut request = [0; 64];
                let count = child_stdin.read(&mut request).await.unwrap();
                let request = std::str::from_utf8(&request[..count]).unwrap();
                let id = request["{\"id\":".len()..].split(',').next().unwrap();
                child_stdout
                    .write_all(format!("{{\"id\":{id},{reply}}}\n").as_bytes())
                    .await
                    .unwrap();
                assert_eq!(call.await.unwrap().unwrap_err(), expected);
            }
        });
    }

    #[test]
    fn long_lines_are_shortened_in_messages() {
        let shown = shown_line(&"x".repeat(500));
        assert_eq!(shown.chars().count(), 203);
        assert_eq!(shown_line("ab"), "`ab`");
    }
}
