//! The two traits a backend implements: a lease service and a fenced store.
//!
//! They are kept as small as Porcupine's model interface: three lock calls, two store calls and
//! one optional log. Everything fencer knows about a backend goes through them, so faults
//! injected at this boundary (latency, lost replies, pauses) apply to every backend alike.
//!
//! Every error says whether the call was *definitely not applied* ([`CallError::NotApplied`],
//! recorded as `fail`) or *might have been applied* ([`CallError::Unknown`], recorded as `info`).
//! When in doubt, an adapter must say `Unknown`: a wrong `NotApplied` makes checkers blame the
//! wrong party, a wrong `Unknown` only makes them less certain.

use std::time::Duration;

use async_trait::async_trait;

use crate::event::{Event, EventType, Op};

/// Random per-acquisition identity of a lease holder; proves *who* holds a lease, not *when*.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerToken(pub u128);

impl std::fmt::Display for OwnerToken {
    /// 32 lower-case hex digits, zero-padded (`{:032x}`), spelt out by hand: every recorded
    /// lock call and lock-log entry names its owner, and the formatting machinery's padded
    /// integer path costs several times the digits themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.hex().as_str())
    }
}

impl OwnerToken {
    /// The 32 hex digits this token prints as, on the stack: what the client path and a
    /// simulated backend's log put into a history without building a `String`.
    pub fn hex(self) -> OwnerHex {
        let mut hex = [0u8; 32];
        for (place, digits) in hex.chunks_exact_mut(8).enumerate() {
            let word = (self.0 >> (96 - 32 * place)) as u32;
            digits.copy_from_slice(&eight_hex_digits(word));
        }
        OwnerHex(hex)
    }
}

/// The 8 lower-case hex digits of `word`, most significant first, made all at once in one
/// 64-bit word: each nibble is spread into a byte of its own, then every byte becomes its
/// digit (`'0'` plus the nibble, 39 more from 10 up, where `'a'` follows `'9'`). No byte can
/// carry into the next: a nibble plus 6 stays below 256, and so does its digit.
fn eight_hex_digits(word: u32) -> [u8; 8] {
    const BYTES: u64 = 0x0101_0101_0101_0101;
    let mut nibbles = u64::from(word);
    nibbles = (nibbles | (nibbles << 16)) & 0x0000_ffff_0000_ffff;
    nibbles = (nibbles | (nibbles << 8)) & 0x00ff_00ff_00ff_00ff;
    nibbles = (nibbles | (nibbles << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Bit 4 of nibble + 6 is set exactly for the nibbles 10 to 15.
    let letters = ((nibbles + 6 * BYTES) >> 4) & BYTES;
    (nibbles + u64::from(b'0') * BYTES + letters * 39).to_be_bytes()
}

/// An owner token's 32 lower-case hex digits ([`OwnerToken::hex`]).
#[derive(Clone, Copy, Debug)]
pub struct OwnerHex([u8; 32]);

impl OwnerHex {
    /// The digits as bytes, for a table that checks them as text only when it has not seen
    /// them before.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The digits as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

/// Why text is not an owner token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected an owner token of 32 lower-case hex digits, found `{0}`")]
pub struct BadOwnerToken(pub String);

impl std::str::FromStr for OwnerToken {
    type Err = BadOwnerToken;

    /// Reads the form [`OwnerToken`] prints as (32 lower-case hex digits), which is how lock
    /// services store owners and hand them back in their logs.
    fn from_str(text: &str) -> Result<OwnerToken, BadOwnerToken> {
        let well_formed = text.len() == 32
            && text
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
        match u128::from_str_radix(text, 16) {
            Ok(token) if well_formed => Ok(OwnerToken(token)),
            _ => Err(BadOwnerToken(text.to_string())),
        }
    }
}

/// Monotonic per-grant number; orders holders so a store can refuse an older one.
pub type FencingToken = u64;

/// Why a call did not succeed, split by what fencer may conclude about its effect.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The backend definitely did not apply the call (connection refused before sending,
    /// validation error). Recorded as `fail`.
    #[error("not applied: {0}")]
    NotApplied(String),
    /// The call may or may not have been applied (timeout, lost reply, connection reset after
    /// sending). Recorded as `info`.
    #[error("unknown outcome: {0}")]
    Unknown(String),
}

/// Why a lock service's restart did not happen. Either ends the run: its history would
/// claim a restart the service never went through.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RestartError {
    /// The service offers no restart ([`LockService::offers_restart`] is false), yet one was
    /// asked of it.
    #[error("this lock service offers no restart")]
    NotOffered,
    /// The service tried and could not lose its state or come back; the message is the
    /// service's own account of what went wrong, for its author to act on.
    #[error("the lock service could not restart: {0}")]
    Failed(String),
}

/// Reply to an acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The caller now holds the lease under this fencing token.
    Granted {
        /// Greater than every token granted before on this lock.
        fencing_token: FencingToken,
    },
    /// Someone else holds an unexpired lease; nothing changed.
    Busy,
}

