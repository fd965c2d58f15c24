//! A network of its own for each member of a cluster fencer starts, so the links *between*
//! members can be cut — what no proxy in front of a member can do, since members talk to each
//! other directly.
//!
//! A [`NetLab`] gives every member a network namespace with one address on a private /24, joined
//! by a bridge in the root namespace whose own address lets fencer's process (its fault proxies,
//! its clients) reach every member. A member's server runs inside its namespace
//! ([`NetLab::launch_in`]); a partition is a set of DROP rules in the members' namespaces
//! ([`NetLab::partition`], [`NetLab::heal`]), so the root namespace's firewall is never touched.
//!
//! Everything a lab makes is named after the owning process id (`fencer-<pid>-<lab>-<member>`
//! namespaces, `fb<pid>.<lab>` bridge, `fv<pid>.<lab>.<i>` veths) and removed when the lab is
//! dropped; what a killed process left behind is swept when the next lab starts. Needs root
//! (`CAP_NET_ADMIN`, `CAP_SYS_ADMIN`) and the Debian packages iproute2 and iptables.

mod links;
mod names;
mod rules;
mod subnet;
mod sweep;
mod tool;

use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use names::LabNames;
use subnet::{MEMBERS_MAX, SubnetClaim};
pub(crate) use tool::on_path;
use tool::{Tool, ip, iptables_restore};

pub use links::LabLinks;

use crate::{Launch, ServerError};

/// Numbers the labs of this process, so parallel tests' labs never share a name.
static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// The interface name of a member's end of its veth pair, inside its namespace.
const MEMBER_INTERFACE: &str = "eth0";

/// One member's namespace and address.
#[derive(Debug)]
struct LabMember {
    name: String,
    namespace: String,
    veth: String,
    address: Ipv4Addr,
}

/// Network namespaces for the members of one cluster, on one bridge, with the links between
/// members cut and healed on demand. Dropping it kills whatever still runs in its namespaces and
/// removes the namespaces (and with them their firewall rules), the veths, the bridge and the
/// subnet claim.
///
/// Its methods run `ip` and `iptables-restore` and wait for them (milliseconds each): call them
/// from a blocking context (`tokio::task::spawn_blocking` in async code).
#[derive(Debug)]
pub struct NetLab {
    names: LabNames,
    subnet: SubnetClaim,
    members: Vec<LabMember>,
    /// Held while a partition or heal rewrites the members' rules, so two of them never
    /// interleave namespace by namespace.
    links: Mutex<()>,
}

impl NetLab {
    /// Makes a namespace for each of `members` (names such as `n1`: lowercase letters and
    /// digits, each once), after sweeping the leftovers of labs whose process died. Every
    /// member reaches every other, and fencer's process reaches all of them.
    pub fn new(members: &[&str]) -> Result<NetLab, ServerError> {
        Tool::Ip.require()?;
        Tool::IptablesRestore.require()?;
        tool::require_privileges()?;
        check_member_names(members)?;
        sweep::sweep_dead_owners()?;
        let names = LabNames {
            pid: std::process::id(),
            lab: NEXT_LAB.fetch_add(1, Ordering::Relaxed),
        };
        if !names.fit(members.len()) {
            return Err(ServerError::Failed(format!(
                "lab {} of this process: its interface names would exceed 15 bytes",
                names.lab
            )));
        }
        // Spread the labs of concurrent processes over the subnets, so they rarely race.
        let start = (names
            .pid
            .wrapping_mul(31)
            .wrapping_add(names.lab.wrapping_mul(7))) as u8;
        let routes = ip(&["-4", "route", "show", "table", "all"])?;
        let subnet = SubnetClaim::take(&names.owner(), start, &routes)?;
        let mut lab = NetLab {
            names,
            subnet,
            members: Vec::new(),
            links: Mutex::new(()),
        };
        // From here on a failure drops `lab`, which removes whatever was made so far.
        lab.make_bridge()?;
        for (index, member) in members.iter().enumerate() {
            lab.add_member(index, member)?;
        }
        Ok(lab)
    }

