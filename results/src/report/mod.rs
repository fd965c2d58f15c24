//! Reports a person reads: `timeline.html` (swimlanes per worker, lock service and store, with
//! leases, writes, faults and the anomalies' evidence) and SVG plots (latency, lease ownership,
//! clock offsets).
//!
//! Reports are pure functions of a history, the run's settings and its verdict, so they are
//! byte-for-byte deterministic and self-contained: inline CSS, JS and SVG, no network fetch.
//! [`report_files`] renders them all; the pages see the verdict through [`ReportInput`], the
//! few plain facts they draw.

pub mod escape;
pub mod model;
pub mod plots;
mod svg;
pub mod timeline;

use fencer_checkers::Verdict;
use fencer_harness::PackedHistory;
use fencer_run::settings::{Settings, format_duration};

pub use plots::{PLOT_FILES, render_plots};
pub use timeline::{MAX_DRAWN_OPS, render_timeline};

/// What a report says about the run besides its history: the verdict in plain data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportInput {
    /// A heading (`fenced-register seed 1 — sqlite-unfenced`).
    pub title: String,
    /// `valid`, `invalid` or `unknown`.
    pub validity: String,
    /// The verdict's one-line summary.
    pub summary: String,
    /// One line describing the settings.
    pub settings: String,
    /// The proven anomalies.
    pub anomalies: Vec<ReportAnomaly>,
}

/// One anomaly as a report shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportAnomaly {
    /// Its class (`stale-write-accepted`, ...).
    pub class: String,
    /// History indexes of the events that prove it.
    pub events: Vec<u64>,
    /// The checker's plain-words explanation.
    pub explanation: String,
    /// A warning (a documented limit that fails only a strict check), not an anomaly.
    pub warning: bool,
}

/// The timeline page's file name in a run directory.
pub const TIMELINE_FILE: &str = "timeline.html";

/// The verdict and settings as a report shows them. `settings` is the run's settings as JSON
/// (as `run.json` holds them), so reports need no knowledge of each setting's type.
pub fn report_input(settings: &serde_json::Value, verdict: &Verdict) -> ReportInput {
    let field = |name: &str| match settings.get(name) {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "?".into(),
    };
    ReportInput {
        title: format!(
            "{} seed {} — lock {}, store {}",
            field("workload"),
            field("seed"),
            field("lock"),
            field("store")
        ),
        validity: verdict.validity.name().to_string(),
        summary: verdict.summary_line(),
        settings: settings_line(settings),
        anomalies: verdict
            .anomalies
            .iter()
            .map(|anomaly| ReportAnomaly {
                class: anomaly.class.name().to_string(),
                events: anomaly.events.clone(),
                explanation: anomaly.explanation.clone(),
                warning: !anomaly.severity.is_failure(),
            })
            .collect(),
    }
}

/// The run's settings as the command line takes them (`--ttl 10s --renew-every 3s …`); for
/// settings this fencer cannot read (another version's), each field as saved, durations in
/// the command line's units.
fn settings_line(settings: &serde_json::Value) -> String {
    if let Ok(parsed) = serde_json::from_value::<Settings>(settings.clone()) {
        let command = parsed.run_command(parsed.seed, false);
        return command.strip_prefix("run ").unwrap_or(&command).to_string();
    }
    let Some(fields) = settings.as_object() else {
        return settings.to_string();
    };
    let described: Vec<String> = fields
        .iter()
        .map(
            |(name, value)| match (name.strip_suffix("_ns"), value.as_u64()) {
                (Some(name), Some(ns)) => format!("{name}={}", format_duration(ns)),
                _ => format!("{name}={value}"),
            },
        )
        .collect();
    described.join(" · ")
}

/// `timeline.html` and the plots, as (file name, bytes).
pub fn report_files(
    history: &PackedHistory,
    settings: &serde_json::Value,
    verdict: &Verdict,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut files = Vec::new();
    let kept: Result<(), std::io::Error> =
        for_each_report_file(history, settings, verdict, |file| {
            let mut bytes = Vec::new();
            file.write_to(&mut bytes)?;
            files.push((file.name(), bytes));
            Ok(())
        });
    kept.expect("writing into memory cannot fail");
    files
}

/// Hands `timeline.html` and each plot, one at a time, to `each` to be written: a saved run
/// never holds a report in memory (the windows around many anomalies can draw hundreds of
/// thousands of calls, and a plot draws a mark per call), and one reading of its history (the [`Model`](model::Model)) serves them all.
pub fn for_each_report_file<E>(
    history: &PackedHistory,
    settings: &serde_json::Value,
    verdict: &Verdict,
    mut each: impl FnMut(&ReportFile<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let input = report_input(settings, verdict);
    let model = model::Model::new(history);
    each(&ReportFile {
        name: TIMELINE_FILE,
        content: Content::Page(&model, &input),
    })?;
    for (position, name) in PLOT_FILES.into_iter().enumerate() {
        each(&ReportFile {
            name,
            content: Content::Plot(&model, position),
        })?;
    }
    Ok(())
}

/// One report file, ready to be written where the caller chooses.
pub struct ReportFile<'m> {
    name: &'static str,
    content: Content<'m>,
}

