//! One applied-log entry as the Redis and ZooKeeper stores keep it: `<token> <write id>`, one
//! per applied write, in the store's order. Both stores read their logs back with
//! [`parse`], so the two cannot drift apart on what an entry says.

use fencer_harness::AppliedWrite;

/// The entry recording that the write `write_id` with `fencing_token` was applied (the Redis
/// store builds the same text in its Lua script).
#[cfg(feature = "zookeeper")]
pub fn format(fencing_token: u64, write_id: &str) -> String {
    format!("{fencing_token} {write_id}")
}

/// The applied write an entry records, as the `seq`-th (from 1) applied to `key`; `None` for
/// an entry that is not in that form (the log is then unreadable, never guessed).
pub fn parse(seq: u64, key: &str, entry: &str) -> Option<AppliedWrite> {
    let (token, write_id) = entry.split_once(' ')?;
    Some(AppliedWrite {
        seq,
        key: key.to_string(),
        fencing_token: token.parse().ok()?,
        write_id: write_id.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_written_and_a_malformed_one_not_at_all() {
        let applied = parse(3, "k", "42 w1-7").unwrap();
        assert_eq!(
            (applied.seq, applied.key.as_str(), applied.fencing_token),
            (3, "k", 42)
        );
        assert_eq!(applied.write_id, "w1-7");
        assert!(parse(1, "k", "w1-7").is_none());
        assert!(parse(1, "k", "x w1-7").is_none());
        #[cfg(feature = "zookeeper")]
        assert_eq!(parse(1, "k", &format(9, "w2-0")).unwrap().fencing_token, 9);
    }
}
