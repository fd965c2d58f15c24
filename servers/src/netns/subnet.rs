//! The private /24 a lab puts its members on, claimed so that concurrent labs (parallel tests,
//! other processes) never get the same one.
//!
//! Every lab subnet is `10.77.X.0/24` for one `X`. A claim is a symlink
//! `/run/fencer-netlab/10.77.X.0` pointing at the lab's owner name (`fencer-<pid>-<lab>`):
//! creating a symlink is atomic, so two processes racing for `X` cannot both win, and the pid in
//! the target lets a later process release the claim of a dead one. `/run` is a tmpfs, so
//! claims vanish at reboot together with the namespaces they describe. A subnet that overlaps a
//! route the host already has (a VPN, a container network) is skipped.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::ServerError;

/// Where claims live.
pub(super) const CLAIMS_DIR: &str = "/run/fencer-netlab";

/// The first two octets of every lab subnet.
const PREFIX: [u8; 2] = [10, 77];

/// The host part of a member's address is this plus its index: `n1` is `.11`.
const FIRST_MEMBER_HOST: u8 = 11;

/// The most members a /24 holds with the numbering above.
pub(super) const MEMBERS_MAX: usize = (u8::MAX - FIRST_MEMBER_HOST) as usize;

/// A claimed `10.77.X.0/24`, released when dropped.
#[derive(Debug)]
pub(super) struct SubnetClaim {
    third_octet: u8,
    path: PathBuf,
}

impl SubnetClaim {
    /// Claims a free subnet for `owner`, trying every `X` once starting from `start` (spread by
    /// the caller so labs do not all race for the same one). `routes` is the host's IPv4
    /// routing table (`ip -4 route show table all`).
    pub(super) fn take(owner: &str, start: u8, routes: &str) -> Result<SubnetClaim, ServerError> {
        std::fs::create_dir_all(CLAIMS_DIR)
            .map_err(|error| ServerError::Failed(format!("cannot create {CLAIMS_DIR}: {error}")))?;
        let routed = routed_prefixes(routes);
        for step in 0..=u8::MAX {
            let third_octet = start.wrapping_add(step);
            let network = Ipv4Addr::new(PREFIX[0], PREFIX[1], third_octet, 0);
            if routed
                .iter()
                .any(|&(prefix, length)| overlaps((network, 24), (prefix, length)))
            {
                continue;
            }
            let path = Path::new(CLAIMS_DIR).join(network.to_string());
            match std::os::unix::fs::symlink(owner, &path) {
                Ok(()) => return Ok(SubnetClaim { third_octet, path }),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(ServerError::Failed(format!(
                        "cannot claim {}: {error}",
                        path.display()
                    )));
                }
            }
        }
        Err(ServerError::Failed(format!(
            "every subnet {}.{}.X.0/24 is claimed in {CLAIMS_DIR} or routed by the host",
            PREFIX[0], PREFIX[1]
        )))
    }

    /// The address of the root namespace's end (the bridge): `.1`.
    pub(super) fn host(&self) -> Ipv4Addr {
        Ipv4Addr::new(PREFIX[0], PREFIX[1], self.third_octet, 1)
    }

    /// The address of the `index`-th member (from 0), which must be below [`MEMBERS_MAX`].
    pub(super) fn member(&self, index: usize) -> Ipv4Addr {
        assert!(index < MEMBERS_MAX, "member {index} does not fit a /24");
        Ipv4Addr::new(
            PREFIX[0],
            PREFIX[1],
            self.third_octet,
            FIRST_MEMBER_HOST + index as u8,
        )
    }

    /// `10.77.X.0/24`, for messages.
    pub(super) fn network(&self) -> String {
        format!("{}.{}.{}.0/24", PREFIX[0], PREFIX[1], self.third_octet)
    }
}

impl Drop for SubnetClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The destination prefixes of a routing table as `ip -4 route` prints it. The default route
/// is left out: it "overlaps" everything, yet a more specific route wins over it.
pub(super) fn routed_prefixes(routes: &str) -> Vec<(Ipv4Addr, u8)> {
    const ROUTE_TYPES: [&str; 10] = [
        "unicast",
        "local",
        "broadcast",
        "multicast",
        "anycast",
        "blackhole",
        "unreachable",
        "prohibit",
        "throw",
        "nat",
    ];
    routes
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let mut destination = words.next()?;
            if ROUTE_TYPES.contains(&destination) {
                destination = words.next()?;
            }
            let (address, length) = destination.split_once('/').unwrap_or((destination, "32"));
            Some((
                address.parse().ok()?,
                length.parse().ok().filter(|l| *l <= 32)?,
            ))
        })
        .collect()
}

/// Whether two prefixes share an address.
pub(super) fn overlaps(a: (Ipv4Addr, u8), b: (Ipv4Addr, u8)) -> bool {
    let shorter = a.1.min(b.1);
    let mask = if shorter == 0 {
        0
    } else {
        u32::MAX << (32 - shorter)
    };
    u32::from(a.0) & mask == u32::from(b.0) & mask
}

/// The owner name a claim points to, for the sweep.
pub(super) fn claim_owner(path: &Path) -> Option<String> {
    Some(std::fs::read_link(path).ok()?.to_str()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_of_every_kind_are_read_and_default_is_not() {
        let table = "default via 192.0.2.1 dev eth0\n\
                     192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2\n\
                     local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1\n\
                     broadcast 10.77.3.255 dev fb1.0 table local\n\
                     10.77.4.0/24 dev fb1.1 proto kernel scope link src 10.77.4.1\n";
        let host = |text: &str| text.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            routed_prefixes(table),
            vec![
                (host("192.0.2.0"), 24),
                (host("127.0.0.0"), 8),
                (host("10.77.3.255"), 32),
                (host("10.77.4.0"), 24),
            ]
        );
    }

    #[test]
    fn prefixes_overlap_when_the_shorter_mask_agrees() {
        let net = |a: u8, b: u8, c: u8, length: u8| (Ipv4Addr::new(10, a, b, c), length);
        assert!(overlaps(net(77, 4, 0, 24), net(77, 4, 0, 24)));
        assert!(overlaps(net(77, 4, 0, 24), net(0, 0, 0, 8)));
        assert!(overlaps(net(77, 4, 0, 24), net(77, 4, 9, 32)));
        assert!(!overlaps(net(77, 4, 0, 24), net(77, 5, 0, 24)));
        assert!(!overlaps(
            net(77, 4, 0, 24),
            (Ipv4Addr::new(192, 0, 2, 0), 24)
        ));
        assert!(overlaps(net(77, 4, 0, 24), (Ipv4Addr::UNSPECIFIED, 0)));
    }
}
