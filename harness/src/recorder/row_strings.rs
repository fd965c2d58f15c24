//! A history's string table as a row being recorded sees it, and what a recorder's callers
//! remember of it: texts they name again and again keep their syms, so a call does not look
//! the same text up in the table on every row.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Table;
use crate::adapter::OwnerToken;
use crate::packed::{Strings, Sym, same_bytes};

/// The fixed error words client completions record, looked up in a history's string table
/// once instead of at every completion (most calls of a contended lock end `busy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Busy,
    NotOwner,
    Rejected,
    Cancelled,
    NotHeld,
    Timeout,
}

impl Word {
    pub(super) const ALL: [Word; 6] = [
        Word::Busy,
        Word::NotOwner,
        Word::Rejected,
        Word::Cancelled,
        Word::NotHeld,
        Word::Timeout,
    ];

    fn text(self) -> &'static str {
        match self {
            Word::Busy => "busy",
            Word::NotOwner => "not-owner",
            Word::Rejected => "rejected",
            Word::Cancelled => "cancelled",
            Word::NotHeld => "not-held",
            Word::Timeout => "timeout",
        }
    }
}

/// A history's string table as a row being recorded sees it: any text interned, and the
/// [`Word`]s from the recorder's note of their syms.
pub(crate) struct RowStrings<'a> {
    pub(super) strings: &'a mut Strings,
    pub(super) words: &'a mut [Option<Sym>; Word::ALL.len()],
    pub(super) owners: &'a mut OwnerSyms,
    pub(super) table: Table,
}

/// The sym a string that is recorded again and again (a process's own name) has in one of a
/// recorder's tables, remembered by its owner so it is looked up once per table: the table's
/// number and the sym, in one word (0: none yet).
#[derive(Debug, Default)]
pub(crate) struct KnownSym(AtomicU64);

/// A text a caller names on call after call (its lock, its key) and its sym, so the text is
/// looked up once per table while the caller keeps naming it: the first text named is the one
/// remembered, and any other is looked up each time.
#[derive(Debug, Default)]
pub(crate) struct KnownText {
    text: OnceLock<Box<str>>,
    sym: KnownSym,
}

impl RowStrings<'_> {
    /// The sym of `text`, remembered by `known` if it is the text `known` is for.
    pub(crate) fn intern_named(&mut self, known: &KnownText, text: &str) -> Sym {
        let held = known.text.get_or_init(|| text.into());
        if same_bytes(held.as_bytes(), text.as_bytes()) {
            self.intern_known(&known.sym, text)
        } else {
            self.intern(text)
        }
    }

    /// The sym of `text`, which `known` remembers for this table once it has been interned.
    pub(crate) fn intern_known(&mut self, known: &KnownSym, text: &str) -> Sym {
        let table = (self.table.0 + 1) << 32;
        let noted = known.0.load(Ordering::Relaxed);
        if noted & !0xffff_ffff == table
            && let Some(sym) = Sym::from_number(noted as u32)
        {
            return sym;
        }
        let sym = self.strings.intern(text);
        known
            .0
            .store(table | u64::from(sym.number()), Ordering::Relaxed);
        sym
    }

    /// The sym of `owner`'s 32 hex digits: remembered for a token recorded lately (its
    /// renewals, its release, the lock service's log of them), else looked up, and checked as
    /// text only when new.
    pub(crate) fn intern_owner(&mut self, owner: OwnerToken) -> Sym {
        let slot = &mut self.owners.0[owner.0 as usize % OwnerSyms::SLOTS];
        if slot.0 == owner.0
            && let Some(sym) = slot.1
        {
            return sym;
        }
        let sym = self
            .strings
            .intern_bytes(owner.hex().as_bytes())
            .expect("hex digits are text");
        *slot = (owner.0, Some(sym));
        sym
    }

    /// The sym of `text`, adding it if it is new.
    pub(crate) fn intern(&mut self, text: &str) -> Sym {
        self.strings.intern(text)
    }

    /// The sym of `word`, interned the first time it is recorded in this table, so the
    /// table's strings are numbered as if it were interned each time.
    pub(crate) fn word(&mut self, word: Word) -> Sym {
        *self.words[word as usize].get_or_insert_with(|| self.strings.intern(word.text()))
    }
}

/// The syms of the owner tokens recorded lately in one table, so a token named again is not
/// formatted and looked up again: a slot per token, picked by its low bits (random, as owner
/// tokens are), the newest token in a slot replacing the one before.
#[derive(Debug)]
pub(super) struct OwnerSyms([(u128, Option<Sym>); OwnerSyms::SLOTS]);

impl OwnerSyms {
    /// A few times the tokens a run has live at once (one per worker, renewal task and call
    /// in flight), few enough to clear in a moment when a table is handed over.
    const SLOTS: usize = 64;

    /// None remembered.
    pub(super) fn new() -> OwnerSyms {
        OwnerSyms([(0, None); OwnerSyms::SLOTS])
    }
}