/// Reply to a renew or release that reached the lock service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owned {
    /// The caller's owner token matched the live lease and the call was applied.
    Done,
    /// The caller does not hold the lease (it expired or another owner holds it); nothing changed.
    NotOwner,
}

/// Reply to a fenced write that reached the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The store applied the write: its token was >= every token it had accepted.
    Applied,
    /// The store refused the write because it had already accepted a newer token.
    Rejected {
        /// The newest token the store had accepted.
        current_token: FencingToken,
    },
}

/// What a read saw: the protected value and the write that put it there.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReadValue {
    /// Fence of the last applied write (0 when nothing was written yet).
    pub fencing_token: FencingToken,
    /// Id of the last applied write, if any.
    pub write_id: Option<String>,
    /// The value, if any.
    pub value: Option<String>,
}

/// One write as the store applied it, in the store's own order: ground truth for checkers when
/// replies were lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedWrite {
    /// Store order, from 1.
    pub seq: u64,
    /// Key written.
    pub key: String,
    /// Fencing token the write carried.
    pub fencing_token: FencingToken,
    /// The write's unique id.
    pub write_id: String,
}

/// One change a lock service applied, in its own order: ground truth for checkers when replies
/// were lost, and what `overlapping-leases` needs (no client ever learns another's expiry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockLogEntry {
    /// Service order, from 1.
    pub seq: u64,
    /// The lock changed.
    pub lock: String,
    /// The service's clock when it applied the change (nanoseconds; any epoch, one per run).
    pub at_ns: i64,
    /// What changed.
    pub change: LockChange,
}

/// How a lock service's log says when a lease ends: its own boundary rule, which fencer
/// applies as the log enters the history, so every log's expiries are recorded in one form
/// (the first reading of the service's clock at which the lease is no longer live) and the
/// checkers judge each service by its own rule.
///
/// Services differ at the instant itself: fencer's simulated service ends a lease at its
/// expiry (`now >= expires`), Redis keeps a key until its clock passes the expiry, compared in
/// whole milliseconds (`now_ms > when_ms`), PostgreSQL keeps a lease `expires_at >= now()` on
/// a microsecond clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpiryRule {
    /// True when a lease is still live at the reading its expiry names, and ends only once
    /// the clock passes it; false when it has ended at that reading.
    pub live_at_expiry: bool,
    /// The resolution, in nanoseconds (at least 1), of the readings the service compares with
    /// an expiry: a reading is cut down to a whole multiple of it first (1 ms for Redis).
    pub resolution_ns: u64,
}

impl ExpiryRule {
    /// fencer's own: a lease ends at its expiry, compared to the nanosecond.
    pub const ENDS_AT_EXPIRY: ExpiryRule = ExpiryRule {
        live_at_expiry: false,
        resolution_ns: 1,
    };

