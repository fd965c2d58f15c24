//! How a checker's raw hits become a report: exact counting, the per-class storage cap, and the
//! three-valued result.

use crate::context::Context;
use crate::verdict::{
    Anomaly, AnomalyClass, CheckerReport, Inconclusive, MAX_ANOMALIES_PER_CLASS,
    MAX_INCONCLUSIVE_EVENTS, Severity, Validity,
};

/// Hits found by a detection pass: all are counted, only the first
/// [`MAX_ANOMALIES_PER_CLASS`] are kept to be explained.
pub(crate) struct Hits<T> {
    /// Exact number of hits.
    pub count: usize,
    /// The hits kept for explanation, in detection order.
    pub kept: Vec<T>,
}

impl<T> Hits<T> {
    pub fn new() -> Hits<T> {
        Hits {
            count: 0,
            kept: Vec::new(),
        }
    }

    /// Counts `hit`; returns its slot in `kept` if it was kept.
    pub fn push(&mut self, hit: T) -> Option<usize> {
        self.count += 1;
        (self.kept.len() < MAX_ANOMALIES_PER_CLASS).then(|| {
            self.kept.push(hit);
            self.kept.len() - 1
        })
    }
}

/// The events that left a checker undecided (history positions): all are counted, the first
/// [`MAX_INCONCLUSIVE_EVENTS`] kept to be named in the report.
pub(crate) struct Undecided {
    count: usize,
    positions: Vec<usize>,
}

impl Undecided {
    pub fn new() -> Undecided {
        Undecided {
            count: 0,
            positions: Vec::new(),
        }
    }

    /// Counts the event at `position`.
    pub fn push(&mut self, position: usize) {
        self.count += 1;
        if self.positions.len() < MAX_INCONCLUSIVE_EVENTS {
            self.positions.push(position);
        }
    }

    /// Counts the event at `position` and keeps it with `cited`, the event that made it
    /// undecidable (both are named; only the first is counted).
    pub fn push_citing(&mut self, position: usize, cited: usize) {
        self.count += 1;
        if self.positions.len() + 2 <= MAX_INCONCLUSIVE_EVENTS {
            self.positions.extend([position, cited]);
        }
    }

    /// How many events were counted.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The report's account of them, `None` when there are none; `reason` words the count.
    pub fn into_inconclusive(
        self,
        ctx: &Context<'_>,
        reason: impl FnOnce(usize) -> String,
    ) -> Option<Inconclusive> {
        (self.count > 0).then(|| {
            let reason = reason(self.count);
            self.with_reason(ctx, reason)
        })
    }

    /// The report's account of them under `reason`, even when no single event is to blame
    /// (a search that ran out of time).
    pub fn with_reason(self, ctx: &Context<'_>, reason: String) -> Inconclusive {
        Inconclusive {
            reason,
            events: ctx.indexes(self.positions),
            count: self.count,
        }
    }
}

/// One checker's report plus the anomalies it explains.
pub(crate) struct Outcome {
    pub report: CheckerReport,
    pub anomalies: Vec<Anomaly>,
}

impl Outcome {
    /// The checker could not run: the history lacks the evidence it needs.
    pub fn skipped(class: AnomalyClass, why: &str) -> Outcome {
        Outcome {
            report: CheckerReport {
                checker: class,
                validity: Validity::Unknown,
                anomalies: 0,
                evidence: "none".into(),
                skipped: Some(why.into()),
                severity: Severity::Failure,
                inconclusive: None,
            },
            anomalies: Vec::new(),
        }
    }

    /// The checker ran on `evidence`, found `count` anomalies (explaining the kept ones), and
    /// could not rule out more when `inconclusive` says why and names the events.
    pub fn ran(
        class: AnomalyClass,
        evidence: &str,
        count: usize,
        anomalies: Vec<Anomaly>,
        inconclusive: Option<Inconclusive>,
    ) -> Outcome {
        debug_assert!(anomalies.len() <= count.min(MAX_ANOMALIES_PER_CLASS));
        debug_assert!(anomalies.iter().all(|anomaly| anomaly.class == class));
        let validity = if count > 0 {
            Validity::Invalid
        } else if inconclusive.is_some() {
            Validity::Unknown
        } else {
            Validity::Valid
        };
        Outcome {
            report: CheckerReport {
                checker: class,
                validity,
                anomalies: count,
                evidence: evidence.to_string(),
                skipped: None,
                severity: Severity::Failure,
                inconclusive,
            },
            anomalies,
        }
    }
}

impl Outcome {
    /// The same findings as warnings: they no longer make the checker invalid (an
    /// inconclusive result stays unknown, for the record), and every anomaly says so.
    pub fn into_warnings(mut self) -> Outcome {
        self.report.severity = Severity::Warning;
        if self.report.validity == Validity::Invalid {
            self.report.validity = Validity::Valid;
        }
        for anomaly in &mut self.anomalies {
            anomaly.severity = Severity::Warning;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_count_everything_but_keep_only_the_cap() {
        let mut hits = Hits::new();
        for n in 0..MAX_ANOMALIES_PER_CLASS + 5 {
            let slot = hits.push(n);
            assert_eq!(slot.is_some(), n < MAX_ANOMALIES_PER_CLASS);
        }
        assert_eq!(hits.count, MAX_ANOMALIES_PER_CLASS + 5);
        assert_eq!(hits.kept.len(), MAX_ANOMALIES_PER_CLASS);
    }

    #[test]
    fn inconclusive_checker_is_unknown_and_names_the_events() {
        let mut b = crate::testkit::Builder::new();
        for _ in 0..MAX_INCONCLUSIVE_EVENTS + 3 {
            b.pause("w1", 1.0);
        }
        let packed = fencer_harness::PackedHistory::pack(&b.build());
        let ctx = Context::new(&packed);
        let mut undecided = Undecided::new();
        for position in (0..MAX_INCONCLUSIVE_EVENTS + 3).rev() {
            undecided.push(position);
        }
        let inconclusive = undecided.into_inconclusive(&ctx, |n| format!("{n} calls timed out"));
        let outcome = Outcome::ran(
            AnomalyClass::StaleWriteAccepted,
            "client replies",
            0,
            Vec::new(),
            inconclusive,
        );
        assert_eq!(outcome.report.validity, Validity::Unknown);
        assert_eq!(outcome.report.evidence, "client replies");
        let why = outcome.report.inconclusive.as_ref().unwrap();
        assert_eq!(why.reason, "103 calls timed out");
        assert_eq!(why.count, MAX_INCONCLUSIVE_EVENTS + 3);
        // The first ones found, in history order.
        assert_eq!(why.events.len(), MAX_INCONCLUSIVE_EVENTS);
        assert_eq!(why.events[0], 3);
        assert!(
            Undecided::new()
                .into_inconclusive(&ctx, |_| unreachable!())
                .is_none()
        );
        let outcome = Outcome::ran(
            AnomalyClass::StaleWriteAccepted,
            "store log",
            0,
            Vec::new(),
            None,
        );
        assert_eq!(outcome.report.validity, Validity::Valid);
    }
}
