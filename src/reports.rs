//! The human-readable files of a run directory: `timeline.html` and the SVG plots, rendered by
//! `fencer_results::report` from the history and the verdict.

use fencer_checkers::Verdict;
use fencer_harness::History;
use fencer_results::report::{ReportAnomaly, ReportInput, render_plots, render_timeline};

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
    history: &History,
    settings: &serde_json::Value,
    verdict: &Verdict,
) -> Vec<(&'static str, Vec<u8>)> {
    let input = report_input(settings, verdict);
    let mut files = vec![(
        TIMELINE_FILE,
        render_timeline(&history.events, &input).into_bytes(),
    )];
    files.extend(
        render_plots(&history.events)
            .into_iter()
            .map(|(name, svg)| (name, svg.into_bytes())),
    );
    files
}