    /// The first reading of the service's clock at which a lease that expires at
    /// `expires_ns` by this rule is no longer live. A reading `now` ends the lease when
    /// `now` cut down to the resolution is past the expiry (live at expiry) or at it (ended
    /// at expiry); the least such `now` is the next whole multiple of the resolution above
    /// the expiry, or at or above it.
    pub fn ended_from_ns(self, expires_ns: i64) -> i64 {
        let step = i64::try_from(self.resolution_ns.max(1)).unwrap_or(i64::MAX);
        let floor = expires_ns - expires_ns.rem_euclid(step);
        if self.live_at_expiry {
            floor.saturating_add(step)
        } else if floor == expires_ns {
            expires_ns
        } else {
            floor.saturating_add(step)
        }
    }

    /// The rule applied to the expiry `entry` states, if it states one.
    pub fn applied_to(self, mut entry: LockLogEntry) -> LockLogEntry {
        match &mut entry.change {
            LockChange::Granted { expires_ns, .. } | LockChange::Renewed { expires_ns, .. } => {
                *expires_ns = self.ended_from_ns(*expires_ns);
            }
            LockChange::Released { .. } => {}
        }
        entry
    }
}

impl Default for ExpiryRule {
    fn default() -> ExpiryRule {
        ExpiryRule::ENDS_AT_EXPIRY
    }
}

/// What one lock-log entry records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockChange {
    /// A lease was granted to `owner` under `fencing_token` until `expires_ns`.
    Granted {
        /// The new holder.
        owner: OwnerToken,
        /// Its fencing token.
        fencing_token: FencingToken,
        /// The TTL asked for.
        ttl: Duration,
        /// When the lease expires, on the service's clock, as the service states it (read by
        /// its [`ExpiryRule`]).
        expires_ns: i64,
    },
    /// `owner`'s renew extended the lease of `holder` (the same owner, unless the service is
    /// broken) to `expires_ns`.
    Renewed {
        /// Who asked.
        owner: OwnerToken,
        /// Whose lease was extended.
        holder: OwnerToken,
        /// That lease's fencing token.
        holder_token: FencingToken,
        /// The TTL asked for.
        ttl: Duration,
        /// The new expiry, on the service's clock, as the service states it (read by its
        /// [`ExpiryRule`]).
        expires_ns: i64,
    },
    /// `owner`'s release ended the lease of `holder` (the same owner, unless broken).
    Released {
        /// Who asked.
        owner: OwnerToken,
        /// Whose lease ended.
        holder: OwnerToken,
        /// That lease's fencing token.
        holder_token: FencingToken,
    },
}

impl LockLogEntry {
    /// The entry as the `lock` `log` event fencer's own simulated service records.
    pub fn into_event(self) -> Event {
        let mut event = Event {
            lock: Some(self.lock),
            local_ns: Some(self.at_ns),
            seq: Some(self.seq),
            ..Event::new("lock", EventType::Log, Op::Acquire)
        };
        match self.change {
            LockChange::Granted {
                owner,
                fencing_token,
                ttl,
                expires_ns,
            } => {
                event.owner = Some(owner.to_string());
                event.token = Some(fencing_token);
                event.ttl_ns = Some(ttl.as_nanos() as u64);
                event.expires_ns = Some(expires_ns);
            }
            LockChange::Renewed {
                owner,
                holder,
                holder_token,
                ttl,
                expires_ns,
            } => {
                event.f = Op::Renew;
                event.owner = Some(owner.to_string());
                event.holder = Some(holder.to_string());
                event.holder_token = Some(holder_token);
                event.ttl_ns = Some(ttl.as_nanos() as u64);
                event.expires_ns = Some(expires_ns);
            }
            LockChange::Released {
                owner,
                holder,
                holder_token,
            } => {
                event.f = Op::Release;
                event.owner = Some(owner.to_string());
                event.holder = Some(holder.to_string());
                event.holder_token = Some(holder_token);
            }
        }
        event
    }
}

