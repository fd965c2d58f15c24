//! The job threads of a parallel batch: how many to start, and starting them so that a machine
//! that grants fewer threads (a pids or memory limit) gets a batch on fewer of them, never an
//! abort.

use std::io;
use std::sync::mpsc::Sender;
use std::thread::{Builder, Scope};

/// The most job threads a batch starts, whatever is asked: each runs one simulation on its own
/// runtime, so more threads than cores only share the cores, and a few hundred already spend
/// hundreds of megabytes on stacks.
pub const MAX_JOBS: usize = 256;

/// The job threads to start for `plans` runs when `asked` for: at least one, never more than
/// there are runs to hand out, nor more than [`MAX_JOBS`].
pub fn job_count(asked: usize, plans: usize) -> usize {
    asked.clamp(1, MAX_JOBS).min(plans.max(1))
}

/// How a job thread is made: by default a plain one, named after its job.
pub(crate) type ThreadFor<'a> = &'a dyn Fn(usize) -> Builder;

/// A job thread named `fencer-job-N`.
pub(crate) fn named_thread(job: usize) -> Builder {
    Builder::new().name(format!("fencer-job-{job}"))
}

/// Starts up to `wanted` threads in `scope` (each made by `thread_for`), each running `work`
/// with its own clone of `sender`, and stops at the first the system refuses. Returns how many
/// started (zero when it refused the first); the caller runs `work` itself when none did.
pub(crate) fn spawn_jobs<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    wanted: usize,
    thread_for: ThreadFor<'_>,
    sender: &Sender<T>,
    work: &'scope (dyn Fn(Sender<T>) + Sync),
) -> usize {
    for job in 0..wanted {
        let sender = sender.clone();
        let started = thread_for(job).spawn_scoped(scope, move || work(sender));
        if let Err(error) = started {
            warn_fewer(wanted, job, &error);
            return job;
        }
    }
    wanted
}

/// Warns (through the log, on stderr for the command line) that the batch runs on fewer
/// threads than asked.
fn warn_fewer(wanted: usize, started: usize, error: &io::Error) {
    let on = match started {
        0 => "the calling thread".to_string(),
        _ => format!("{started}"),
    };
    tracing::warn!(
        "the system started {started} of {wanted} job threads ({error}); the batch runs on {on}"
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A thread no system can start: its stack is larger than any address space.
    pub(crate) fn unstartable(_job: usize) -> Builder {
        Builder::new().stack_size(1 << 62)
    }

    #[test]
    fn jobs_are_capped_by_the_runs_and_by_the_most_a_batch_starts() {
        assert_eq!(job_count(3_000, 100), 100);
        assert_eq!(job_count(3_000, usize::MAX), MAX_JOBS);
        assert_eq!(job_count(0, 10), 1);
        assert_eq!(job_count(4, 0), 1);
        assert_eq!(job_count(4, 10), 4);
    }

    #[test]
    fn a_refused_thread_stops_the_spawning_without_a_panic() {
        let (sender, receiver) = std::sync::mpsc::channel();
        let started = std::thread::scope(|scope| {
            let first_only = |job: usize| {
                if job == 0 {
                    named_thread(job)
                } else {
                    unstartable(job)
                }
            };
            spawn_jobs(scope, 5, &first_only, &sender, &|sender| {
                sender.send(1).unwrap();
            })
        });
        drop(sender);
        assert_eq!(started, 1);
        assert_eq!(receiver.iter().sum::<i32>(), 1, "only the one started ran");
    }
}
