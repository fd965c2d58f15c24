//! What the checkers conclude: the verdict written as `verdict.json`, and its parts.
//!
//! Everything here is plain data (serde, `PartialEq`) so the verdict can be stored, diffed
//! between runs and read back by the results crate without re-running a checker. Maps are
//! `BTreeMap`s so the JSON is byte-for-byte deterministic.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// At most this many [`Anomaly`] entries are stored per class in [`Verdict::anomalies`].
///
/// A pathological history (a store that ignores fencing entirely) can produce one anomaly per
/// write; a million explanations would make `verdict.json` unreadable and slow to write. The
/// counts ([`Verdict::anomaly_counts`], [`CheckerReport::anomalies`]) stay exact.
pub const MAX_ANOMALIES_PER_CLASS: usize = 1000;

/// Jepsen's three-valued answer.
///
/// Ordered by how bad the news is, so combining checkers is `max`: `Invalid > Unknown > Valid`.
/// The declaration order is not the ordering; see the `Ord` impl.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Validity {
    /// No anomaly, and the evidence was enough to say so.
    Valid,
    /// At least one anomaly was proven.
    Invalid,
    /// No anomaly was proven, but calls with unknown outcome could hide one.
    Unknown,
}

impl Validity {
    fn severity(self) -> u8 {
        match self {
            Validity::Valid => 0,
            Validity::Unknown => 1,
            Validity::Invalid => 2,
        }
    }

    /// The worse of two results: what a composed checker reports.
    pub fn worst(self, other: Validity) -> Validity {
        self.max(other)
    }

    /// Jepsen's exit code for this result: 0 valid, 1 invalid, 2 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 2,
        }
    }

    /// The lower-case name used in JSON and in [`Verdict::summary_line`].
    pub fn name(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        }
    }
}

impl Ord for Validity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.severity().cmp(&other.severity())
    }
}

impl PartialOrd for Validity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The anomaly families this crate checks for; each names one checker.
///
/// The kebab-case names are the stable vocabulary shared with the CLI, `verdict.json`, JUnit
/// reports and DESIGN.md's taxonomy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyClass {
    /// The store accepted a write whose fencing token was lower than one it had already accepted.
    StaleWriteAccepted,
    /// A release or renew by a stale owner removed or extended another owner's lease.
    ForeignRelease,
    /// Two leases on one lock were valid at the same time per the lock service.
    OverlappingLeases,
    /// A grant carried a token not greater than an earlier grant's on the same lock.
    TokenRegression,
    /// A worker was told `ok` for a write the store never applied, or `fail` for one it applied.
    AckMismatch,
    /// The store accepted a write from a holder whose lock had already been granted to a newer
    /// token the store had not seen yet: the documented limit of fencing, a warning unless
    /// strict.
    SupersededWriteAccepted,
    /// A read-modify-write increment acknowledged to a worker is missing from the final state.
    LostUpdate,
    /// One logical operation (one write id) took effect twice.
    DuplicateEffect,
    /// A renewal task renewed (or tried to) after its worker released that lease or finished.
    ZombieRenewal,
    /// A read returned a value older than a write that completed before the read began.
    StaleRead,
    /// The reads and writes of the protected value admit no linearization as a register.
    NonlinearizableRegister,
    /// The store refused a write as stale although it had accepted no higher token for the key.
    UnfoundedRejection,
    /// A read returned a write no client sent, one whose every send was refused, one the store
    /// never applied, or a sent write with another token or value.
    PhantomRead,
    /// A lock call's reply contradicts the lock service's log: a grant, renew or release
    /// answered `ok` that the log never applied (or with another token), answered `fail` that
    /// it applied, or `busy` while the log shows no live lease.
    LockReplyMismatch,
    /// The lock service renewed a lease its own log shows expired or released, with no newer
    /// lease live (a warning unless strict; with one live it is `overlapping-leases`).
    ExpiredLeaseRenewed,
    /// The lock stayed busy for over a TTL plus a margin after its last lease ended, with no
    /// grant in between: a liveness failure (a warning unless strict).
    StuckLock,
    /// A worker sent a write under a lease its own lock client library had told it was lost.
    WriteAfterLostNotice,
    /// A lock client library answered "held" to an ownership check after another owner had
    /// been granted the lock.
    StaleOwnershipCheck,
    /// The lock service refused a renewal of a worker's lease and its library never told the
    /// worker the lease was lost (a warning unless strict).
    SilentLeaseLoss,
    /// A library's renewal period is half a TTL or more: one lost reply and the lease may
    /// expire before the next renewal (a warning unless strict).
    FragileRenewal,
    /// A lease was renewed after its worker gave it up unreleased, its work cancelled (a
    /// warning unless strict).
    AbandonedLease,
}

