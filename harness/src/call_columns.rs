//! The columns a client call must carry for the checkers to know what it did, and the rule
//! that a completion repeats them.
//!
//! fencer's recorder writes every one of them (a completion is its invoke plus the reply), but
//! an imported history may not; a call lacking one would be skipped by the checkers that need
//! it, so a checker could report `valid` about calls it never judged. The reader refuses such
//! a history at the line instead.
//!
//! | op | the invoke carries | the completion adds |
//! |---|---|---|
//! | `acquire` | `lock`, `owner`, `ttl_ns` | `token` (when `ok`) |
//! | `renew` | `lock`, `owner`, `ttl_ns` | |
//! | `release` | `lock`, `owner` | |
//! | `write` | `key`, `token`, and `write_id` or `value` (or both) | `current_token` (when refused) |
//! | `read` | `key` | `token`, `write_id`, `value` it read (none: the initial value) |

use crate::event::Op;
use crate::packed::{Row, Strings, Sym};

/// The identifying columns of a client call, as its invoke carried them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallColumns {
    lock: Option<Sym>,
    owner: Option<Sym>,
    ttl_ns: Option<u64>,
    key: Option<Sym>,
    token: Option<u64>,
    write_id: Option<Sym>,
    value: Option<Sym>,
}

/// One column of [`CallColumns`], named as in the JSONL form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    Lock,
    Owner,
    TtlNs,
    Key,
    Token,
    WriteId,
    Value,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Lock => "lock",
            Column::Owner => "owner",
            Column::TtlNs => "ttl_ns",
            Column::Key => "key",
            Column::Token => "token",
            Column::WriteId => "write_id",
            Column::Value => "value",
        }
    }
}

/// A column's value as text, for an error message.
fn shown(value: Option<ColumnValue>, strings: &Strings) -> String {
    match value {
        None => "none".to_string(),
        Some(ColumnValue::Text(sym)) => format!("{:?}", strings.text(sym)),
        Some(ColumnValue::Number(number)) => number.to_string(),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ColumnValue {
    Text(Sym),
    Number(u64),
}

/// The columns an invoke of `f` must carry, all of them; a write also needs a `write_id` or
/// a `value` (see [`CallColumns::of_invoke`]).
fn required(f: Op) -> &'static [Column] {
    match f {
        Op::Acquire | Op::Renew => &[Column::Lock, Column::Owner, Column::TtlNs],
        Op::Release | Op::Check => &[Column::Lock, Column::Owner],
        Op::Write => &[Column::Key, Column::Token],
        Op::Read => &[Column::Key],
        _ => &[],
    }
}

/// The columns a completion of `f` must repeat from its invoke: the required ones, and a
/// write's id and value, which name the write.
fn repeated(f: Op) -> &'static [Column] {
    match f {
        Op::Write => &[Column::Key, Column::Token, Column::WriteId, Column::Value],
        other => required(other),
    }
}

impl CallColumns {
    fn get(&self, column: Column) -> Option<ColumnValue> {
        let text = |sym: Option<Sym>| sym.map(ColumnValue::Text);
        let number = |number: Option<u64>| number.map(ColumnValue::Number);
        match column {
            Column::Lock => text(self.lock),
            Column::Owner => text(self.owner),
            Column::TtlNs => number(self.ttl_ns),
            Column::Key => text(self.key),
            Column::Token => number(self.token),
            Column::WriteId => text(self.write_id),
            Column::Value => text(self.value),
        }
    }

    fn of(row: &Row) -> CallColumns {
        CallColumns {
            lock: row.lock,
            owner: row.owner,
            ttl_ns: row.ttl_ns(),
            key: row.key,
            token: row.token(),
            write_id: row.write_id,
            value: row.value,
        }
    }

    /// The columns of the client invoke `row`, or what it lacks.
    // The error is the "expected ..., found ..." sentence of a `HistoryError::Malformed`,
    // which adds the file and line: it has no other reader.
    pub(crate) fn of_invoke(row: &Row) -> Result<CallColumns, String> {
        let columns = CallColumns::of(row);
        if columns.complete_for(row.f) {
            return Ok(columns);
        }
        let f = row.f.name();
        if let Some(missing) = required(row.f)
            .iter()
            .find(|&&column| columns.get(column).is_none())
        {
            return Err(format!(
                "expected a {f} invoke to carry {}, found none",
                missing.name()
            ));
        }
        if row.f == Op::Write && columns.write_id.is_none() && columns.value.is_none() {
            return Err(format!(
                "expected a {f} invoke to carry a write_id or a value (what names the write a \
                 read returns), found neither"
            ));
        }
        Ok(columns)
    }

