//! What one master answered to one command, and what a round of answers from every master
//! lets the client conclude: Redlock decides by counting, so the counting is kept in one place.

use std::fmt::Write as _;

/// One master's answer to one command of a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum NodeReply {
    /// The command did what was asked (the key was set, extended or deleted).
    Yes,
    /// The master answered and did nothing (the key was held by someone else, or not ours).
    No,
    /// Nothing was sent: no connection could be opened in time.
    NotSent(String),
    /// Sent, and no answer came in time (or the connection broke): it may have been applied.
    Unknown(String),
}

/// A round of answers, one per master in URL order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// Masters that did what was asked.
    pub(super) yes: usize,
    /// Masters that answered and did nothing.
    pub(super) no: usize,
    /// Masters nothing was sent to.
    pub(super) not_sent: usize,
    /// Masters whose answer is unknown.
    pub(super) unknown: usize,
    /// The first error seen, for messages.
    first_error: Option<String>,
}

impl Tally {
    /// Counts `replies`.
    pub(super) fn of(replies: &[NodeReply]) -> Tally {
        let mut tally = Tally::default();
        for reply in replies {
            match reply {
                NodeReply::Yes => tally.yes += 1,
                NodeReply::No => tally.no += 1,
                NodeReply::NotSent(why) => {
                    tally.not_sent += 1;
                    tally.first_error.get_or_insert_with(|| why.clone());
                }
                NodeReply::Unknown(why) => {
                    tally.unknown += 1;
                    tally.first_error.get_or_insert_with(|| why.clone());
                }
            }
        }
        tally
    }

    /// True when at least `quorum` masters did what was asked.
    pub(super) fn reached(&self, quorum: usize) -> bool {
        self.yes >= quorum
    }

    /// True when the round certainly did not reach `quorum` masters: even every unknown answer
    /// counted as done would not make a majority.
    pub(super) fn surely_missed(&self, quorum: usize) -> bool {
        self.yes + self.unknown < quorum
    }

    /// `3 of 5 masters did it, 1 refused, 1 unreachable (connection refused)`: the round in
    /// words, `did` naming what a yes means.
    pub(super) fn describe(&self, did: &str) -> String {
        let masters = self.yes + self.no + self.not_sent + self.unknown;
        let mut text = format!("{} of {masters} masters {did}", self.yes);
        for (count, what) in [
            (self.no, "refused"),
            (self.not_sent, "unreachable"),
            (self.unknown, "left the outcome unknown"),
        ] {
            if count > 0 {
                let _ = write!(text, ", {count} {what}");
            }
        }
        if let Some(error) = &self.first_error {
            let _ = write!(text, " ({error})");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_counts_each_kind_of_answer_and_says_so() {
        let tally = Tally::of(&[
            NodeReply::Yes,
            NodeReply::Yes,
            NodeReply::No,
            NodeReply::NotSent("connection refused".into()),
            NodeReply::Unknown("timed out".into()),
        ]);
        assert_eq!(
            (tally.yes, tally.no, tally.not_sent, tally.unknown),
            (2, 1, 1, 1)
        );
        assert!(!tally.reached(3));
        assert!(tally.reached(2));
        assert!(
            !tally.surely_missed(3),
            "the unknown answer may have made 3"
        );
        assert!(tally.surely_missed(4));
        assert_eq!(
            tally.describe("took the key"),
            "2 of 5 masters took the key, 1 refused, 1 unreachable, 1 left the outcome unknown \
             (connection refused)"
        );
    }
}
