//! Escaping for HTML and SVG: every string that came from a history, a plan or a backend name
//! goes through [`text`] before it is placed in a page, so a value like
//! `<script>alert(1)</script>` renders as text and never runs.
//!
//! The pages never put user strings inside `<script>`: scripts read only numeric `data-`
//! attributes, so HTML escaping is the only escaping needed.

/// Escapes `raw` for HTML/SVG text and for double- or single-quoted attribute values.
pub fn text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    push(&mut out, raw);
    out
}

/// Appends `raw`, escaped as by [`text`], to `out`.
pub fn push(out: &mut String, raw: &str) {
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab/newline are not valid in XML (SVG files).
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_entities() {
        assert_eq!(
            text("<script>alert('x' & \"y\")</script>"),
            "&lt;script&gt;alert(&#39;x&#39; &amp; &quot;y&quot;)&lt;/script&gt;"
        );
        assert_eq!(text("plain w0-1"), "plain w0-1");
    }

    #[test]
    fn control_characters_are_replaced_so_svg_stays_well_formed() {
        let escaped = text("a\u{1}b\0c");
        assert!(
            !escaped.contains('\u{1}') && !escaped.contains('\0'),
            "{escaped}"
        );
    }
}
