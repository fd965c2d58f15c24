//! Two rules of a history about names, checked as it is read: a process is a client or a
//! server, never both, and a write id names one write.
//!
//! A server's log is ground truth because a server recorded it: an entry attributed to a
//! process that makes client calls (a worker, its renewal task) would be trusted as the
//! lock service's or the store's word without being either. And the checkers tell writes
//! apart by id: a read names the write it saw by id, the store log says which write it
//! applied by id. An id that names two different writes (as histories converted from other
//! tools give, whose "ids" are the values written) would make them judge one write by
//! another's fate, so such a history is refused at the line that reuses the id. A retry sends
//! the same write again, from the same process, with the same key, token and value: that is
//! one write sent twice, and allowed.
//!
//! Both are kept in tables indexed by [`Sym::slot`]: a process acts on every line, and a
//! hashed lookup per line would cost more than the rule.

use crate::event::{EventType, Op};
use crate::packed::{Row, Strings, Sym};

/// The first write invoke that carried a write id.
#[derive(Clone, Copy)]
struct FirstWrite {
    line: usize,
    process: Sym,
    key: Option<Sym>,
    token: Option<u64>,
    value: Option<Sym>,
}

impl FirstWrite {
    fn of(row: &Row, line: usize) -> FirstWrite {
        FirstWrite {
            line,
            process: row.process,
            key: row.key,
            token: row.token(),
            value: row.value,
        }
    }

    /// `w1's write of "a" with token 3 to key k`.
    fn describe(&self, strings: &Strings) -> String {
        let text = |sym: Option<Sym>| sym.map_or("(none)", |sym| strings.text(sym));
        format!(
            "{}'s write of {:?} with token {} to key {}",
            strings.text(self.process),
            text(self.value),
            self.token
                .map_or("(none)".into(), |token| token.to_string()),
            text(self.key)
        )
    }

    fn same_write(&self, other: &FirstWrite) -> bool {
        (self.process, self.key, self.token, self.value)
            == (other.process, other.key, other.token, other.value)
    }
}

/// What a process has been seen doing so far.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Acting {
    #[default]
    Nothing,
    /// It invoked a client call.
    Calls,
    /// It recorded a server log entry, first on this line.
    Logs { line: usize },
}

/// A name used against the rules: what was expected and what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Misnamed {
    /// A log entry from a process that makes client calls.
    #[error(
        "expected a server's log entry to come from the server (lock, store), found one from \
         {process}, a process that makes client calls"
    )]
    LogFromClient { process: String },
    /// A client call from a process that records log entries.
    #[error(
        "expected client calls to come from a client (a worker or its renewal task), found an \
         invoke from {process}, which recorded a server's log entry on line {line}"
    )]
    CallFromServer { process: String, line: usize },
    /// A write id carried by two different writes.
    #[error(
        "expected write id {write_id} to name one write (a retry sends the same write again \
         from the same process), found it on line {first_line} for {first} and here for {again}"
    )]
    ReusedWriteId {
        write_id: String,
        first_line: usize,
        first: String,
        again: String,
    },
}

/// The names read so far, and the rules they must keep.
#[derive(Default)]
pub(crate) struct Identities {
    /// By the write id's slot: the first write invoke that carried it.
    writes: Vec<Option<FirstWrite>>,
    /// By the process's slot: what it was first seen doing.
    acting: Vec<Acting>,
}

impl Identities {
    /// Checks `row`, on `line`, against what came before.
    pub(crate) fn follow(
        &mut self,
        row: &Row,
        line: usize,
        strings: &Strings,
    ) -> Result<(), Misnamed> {
        match row.kind {
            EventType::Invoke => {
                self.acts(row.process, Acting::Calls, strings)?;
                if row.f == Op::Write
                    && let Some(write_id) = row.write_id
                {
                    self.names(write_id, FirstWrite::of(row, line), strings)?;
                }
            }
            EventType::Log => self.acts(row.process, Acting::Logs { line }, strings)?,
            _ => {}
        }
        Ok(())
    }

    /// `process` acts as `now`: refused when it acted as the other kind before.
    fn acts(&mut self, process: Sym, now: Acting, strings: &Strings) -> Result<(), Misnamed> {
        let slot = process.slot();
        if slot >= self.acting.len() {
            self.acting.resize(slot + 1, Acting::Nothing);
        }
        let process = || strings.text(process).to_string();
        match (self.acting[slot], now) {
            (Acting::Nothing, now) => self.acting[slot] = now,
            (Acting::Calls, Acting::Logs { .. }) => {
                return Err(Misnamed::LogFromClient { process: process() });
            }
            (Acting::Logs { line }, Acting::Calls) => {
                return Err(Misnamed::CallFromServer {
                    process: process(),
                    line,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// `write_id` is carried by `write`: refused when it named another write before.
    fn names(
        &mut self,
        write_id: Sym,
        write: FirstWrite,
        strings: &Strings,
    ) -> Result<(), Misnamed> {
        let slot = write_id.slot();
        if slot >= self.writes.len() {
            self.writes.resize(slot + 1, None);
        }
        match &self.writes[slot] {
            None => self.writes[slot] = Some(write),
            Some(first) if first.same_write(&write) => {}
            Some(first) => {
                return Err(Misnamed::ReusedWriteId {
                    write_id: strings.text(write_id).to_string(),
                    first_line: first.line,
                    first: first.describe(strings),
                    again: write.describe(strings),
                });
            }
        }
        Ok(())
    }
}
