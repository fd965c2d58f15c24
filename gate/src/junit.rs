//! JUnit XML from a gate summary, in the dialect GitLab, GitHub (test-reporter actions) and
//! Jenkins all render: one `<testsuite>`, one test case per chunk of passing seeds, one per
//! failing run with the anomaly's explanation and the replay command in its `<failure>`.

use std::fmt::Write;

use fencer_checkers::AnomalyClass;

use crate::summary::{Chunk, GateSummary};

/// The JUnit document for `summary`.
pub fn junit_xml(summary: &GateSummary) -> String {
    let suite = "fencer gate";
    let tests = summary.chunks.len() + summary.failures.len();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"{suite}\" tests=\"{tests}\" failures=\"{failures}\" time=\"{time:.3}\">",
        failures = summary.failures.len(),
        time = summary.wall_s
    );
    let _ = writeln!(
        xml,
        "  <testsuite name=\"{suite}\" tests=\"{tests}\" failures=\"{failures}\" time=\"{time:.3}\">",
        failures = summary.failures.len(),
        time = summary.wall_s
    );
    let _ = writeln!(
        xml,
        "    <properties><property name=\"seeds\" value=\"{}\"/><property name=\"complete\" value=\"{}\"/></properties>",
        escape(&summary.seeds.to_string()),
        summary.complete
    );
    for chunk in &summary.chunks {
        // Named by the seeds that ran, as `--seeds` takes a range (the end excluded).
        let _ = writeln!(
            xml,
            "    <testcase classname=\"{class}\" name=\"seeds {first}..{end}\">",
            class = escape(summary.settings.workload.name()),
            first = chunk.lowest_seed,
            end = chunk.highest_seed.saturating_add(1),
        );
        let _ = writeln!(
            xml,
            "      <system-out>{}</system-out>",
            escape(&chunk_output(summary, chunk))
        );
        xml.push_str("    </testcase>\n");
    }
    for failure in &summary.failures {
        let _ = writeln!(
            xml,
            "    <testcase classname=\"{class}\" name=\"{name}\">",
            class = escape(summary.settings.workload.name()),
            name = escape(&failure.label),
        );
        let message = match &failure.class {
            Some(class) => format!("{class}: {}", failure.explanation),
            None => format!("{}: {}", failure.kind.name(), failure.explanation),
        };
        let mut body = format!("{message}\n\nreproduce with:\n");
        for command in &failure.replay {
            body.push_str(&format!("  {command}\n"));
        }
        if let Some(shrunk) = &failure.shrunk {
            body.push_str(&format!("minimal plan: {}\n", shrunk.plan));
        }
        let _ = writeln!(
            xml,
            "      <failure message=\"{}\" type=\"{}\">{}</failure>",
            escape(&message),
            escape(
                failure
                    .class
                    .as_ref()
                    .map_or(failure.kind.name(), AnomalyClass::name)
            ),
            escape(&body)
        );
        xml.push_str("    </testcase>\n");
    }
    // The suite's own output comes after its test cases, as the JUnit schema orders them.
    if !summary.left_out.is_empty() {
        let named: Vec<String> = summary.left_out.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            xml,
            "    <system-out>{}</system-out>",
            escape(&format!("left out: {}", named.join("; ")))
        );
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// What a chunk's test case prints: its counts, then each unknown seed of it and what its
/// checks could not decide.
fn chunk_output(summary: &GateSummary, chunk: &Chunk) -> String {
    let passed = chunk.seeds_run - chunk.failed;
    let mut out = format!(
        "{} seeds ran, {passed} passed ({} unknown), {} failed (reported as their own test cases)",
        chunk.seeds_run, chunk.unknown, chunk.failed
    );
    for unknown in &summary.unknowns {
        if unknown
            .seed
            .is_some_and(|seed| (chunk.lowest_seed..=chunk.highest_seed).contains(&seed))
        {
            let _ = write!(
                out,
                "\n{}: unknown: {}",
                unknown.label, unknown.inconclusive
            );
        }
    }
    out
}

/// Escapes text for XML content and attribute values; drops the control characters XML 1.0
/// cannot carry at all (keeping tab, newline and carriage return, which are written as
/// character references so attribute values keep them).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_quotes_and_control_characters() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\n\u{1}e"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;&#10;e"
        );
    }
}
