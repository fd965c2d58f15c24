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
    let described: Vec<String> = settings
        .as_object()
        .map(|fields| {
            fields
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect()
        })
        .unwrap_or_default();
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
        settings: described.join(" · "),
        anomalies: verdict
            .anomalies
            .iter()
            .map(|anomaly| ReportAnomaly {
                class: anomaly.class.name().to_string(),
                events: anomaly.events.clone(),
                explanation: anomaly.explanation.clone(),
            })
            .collect(),
    }
}

/// `timeline.html` and the plots, as (file name, bytes).
pub fn report_files(
    history: &PackedHistory,
    settings: &serde_json::Value,
    verdict: &Verdict,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut files = Vec::new();
    let kept: Result<(), std::convert::Infallible> =
        for_each_report_file(history, settings, verdict, |name, text| {
            files.push((name, text.into_bytes()));
            Ok(())
        });
    let Ok(()) = kept;
    files
}

/// Renders `timeline.html` and the plots one at a time, handing each (file name, text) to
/// `each` before the next is rendered: a saved run holds one report in memory at a time, and
/// one reading of its history (the [`Model`](model::Model)) serves them all.
pub fn for_each_report_file<E>(
    history: &PackedHistory,
    settings: &serde_json::Value,
    verdict: &Verdict,
    mut each: impl FnMut(&'static str, String) -> Result<(), E>,
) -> Result<(), E> {
    let input = report_input(settings, verdict);
    let model = model::Model::new(history);
    each(TIMELINE_FILE, timeline::page(&model, &input))?;
    for (position, name) in PLOT_FILES.into_iter().enumerate() {
        each(name, plots::plot(&model, position))?;
    }
    Ok(())
}
