//! The Redis lock service's lock log: one list per lock, appended by the same Lua script that
//! grants, renews or releases, so an entry exists exactly when its change was applied.
//!
//! An entry is one line of space-separated words, built in Lua and read back here:
//!
//! ```text
//! grant   <owner> <token> <ttl_ms> <clock> <expire_ms>
//! renew   <owner> <holder> <holder_token> <ttl_ms> <clock> <expire_ms>
//! release <owner> <holder> <holder_token> <clock>
//! ```
//!
//! `<clock>` is `<secs> <micros> <shift_ms>`: the server's `TIME` when the script ran, and how
//! far emulated clock jumps have moved this lock's expiries (see [`LOG_PRELUDE`]).
//! `<expire_ms>` is the lease's `PEXPIRETIME`, the instant Redis itself expires the key, on the
//! same wall clock as `TIME`; both get `<shift_ms>` added, so the log's times are the clock
//! Redis's expiry behaves by. Lua numbers are doubles, exact only below 2^53, so the script
//! never forms a nanosecond value itself: the words are joined into nanoseconds here.
//! `<expire_ms>` is `-` on a Redis without `PEXPIRETIME` (before 7.0): its log has no sound
//! expiry and is not used.

use std::time::Duration;

use fencer_harness::{LockChange, LockLogEntry};

/// The Lua every lock script starts with. KEYS[1] is the lock, KEYS[3] its log, KEYS[4] and
/// KEYS[5] the clock shifts (ms) of this lock and of the whole server, which the clock-jump
/// emulation adds to in the same script that moves the expiries. `log(words, with_expiry)`
/// appends one entry.
pub const LOG_PRELUDE: &str = r"
local function log(words, with_expiry)
  local time = redis.call('TIME')
  local shift = tonumber(redis.call('GET', KEYS[4]) or '0')
    + tonumber(redis.call('GET', KEYS[5]) or '0')
  local entry = words .. ' ' .. time[1] .. ' ' .. time[2] .. ' ' .. string.format('%.0f', shift)
  if with_expiry then
    local expire_ms = redis.pcall('PEXPIRETIME', KEYS[1])
    if type(expire_ms) == 'number' then
      entry = entry .. ' ' .. string.format('%.0f', expire_ms)
    else
      entry = entry .. ' -'
    end
  end
  redis.call('RPUSH', KEYS[3], entry)
end
";

/// The key of `lock`'s log.
pub fn log_key(lock: &str) -> String {
    format!("{lock}:log")
}

/// The key of the clock shift (ms) applied to `lock` alone.
pub fn lock_shift_key(lock: &str) -> String {
    format!("{lock}:clock-shift-ms")
}

/// The key of the clock shift (ms) applied to every key of the server.
pub const SERVER_SHIFT_KEY: &str = "fencer:clock-shift-ms";

/// Why an entry cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// The server had no `PEXPIRETIME`: the entry names no expiry.
    NoExpiry,
    /// The entry is not in the form above.
    Malformed(String),
}

