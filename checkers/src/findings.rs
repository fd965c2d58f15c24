//! How a checker's raw hits become a report: exact counting, the per-class storage cap, and the
//! three-valued result.

use crate::verdict::{
    Anomaly, AnomalyClass, CheckerReport, MAX_ANOMALIES_PER_CLASS, Severity, Validity,
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
            },
            anomalies: Vec::new(),
        }
    }

    /// The checker ran on `evidence`, found `count` anomalies (explaining the kept ones), and
    /// could not rule out more when `inconclusive` says why.
    pub fn ran(
        class: AnomalyClass,
        evidence: &str,
        count: usize,
        anomalies: Vec<Anomaly>,
        inconclusive: Option<String>,
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
        let evidence = match inconclusive {
            Some(why) => format!("{evidence}; inconclusive: {why}"),
            None => evidence.to_string(),
        };
        Outcome {
            report: CheckerReport {
                checker: class,
                validity,
                anomalies: count,
                evidence,
                skipped: None,
                severity: Severity::Failure,
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
    fn inconclusive_checker_is_unknown_and_says_why() {
        let outcome = Outcome::ran(
            AnomalyClass::StaleWriteAccepted,
            "client replies",
            0,
            Vec::new(),
            Some("1 write timed out".into()),
        );
        assert_eq!(outcome.report.validity, Validity::Unknown);
        assert_eq!(
            outcome.report.evidence,
            "client replies; inconclusive: 1 write timed out"
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
