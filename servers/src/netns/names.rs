//! The names of everything a lab makes. Each carries the owning process id, so a later process
//! can tell a dead owner's leftovers (to sweep) from a live one's (to leave alone), and a lab
//! number, so the labs of one process (parallel tests) never share a name.

/// Interface names are at most 15 bytes (the kernel's `IFNAMSIZ` less the terminating NUL).
const IFNAME_MAX_BYTES: usize = 15;

/// The naming of one lab: owner pid and lab number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LabNames {
    pub(super) pid: u32,
    pub(super) lab: u32,
}

impl LabNames {
    /// The lab's own name, `fencer-<pid>-<lab>`: the prefix of its namespaces and what its
    /// subnet claim points to.
    pub(super) fn owner(self) -> String {
        format!("fencer-{}-{}", self.pid, self.lab)
    }

    /// The namespace of `member`: `fencer-<pid>-<lab>-<member>`.
    pub(super) fn namespace(self, member: &str) -> String {
        format!("{}-{member}", self.owner())
    }

    /// The bridge in the root namespace: `fb<pid>.<lab>`.
    pub(super) fn bridge(self) -> String {
        format!("fb{}.{}", self.pid, self.lab)
    }

    /// The root end of the `index`-th member's veth pair: `fv<pid>.<lab>.<index>`.
    pub(super) fn veth(self, index: usize) -> String {
        format!("fv{}.{}.{index}", self.pid, self.lab)
    }

    /// Whether the interface names for `members` members fit the kernel's limit.
    pub(super) fn fit(self, members: usize) -> bool {
        self.veth(members.saturating_sub(1)).len() <= IFNAME_MAX_BYTES
    }
}

/// The pid that owns `name`, when `name` is one of a lab's namespaces, interfaces or owner
/// names; `None` for anything else, which is never touched.
pub(super) fn owner_pid(name: &str) -> Option<u32> {
    let digits = if let Some(rest) = name.strip_prefix("fencer-") {
        rest.split('-').next()?
    } else {
        let rest = name
            .strip_prefix("fb")
            .or_else(|| name.strip_prefix("fv"))?;
        rest.split('.').next()?
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether process `pid` still runs (its `/proc` entry is there; a zombie counts as gone only
/// once reaped, which is soon for a process whose parent died too).
pub(super) fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_carries_its_owner_pid() {
        let names = LabNames {
            pid: 4_194_304,
            lab: 12,
        };
        assert_eq!(names.owner(), "fencer-4194304-12");
        assert_eq!(names.namespace("n2"), "fencer-4194304-12-n2");
        assert_eq!(names.bridge(), "fb4194304.12");
        assert_eq!(names.veth(2), "fv4194304.12.2");
        for name in [
            names.owner(),
            names.namespace("n2"),
            names.bridge(),
            names.veth(2),
        ] {
            assert_eq!(owner_pid(&name), Some(4_194_304), "{name}");
        }
    }

    #[test]
    fn foreign_names_have_no_owner() {
        for name in [
            "eth0",
            "fb",
            "fbx.1",
            "fencer-",
            "fencer-x-1",
            "fvv",
            "docker0",
        ] {
            assert_eq!(owner_pid(name), None, "{name}");
        }
    }

    #[test]
    fn interface_names_must_fit_fifteen_bytes() {
        assert!(
            LabNames {
                pid: 4_194_304,
                lab: 99
            }
            .fit(9)
        );
        assert!(
            !LabNames {
                pid: 4_194_304,
                lab: 1000
            }
            .fit(3)
        );
        assert!(
            LabNames {
                pid: 123,
                lab: 1000
            }
            .fit(3)
        );
    }
}