/// A lease service: grants time-limited, owner-checked leases with fencing tokens.
///
/// Contract (what checkers hold a backend to):
/// - `acquire` grants only when no unexpired lease exists, and each grant's fencing token is
///   greater than every earlier grant's on that lock, across restarts (`token-regression`);
///   otherwise it answers [`Acquired::Busy`] and changes nothing;
/// - `renew` and `release` apply only when `owner` matches the live lease, compared atomically
///   with the change, and answer [`Owned::NotOwner`] otherwise (`foreign-release`);
/// - expiry is measured on the service's own clock; a renew never revives an expired lease
///   (`overlapping-leases`);
/// - errors follow [`CallError`]: `NotApplied` only when the call definitely had no effect,
///   `Unknown` for anything that may have reached the service (timeouts, resets after sending);
/// - calls are async and must not block the thread: fencer runs every worker on one runtime.
///   They need no timeouts of their own (fencer gives up after its call timeout and records
///   `info`), and a panic is recorded as `info` too.
///
/// Each run uses its own lock name, so a service may keep state from earlier runs.
#[async_trait]
pub trait LockService: Send + Sync {
    /// Takes the lease on `lock` for `ttl` if it is free.
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError>;
    /// Extends the caller's live lease to `ttl` from now.
    async fn renew(&self, lock: &str, owner: OwnerToken, ttl: Duration)
    -> Result<Owned, CallError>;
    /// Ends the caller's lease.
    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError>;
    /// Every change the service applied (grants, renewals, releases), in its own order, if it
    /// can tell; called once, after the workers finished. Record each entry in the same atomic
    /// step as the change it describes. `None` means "not offered": checkers then reason from
    /// what clients were told.
    async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
        None
    }

    /// How the expiries in [`LockService::lock_log`] are to be read: whether a lease is still
    /// live at the instant its expiry names, and the resolution of the clock the service
    /// compares them on. fencer records every expiry by this rule, so the checkers hold the
    /// service to its own boundary (a renew at the very instant of expiry is legal where the
    /// lease was still live). The default is fencer's own: a lease ends at its expiry.
    fn lock_log_expiry(&self) -> ExpiryRule {
        ExpiryRule::ENDS_AT_EXPIRY
    }

    /// True when the service offers [`LockService::restart`]. Optional: without it, fencer
    /// leaves the nemesis's `restart` faults out of the plan, and names them as left out in
    /// the run's record and report.
    fn offers_restart(&self) -> bool {
        false
    }

    /// Loses, now, whatever the service keeps only in memory, as a crash and restart of its
    /// process would: leases, a token counter it does not persist. Called by the nemesis's
    /// `restart` fault when [`LockService::offers_restart`] is true. While the fault lasts,
    /// fencer refuses every call to the service itself (recorded `fail`, "connection
    /// refused"), so the hook need not model the downtime. An error ends the run: its history
    /// would claim a restart that did not happen.
    async fn restart(&self) -> Result<(), RestartError> {
        Err(RestartError::NotOffered)
    }

    /// Whether the service reads `tokio::time` (the time now, a sleep, a timeout) while it
    /// answers a call. In the simulation, fencer moves tokio's paused clock to the simulated
    /// time before each call so that such a service reads the right time. A service that
    /// keeps time only through fencer ([`LocalClock`](crate::LocalClock),
    /// [`caller_clock`](crate::caller_clock)) or not at all, as fencer's own simulated ones
    /// do, may answer `false` and spare each of its calls that move; one that answers `false`
    /// and reads `tokio::time` anyway reads a clock left at some earlier moment of the run.
    fn reads_tokio_time(&self) -> bool {
        true
    }
}

