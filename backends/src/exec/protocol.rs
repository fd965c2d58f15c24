//! The exec protocol's messages (docs/exec-protocol.md): the requests fencer writes to a
//! child's stdin and the replies it reads from the child's stdout, one JSON object per line.
//!
//! Only the shapes live here; which reply answers which request is checked by the caller that
//! knows the request ([`super::ExecLock`], [`super::ExecStore`]).

use std::time::Duration;

use fencer_harness::{
    AppliedWrite, BadOwnerToken, CallError, ExpiryRule, FencingToken, LockChange, LockLogEntry,
    OwnerToken,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version a lock or store child is greeted with; such a child may answer 1 or
/// [`CLIENT_PROTOCOL_VERSION`], since version 2 changed nothing for those roles.
pub const PROTOCOL_VERSION: u64 = 1;

/// The protocol version that added the client role: a client child is greeted with it and must
/// answer with it, so a version-1 child named as a client is refused before the run.
pub const CLIENT_PROTOCOL_VERSION: u64 = 2;

/// The optional call that hands over a store's applied writes.
pub const APPLIED_LOG: &str = "applied-log";

/// The optional call that hands over a lock service's grants, renewals and releases.
pub const LOCK_LOG: &str = "lock-log";

/// One request, without its `id` (see [`Request::line`]).
#[derive(Debug, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request<'a> {
    /// The handshake: fencer's version, and for a client child what it is to connect to.
    Hello {
        /// [`PROTOCOL_VERSION`], or [`CLIENT_PROTOCOL_VERSION`] for a client child.
        protocol: u64,
        /// A client child's assignment; absent for a lock or store child.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        client: Option<ClientHello<'a>>,
    },
    /// Take the lease on `lock` if it is free.
    Acquire {
        /// The lock's name.
        lock: &'a str,
        /// The caller's owner token, 32 hex digits.
        owner: String,
        /// The lease's length, rounded up to whole milliseconds.
        ttl_ms: u64,
    },
    /// Extend the caller's live lease.
    Renew {
        /// The lock's name.
        lock: &'a str,
        /// The caller's owner token.
        owner: String,
        /// The new length from now, rounded up to whole milliseconds.
        ttl_ms: u64,
    },
    /// End the caller's lease.
    Release {
        /// The lock's name.
        lock: &'a str,
        /// The caller's owner token.
        owner: String,
    },
    /// A fenced write.
    Write {
        /// The key written.
        key: &'a str,
        /// The writer's fencing token.
        fencing_token: FencingToken,
        /// The write's unique id.
        write_id: &'a str,
        /// The value.
        value: &'a str,
    },
    /// Read a key.
    Read {
        /// The key read.
        key: &'a str,
    },
    /// A client child's own ownership check of its lease.
    Check {
        /// The lock's name.
        lock: &'a str,
        /// The owner the child named when it acquired the lease.
        owner: &'a str,
    },
    /// A client child's caller gave up its work: the child forgets the lease without
    /// releasing it, and its renewals of it stop.
    Cancel {
        /// The lock's name.
        lock: &'a str,
        /// The owner the child named when it acquired the lease.
        owner: &'a str,
    },
    /// Every applied write, in store order.
    AppliedLog,
    /// Every change the lock service applied, in its order.
    LockLog,
}

/// What a client child is told in its hello: which worker it serves and the server it
/// connects to (the lock and TTL come with every acquire).
#[derive(Clone, Debug, Serialize)]
pub struct ClientHello<'a> {
    /// Always `client`: the role the child is started for.
    pub role: &'static str,
    /// The worker the child serves (`w0`).
    pub worker: &'a str,
    /// The lock service's URL (`redis://127.0.0.1:40123`): fencer's proxy for this worker.
    pub server: &'a str,
}

/// A request with its id, as written on the wire.
#[derive(Serialize)]
struct Numbered<'a, 'r> {
    id: u64,
    #[serde(flatten)]
    request: &'r Request<'a>,
}

