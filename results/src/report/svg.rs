//! Small drawing vocabulary shared by the timeline and the plots: colours and number formats.

use fencer_harness::Op;

/// A distinct, stable colour per fencing token (golden-angle hues), so neighbouring
/// generations never look alike.
pub fn token_colour(token: u64) -> String {
    format!("hsl({},70%,50%)", token.wrapping_mul(137) % 360)
}

/// One colour per client operation.
pub fn op_colour(f: Op) -> &'static str {
    match f {
        Op::Acquire => "#4c72b0",
        Op::Renew => "#8172b2",
        Op::Release => "#64b5cd",
        Op::Write => "#dd8452",
        Op::Read => "#55a868",
        Op::Check => "#8e44ad",
        _ => "#999999",
    }
}

/// Nanoseconds as milliseconds with microsecond precision (`1234.567`), for `data-` attributes
/// the page's script reads.
pub fn ms(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000, ns % 1_000_000 / 1_000)
}

/// A coordinate with one decimal: enough for a screen, short in the file.
pub fn px(value: f64) -> String {
    format!("{value:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_tokens_get_different_colours() {
        assert_ne!(token_colour(5), token_colour(6));
        assert_eq!(token_colour(0), "hsl(0,70%,50%)");
        assert_eq!(ms(1_234_567_890), "1234.567");
    }
}
