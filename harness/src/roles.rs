//! What a process name says about who acted: a worker (`w0`), one of its renewal tasks
//! (`w0:renew`, `w0:renew-1`, ...), its lock client library's ownership check (`w0:check`),
//! work it abandoned that still sends its write (`w0:late`, ...), or a server or the nemesis.
//!
//! A process is one sequential actor: it has at most one call open at a time, which is what
//! lets a reader pair every completion with its invoke by process. A worker's renewal task
//! lives as long as its lease, so one task after another shares the name `wN:renew`; a task
//! that outlives its lease (a worker that failed to stop it) is still running when the next
//! one starts, and the next one then takes the first name no live task holds.

/// The process name of the renewal task of `worker` in `slot`: slot 0 is `w0:renew`, slot
/// `k` is `w0:renew-k`. A worker starts each renewal task in the lowest slot no renewal task
/// of its own still running holds, so a worker that stops every task uses slot 0 only.
pub fn renewal_task(worker: &str, slot: usize) -> String {
    if slot == 0 {
        format!("{worker}:renew")
    } else {
        format!("{worker}:renew-{slot}")
    }
}

/// True for a renewal task's name (`w0:renew`, `w0:renew-3`), as [`renewal_task`] makes them.
pub fn is_renewal_task(process: &str) -> bool {
    let Some((_, task)) = process.split_once(':') else {
        return false;
    };
    match task.strip_prefix("renew") {
        Some("") => true,
        Some(slot) => slot
            .strip_prefix('-')
            .is_some_and(|slot| !slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// The process name under which a worker's lock client library makes the lock-service calls
/// of an ownership check (`w0:check`): the worker's own process has its `check` open
/// meanwhile, and a process has one call open at a time.
pub fn check_task(worker: &str) -> String {
    format!("{worker}:check")
}

/// True for an ownership check's process (`w0:check`), as [`check_task`] makes it.
pub fn is_check_task(process: &str) -> bool {
    process
        .split_once(':')
        .is_some_and(|(worker, task)| !worker.is_empty() && task == "check")
}

/// The task name under which a worker's lock client library gives back a lease granted after
/// the worker stopped waiting for it (its acquire recorded `info`): `w0:give-back` releases
/// it, since the worker's own process may have another call open by then.
pub const GIVE_BACK_TASK: &str = "give-back";

/// The process name of work a worker abandoned (its caller cancelled it) that goes on to send
/// its write late, in `slot`: `w0:late`, then `w0:late-1`, … while several are alive at once,
/// as renewal tasks are named.
pub fn late_work(worker: &str, slot: usize) -> String {
    if slot == 0 {
        format!("{worker}:late")
    } else {
        format!("{worker}:late-{slot}")
    }
}

/// True for abandoned work's name (`w0:late`, `w0:late-2`), as [`late_work`] makes them.
pub fn is_late_work(process: &str) -> bool {
    let Some((_, task)) = process.split_once(':') else {
        return false;
    };
    match task.strip_prefix("late") {
        Some("") => true,
        Some(slot) => slot
            .strip_prefix('-')
            .is_some_and(|slot| !slot.is_empty() && slot.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// The worker a process belongs to: `w0:renew` acts for `w0`, and faults target `w0`.
pub fn worker_of(process: &str) -> &str {
    process
        .split_once(':')
        .map_or(process, |(worker, _)| worker)
}

/// The number of the worker a process is or belongs to (`w1:renew` is worker 1's); `None`
/// for a server, the nemesis or any other name.
pub fn worker_number(process: &str) -> Option<usize> {
    worker_of(process).strip_prefix('w')?.parse().ok()
}

/// The id of the write `worker` sends in its cycle `cycle` (`w2-7`): unique in a run, and it
/// names its sender even where only the id is logged (a store's log).
pub fn cycle_write_id(worker: &str, cycle: usize) -> String {
    format!("{worker}-{cycle}")
}

/// The worker that sent write `write_id`, when the id has [`cycle_write_id`]'s form.
pub fn writer_of(write_id: &str) -> Option<&str> {
    let (worker, cycle) = write_id.rsplit_once('-')?;
    let numbered = !cycle.is_empty() && cycle.bytes().all(|b| b.is_ascii_digit());
    (numbered && worker_number(worker).is_some()).then_some(worker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_id_names_its_worker_and_a_process_its_number() {
        assert_eq!(cycle_write_id("w2", 7), "w2-7");
        assert_eq!(writer_of(&cycle_write_id("w12", 0)), Some("w12"));
        assert_eq!(writer_of("w2-"), None);
        assert_eq!(writer_of("w2-x"), None);
        assert_eq!(writer_of("store-3"), None);
        assert_eq!(writer_of("w2"), None);
        assert_eq!(worker_number("w3:renew-1"), Some(3));
        assert_eq!(worker_number("w0"), Some(0));
        assert_eq!(worker_number("lock"), None);
        assert_eq!(worker_number("nemesis"), None);
    }

    #[test]
    fn renewal_tasks_are_named_by_slot_and_recognised() {
        assert_eq!(renewal_task("w3", 0), "w3:renew");
        assert_eq!(renewal_task("w3", 2), "w3:renew-2");
        for slot in [0, 1, 17] {
            let name = renewal_task("w3", slot);
            assert!(is_renewal_task(&name), "{name}");
            assert_eq!(worker_of(&name), "w3");
        }
        for other in [
            "w3",
            "w3:renewal",
            "w3:renew-",
            "w3:renew-x",
            "lock",
            "final",
        ] {
            assert!(!is_renewal_task(other), "{other}");
        }
    }

    #[test]
    fn check_and_late_work_processes_are_named_and_recognised() {
        assert_eq!(check_task("w2"), "w2:check");
        assert!(is_check_task("w2:check"));
        assert_eq!(worker_of("w2:check"), "w2");
        for other in ["w2", "w2:checks", ":check", "w2:renew"] {
            assert!(!is_check_task(other), "{other}");
        }
        assert_eq!(late_work("w2", 0), "w2:late");
        assert_eq!(late_work("w2", 3), "w2:late-3");
        for slot in [0, 1, 12] {
            let name = late_work("w2", slot);
            assert!(is_late_work(&name), "{name}");
            assert!(!is_renewal_task(&name), "{name}");
            assert_eq!(worker_of(&name), "w2");
        }
        for other in ["w2", "w2:lately", "w2:late-", "w2:late-x", "w2:check"] {
            assert!(!is_late_work(other), "{other}");
        }
    }

    #[test]
    fn a_task_belongs_to_its_worker() {
        assert_eq!(worker_of("w3:renew"), "w3");
        assert_eq!(worker_of("w3"), "w3");
        assert_eq!(worker_of("lock"), "lock");
    }
}