    /// Whether these columns are all an invoke of `f` must carry: the answer for nearly
    /// every invoke, told without walking the list of columns.
    fn complete_for(&self, f: Op) -> bool {
        let lease = self.lock.is_some() && self.owner.is_some();
        match f {
            Op::Acquire | Op::Renew => lease && self.ttl_ns.is_some(),
            Op::Release | Op::Check => lease,
            Op::Write => {
                self.key.is_some()
                    && self.token.is_some()
                    && (self.write_id.is_some() || self.value.is_some())
            }
            Op::Read => self.key.is_some(),
            _ => required(f).is_empty(),
        }
    }

    /// Whether `found` repeats every column a completion of `f` must repeat from these: the
    /// answer for nearly every completion, told by comparing the columns directly.
    fn repeated_in(&self, found: &CallColumns, f: Op) -> bool {
        let lease = self.lock == found.lock && self.owner == found.owner;
        match f {
            Op::Acquire | Op::Renew => lease && self.ttl_ns == found.ttl_ns,
            Op::Release | Op::Check => lease,
            Op::Write => {
                self.key == found.key
                    && self.token == found.token
                    && self.write_id == found.write_id
                    && self.value == found.value
            }
            Op::Read => self.key == found.key,
            _ => repeated(f).is_empty(),
        }
    }