impl Request<'_> {
    /// The request as one line (newline included) carrying `id`.
    pub fn line(&self, id: u64) -> String {
        let mut line = serde_json::to_string(&Numbered { id, request: self })
            .expect("a request of strings and integers always serialises");
        line.push('\n');
        line
    }

    /// The `op` name, for messages.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Acquire { .. } => "acquire",
            Request::Renew { .. } => "renew",
            Request::Release { .. } => "release",
            Request::Write { .. } => "write",
            Request::Read { .. } => "read",
            Request::Check { .. } => "check",
            Request::Cancel { .. } => "cancel",
            Request::AppliedLog => APPLIED_LOG,
            Request::LockLog => LOCK_LOG,
        }
    }
}

/// A lease length as the protocol carries it: whole milliseconds, rounded up (a lease longer
/// than the worker believes is safe; a shorter one is not).
pub fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// A successful reply's `result` and its fields.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// The handshake's answer.
    Hello(Hello),
    /// acquire: the lease is the caller's.
    Granted {
        /// Greater than every earlier grant's on the lock.
        fencing_token: FencingToken,
    },
    /// acquire (client role): the lease is the child's, under the owner it names.
    Acquired {
        /// The owner value the child's library holds the lock with.
        owner: String,
        /// The library's fencing token, when it hands one out.
        #[serde(default)]
        fencing_token: Option<FencingToken>,
    },
    /// check (client role): the child's library says the lease is held.
    Held,
    /// check (client role): the child's library says the lease is not held.
    NotHeld,
    /// acquire: someone holds a live lease.
    Busy,
    /// renew, release: applied.
    Done,
    /// renew, release: the caller does not hold the lease.
    NotOwner,
    /// write: applied.
    Applied,
    /// write: refused by the fence.
    Rejected {
        /// The newest token the store accepted for the key.
        current_token: FencingToken,
    },
    /// read: the current value.
    Value {
        /// Token of the write that put it there (0 if none).
        fencing_token: FencingToken,
        /// Id of that write.
        write_id: Option<String>,
        /// The value.
        value: Option<String>,
    },
    /// applied-log: every applied write.
    AppliedLog {
        /// In store order.
        writes: Vec<LoggedWrite>,
    },
    /// lock-log: every grant, renewal, release and expiry.
    LockLog {
        /// In the service's order.
        entries: Vec<LoggedLockChange>,
    },
}

impl Outcome {
    /// The `result` name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Hello(_) => "hello",
            Outcome::Granted { .. } => "granted",
            Outcome::Acquired { .. } => "acquired",
            Outcome::Held => "held",
            Outcome::NotHeld => "not-held",
            Outcome::Busy => "busy",
            Outcome::Done => "done",
            Outcome::NotOwner => "not-owner",
            Outcome::Applied => "applied",
            Outcome::Rejected { .. } => "rejected",
            Outcome::Value { .. } => "value",
            Outcome::AppliedLog { .. } => APPLIED_LOG,
            Outcome::LockLog { .. } => LOCK_LOG,
        }
    }
}

/// What a child says about itself in its hello.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Hello {
    /// The version it speaks.
    pub protocol: u64,
    /// `lock`, `store` or both; or `client`.
    pub roles: Vec<Role>,
    /// Optional calls it answers (`applied-log`, `lock-log`); names fencer does not know are
    /// kept and ignored.
    #[serde(default)]
    pub offers: Vec<String>,
    /// How its lock log's expiries are to be read (absent: fencer's own rule, a lease ends at
    /// its expiry).
    #[serde(default)]
    pub lock_log_expiry: Option<LogExpiry>,
}

/// A child's boundary rule for its lock log, as its hello states it: the fields of
/// [`ExpiryRule`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogExpiry {
    /// Whether a lease is still live at the reading its expiry names.
    pub live_at_expiry: bool,
    /// The resolution of the readings compared with an expiry, in nanoseconds (at least 1).
    pub resolution_ns: u64,
}

