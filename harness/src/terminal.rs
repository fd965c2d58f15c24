//! Text from a history or a plan made safe to print on a terminal or into a CI log.
//!
//! A lock name, key, value, process or error string is whatever a backend, a stored history or
//! a hand-written plan says. Printed raw, `\x1b[2J` clears the reader's screen, `\r` lets the
//! rest of a line overwrite the verdict before it, and `\n` starts a line fencer never wrote.
//! Every line fencer prints with such text passes through [`escape`] (or [`escape_lines`] for a
//! block fencer composed itself), which writes those characters as visible escapes instead.

use std::borrow::Cow;

/// Whether `c` would act on a terminal rather than show: the C0 controls (newline and tab
/// included), DEL, the C1 controls (`\u{9b}` is a one-character escape sequence introducer),
/// and the bidirectional marks and overrides that reorder how the rest of a line reads.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` as one printable line: every character that would act on a terminal is written as
/// an escape (`\n`, `\r`, `\t`, else `\u{1b}`-style), everything else as is. Text with none
/// (nearly all of it) is returned without copying.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts_on_terminal(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A block of lines fencer composed, each line passed through [`escape`] and the line breaks
/// kept. A string that may itself hold a line break must be escaped on its own, before it is
/// joined into the block.
pub fn escape_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && acts_on_terminal(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.split('\n').map(escape).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_written_as_visible_escapes() {
        assert_eq!(
            escape("lock\x1b[2J\rverdict: valid\n\t\u{7f}\u{9b}31m\u{202e}x"),
            "lock\\u{1b}[2J\\rverdict: valid\\n\\t\\u{7f}\\u{9b}31m\\u{202e}x"
        );
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "w2 was granted lock lock-1 with token 6 — clé ✓t7 \\u{1b}";
        assert!(matches!(escape(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(escape_lines("a\nb"), Cow::Borrowed("a\nb")));
    }

    #[test]
    fn a_block_keeps_its_lines_and_escapes_within_them() {
        assert_eq!(
            escape_lines("FAIL seed 1: lock \x1b[2J\r\n  reproduce: x"),
            "FAIL seed 1: lock \\u{1b}[2J\\r\n  reproduce: x"
        );
    }
}
