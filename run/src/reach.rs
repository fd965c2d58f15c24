//! Which of a plan's faults its backends can take: a fault aimed at a role (`lock`, `store`)
//! reaches the backend only where fencer owns what the fault acts on — the simulated lease
//! service's clock and restart, a server fencer started, an `exec:` child. Everything else is
//! the backend's own (a server behind a plain URL keeps its process and clock), so such a
//! fault is left out of the run and named, never dropped silently.

use fencer_backends::registry::{EXEC_SCHEME, exec_refusal};
use fencer_nemesis::{Effect, Fault};
use fencer_servers::PrivateBackend;

use crate::backends::BackendName;
use crate::plan::{InvalidPlan, Plan};

/// What fencer can do to one backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// Its clock is fencer's to step and skew.
    pub clock: bool,
    /// fencer can restart it (its volatile state lost).
    pub restart: bool,
    /// fencer runs its process: server faults reach it, as far as that server takes them.
    pub server: bool,
}

impl Reach {
    /// Whether the backend `name` can take `fault`, or why not.
    pub fn takes(&self, name: &BackendName, fault: &Fault) -> Result<(), String> {
        let own = match fault.effect() {
            Effect::ClockJump(_) | Effect::ClockDrift(_) => self.clock,
            Effect::Restart => self.restart,
            Effect::Worker(_) | Effect::ServerOnly => false,
        };
        if own {
            return Ok(());
        }
        if !self.server || fault.server_action().is_none() {
            return Err(match fault.effect() {
                Effect::ClockJump(_) | Effect::ClockDrift(_) => format!(
                    "`{name}` keeps its own clock: fencer steps only its simulated lease \
                     service's and those of servers it starts ({})",
                    PrivateBackend::URLS
                ),
                Effect::Restart => format!(
                    "`{name}` offers no restart: fencer restarts only its simulated lease \
                     service and servers it starts ({}) or runs (exec:COMMAND)",
                    PrivateBackend::URLS
                ),
                _ => format!(
                    "`{name}` is not fencer's own server: start one with --{} {}",
                    fault.target(),
                    PrivateBackend::URLS
                ),
            });
        }
        server_takes(name, fault)
    }
}

/// Whether a server fencer runs for `name` (a private server, an exec child) takes `fault`.
fn server_takes(name: &BackendName, fault: &Fault) -> Result<(), String> {
    if name.as_str().starts_with(EXEC_SCHEME) {
        return exec_refusal(fault).map_or(Ok(()), Err);
    }
    let Some(Ok((backend, _))) = PrivateBackend::parse(name.as_str()) else {
        return Ok(());
    };
    if let Fault::ClockDrift { .. } = fault {
        return Err(format!(
            "clock drift on the private {backend:?} server: a real server's clock can be \
             stepped (libfaketime, Redis expiry rewrite), not made to drift"
        ));
    }
    if let Fault::ClockJump { .. } = fault
        && !backend.takes_clock_jumps()
    {
        return Err(format!(
            "the clock of a private {backend:?} cannot be stepped (etcd ignores libfaketime; \
             ZooKeeper expires sessions by its monotonic clock)"
        ));
    }
    Ok(())
}

/// A fault of a plan its backends could not take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// The fault's family.
    pub kind: &'static str,
    /// What it aimed at (`lock`, `store`).
    pub target: String,
    /// Why that target cannot take it.
    pub why: String,
}

/// The backends of a run, each by name with what fencer can do to it.
#[derive(Clone, Copy, Debug)]
pub struct Roles<'a> {
    /// The lock service.
    pub lock: (&'a BackendName, Reach),
    /// The store.
    pub store: (&'a BackendName, Reach),
}

impl Roles<'_> {
    /// Why the role `target` cannot take `fault`; `Ok` for faults aimed at a worker.
    fn takes(&self, fault: &Fault) -> Result<(), String> {
        let (name, reach) = match fault.target() {
            "lock" => self.lock,
            "store" => self.store,
            _ => return Ok(()),
        };
        reach.takes(name, fault)
    }

    /// `plan` without the faults its backends cannot take, and what was left out.
    pub fn fit(&self, plan: &Plan) -> (Plan, Vec<LeftOut>) {
        let mut fitted = plan.clone();
        let mut left_out = Vec::new();
        fitted.faults.retain(|fault| match self.takes(fault) {
            Ok(()) => true,
            Err(why) => {
                left_out.push(LeftOut {
                    kind: fault.kind().name(),
                    target: fault.target().to_string(),
                    why,
                });
                false
            }
        });
        (fitted, left_out)
    }

    /// Refuses the first fault of `plan` its backends cannot take, at its place in the plan:
    /// for plans written by hand, whose every fault was meant.
    pub fn check(&self, plan: &Plan) -> Result<(), InvalidPlan> {
        for (index, fault) in plan.faults.iter().enumerate() {
            self.takes(fault).map_err(|why| {
                InvalidPlan::at_fault(
                    index,
                    format!(
                        "faults[{index}]: `{}` at {} ns aims at the {}: {why}",
                        fault.kind().name(),
                        fault.at_ns(),
                        fault.target()
                    ),
                )
            })?;
        }
        Ok(())
    }
}

/// The faults left out, counted by family and target, in words: `3 restart aimed at lock
/// (`my-lock` offers no restart: …)`.
pub fn describe_left_out(left_out: &[LeftOut]) -> Vec<String> {
    let mut counted: Vec<(&LeftOut, usize)> = Vec::new();
    for fault in left_out {
        match counted
            .iter_mut()
            .find(|(seen, _)| seen.kind == fault.kind && seen.target == fault.target)
        {
            Some((_, count)) => *count += 1,
            None => counted.push((fault, 1)),
        }
    }
    counted
        .into_iter()
        .map(|(fault, count)| {
            format!(
                "{count} {} aimed at {} ({})",
                fault.kind, fault.target, fault.why
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restart() -> Fault {
        Fault::Restart {
            at_ns: 5,
            target: "lock".into(),
            duration_ns: 1,
        }
    }

    #[test]
    fn a_fault_reaches_only_what_fencer_owns() {
        let sim = Reach {
            clock: true,
            restart: true,
            server: false,
        };
        let name = BackendName::new("sim");
        assert!(sim.takes(&name, &restart()).is_ok());
        let mine = BackendName::new("my-lock");
        let why = Reach::default().takes(&mine, &restart()).unwrap_err();
        assert!(why.starts_with("`my-lock` offers no restart"), "{why}");
        let cut = Fault::Cut {
            at_ns: 1,
            target: "store".into(),
        };
        let server = Reach {
            server: true,
            ..Reach::default()
        };
        assert!(server.takes(&"private:redis".into(), &cut).is_ok());
        let why = server.takes(&"exec:python3 x.py".into(), &cut).unwrap_err();
        assert!(why.contains("takes only server-pause and restart"), "{why}");
        let jump = Fault::ClockJump {
            at_ns: 1,
            target: "store".into(),
            jump_ns: 5,
        };
        assert!(server.takes(&"private:redis".into(), &jump).is_ok());
        assert!(server.takes(&"private:etcd".into(), &jump).is_err());
    }

    #[test]
    fn left_out_faults_are_counted_by_family_and_target() {
        let why = "`my-lock` offers no restart".to_string();
        let fault = LeftOut {
            kind: "restart",
            target: "lock".into(),
            why: why.clone(),
        };
        assert_eq!(
            describe_left_out(&[fault.clone(), fault]),
            [format!("2 restart aimed at lock ({why})")]
        );
    }
}