impl LogExpiry {
    /// The rule fencer reads the child's lock log by.
    pub fn rule(self) -> ExpiryRule {
        ExpiryRule {
            live_at_expiry: self.live_at_expiry,
            resolution_ns: self.resolution_ns.max(1),
        }
    }
}

impl Hello {
    /// Whether the child serves `role`.
    pub fn serves(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Whether the child answers the optional call `op`.
    pub fn offers(&self, op: &str) -> bool {
        self.offers.iter().any(|offered| offered == op)
    }
}

/// Which calls a child serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// acquire, renew, release.
    Lock,
    /// write, read.
    Store,
    /// acquire, check, release and cancel through the child's own lock client library, with
    /// `lost`, `renewed` and `renew-refused` notices (protocol 2).
    Client,
}

impl Role {
    /// The name used in the hello and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Lock => "lock",
            Role::Store => "store",
            Role::Client => "client",
        }
    }
}

/// One entry of an applied log.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct LoggedWrite {
    /// Store order, from 1.
    pub seq: u64,
    /// Key written.
    pub key: String,
    /// The write's token.
    pub fencing_token: FencingToken,
    /// The write's id.
    pub write_id: String,
}

impl From<LoggedWrite> for AppliedWrite {
    fn from(write: LoggedWrite) -> AppliedWrite {
        AppliedWrite {
            seq: write.seq,
            key: write.key,
            fencing_token: write.fencing_token,
            write_id: write.write_id,
        }
    }
}

/// One entry of a lock log, as the child sends it: `op` names the change, `seq` counts from 1
/// in the service's order, times are nanoseconds on the service's own clock.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum LoggedLockChange {
    /// A lease was granted.
    Grant {
        /// Service order.
        seq: u64,
        /// The lock.
        lock: String,
        /// The new holder.
        owner: String,
        /// Its fencing token.
        fencing_token: FencingToken,
        /// The TTL asked for, in milliseconds.
        ttl_ms: u64,
        /// When it was granted.
        at_ns: i64,
        /// When it expires.
        expires_ns: i64,
    },
    /// A lease was extended.
    Renew {
        /// Service order.
        seq: u64,
        /// The lock.
        lock: String,
        /// Who asked.
        owner: String,
        /// Whose lease was extended.
        holder: String,
        /// That lease's token.
        holder_token: FencingToken,
        /// The TTL asked for, in milliseconds.
        ttl_ms: u64,
        /// When it was extended.
        at_ns: i64,
        /// Its new expiry.
        expires_ns: i64,
    },
    /// A lease was ended by a release.
    Release {
        /// Service order.
        seq: u64,
        /// The lock.
        lock: String,
        /// Who asked.
        owner: String,
        /// Whose lease ended.
        holder: String,
        /// That lease's token.
        holder_token: FencingToken,
        /// When it ended.
        at_ns: i64,
    },
    /// The service noticed a lease had expired.
    Expire {
        /// Service order.
        seq: u64,
        /// The lock.
        lock: String,
        /// Whose lease expired.
        holder: String,
        /// That lease's token.
        holder_token: FencingToken,
        /// When the service noticed.
        at_ns: i64,
    },
}