impl AnomalyClass {
    /// Every class, in the order checkers run and summaries list them.
    pub const ALL: [AnomalyClass; 21] = [
        AnomalyClass::StaleWriteAccepted,
        AnomalyClass::ForeignRelease,
        AnomalyClass::OverlappingLeases,
        AnomalyClass::TokenRegression,
        AnomalyClass::AckMismatch,
        AnomalyClass::SupersededWriteAccepted,
        AnomalyClass::LostUpdate,
        AnomalyClass::DuplicateEffect,
        AnomalyClass::ZombieRenewal,
        AnomalyClass::StaleRead,
        AnomalyClass::NonlinearizableRegister,
        AnomalyClass::UnfoundedRejection,
        AnomalyClass::PhantomRead,
        AnomalyClass::LockReplyMismatch,
        AnomalyClass::ExpiredLeaseRenewed,
        AnomalyClass::StuckLock,
        AnomalyClass::WriteAfterLostNotice,
        AnomalyClass::StaleOwnershipCheck,
        AnomalyClass::SilentLeaseLoss,
        AnomalyClass::FragileRenewal,
        AnomalyClass::AbandonedLease,
    ];

    /// The kebab-case name (`stale-write-accepted`, ...), identical to the serde form.
    pub fn name(&self) -> &'static str {
        match self {
            AnomalyClass::StaleWriteAccepted => "stale-write-accepted",
            AnomalyClass::ForeignRelease => "foreign-release",
            AnomalyClass::OverlappingLeases => "overlapping-leases",
            AnomalyClass::TokenRegression => "token-regression",
            AnomalyClass::AckMismatch => "ack-mismatch",
            AnomalyClass::SupersededWriteAccepted => "superseded-write-accepted",
            AnomalyClass::LostUpdate => "lost-update",
            AnomalyClass::DuplicateEffect => "duplicate-effect",
            AnomalyClass::ZombieRenewal => "zombie-renewal",
            AnomalyClass::StaleRead => "stale-read",
            AnomalyClass::NonlinearizableRegister => "nonlinearizable-register",
            AnomalyClass::UnfoundedRejection => "unfounded-rejection",
            AnomalyClass::PhantomRead => "phantom-read",
            AnomalyClass::LockReplyMismatch => "lock-reply-mismatch",
            AnomalyClass::ExpiredLeaseRenewed => "expired-lease-renewed",
            AnomalyClass::StuckLock => "stuck-lock",
            AnomalyClass::WriteAfterLostNotice => "write-after-lost-notice",
            AnomalyClass::StaleOwnershipCheck => "stale-ownership-check",
            AnomalyClass::SilentLeaseLoss => "silent-lease-loss",
            AnomalyClass::FragileRenewal => "fragile-renewal",
            AnomalyClass::AbandonedLease => "abandoned-lease",
        }
    }
}