/// A store that protects a value with fencing tokens.
///
/// Contract: a write applies only if its token is >= the newest token the store has accepted
/// for the key, checked and applied in one atomic step; equal tokens are allowed (fencing does
/// not deduplicate). A refused write answers [`Written::Rejected`], never success
/// (`stale-write-accepted`). A read returns the last applied write's token, id and value.
/// Errors and timing follow the same rules as [`LockService`].
///
/// [`FencedStore::applied_log`] is optional and is called once, after the workers finished:
/// every write the store applied, in the store's own order (`seq` ascending), for any keys
/// (fencer keeps the run's key). Record it in the same atomic step as the write; a log kept
/// apart from the write can disagree with the store. With it, checkers judge from ground truth
/// even when replies were lost, and `ack-mismatch` becomes checkable.
#[async_trait]
pub trait FencedStore: Send + Sync {
    /// Writes `value` (identified by `write_id`) to `key` under `fencing_token`.
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError>;
    /// Reads the current value of `key`.
    async fn read(&self, key: &str) -> Result<ReadValue, CallError>;
    /// Every applied write in store order, if the store can tell. `None` means "not offered";
    /// checkers then fall back to what clients were told.
    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        None
    }

    /// Whether the service reads `tokio::time` (the time now, a sleep, a timeout) while it
    /// answers a call. In the simulation, fencer moves tokio's paused clock to the simulated
    /// time before each call so that such a service reads the right time. A service that
    /// keeps time only through fencer ([`LocalClock`](crate::LocalClock),
    /// [`caller_clock`](crate::caller_clock)) or not at all, as fencer's own simulated ones
    /// do, may answer `false` and spare each of its calls that move; one that answers `false`
    /// and reads `tokio::time` anyway reads a clock left at some earlier moment of the run.
    fn reads_tokio_time(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_ends_at_the_first_reading_its_rule_says_it_is_over() {
        const MS: i64 = 1_000_000;
        let own = ExpiryRule::ENDS_AT_EXPIRY;
        for expires_ns in [0, 7, 332_152 * MS, -5 * MS - 3] {
            assert_eq!(own.ended_from_ns(expires_ns), expires_ns);
        }
        // Live through the whole millisecond the expiry names, whatever its own sub-millisecond
        // part: over only once the clock, cut to milliseconds, is past it.
        let live = ExpiryRule {
            live_at_expiry: true,
            resolution_ns: MS as u64,
        };
        assert_eq!(live.ended_from_ns(332_152 * MS), 332_153 * MS);
        assert_eq!(live.ended_from_ns(332_152 * MS + 400_000), 332_153 * MS);
        assert_eq!(live.ended_from_ns(-5 * MS - 3), -5 * MS);
        // Over at the expiry, compared in milliseconds: from the first whole millisecond at or
        // after it.
        let coarse = ExpiryRule {
            live_at_expiry: false,
            resolution_ns: MS as u64,
        };
        assert_eq!(coarse.ended_from_ns(332_152 * MS), 332_152 * MS);
        assert_eq!(coarse.ended_from_ns(332_152 * MS + 1), 332_153 * MS);
        // A release states no expiry and is left as it is.
        let released = LockLogEntry {
            seq: 1,
            lock: "L".into(),
            at_ns: 3,
            change: LockChange::Released {
                owner: OwnerToken(1),
                holder: OwnerToken(1),
                holder_token: 1,
            },
        };
        assert_eq!(live.applied_to(released.clone()), released);
    }

    #[test]
    fn owner_token_prints_as_32_hex_digits() {
        assert_eq!(
            OwnerToken(0xab).to_string(),
            "000000000000000000000000000000ab"
        );
    }

    #[test]
    fn owner_token_prints_every_digit_as_zero_padded_lower_hex_does() {
        let mut value = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        for _ in 0..64 {
            assert_eq!(OwnerToken(value).to_string(), format!("{value:032x}"));
            value = value.rotate_left(7) ^ (value >> 3);
        }
        assert_eq!(OwnerToken(u128::MAX).to_string(), "f".repeat(32));
        assert_eq!(OwnerToken(0).to_string(), "0".repeat(32));
    }

    #[test]
    fn owner_token_reads_back_only_from_its_printed_form() {
        let owner = OwnerToken(0xab_cdef);
        assert_eq!(owner.to_string().parse(), Ok(owner));
        for bad in [
            "ab",
            "000000000000000000000000000000AB",
            "+0000000000000000000000000000000a",
        ] {
            assert_eq!(
                bad.parse::<OwnerToken>(),
                Err(BadOwnerToken(bad.to_string())),
                "{bad}"
            );
        }
    }
}
