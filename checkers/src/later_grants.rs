//! Which grant acknowledged after a given point of a history carried the highest token: how
//! the checkers working from client replies tell that an owner was superseded.
//!
//! On a correct lock service tokens follow grant order, so a grant with a higher token than an
//! owner's came after the owner's. That holds only where the tokens do not contradict real
//! time: a grant acknowledged before the owner's acquire was even sent came first, whatever
//! its token. A higher token there is the lock's tokens going backwards (a counter lost in a
//! restart, a clock stepped back: `token-regression`), not the owner being superseded, so only
//! grants acknowledged after the owner's acquire was sent can supersede it.

use fencer_harness::Sym;

/// An acknowledged grant on a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Granted {
    pub token: u64,
    pub owner: Sym,
    /// Position of the acquire's `ok`.
    pub ok: usize,
}

/// One lock's acknowledged grants, in acknowledgement order. Only a grant no later grant
/// outranks can answer [`LaterGrants::highest_after`], so those alone are kept (tokens
/// falling): each grant is pushed and popped at most once.
#[derive(Default)]
pub(crate) struct LaterGrants {
    unsurpassed: Vec<Granted>,
}

impl LaterGrants {
    /// Adds a grant acknowledged after every grant already added.
    pub fn push(&mut self, granted: Granted) {
        while self
            .unsurpassed
            .last()
            .is_some_and(|last| last.token <= granted.token)
        {
            self.unsurpassed.pop();
        }
        self.unsurpassed.push(granted);
    }

    /// The grant with the highest token among those acknowledged after position `after` (the
    /// latest of equals).
    pub fn highest_after(&self, after: usize) -> Option<Granted> {
        let first = self
            .unsurpassed
            .partition_point(|granted| granted.ok <= after);
        self.unsurpassed.get(first).copied()
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::Strings;

    use super::*;

    #[test]
    fn the_highest_token_acknowledged_after_a_point_is_found() {
        let owner = Strings::new().intern("o");
        let mut grants = LaterGrants::default();
        // Tokens 5 and 9 before a reset, then 1, 2, 3 after it.
        for (token, ok) in [(5, 10), (9, 20), (1, 30), (2, 40), (3, 50)] {
            grants.push(Granted { token, owner, ok });
        }
        let token_after = |after| grants.highest_after(after).map(|granted| granted.token);
        assert_eq!(token_after(0), Some(9));
        assert_eq!(token_after(20), Some(3));
        assert_eq!(token_after(35), Some(3));
        assert_eq!(token_after(50), None);
    }
}