impl fmt::Display for AnomalyClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name given to [`AnomalyClass::from_str`] that names no class.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "expected an anomaly class (stale-write-accepted, foreign-release, overlapping-leases, \
     token-regression, ack-mismatch, superseded-write-accepted, lost-update, duplicate-effect, \
     zombie-renewal, stale-read, nonlinearizable-register, unfounded-rejection, phantom-read, \
     lock-reply-mismatch, expired-lease-renewed, stuck-lock, write-after-lost-notice, \
     stale-ownership-check, silent-lease-loss, fragile-renewal or abandoned-lease), found \
     {found:?}"
)]
pub struct UnknownAnomalyClass {
    /// The name that was given.
    pub found: String,
}

impl FromStr for AnomalyClass {
    type Err = UnknownAnomalyClass;

    fn from_str(name: &str) -> Result<AnomalyClass, UnknownAnomalyClass> {
        AnomalyClass::ALL
            .into_iter()
            .find(|class| class.name() == name)
            .ok_or_else(|| UnknownAnomalyClass {
                found: name.to_string(),
            })
    }
}

/// How much a finding counts: a failure decides the verdict, a warning is reported but does
/// not (unless checking is strict, which turns warnings into failures).
///
/// Serialised only when it is a warning, so verdicts written before warnings existed read back
/// unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// The finding makes the verdict invalid.
    #[default]
    Failure,
    /// A documented limit, reported without failing the verdict.
    Warning,
}

impl Severity {
    /// True for [`Severity::Failure`] (serde's skip test).
    pub fn is_failure(&self) -> bool {
        *self == Severity::Failure
    }
}

/// One proven anomaly: the events that prove it and a paragraph a person can follow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    /// Which family it belongs to.
    pub class: AnomalyClass,
    /// Whether it fails the verdict (omitted from JSON when it does).
    #[serde(default, skip_serializing_if = "Severity::is_failure")]
    pub severity: Severity,
    /// History indexes of the proof, ascending: the offending event, what it contradicts, and
    /// the faults that touched the offender in between (so a timeline can highlight them).
    pub events: Vec<u64>,
    /// Plain words: who, which tokens and write ids, when on the true clock and on the actor's
    /// own clock, and what the system should have done.
    pub explanation: String,
}

/// What one checker did and found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckerReport {
    /// The class this checker looks for.
    pub checker: AnomalyClass,
    /// Its own result. A skipped checker reports [`Validity::Unknown`] (it cannot vouch for
    /// anything), but [`crate::check`] leaves skipped checkers out of the overall verdict.
    pub validity: Validity,
    /// Exact number of anomalies found, even beyond [`MAX_ANOMALIES_PER_CLASS`].
    pub anomalies: usize,
    /// Which evidence was used (`store log`, `client replies`, `lock log + client replies`);
    /// when the result is unknown, also why.
    pub evidence: String,
    /// Why the checker did not run (the history lacks the evidence it needs), if it did not.
    pub skipped: Option<String>,
    /// Whether its findings fail the verdict or are warnings (omitted from JSON for failures).
    #[serde(default, skip_serializing_if = "Severity::is_failure")]
    pub severity: Severity,
    /// What the checker could not decide, when it is unknown: the reason and the events that
    /// left it undecided, so a person can look at exactly those calls (omitted from JSON when
    /// the checker decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<Inconclusive>,
}

/// At most this many event indexes are stored per [`Inconclusive`]; its count stays exact.
pub const MAX_INCONCLUSIVE_EVENTS: usize = 100;

/// Why a checker's result is unknown, and which events made it so.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inconclusive {
    /// One line: what could not be decided (`1 read saw value 3, which 2 writes wrote`).
    pub reason: String,
    /// History indexes of the events that left the checker undecided (calls with unknown
    /// outcome, reads that name no single write, unreadable log entries), ascending; at most
    /// [`MAX_INCONCLUSIVE_EVENTS`].
    pub events: Vec<u64>,
    /// Exact number of such events, even beyond the stored ones.
    pub count: usize,
}

