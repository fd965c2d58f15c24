//! Times and owner tokens in plain words, shared by every place fencer explains a history
//! (checker explanations, timelines, `fencer explain`), so one history reads the same in all.
//!
//! Times are printed from integer nanoseconds rounded to milliseconds, never through floats,
//! so the same history gives the same words on every platform.

/// `12.504s`: seconds with three decimals, rounded to the nearest millisecond.
pub fn secs(ns: u64) -> String {
    let ms = ns / 1_000_000 + u64::from(ns % 1_000_000 >= 500_000);
    format!("{}.{:03}s", ms / 1000, ms % 1000)
}

/// As [`secs`], for a clock reading that may be negative after a backward jump.
pub fn secs_signed(ns: i64) -> String {
    let magnitude = secs(ns.unsigned_abs());
    if ns < 0 && magnitude != "0.000s" {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// The first 8 characters of an owner token, enough to tell holders apart in prose.
pub fn short_owner(owner: &str) -> String {
    match owner.char_indices().nth(8) {
        Some((cut, _)) => format!("{}…", &owner[..cut]),
        None => owner.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_to_the_millisecond_and_keep_the_sign() {
        assert_eq!(secs(12_504_500_000), "12.505s");
        assert_eq!(secs_signed(-1_500_000_000), "-1.500s");
        assert_eq!(secs_signed(-100), "0.000s");
    }

    #[test]
    fn owners_are_cut_to_eight_characters() {
        assert_eq!(short_owner("0123456789abcdef"), "01234567…");
        assert_eq!(short_owner("abc"), "abc");
    }
}