/// The `seq`-th (from 1) entry of `lock`'s log.
pub fn parse(seq: u64, lock: &str, entry: &str) -> Result<LockLogEntry, Unreadable> {
    let malformed = || Unreadable::Malformed(entry.to_string());
    let words: Vec<&str> = entry.split(' ').collect();
    let owner = |word: &str| word.parse().map_err(|_| malformed());
    let number = |word: &str| word.parse::<u64>().map_err(|_| malformed());
    let (mut change, clock, expire) = match words.as_slice() {
        ["grant", owner_word, token, ttl_ms, clock @ .., expire] if clock.len() == 3 => (
            LockChange::Granted {
                owner: owner(owner_word)?,
                fencing_token: number(token)?,
                ttl: Duration::from_millis(number(ttl_ms)?),
                expires_ns: 0,
            },
            clock,
            Some(*expire),
        ),
        [
            "renew",
            owner_word,
            holder,
            holder_token,
            ttl_ms,
            clock @ ..,
            expire,
        ] if clock.len() == 3 => (
            LockChange::Renewed {
                owner: owner(owner_word)?,
                holder: owner(holder)?,
                holder_token: number(holder_token)?,
                ttl: Duration::from_millis(number(ttl_ms)?),
                expires_ns: 0,
            },
            clock,
            Some(*expire),
        ),
        ["release", owner_word, holder, holder_token, clock @ ..] if clock.len() == 3 => (
            LockChange::Released {
                owner: owner(owner_word)?,
                holder: owner(holder)?,
                holder_token: number(holder_token)?,
            },
            clock,
            None,
        ),
        _ => return Err(malformed()),
    };
    let signed = |word: &str| word.parse::<i64>().map_err(|_| malformed());
    let [secs, micros, shift_ms] = [clock[0], clock[1], clock[2]];
    let shift_ns = signed(shift_ms)?
        .checked_mul(1_000_000)
        .ok_or_else(malformed)?;
    let (secs, micros) = (signed(secs)?, signed(micros)?);
    let at_ns = secs
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(micros.checked_mul(1_000)?))
        .and_then(|ns| ns.checked_add(shift_ns))
        .ok_or_else(malformed)?;
    if let Some(expire) = expire {
        if expire == "-" {
            return Err(Unreadable::NoExpiry);
        }
        let expiry_ns = signed(expire)?
            .checked_mul(1_000_000)
            .and_then(|ns| ns.checked_add(shift_ns))
            .ok_or_else(malformed)?;
        match &mut change {
            LockChange::Granted { expires_ns, .. } | LockChange::Renewed { expires_ns, .. } => {
                *expires_ns = expiry_ns;
            }
            LockChange::Released { .. } => {}
        }
    }
    Ok(LockLogEntry {
        seq,
        lock: lock.to_string(),
        at_ns,
        change,
    })
}

#[cfg(test)]
mod tests {
    use fencer_harness::OwnerToken;

    use super::*;

    const A: &str = "0000000000000000000000000000000a";
    const B: &str = "0000000000000000000000000000000b";

    #[test]
    fn entries_read_back_in_nanoseconds_with_the_clock_shift_added() {
        let granted = parse(
            1,
            "L",
            &format!("grant {A} 7 300 1700000000 250000 0 1700000000550"),
        )
        .unwrap();
        assert_eq!(
            granted,
            LockLogEntry {
                seq: 1,
                lock: "L".into(),
                at_ns: 1_700_000_000_250_000_000,
                change: LockChange::Granted {
                    owner: OwnerToken(0xa),
                    fencing_token: 7,
                    ttl: Duration::from_millis(300),
                    expires_ns: 1_700_000_000_550_000_000,
                },
            }
        );
        let renewed = parse(
            2,
            "L",
            &format!("renew {B} {A} 7 300 1700000000 400001 5000 1700000000700"),
        )
        .unwrap();
        assert_eq!(renewed.at_ns, 1_700_000_005_400_001_000);
        assert_eq!(
            renewed.change,
            LockChange::Renewed {
                owner: OwnerToken(0xb),
                holder: OwnerToken(0xa),
                holder_token: 7,
                ttl: Duration::from_millis(300),
                expires_ns: 1_700_000_005_700_000_000,
            }
        );
        let released = parse(3, "L", &format!("release {B} {A} 7 1700000001 0 -200")).unwrap();
        assert_eq!(released.at_ns, 1_700_000_000_800_000_000);
        assert_eq!(
            released.change,
            LockChange::Released {
                owner: OwnerToken(0xb),
                holder: OwnerToken(0xa),
                holder_token: 7,
            }
        );
    }

    #[test]
    fn an_entry_without_an_expiry_or_out_of_form_is_not_read() {
        assert_eq!(
            parse(1, "L", &format!("grant {A} 7 300 1700000000 250000 0 -")),
            Err(Unreadable::NoExpiry)
        );
        for bad in [
            format!("grant {A} 7 300 1700000000 250000 0"),
            "grant w0 7 300 1700000000 250000 0 1700000000550".to_string(),
            format!("steal {A} {B} 7 1700000000 0 0"),
            format!("release {A} {B} x 1700000000 0 0"),
            format!("release {A} {B} 7 99999999999 0 0"),
        ] {
            assert!(
                matches!(parse(1, "L", &bad), Err(Unreadable::Malformed(_))),
                "{bad}"
            );
        }
    }
}