impl LoggedLockChange {
    /// The entry as fencer records it, or `None` for an `expire`: a lease's end by expiry is
    /// its `expires_ns`, the time its holder was promised, and an `expire` entry cannot move
    /// that promise (one logged before it would be the service ending a lease early, which the
    /// next grant's overlap then shows). An owner that is not 32 hex digits is an error.
    pub fn into_entry(self) -> Result<Option<LockLogEntry>, BadOwnerToken> {
        let owner_token = |text: &str| text.parse::<OwnerToken>();
        let ttl = Duration::from_millis;
        let (seq, lock, at_ns, change) = match self {
            LoggedLockChange::Grant {
                seq,
                lock,
                owner,
                fencing_token,
                ttl_ms,
                at_ns,
                expires_ns,
            } => {
                let change = LockChange::Granted {
                    owner: owner_token(&owner)?,
                    fencing_token,
                    ttl: ttl(ttl_ms),
                    expires_ns,
                };
                (seq, lock, at_ns, change)
            }
            LoggedLockChange::Renew {
                seq,
                lock,
                owner,
                holder,
                holder_token,
                ttl_ms,
                at_ns,
                expires_ns,
            } => {
                let change = LockChange::Renewed {
                    owner: owner_token(&owner)?,
                    holder: owner_token(&holder)?,
                    holder_token,
                    ttl: ttl(ttl_ms),
                    expires_ns,
                };
                (seq, lock, at_ns, change)
            }
            LoggedLockChange::Release {
                seq,
                lock,
                owner,
                holder,
                holder_token,
                at_ns,
            } => {
                let change = LockChange::Released {
                    owner: owner_token(&owner)?,
                    holder: owner_token(&holder)?,
                    holder_token,
                };
                (seq, lock, at_ns, change)
            }
            LoggedLockChange::Expire { holder, .. } => {
                owner_token(&holder)?;
                return Ok(None);
            }
        };
        Ok(Some(LockLogEntry {
            seq,
            lock,
            at_ns,
            change,
        }))
    }
}

/// An error reply: the child's own verdict on the call's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Failed {
    /// The call definitely had no effect.
    NotApplied,
    /// It may have had one.
    Unknown,
}

/// One reply line, read: its id, and the outcome or the child's error (kind and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The request it answers.
    pub id: u64,
    /// What the child said.
    pub answer: Result<Outcome, CallError>,
}

/// What is wrong with a reply line: the child broke the protocol.
#[derive(Debug, thiserror::Error)]
pub enum BadReply {
    /// The line is not JSON.
    #[error("not a JSON object: {0}")]
    NotJson(serde_json::Error),
    /// The line is JSON, but not an object.
    #[error("not a JSON object")]
    NotObject,
    /// No `id` to match it with its request.
    #[error("no `id`")]
    NoId,
    /// An `id` no request can carry.
    #[error("`id` is not a non-negative integer")]
    BadId,
    /// Both a result and an error.
    #[error("both `result` and `error`")]
    Both,
    /// Neither a result nor an error.
    #[error("neither `result` nor `error`")]
    Neither,
    /// A result fencer does not know, or one without the fields its kind carries.
    #[error("`result`: {0}")]
    BadResult(serde_json::Error),
    /// An `error` that is neither kind the protocol has.
    #[error("`error` is {0}: expected \"not-applied\" or \"unknown\"")]
    BadErrorKind(Value),
    /// A `message` that is not text.
    #[error("`message` is {0}: expected a string")]
    BadMessage(Value),
    /// A notice carrying an `id`, as if it answered a request.
    #[error("a notice carries no `id` (it answers no request)")]
    NoticeWithId,
    /// A notice fencer does not know, or one without its fields.
    #[error("`notice`: {0} (expected \"lost\", \"renewed\" or \"renew-refused\" with an `owner`)")]
    BadNotice(serde_json::Error),
}

/// What a client child tells fencer unprompted about one of its leases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// The library learnt the lease is gone (a renewal refused, renewals unanswered for a TTL).
    Lost,
    /// The library's auto-renewal extended the lease.
    Renewed,
    /// The lock service refused a renewal the library made on its own: what the adapter saw
    /// of the library's call, sent before the library acts on it (whatever it then tells).
    RenewRefused,
}

/// A notice line: `{"notice":"lost","owner":"…","message":"renewal refused"}`, with no `id`
/// because no request asked for it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Notice {
    /// What happened.
    pub notice: NoticeKind,
    /// The owner the child named when it acquired the lease.
    pub owner: String,
    /// The library's own words, recorded with a `lost` or `renew-refused` notice.
    #[serde(default)]
    pub message: Option<String>,
}

