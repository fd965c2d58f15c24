//! Finding the line of a JSON value by its path (`faults[3]`, `settings.ttl_ns`), so a plan that
//! parses but cannot run is refused at the line a user has to edit, not at line 1.
//!
//! serde_json does not keep spans, and a plan is small, so a tiny scanner over the text is
//! enough: it skips strings, counts array elements and matches object keys at the right depth.

/// One step of a path into a JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An object member by key.
    Key(&'static str),
    /// An array element by 0-based position.
    Index(usize),
}

/// The 1-based line where the value at `path` starts, or where the deepest prefix of `path`
/// that exists starts; `None` only for an empty text.
pub fn line_of(text: &[u8], path: &[Step]) -> Option<usize> {
    let mut pos = skip_ws(text, 0);
    let mut found = pos;
    for step in path {
        let next = match (step, text.get(pos)?) {
            (Step::Key(key), b'{') => find_member(text, pos, key),
            (Step::Index(index), b'[') => find_element(text, pos, *index),
            _ => None,
        };
        let Some(next) = next else { break };
        pos = next;
        found = pos;
    }
    Some(1 + text[..found].iter().filter(|&&b| b == b'\n').count())
}

fn skip_ws(text: &[u8], mut pos: usize) -> usize {
    while text.get(pos).is_some_and(|b| b.is_ascii_whitespace()) {
        pos += 1;
    }
    pos
}

/// Position just past the string starting at `pos` (which holds `"`).
fn skip_string(text: &[u8], mut pos: usize) -> Option<usize> {
    pos += 1;
    loop {
        match text.get(pos)? {
            b'\\' => pos += 2,
            b'"' => return Some(pos + 1),
            _ => pos += 1,
        }
    }
}

/// Position just past the value starting at `pos`.
fn skip_value(text: &[u8], pos: usize) -> Option<usize> {
    match text.get(pos)? {
        b'"' => skip_string(text, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = pos;
            loop {
                match text.get(at)? {
                    b'"' => {
                        at = skip_string(text, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let mut at = pos;
            while text
                .get(at)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                at += 1;
            }
            Some(at)
        }
    }
}

/// Start of the value of member `key` in the object at `pos`.
fn find_member(text: &[u8], pos: usize, key: &str) -> Option<usize> {
    let mut at = skip_ws(text, pos + 1);
    while text.get(at)? == &b'"' {
        let end = skip_string(text, at)?;
        let name = &text[at + 1..end - 1];
        at = skip_ws(text, end);
        if text.get(at)? != &b':' {
            return None;
        }
        let value = skip_ws(text, at + 1);
        if name == key.as_bytes() {
            return Some(value);
        }
        at = skip_ws(text, skip_value(text, value)?);
        if text.get(at)? == &b',' {
            at = skip_ws(text, at + 1);
        }
    }
    None
}

/// Start of element `index` in the array at `pos`.
fn find_element(text: &[u8], pos: usize, index: usize) -> Option<usize> {
    let mut at = skip_ws(text, pos + 1);
    for _ in 0..index {
        if text.get(at)? == &b']' {
            return None;
        }
        at = skip_ws(text, skip_value(text, at)?);
        if text.get(at)? != &b',' {
            return None;
        }
        at = skip_ws(text, at + 1);
    }
    (text.get(at)? != &b']').then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"{\n  \"format\": 1,\n  \"settings\": {\n    \"seed\": \"a,]}\\\"\",\n    \"ttl_ns\": 5\n  },\n  \"faults\": [\n    {\"x\": [1, 2]},\n    {\n      \"y\": 2\n    }\n  ]\n}\n";

    #[test]
    fn finds_members_and_elements_past_tricky_strings() {
        assert_eq!(line_of(TEXT, &[Step::Key("format")]), Some(2));
        assert_eq!(
            line_of(TEXT, &[Step::Key("settings"), Step::Key("ttl_ns")]),
            Some(5)
        );
        assert_eq!(
            line_of(TEXT, &[Step::Key("faults"), Step::Index(0)]),
            Some(8)
        );
        assert_eq!(
            line_of(TEXT, &[Step::Key("faults"), Step::Index(1)]),
            Some(9)
        );
    }

    #[test]
    fn missing_steps_fall_back_to_the_deepest_prefix() {
        assert_eq!(
            line_of(TEXT, &[Step::Key("faults"), Step::Index(7)]),
            Some(7)
        );
        assert_eq!(
            line_of(TEXT, &[Step::Key("settings"), Step::Index(0)]),
            Some(3)
        );
        assert_eq!(line_of(TEXT, &[Step::Key("nope")]), Some(1));
        assert_eq!(line_of(b"", &[Step::Key("nope")]), None);
    }
}