/// What a report file draws, as it is written.
enum Content<'m> {
    Page(&'m model::Model<'m>, &'m ReportInput),
    Plot(&'m model::Model<'m>, usize),
}

impl ReportFile<'_> {
    /// Its file name in a run directory (`timeline.html`, `latency.svg`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Writes the file's bytes to `out`.
    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut sink = IoSink { out, error: None };
        match self.content {
            Content::Page(model, input) => timeline::page(model, input, &mut sink),
            Content::Plot(model, position) => plots::plot(model, position, &mut sink),
        }
        sink.error.map_or(Ok(()), Err)
    }
}

/// Text formatted straight into a byte writer, keeping the first I/O error (formatting can only
/// say that it failed, not why).
struct IoSink<'w> {
    out: &'w mut dyn std::io::Write,
    error: Option<std::io::Error>,
}

impl std::fmt::Write for IoSink<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        if self.error.is_some() {
            return Err(std::fmt::Error);
        }
        self.out.write_all(text.as_bytes()).map_err(|error| {
            self.error = Some(error);
            std::fmt::Error
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Event, EventType, History, Op};

    /// A writer that takes `room` bytes, then fails.
    struct FullDisk {
        room: usize,
        taken: Vec<u8>,
    }

    impl std::io::Write for FullDisk {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.taken.len() + bytes.len() > self.room {
                return Err(std::io::Error::other("disk full"));
            }
            self.taken.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn history() -> PackedHistory {
        let events = (0..40u64)
            .flat_map(|n| {
                let process = format!("w{}", n % 3);
                [
                    Event {
                        time_ns: n * 5_000_000,
                        ..Event::new(&process, EventType::Invoke, Op::Acquire)
                    },
                    Event {
                        time_ns: n * 5_000_000 + 1_000_000 * (n % 4 + 1),
                        ..Event::new(&process, EventType::Fail, Op::Acquire)
                    },
                ]
            })
            .enumerate()
            .map(|(index, event)| Event {
                index: index as u64,
                ..event
            })
            .collect();
        PackedHistory::pack(&History { events })
    }

    #[test]
    fn settings_are_told_as_the_command_line_takes_them() {
        let settings = serde_json::to_value(Settings::default()).unwrap();
        let line = report_input(&settings, &fencer_checkers::check(&history().unpack())).settings;
        assert!(
            line.starts_with("--seed 0 --workload fenced-register"),
            "{line}"
        );
        assert!(line.contains(" --ttl 10s --renew-every 3s "), "{line}");
        assert!(!line.contains("_ns"), "{line}");
        // Settings another version wrote are shown field by field, durations in units.
        let other = serde_json::json!({"ttl_ns": 10_000_000_000u64, "workers": 5});
        assert_eq!(settings_line(&other), "ttl=10s · workers=5");
    }

    #[test]
    fn a_report_written_to_a_file_is_the_report_rendered_in_memory() {
        let history = history();
        let verdict = fencer_checkers::check(&history.unpack());
        let mut written = Vec::new();
        let done: std::io::Result<()> =
            for_each_report_file(&history, &serde_json::json!({}), &verdict, |file| {
                let mut bytes = Vec::new();
                file.write_to(&mut bytes)?;
                written.push((file.name(), bytes));
                Ok(())
            });
        done.unwrap();
        let names: Vec<&str> = written.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            names,
            [TIMELINE_FILE, PLOT_FILES[0], PLOT_FILES[1], PLOT_FILES[2]]
        );
        for ((name, bytes), (plot_name, text)) in written[1..].iter().zip(render_plots(&history)) {
            assert_eq!(*name, plot_name);
            assert_eq!(String::from_utf8(bytes.clone()).unwrap(), text);
        }
        let page = render_timeline(&history, &report_input(&serde_json::json!({}), &verdict));
        assert_eq!(String::from_utf8(written[0].1.clone()).unwrap(), page);
        let latency = String::from_utf8(written[1].1.clone()).unwrap();
        assert_eq!(latency.matches("<circle").count(), 40, "a mark per call");
    }

    #[test]
    fn a_write_that_fails_partway_through_a_report_returns_its_error() {
        let history = history();
        let verdict = fencer_checkers::check(&history.unpack());
        let mut failed = Vec::new();
        let done: std::io::Result<()> =
            for_each_report_file(&history, &serde_json::json!({}), &verdict, |file| {
                let mut disk = FullDisk {
                    room: 600,
                    taken: Vec::new(),
                };
                if let Err(error) = file.write_to(&mut disk) {
                    failed.push((file.name(), error.to_string(), disk.taken.len()));
                }
                Ok(())
            });
        done.unwrap();
        assert!(
            failed
                .iter()
                .filter(|(_, error, taken)| error == "disk full" && *taken <= 600)
                .count()
                == 4,
            "{failed:?}"
        );
    }
}