    /// Checks that `completion` repeats these columns of its invoke (of `f`, at `invoke`).
    // The error is the sentence of a `HistoryError::Malformed`, as for `of_invoke`.
    pub(crate) fn repeated_by(
        &self,
        completion: &Row,
        f: Op,
        invoke: u64,
        strings: &Strings,
    ) -> Result<(), String> {
        let found = CallColumns::of(completion);
        if self.repeated_in(&found, f) {
            return Ok(());
        }
        for &column in repeated(f) {
            let (want, got) = (self.get(column), found.get(column));
            if want != got {
                return Err(format!(
                    "expected the completion of {} (invoked at index {invoke}) to repeat its {} \
                     {}, found {}",
                    f.name(),
                    column.name(),
                    shown(want, strings),
                    shown(got, strings)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventType};
    use crate::history::History;

    fn row(event: &Event, strings: &mut Strings) -> Row {
        Row::pack(event, strings)
    }

    fn write(write_id: Option<&str>, value: Option<&str>) -> Event {
        Event {
            key: Some("k".into()),
            token: Some(3),
            write_id: write_id.map(Into::into),
            value: value.map(Into::into),
            ..Event::new("w0", EventType::Invoke, Op::Write)
        }
    }

    /// Columns with every one set: each text column to `text`, each number to 1.
    fn every_column(text: Option<Sym>) -> CallColumns {
        CallColumns {
            lock: text,
            owner: text,
            ttl_ns: Some(1),
            key: text,
            token: Some(1),
            write_id: text,
            value: text,
        }
    }

    /// The direct check of an invoke's columns answers as the column-by-column one does, for
    /// every op and with each column missing in turn.
    #[test]
    fn the_direct_check_of_an_invoke_agrees_with_the_columns() {
        let mut strings = Strings::new();
        let full = every_column(Some(strings.intern("a")));
        let missing = [
            CallColumns { lock: None, ..full },
            CallColumns {
                owner: None,
                ..full
            },
            CallColumns {
                ttl_ns: None,
                ..full
            },
            CallColumns { key: None, ..full },
            CallColumns {
                token: None,
                ..full
            },
            CallColumns {
                write_id: None,
                ..full
            },
            CallColumns {
                value: None,
                ..full
            },
            CallColumns {
                write_id: None,
                value: None,
                ..full
            },
            full,
        ];
        for f in Op::ALL {
            for columns in missing {
                let by_columns = required(f)
                    .iter()
                    .all(|&column| columns.get(column).is_some())
                    && (f != Op::Write || columns.write_id.is_some() || columns.value.is_some());
                assert_eq!(columns.complete_for(f), by_columns, "{f:?} {columns:?}");
            }
        }
    }

    /// The direct comparison answers as the column-by-column one does, for every op and
    /// with each column changed in turn.
    #[test]
    fn the_direct_comparison_agrees_with_the_columns() {
        let mut strings = Strings::new();
        let base = every_column(Some(strings.intern("a")));
        let b = Some(strings.intern("b"));
        let changed = [
            CallColumns { lock: b, ..base },
            CallColumns { owner: b, ..base },
            CallColumns {
                ttl_ns: None,
                ..base
            },
            CallColumns { key: None, ..base },
            CallColumns {
                token: Some(2),
                ..base
            },
            CallColumns {
                write_id: b,
                ..base
            },
            CallColumns {
                value: None,
                ..base
            },
            base,
        ];
        for f in Op::ALL {
            for found in changed {
                let by_columns = repeated(f)
                    .iter()
                    .all(|&column| base.get(column) == found.get(column));
                assert_eq!(base.repeated_in(&found, f), by_columns, "{f:?} {found:?}");
            }
        }
    }

    #[test]
    fn a_write_names_itself_by_id_or_value() {
        let mut strings = Strings::new();
        for (id, value) in [
            (Some("w0-1"), None),
            (None, Some("7")),
            (Some("w0-1"), Some("7")),
        ] {
            let invoke = row(&write(id, value), &mut strings);
            assert!(CallColumns::of_invoke(&invoke).is_ok(), "{id:?} {value:?}");
        }
        let nameless = row(&write(None, None), &mut strings);
        let error = CallColumns::of_invoke(&nameless).unwrap_err();
        assert!(error.contains("a write_id or a value"), "{error}");
    }

    #[test]
    fn every_op_needs_its_columns() {
        let mut strings = Strings::new();
        let bare = |f| Event::new("w0", EventType::Invoke, f);
        let cases = [
            (Op::Acquire, "lock"),
            (Op::Renew, "lock"),
            (Op::Release, "lock"),
            (Op::Write, "key"),
            (Op::Read, "key"),
            (Op::Check, "lock"),
        ];
        for (f, first_missing) in cases {
            let error = CallColumns::of_invoke(&row(&bare(f), &mut strings)).unwrap_err();
            assert_eq!(
                error,
                format!(
                    "expected a {} invoke to carry {first_missing}, found none",
                    f.name()
                )
            );
        }
        let no_ttl = Event {
            lock: Some("L".into()),
            owner: Some("o".into()),
            ..bare(Op::Renew)
        };
        let error = CallColumns::of_invoke(&row(&no_ttl, &mut strings)).unwrap_err();
        assert!(error.contains("carry ttl_ns"), "{error}");
    }

    #[test]
    fn a_completion_repeats_what_names_its_call() {
        let mut strings = Strings::new();
        let invoke = write(Some("w0-1"), Some("7"));
        let columns = CallColumns::of_invoke(&row(&invoke, &mut strings)).unwrap();
        let ok = Event {
            kind: EventType::Ok,
            ..invoke.clone()
        };
        let ok = row(&ok, &mut strings);
        assert!(columns.repeated_by(&ok, Op::Write, 4, &strings).is_ok());
        let other = Event {
            kind: EventType::Ok,
            write_id: Some("w0-2".into()),
            ..invoke.clone()
        };
        let error = columns
            .repeated_by(&row(&other, &mut strings), Op::Write, 4, &strings)
            .unwrap_err();
        assert_eq!(
            error,
            "expected the completion of write (invoked at index 4) to repeat its write_id \
             \"w0-1\", found \"w0-2\""
        );
        let bare = Event::new("w0", EventType::Info, Op::Write);
        let error = columns
            .repeated_by(&row(&bare, &mut strings), Op::Write, 4, &strings)
            .unwrap_err();
        assert!(
            error.ends_with("to repeat its key \"k\", found none"),
            "{error}"
        );
    }

    /// The reader refuses, at the line, a call the checkers could not judge.
    fn read_error(events: Vec<Event>) -> String {
        let events = events
            .into_iter()
            .enumerate()
            .map(|(index, event)| Event {
                index: index as u64,
                ..event
            })
            .collect();
        let jsonl = History { events }.to_jsonl();
        History::read_jsonl(&jsonl[..], "h.jsonl")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_reader_refuses_a_write_naming_nothing_at_its_line() {
        let read = Event {
            key: Some("k".into()),
            ..Event::new("w1", EventType::Invoke, Op::Read)
        };
        let error = read_error(vec![read, write(None, None)]);
        assert!(
            error.starts_with("h.jsonl:2: expected a write invoke to carry a write_id or a value"),
            "{error}"
        );
    }

    #[test]
    fn the_reader_refuses_a_completion_that_drops_its_key_at_its_line() {
        let invoke = write(Some("w0-1"), None);
        let ok = Event {
            kind: EventType::Ok,
            key: None,
            ..invoke.clone()
        };
        assert_eq!(
            read_error(vec![invoke, ok]),
            "h.jsonl:2: expected the completion of write (invoked at index 0) to repeat its key \
             \"k\", found none"
        );
    }

    #[test]
    fn a_read_s_completion_adds_what_it_read() {
        let mut strings = Strings::new();
        let invoke = Event {
            key: Some("k".into()),
            ..Event::new("w0", EventType::Invoke, Op::Read)
        };
        let columns = CallColumns::of_invoke(&row(&invoke, &mut strings)).unwrap();
        let ok = Event {
            kind: EventType::Ok,
            token: Some(2),
            write_id: Some("w1-0".into()),
            value: Some("w1-0".into()),
            ..invoke
        };
        assert!(
            columns
                .repeated_by(&row(&ok, &mut strings), Op::Read, 0, &strings)
                .is_ok()
        );
    }
}
