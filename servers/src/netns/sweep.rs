//! Removing what labs of dead processes left behind (a process killed with SIGKILL runs no
//! Drop): their processes, namespaces, interfaces and subnet claims. Only names that carry a
//! dead owner pid are touched ([`owner_pid`]), so a live lab of another process is safe.

use std::time::{Duration, Instant};

use super::names::{alive, owner_pid};
use super::subnet::{CLAIMS_DIR, claim_owner};
use super::tool::ip;
use crate::ServerError;

/// How long killed processes of a namespace may take to be gone.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Sweeps every leftover of a dead owner, and returns how many things it removed.
pub(super) fn sweep_dead_owners() -> Result<usize, ServerError> {
    let dead = |name: &str| owner_pid(name).is_some_and(|pid| !alive(pid));
    let mut removed = 0;
    for namespace in namespaces()?.iter().filter(|name| dead(name)) {
        remove_namespace(namespace);
        removed += 1;
    }
    // Veths before bridges: a root veth end whose peer died with its namespace is gone already.
    let mut links: Vec<String> = links()?.into_iter().filter(|name| dead(name)).collect();
    links.sort_by_key(|name| name.starts_with("fb"));
    for link in links {
        let _ = ip(&["link", "del", &link]);
        removed += 1;
    }
    for entry in std::fs::read_dir(CLAIMS_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        if claim_owner(&entry.path()).is_some_and(|owner| dead(&owner)) {
            let _ = std::fs::remove_file(entry.path());
            removed += 1;
        }
    }
    Ok(removed)
}

/// Kills every process in `namespace`, waits for them to be gone (bounded), and deletes it.
/// Errors are ignored: this runs on teardown paths, where the best effort is all there is.
pub(super) fn remove_namespace(namespace: &str) {
    let pids: Vec<String> = ip(&["netns", "pids", namespace])
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if !pids.is_empty() {
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(std::process::Stdio::null())
            .status();
        let started = Instant::now();
        while started.elapsed() < KILL_WAIT && pids.iter().any(|pid| running(pid)) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = ip(&["netns", "del", namespace]);
}

/// Whether `pid` runs (a zombie waiting to be reaped by its parent does not: it holds no
/// namespace any more).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Every named network namespace (`ip netns list`: `NAME` or `NAME (id: N)`).
pub(super) fn namespaces() -> Result<Vec<String>, ServerError> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Every interface of the root namespace (`ip -o link show`: `N: NAME[@PEER]: <…>`).
pub(super) fn links() -> Result<Vec<String>, ServerError> {
    Ok(ip(&["-o", "link", "show"])?
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .map(|name| {
            let name = name.trim_end_matches(':');
            name.split('@').next().unwrap_or(name).to_string()
        })
        .collect())
}