/// One stdout line, read: a reply to a request, or a client child's notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A reply, matched to its request by id.
    Reply(Reply),
    /// A notice, recorded when it arrives.
    Notice(Notice),
}

/// Reads one stdout line (without its newline): a notice when it has a `notice` field, a reply
/// otherwise. The error says what is wrong with it.
pub fn parse_line(line: &str) -> Result<Line, BadReply> {
    let value: Value = serde_json::from_str(line).map_err(BadReply::NotJson)?;
    let Value::Object(fields) = &value else {
        return Err(BadReply::NotObject);
    };
    if !fields.contains_key("notice") {
        return reply_of(&value).map(Line::Reply);
    }
    if fields.contains_key("id") {
        return Err(BadReply::NoticeWithId);
    }
    Notice::deserialize(&value)
        .map(Line::Notice)
        .map_err(BadReply::BadNotice)
}

/// Reads one reply line (without its newline). The error says what is wrong with it.
pub fn parse_reply(line: &str) -> Result<Reply, BadReply> {
    let value: Value = serde_json::from_str(line).map_err(BadReply::NotJson)?;
    reply_of(&value)
}

/// The reply `value` is, or what is wrong with it.
fn reply_of(value: &Value) -> Result<Reply, BadReply> {
    let Value::Object(fields) = value else {
        return Err(BadReply::NotObject);
    };
    let id = fields
        .get("id")
        .ok_or(BadReply::NoId)?
        .as_u64()
        .ok_or(BadReply::BadId)?;
    let answer = match (fields.get("result"), fields.get("error")) {
        (Some(_), Some(_)) => return Err(BadReply::Both),
        (None, None) => return Err(BadReply::Neither),
        (Some(_), None) => Ok(Outcome::deserialize(value).map_err(BadReply::BadResult)?),
        (None, Some(kind)) => {
            let kind =
                Failed::deserialize(kind).map_err(|_| BadReply::BadErrorKind(kind.clone()))?;
            let message = match fields.get("message") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(message)) => message.clone(),
                Some(other) => return Err(BadReply::BadMessage(other.clone())),
            };
            Err(match kind {
                Failed::NotApplied => CallError::NotApplied(message),
                Failed::Unknown => CallError::Unknown(message),
            })
        }
    };
    Ok(Reply { id, answer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_line_with_id_and_op() {
        let acquire = Request::Acquire {
            lock: "L",
            owner: "00ab".into(),
            ttl_ms: 300,
        };
        assert_eq!(
            acquire.line(7),
            "{\"id\":7,\"op\":\"acquire\",\"lock\":\"L\",\"owner\":\"00ab\",\"ttl_ms\":300}\n"
        );
        assert_eq!(
            Request::AppliedLog.line(9),
            "{\"id\":9,\"op\":\"applied-log\"}\n"
        );
        let write = Request::Write {
            key: "k",
            fencing_token: 3,
            write_id: "w",
            value: "a\nb",
        };
        let line = write.line(1);
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(line.contains("\"value\":\"a\\nb\""), "{line}");
    }

    #[test]
    fn notices_parse_with_their_owner_and_message() {
        let notice = |line: &str| match parse_line(line) {
            Ok(Line::Notice(notice)) => notice,
            other => panic!("{line}: {other:?}"),
        };
        assert_eq!(
            notice(r#"{"notice":"renew-refused","owner":"o1","message":"NotAcquired"}"#),
            Notice {
                notice: NoticeKind::RenewRefused,
                owner: "o1".into(),
                message: Some("NotAcquired".into()),
            }
        );
        assert_eq!(
            notice(r#"{"notice":"renewed","owner":"o1"}"#).notice,
            NoticeKind::Renewed
        );
        let unknown = parse_line(r#"{"notice":"renew-failed","owner":"o1"}"#).unwrap_err();
        assert!(
            unknown
                .to_string()
                .contains("(expected \"lost\", \"renewed\" or \"renew-refused\" with an `owner`)"),
            "{unknown}"
        );
    }

    #[test]
    fn ttls_round_up_to_whole_milliseconds() {
        assert_eq!(ttl_ms(Duration::from_millis(300)), 300);
        assert_eq!(ttl_ms(Duration::from_micros(300_001)), 301);
        assert_eq!(ttl_ms(Duration::from_nanos(1)), 1);
    }

    #[test]
    fn replies_parse_with_their_fields() {
        let parsed = |line: &str| parse_reply(line).unwrap();
        assert_eq!(
            parsed(r#"{"id":3,"result":"granted","fencing_token":5,"extra":true}"#),
            Reply {
                id: 3,
                answer: Ok(Outcome::Granted { fencing_token: 5 })
            }
        );
        assert_eq!(
            parsed(r#"{"id":4,"result":"not-owner"}"#).answer,
            Ok(Outcome::NotOwner)
        );
        assert_eq!(
            parsed(r#"{"id":5,"result":"value","fencing_token":0,"write_id":null,"value":null}"#)
                .answer,
            Ok(Outcome::Value {
                fencing_token: 0,
                write_id: None,
                value: None
            })
        );
        assert_eq!(
            parsed(r#"{"id":0,"result":"hello","protocol":1,"roles":["store"]}"#).answer,
            Ok(Outcome::Hello(Hello {
                protocol: 1,
                roles: vec![Role::Store],
                offers: vec![],
                lock_log_expiry: None,
            }))
        );
        let hello = parsed(
            r#"{"id":0,"result":"hello","protocol":1,"roles":["lock"],"offers":["lock-log"],"lock_log_expiry":{"live_at_expiry":true,"resolution_ns":1000000}}"#,
        );
        let Ok(Outcome::Hello(hello)) = hello.answer else {
            panic!("{hello:?}")
        };
        assert_eq!(
            hello.lock_log_expiry.map(LogExpiry::rule),
            Some(ExpiryRule {
                live_at_expiry: true,
                resolution_ns: 1_000_000
            })
        );
        let misspelt = r#"{"id":0,"result":"hello","protocol":1,"roles":["lock"],"lock_log_expiry":{"live_at_expiry":true,"resolution_ms":1}}"#;
        assert!(parse_reply(misspelt).is_err(), "{misspelt}");
        assert_eq!(
            parsed(r#"{"id":6,"error":"not-applied","message":"full"}"#).answer,
            Err(CallError::NotApplied("full".into()))
        );
        assert_eq!(
            parsed(r#"{"id":6,"error":"unknown"}"#).answer,
            Err(CallError::Unknown(String::new()))
        );
        let log = parsed(
            r#"{"id":8,"result":"applied-log","writes":[{"seq":1,"key":"k","fencing_token":2,"write_id":"w"}]}"#,
        );
        let Ok(Outcome::AppliedLog { writes }) = log.answer else {
            panic!("{log:?}")
        };
        assert_eq!(
            AppliedWrite::from(writes[0].clone()),
            AppliedWrite {
                seq: 1,
                key: "k".into(),
                fencing_token: 2,
                write_id: "w".into()
            }
        );
    }

    #[test]
    fn a_lock_log_reads_as_the_entries_fencer_records_without_expiries() {
        let owner = "0".repeat(31) + "a";
        let other = "0".repeat(31) + "b";
        let line = format!(
            r#"{{"id":9,"result":"lock-log","entries":[
              {{"seq":1,"op":"grant","lock":"L","owner":"{owner}","fencing_token":3,"ttl_ms":300,"at_ns":100,"expires_ns":300000100}},
              {{"seq":2,"op":"renew","lock":"L","owner":"{other}","holder":"{owner}","holder_token":3,"ttl_ms":200,"at_ns":150,"expires_ns":200000150}},
              {{"seq":3,"op":"expire","lock":"L","holder":"{owner}","holder_token":3,"at_ns":900000000}},
              {{"seq":4,"op":"release","lock":"L","owner":"{other}","holder":"{other}","holder_token":4,"at_ns":950000000}}]}}"#
        )
        .replace('\n', "");
        let Ok(Outcome::LockLog { entries }) = parse_reply(&line).unwrap().answer else {
            panic!("{line}")
        };
        let read: Vec<Option<LockLogEntry>> = entries
            .into_iter()
            .map(|entry| entry.into_entry().unwrap())
            .collect();
        let (a, b) = (OwnerToken(0xa), OwnerToken(0xb));
        let entry = |seq, at_ns, change| {
            Some(LockLogEntry {
                seq,
                lock: "L".into(),
                at_ns,
                change,
            })
        };
        assert_eq!(
            read,
            [
                entry(
                    1,
                    100,
                    LockChange::Granted {
                        owner: a,
                        fencing_token: 3,
                        ttl: Duration::from_millis(300),
                        expires_ns: 300_000_100
                    }
                ),
                entry(
                    2,
                    150,
                    LockChange::Renewed {
                        owner: b,
                        holder: a,
                        holder_token: 3,
                        ttl: Duration::from_millis(200),
                        expires_ns: 200_000_150
                    }
                ),
                None,
                entry(
                    4,
                    950_000_000,
                    LockChange::Released {
                        owner: b,
                        holder: b,
                        holder_token: 4
                    }
                ),
            ]
        );
        assert_eq!(Request::LockLog.line(3), "{\"id\":3,\"op\":\"lock-log\"}\n");
    }

    #[test]
    fn a_lock_log_entry_fencer_cannot_read_says_why() {
        let bad_owner = r#"{"id":1,"result":"lock-log","entries":[{"seq":1,"op":"release","lock":"L","owner":"w0","holder":"w0","holder_token":1,"at_ns":5}]}"#;
        let Ok(Outcome::LockLog { entries }) = parse_reply(bad_owner).unwrap().answer else {
            panic!("{bad_owner}")
        };
        let why = entries[0].clone().into_entry().unwrap_err().to_string();
        assert!(why.contains("owner token") && why.contains("`w0`"), "{why}");
        let no_expiry = r#"{"id":1,"result":"lock-log","entries":[{"seq":1,"op":"grant","lock":"L","owner":"0000000000000000000000000000000a","fencing_token":1,"ttl_ms":1,"at_ns":5}]}"#;
        assert!(
            parse_reply(no_expiry)
                .unwrap_err()
                .to_string()
                .contains("expires_ns")
        );
        let unknown =
            r#"{"id":1,"result":"lock-log","entries":[{"seq":1,"op":"steal","lock":"L"}]}"#;
        assert!(
            parse_reply(unknown)
                .unwrap_err()
                .to_string()
                .contains("steal")
        );
    }

    #[test]
    fn malformed_replies_say_what_is_wrong() {
        let error = |line: &str| parse_reply(line).unwrap_err().to_string();
        assert!(error("hello there").starts_with("not a JSON object"));
        assert_eq!(error("[1]"), "not a JSON object");
        assert_eq!(error(r#"{"result":"busy"}"#), "no `id`");
        assert_eq!(
            error(r#"{"id":-1,"result":"busy"}"#),
            "`id` is not a non-negative integer"
        );
        assert_eq!(error(r#"{"id":1}"#), "neither `result` nor `error`");
        assert_eq!(
            error(r#"{"id":1,"result":"busy","error":"unknown"}"#),
            "both `result` and `error`"
        );
        assert!(error(r#"{"id":1,"result":"granted"}"#).contains("fencing_token"));
        assert!(error(r#"{"id":1,"result":"granted","fencing_token":"5"}"#).contains("string"));
        assert!(error(r#"{"id":1,"result":"maybe"}"#).contains("maybe"));
        assert!(error(r#"{"id":1,"error":"oops"}"#).contains("expected \"not-applied\""));
    }
}
