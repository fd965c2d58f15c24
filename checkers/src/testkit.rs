//! Hand-written histories for the checkers' tests: a builder that numbers events, advances the
//! true clock by 1 ms per event (or to a chosen time) and copies an invoke's columns into its
//! completion, as the harness's recorder does.

use std::collections::BTreeMap;

use fencer_harness::{Event, EventType, History, Op, PackedHistory};

use crate::context::Context;
use crate::findings::Outcome;

const STEP_NS: u64 = 1_000_000;

/// Seconds to nanoseconds, for readable test times.
pub fn s(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

/// Builds a [`History`] event by event.
pub struct Builder {
    events: Vec<Event>,
    now_ns: u64,
    open: BTreeMap<String, Event>,
    skew_ns: BTreeMap<String, i64>,
    store_seq: u64,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            events: Vec::new(),
            now_ns: 0,
            open: BTreeMap::new(),
            skew_ns: BTreeMap::new(),
            store_seq: 0,
        }
    }

    /// The next event happens at `seconds` of true time.
    pub fn at(&mut self, seconds: f64) -> &mut Builder {
        let now_ns = s(seconds);
        assert!(now_ns >= self.now_ns, "time never goes back in a history");
        self.now_ns = now_ns;
        self
    }

    /// From now on `process`'s local clock reads `skew` seconds off true time.
    pub fn skew(&mut self, process: &str, skew_s: f64) -> &mut Builder {
        self.skew_ns
            .insert(process.to_string(), (skew_s * 1e9).round() as i64);
        self
    }

    fn push(&mut self, mut event: Event) -> u64 {
        event.index = self.events.len() as u64;
        event.time_ns = self.now_ns;
        if event.local_ns.is_none() && event.kind != EventType::Nemesis {
            let skew = self.skew_ns.get(&event.process).copied().unwrap_or(0);
            event.local_ns = Some(self.now_ns as i64 + skew);
        }
        self.now_ns += STEP_NS;
        self.events.push(event);
        self.events.len() as u64 - 1
    }

    /// A client call starts.
    pub fn invoke(&mut self, process: &str, f: Op, fill: impl FnOnce(&mut Event)) -> u64 {
        let mut event = Event::new(process, EventType::Invoke, f);
        fill(&mut event);
        assert!(
            self.open
                .insert(process.to_string(), event.clone())
                .is_none(),
            "{process} already has an open call"
        );
        self.push(event)
    }

    /// `process`'s open call completes as `kind`, with the invoke's columns plus `fill`'s.
    pub fn complete(
        &mut self,
        process: &str,
        kind: EventType,
        fill: impl FnOnce(&mut Event),
    ) -> u64 {
        let invoke = self
            .open
            .remove(process)
            .unwrap_or_else(|| panic!("{process} has no open call"));
        let mut event = Event {
            kind,
            local_ns: None,
            ..invoke
        };
        fill(&mut event);
        self.push(event)
    }

    pub fn ok(&mut self, process: &str) -> u64 {
        self.complete(process, EventType::Ok, |_| {})
    }

    pub fn fail(&mut self, process: &str, error: &str) -> u64 {
        self.complete(process, EventType::Fail, |e| e.error = Some(error.into()))
    }

    pub fn info(&mut self, process: &str) -> u64 {
        self.complete(process, EventType::Info, |e| {
            e.error = Some("timeout".into())
        })
    }

    /// A notice on `process` about the lease of `owner` on `lock` (`lost` with `why`,
    /// `renewed`, `abandoned`).
    pub fn notice(
        &mut self,
        process: &str,
        f: Op,
        lock: &str,
        owner: &str,
        why: Option<&str>,
    ) -> u64 {
        let mut event = Event::new(process, EventType::Notice, f);
        event.lock = Some(lock.into());
        event.owner = Some(owner.into());
        event.error = why.map(str::to_string);
        self.push(event)
    }

    /// An ownership check of `owner`'s lease on `lock` by worker `process`, answered held or
    /// not. Returns the invoke.
    pub fn check(&mut self, process: &str, lock: &str, owner: &str, held: bool) -> u64 {
        let invoke = self.invoke(process, Op::Check, |e| {
            e.lock = Some(lock.into());
            e.owner = Some(owner.into());
        });
        if held {
            self.ok(process);
        } else {
            self.fail(process, "not-held");
        }
        invoke
    }

    pub fn nemesis(&mut self, f: Op, target: &str, fill: impl FnOnce(&mut Event)) -> u64 {
        let mut event = Event::new("nemesis", EventType::Nemesis, f);
        event.target = Some(target.into());
        fill(&mut event);
        self.push(event)
    }

    pub fn pause(&mut self, target: &str, duration_s: f64) -> u64 {
        self.nemesis(Op::Pause, target, |e| e.duration_ns = Some(s(duration_s)))
    }

    pub fn resume(&mut self, target: &str) -> u64 {
        self.nemesis(Op::Resume, target, |_| {})
    }

    /// A server log entry.
    pub fn log(&mut self, process: &str, f: Op, fill: impl FnOnce(&mut Event)) -> u64 {
        let mut event = Event::new(process, EventType::Log, f);
        fill(&mut event);
        self.push(event)
    }

    fn lock_local_ns(&self) -> i64 {
        self.now_ns as i64 + self.skew_ns.get("lock").copied().unwrap_or(0)
    }

    /// The lock service grants `token` on `lock` to `owner` for `ttl_s`.
    pub fn grant(&mut self, lock: &str, owner: &str, token: u64, ttl_s: f64) -> u64 {
        let local_ns = self.lock_local_ns();
        self.log("lock", Op::Acquire, |e| {
            e.lock = Some(lock.into());
            e.owner = Some(owner.into());
            e.token = Some(token);
            e.ttl_ns = Some(s(ttl_s));
            e.local_ns = Some(local_ns);
            e.expires_ns = Some(local_ns + s(ttl_s) as i64);
        })
    }

    /// The lock service applies a renew or release (`f`) by `owner` to `holder`'s lease.
    pub fn lock_log(
        &mut self,
        f: Op,
        lock: &str,
        owner: &str,
        holder: &str,
        holder_token: u64,
        ttl_s: f64,
    ) -> u64 {
        let local_ns = self.lock_local_ns();
        self.log("lock", f, |e| {
            e.lock = Some(lock.into());
            e.owner = Some(owner.into());
            e.holder = Some(holder.into());
            e.holder_token = Some(holder_token);
            e.local_ns = Some(local_ns);
            if f == Op::Renew {
                e.expires_ns = Some(local_ns + s(ttl_s) as i64);
            }
        })
    }

    /// The store applies a write.
    pub fn applied(&mut self, key: &str, token: u64, write_id: &str) -> u64 {
        self.store_seq += 1;
        let seq = self.store_seq;
        self.log("store", Op::Write, |e| {
            e.key = Some(key.into());
            e.token = Some(token);
            e.write_id = Some(write_id.into());
            e.value = Some(format!("v-{write_id}"));
            e.seq = Some(seq);
        })
    }

    pub fn invoke_acquire(&mut self, process: &str, lock: &str, owner: &str) -> u64 {
        self.invoke(process, Op::Acquire, |e| {
            e.lock = Some(lock.into());
            e.owner = Some(owner.into());
            e.ttl_ns = Some(s(10.0));
        })
    }

    pub fn ok_acquire(&mut self, process: &str, token: u64) -> u64 {
        self.complete(process, EventType::Ok, |e| e.token = Some(token))
    }

    /// A whole successful acquire: invoke, the grant log (if `logged`), ok. Returns the ok.
    pub fn acquire(
        &mut self,
        process: &str,
        lock: &str,
        owner: &str,
        token: u64,
        logged: bool,
    ) -> u64 {
        self.invoke_acquire(process, lock, owner);
        if logged {
            self.grant(lock, owner, token, 10.0);
        }
        self.ok_acquire(process, token)
    }

    /// Starts a renew (`Op::Renew`) or release (`Op::Release`) by `owner`.
    pub fn invoke_lock_call(&mut self, process: &str, f: Op, lock: &str, owner: &str) -> u64 {
        self.invoke(process, f, |e| {
            e.lock = Some(lock.into());
            e.owner = Some(owner.into());
            if f == Op::Renew {
                e.ttl_ns = Some(s(10.0));
            }
        })
    }

    /// A whole renew or release (`f`) by `owner`, answered `kind` (`fail` as not-owner, `info`
    /// as a timeout). Returns the invoke.
    pub fn lock_call(
        &mut self,
        process: &str,
        f: Op,
        lock: &str,
        owner: &str,
        kind: EventType,
    ) -> u64 {
        let invoke = self.invoke_lock_call(process, f, lock, owner);
        match kind {
            EventType::Ok => self.ok(process),
            EventType::Fail => self.fail(process, "not-owner"),
            _ => self.info(process),
        };
        invoke
    }

    /// An acquire the lock service refuses as busy. Returns the invoke.
    pub fn busy(&mut self, process: &str, lock: &str, owner: &str) -> u64 {
        let invoke = self.invoke_acquire(process, lock, owner);
        self.fail(process, "busy");
        invoke
    }

    /// A whole read of `key`; `fill` sets what it returned. Returns the `ok`.
    pub fn read(&mut self, process: &str, key: &str, fill: impl FnOnce(&mut Event)) -> u64 {
        self.invoke(process, Op::Read, |e| e.key = Some(key.into()));
        self.complete(process, EventType::Ok, fill)
    }

    pub fn invoke_write(&mut self, process: &str, key: &str, token: u64, write_id: &str) -> u64 {
        self.invoke(process, Op::Write, |e| {
            e.key = Some(key.into());
            e.token = Some(token);
            e.write_id = Some(write_id.into());
            e.value = Some(format!("v-{write_id}"));
        })
    }

    /// A whole write the store applies: invoke, the store log (if `logged`), ok. Returns the
    /// store log's index, or the ok's when not logged.
    pub fn write(
        &mut self,
        process: &str,
        key: &str,
        token: u64,
        write_id: &str,
        logged: bool,
    ) -> u64 {
        self.invoke_write(process, key, token, write_id);
        let applied = logged.then(|| self.applied(key, token, write_id));
        let ok = self.ok(process);
        applied.unwrap_or(ok)
    }

    /// A write the store refuses: invoke, fail. Returns the fail.
    pub fn rejected_write(
        &mut self,
        process: &str,
        key: &str,
        token: u64,
        write_id: &str,
        current: u64,
    ) -> u64 {
        self.invoke_write(process, key, token, write_id);
        self.complete(process, EventType::Fail, |e| {
            e.current_token = Some(current);
            e.error = Some("rejected".into());
        })
    }

    /// What the checker `check` makes of the history built so far.
    pub fn judged_by(&self, check: fn(&Context<'_>) -> Outcome) -> Outcome {
        let packed = PackedHistory::pack(&self.build());
        check(&Context::new(&packed))
    }

    pub fn build(&self) -> History {
        History {
            events: self.events.clone(),
        }
    }
}