    fn make_bridge(&self) -> Result<(), ServerError> {
        let bridge = self.names.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        // Bridged frames skip the root namespace's iptables (br_netfilter would otherwise send
        // them through its FORWARD chain, which a host may set to drop).
        ip(&[
            "link",
            "set",
            &bridge,
            "type",
            "bridge",
            "nf_call_iptables",
            "0",
        ])?;
        let host = format!("{}/24", self.subnet.host());
        ip(&["addr", "add", &host, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        Ok(())
    }

    fn add_member(&mut self, index: usize, name: &str) -> Result<(), ServerError> {
        let member = LabMember {
            name: name.to_string(),
            namespace: self.names.namespace(name),
            veth: self.names.veth(index),
            address: self.subnet.member(index),
        };
        ip(&["netns", "add", &member.namespace])?;
        let namespace = member.namespace.clone();
        let veth = member.veth.clone();
        let address = format!("{}/24", member.address);
        self.members.push(member);
        ip(&[
            "link",
            "add",
            &veth,
            "type",
            "veth",
            "peer",
            "name",
            MEMBER_INTERFACE,
            "netns",
            &namespace,
        ])?;
        ip(&["link", "set", &veth, "master", &self.names.bridge(), "up"])?;
        ip(&[
            "-n",
            &namespace,
            "addr",
            "add",
            &address,
            "dev",
            MEMBER_INTERFACE,
        ])?;
        ip(&["-n", &namespace, "link", "set", MEMBER_INTERFACE, "up"])?;
        ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
        iptables_restore(&namespace, &rules::hook_script())
    }

    /// The members' names, in the order they were given.
    pub fn members(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.name.clone())
            .collect()
    }

    /// The lab's name, `fencer-<pid>-<lab>`, the prefix of its namespaces.
    pub fn name(&self) -> String {
        self.names.owner()
    }

    /// The address of `member` on the lab's /24, where its server listens.
    pub fn address(&self, member: &str) -> Result<Ipv4Addr, ServerError> {
        Ok(self.member(member)?.address)
    }

    /// The root namespace's address on the lab's /24: where members see fencer's process.
    pub fn host_address(&self) -> Ipv4Addr {
        self.subnet.host()
    }

    /// The network namespace of `member` (for `ip netns exec`).
    pub fn namespace(&self, member: &str) -> Result<String, ServerError> {
        Ok(self.member(member)?.namespace.clone())
    }

    /// Every namespace the lab made, for checks that none outlives it.
    pub fn namespaces(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.namespace.clone())
            .collect()
    }

    /// Every interface the lab made in the root namespace (the bridge, then each member's veth
    /// end), for checks that none outlives it.
    pub fn links(&self) -> Vec<String> {
        std::iter::once(self.names.bridge())
            .chain(self.members.iter().map(|member| member.veth.clone()))
            .collect()
    }

    fn member(&self, name: &str) -> Result<&LabMember, ServerError> {
        self.members
            .iter()
            .find(|member| member.name == name)
            .ok_or_else(|| {
                ServerError::Failed(format!(
                    "no member `{name}` in {}: expected one of {}",
                    self.name(),
                    self.members().join(", ")
                ))
            })
    }

    /// `launch` run inside `member`'s namespace: `ip netns exec NS PROGRAM ARGS…`. `ip` execs
    /// the program in place, so the pid a [`ServerGuard`](crate::ServerGuard) holds is the
    /// server's own and its signals reach the server. A launch that must change user cannot be
    /// wrapped (entering a namespace needs root), and is refused.
    pub fn launch_in(&self, member: &str, launch: Launch) -> Result<Launch, ServerError> {
        if launch.run_as.is_some() {
            return Err(ServerError::Failed(format!(
                "{} must run as another user, which `ip netns exec` cannot do for it",
                launch.program.display()
            )));
        }
        let namespace = self.namespace(member)?;
        let mut args: Vec<std::ffi::OsString> =
            vec!["netns".into(), "exec".into(), namespace.into()];
        args.push(launch.program.into_os_string());
        args.extend(launch.args);
        Ok(Launch {
            program: "ip".into(),
            args,
            env: launch.env,
            run_as: None,
            log: launch.log,
        })
    }

    /// Cuts every link whose two ends share no group of `groups`, both directions, and keeps
    /// the links inside each group (groups may overlap: a member in two groups bridges them);
    /// a member in no group is cut from every other. Replaces the
    /// partition in place, if any. Links between fencer's process and the members stay up.
    pub fn partition(&self, groups: &[Vec<String>]) -> Result<(), ServerError> {
        let cuts = rules::cut_peers(&self.members(), groups)?;
        let _rewriting = self
            .links
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for (member, peers) in self.members.iter().zip(cuts) {
            let addresses: Vec<Ipv4Addr> = peers
                .into_iter()
                .map(|peer| self.members[peer].address)
                .collect();
            iptables_restore(&member.namespace, &rules::chain_script(&addresses))?;
        }
        Ok(())
    }

    /// Restores every link between members.
    pub fn heal(&self) -> Result<(), ServerError> {
        self.partition(&[self.members()])
    }

    /// What it is, for the line fencer prints: subnet, and each member's address and namespace.
    pub fn describe(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|member| format!("{} {} in {}", member.name, member.address, member.namespace))
            .collect();
        format!(
            "namespaces on {} (fencer at {}): {}",
            self.subnet.network(),
            self.subnet.host(),
            members.join(", ")
        )
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for member in self.members.iter().rev() {
            sweep::remove_namespace(&member.namespace);
            // Usually gone with its peer already; deleting it here covers a namespace that
            // could not be deleted.
            let _ = ip(&["link", "del", &member.veth]);
        }
        let _ = ip(&["link", "del", &self.names.bridge()]);
    }
}

/// Member names become parts of namespace names: keep them short and plain.
fn check_member_names(members: &[&str]) -> Result<(), ServerError> {
    if members.is_empty() || members.len() > MEMBERS_MAX {
        return Err(ServerError::Failed(format!(
            "a lab holds 1 to {MEMBERS_MAX} members, not {}",
            members.len()
        )));
    }
    for (index, name) in members.iter().enumerate() {
        let plain = !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
        if !plain {
            return Err(ServerError::Failed(format!(
                "member name `{name}`: expected lowercase letters and digits (e.g. n1)"
            )));
        }
        if members[..index].contains(name) {
            return Err(ServerError::Failed(format!(
                "member name `{name}` is given twice"
            )));
        }
    }
    Ok(())
}
