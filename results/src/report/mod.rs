//! Reports a person reads: `timeline.html` (swimlanes per worker, lock service and store, with
//! leases, writes, faults and the anomalies' evidence) and SVG plots (latency, lease ownership,
//! clock offsets).
//!
//! Reports are pure functions of a history and a verdict summary, so they are byte-for-byte
//! deterministic and self-contained: inline CSS, JS and SVG, no network fetch. This crate holds
//! the on-disk format and does not depend on the checkers; the verdict arrives as
//! [`ReportInput`], plain data.

pub mod escape;
pub mod model;
pub mod plots;
mod svg;
pub mod timeline;
pub mod words;

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