impl Inconclusive {
    /// `reason: events 3, 9 and 12` — the reason with the first few events named.
    pub fn describe(&self) -> String {
        const SHOWN: usize = 5;
        let mut shown: Vec<String> = self.events.iter().take(SHOWN).map(u64::to_string).collect();
        let more = self.count.saturating_sub(shown.len());
        let list = match (shown.len(), more) {
            (0, _) => return self.reason.clone(),
            (1, 0) => return format!("{}: event {}", self.reason, shown[0]),
            (_, 0) => {
                let last = shown.pop().unwrap_or_default();
                format!("{} and {last}", shown.join(", "))
            }
            (_, more) => format!("{} and {more} more", shown.join(", ")),
        };
        format!("{}: events {list}", self.reason)
    }
}

/// The answer for a whole history: the worst result of the checkers that ran, with proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Worst result over the checkers that ran (skipped ones excluded).
    pub validity: Validity,
    /// Number of events in the checked history (for the summary line).
    #[serde(default)]
    pub events: u64,
    /// Exact anomaly count per class name, only for classes with at least one anomaly that
    /// fails the verdict.
    pub anomaly_counts: BTreeMap<String, usize>,
    /// Exact count per class name of findings reported as warnings (they do not fail the
    /// verdict); omitted from JSON when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub warning_counts: BTreeMap<String, usize>,
    /// The anomalies, grouped by class in [`AnomalyClass::ALL`] order, each group in history
    /// order; at most [`MAX_ANOMALIES_PER_CLASS`] per class.
    pub anomalies: Vec<Anomaly>,
    /// One report per checker, in [`AnomalyClass::ALL`] order.
    pub checkers: Vec<CheckerReport>,
    /// Why the history as a whole cannot be judged, when that is so whatever the checkers
    /// say: a history with no events records nothing, so it shows neither a correct system
    /// nor a broken one, and the verdict is unknown (omitted from JSON when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_because: Option<String>,
    /// True when no acquire in the history was answered as granted: no worker was told it held
    /// a lease, so a valid verdict says nothing about what a lock protects (a lock service that
    /// was never reached, a client that never got the lock; a grant whose reply was lost does
    /// not count, as its worker never learnt of it); omitted from JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_lease_granted: bool,
}

impl Verdict {
    /// One line for a terminal or a CI log, e.g. `invalid: 3 stale-write-accepted, 1
    /// ack-mismatch` or `valid: 0 anomalies in 1234 events`.
    pub fn summary_line(&self) -> String {
        let skipped: Vec<&str> = self
            .checkers
            .iter()
            .filter(|report| report.skipped.is_some())
            .map(|report| report.checker.name())
            .collect();
        let mut skipped_note = if skipped.is_empty() {
            String::new()
        } else {
            format!(" (skipped: {})", skipped.join(", "))
        };
        let warnings: Vec<String> = AnomalyClass::ALL
            .iter()
            .filter_map(|class| {
                let count = self.warning_counts.get(class.name()).copied()?;
                (count > 0).then(|| format!("{count} {class}"))
            })
            .collect();
        if !warnings.is_empty() {
            skipped_note.push_str(&format!("; warnings: {}", warnings.join(", ")));
        }
        match self.validity {
            Validity::Invalid => {
                let counts: Vec<String> = AnomalyClass::ALL
                    .iter()
                    .filter_map(|class| {
                        let count = self.anomaly_counts.get(class.name()).copied()?;
                        (count > 0).then(|| format!("{count} {class}"))
                    })
                    .collect();
                format!("invalid: {}{skipped_note}", counts.join(", "))
            }
            Validity::Valid if self.no_lease_granted => format!(
                "valid: 0 anomalies in {} events, but no acquire was answered as granted: no \
                 worker was told it held a lease, so nothing a lock protects was \
                 tested{skipped_note}",
                self.events
            ),
            Validity::Valid => {
                format!("valid: 0 anomalies in {} events{skipped_note}", self.events)
            }
            Validity::Unknown => {
                let inconclusive: Vec<String> = self
                    .unknown_because
                    .iter()
                    .cloned()
                    .chain(self.inconclusive().map(|(class, why)| match why {
                        Some(why) => format!("{class} ({})", why.describe()),
                        None => class.name().to_string(),
                    }))
                    .collect();
                format!(
                    "unknown: 0 anomalies in {} events, inconclusive: {}{skipped_note}",
                    self.events,
                    inconclusive.join("; ")
                )
            }
        }
    }

    /// The first anomaly that fails the verdict, in [`Verdict::anomalies`] order: what a failing
    /// run is reported and shrunk as. A warning listed before it (fencing's documented limit)
    /// does not fail the run, so it must not name the failure.
    pub fn first_failure(&self) -> Option<&Anomaly> {
        self.anomalies
            .iter()
            .find(|anomaly| anomaly.severity.is_failure())
    }

    /// The checkers that ran but could not decide, in [`AnomalyClass::ALL`] order, each with
    /// what left it undecided: for a report that names the calls behind an unknown verdict.
    pub fn inconclusive(&self) -> impl Iterator<Item = (AnomalyClass, Option<&Inconclusive>)> {
        self.checkers
            .iter()
            .filter(|report| report.skipped.is_none() && report.validity == Validity::Unknown)
            .map(|report| (report.checker, report.inconclusive.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_validity_wins_invalid_over_unknown_over_valid() {
        assert!(Validity::Invalid > Validity::Unknown);
        assert!(Validity::Unknown > Validity::Valid);
        assert_eq!(Validity::Valid.worst(Validity::Unknown), Validity::Unknown);
        assert_eq!(
            Validity::Invalid.worst(Validity::Unknown),
            Validity::Invalid
        );
        assert_eq!(
            Validity::Unknown.worst(Validity::Invalid),
            Validity::Invalid
        );
        assert_eq!(Validity::Valid.worst(Validity::Valid), Validity::Valid);
        let all = [Validity::Unknown, Validity::Valid, Validity::Invalid];
        assert_eq!(all.iter().max(), Some(&Validity::Invalid));
        assert_eq!(
            [Validity::Valid, Validity::Unknown, Validity::Invalid].map(Validity::exit_code),
            [0, 2, 1]
        );
    }

    #[test]
    fn anomaly_class_names_agree_across_display_fromstr_and_serde() {
        for class in AnomalyClass::ALL {
            let name = class.name();
            assert_eq!(class.to_string(), name);
            assert_eq!(name.parse::<AnomalyClass>(), Ok(class));
            assert_eq!(
                serde_json::to_string(&class).unwrap(),
                format!("\"{name}\"")
            );
        }
        assert_eq!(
            serde_json::to_string(&Validity::Unknown).unwrap(),
            "\"unknown\""
        );
    }

    #[test]
    fn unknown_class_name_is_rejected_naming_what_was_expected() {
        let err = "stale-write".parse::<AnomalyClass>().unwrap_err();
        let message = err.to_string();
        assert!(message.contains("stale-write-accepted"), "{message}");
        assert!(message.contains("found \"stale-write\""), "{message}");
    }

    fn sample_verdict() -> Verdict {
        Verdict {
            validity: Validity::Invalid,
            events: 12,
            anomaly_counts: BTreeMap::from([
                ("ack-mismatch".to_string(), 1),
                ("stale-write-accepted".to_string(), 3),
            ]),
            warning_counts: BTreeMap::new(),
            anomalies: vec![Anomaly {
                class: AnomalyClass::StaleWriteAccepted,
                events: vec![1, 4, 9],
                severity: Severity::Failure,
                explanation: "w1 wrote late".into(),
            }],
            checkers: vec![
                CheckerReport {
                    checker: AnomalyClass::StaleWriteAccepted,
                    validity: Validity::Invalid,
                    anomalies: 3,
                    evidence: "store log".into(),
                    skipped: None,
                    severity: Severity::Failure,
                    inconclusive: None,
                },
                CheckerReport {
                    checker: AnomalyClass::OverlappingLeases,
                    validity: Validity::Unknown,
                    anomalies: 0,
                    evidence: "none".into(),
                    skipped: Some("needs the lock service's log".into()),
                    severity: Severity::Failure,
                    inconclusive: None,
                },
                CheckerReport {
                    checker: AnomalyClass::AckMismatch,
                    validity: Validity::Invalid,
                    anomalies: 1,
                    evidence: "store log + client replies".into(),
                    skipped: None,
                    severity: Severity::Failure,
                    inconclusive: None,
                },
            ],
            unknown_because: None,
            no_lease_granted: false,
        }
    }

    #[test]
    fn verdict_round_trips_through_json() {
        let verdict = sample_verdict();
        let json = serde_json::to_string_pretty(&verdict).unwrap();
        assert!(json.contains("\"validity\": \"invalid\""), "{json}");
        assert!(
            json.contains("\"class\": \"stale-write-accepted\""),
            "{json}"
        );
        let back: Verdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back, verdict);
    }

    #[test]
    fn invalid_summary_lists_counts_in_class_order() {
        assert_eq!(
            sample_verdict().summary_line(),
            "invalid: 3 stale-write-accepted, 1 ack-mismatch (skipped: overlapping-leases)"
        );
    }

    #[test]
    fn valid_and_unknown_summaries_give_the_event_count() {
        let mut verdict = Verdict {
            validity: Validity::Valid,
            events: 1234,
            anomaly_counts: BTreeMap::new(),
            warning_counts: BTreeMap::new(),
            anomalies: Vec::new(),
            checkers: Vec::new(),
            unknown_because: None,
            no_lease_granted: false,
        };
        assert_eq!(verdict.summary_line(), "valid: 0 anomalies in 1234 events");
        verdict.validity = Validity::Unknown;
        verdict.checkers.push(CheckerReport {
            checker: AnomalyClass::ForeignRelease,
            validity: Validity::Unknown,
            anomalies: 0,
            evidence: "client replies".into(),
            skipped: None,
            severity: Severity::Failure,
            inconclusive: None,
        });
        assert_eq!(
            verdict.summary_line(),
            "unknown: 0 anomalies in 1234 events, inconclusive: foreign-release"
        );
        verdict.checkers.push(CheckerReport {
            checker: AnomalyClass::NonlinearizableRegister,
            validity: Validity::Unknown,
            anomalies: 0,
            evidence: "client replies (linearizability search)".into(),
            skipped: None,
            severity: Severity::Failure,
            inconclusive: Some(Inconclusive {
                reason: "the search budget ran out on key k".into(),
                events: vec![4, 9],
                count: 2,
            }),
        });
        assert_eq!(
            verdict.summary_line(),
            "unknown: 0 anomalies in 1234 events, inconclusive: foreign-release; \
             nonlinearizable-register (the search budget ran out on key k: events 4 and 9)"
        );
        let kinds: Vec<(AnomalyClass, bool)> = verdict
            .inconclusive()
            .map(|(class, why)| (class, why.is_some()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (AnomalyClass::ForeignRelease, false),
                (AnomalyClass::NonlinearizableRegister, true)
            ]
        );
    }

    #[test]
    fn an_inconclusive_reason_names_its_first_events_and_counts_the_rest() {
        let why = |events: Vec<u64>, count: usize| Inconclusive {
            reason: "r".into(),
            events,
            count,
        };
        assert_eq!(why(vec![], 0).describe(), "r");
        assert_eq!(why(vec![7], 1).describe(), "r: event 7");
        assert_eq!(why(vec![1, 2, 3], 3).describe(), "r: events 1, 2 and 3");
        assert_eq!(
            why((0..100).collect(), 250).describe(),
            "r: events 0, 1, 2, 3, 4 and 245 more"
        );
    }
}
