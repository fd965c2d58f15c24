//! What a partition means as firewall rules: from groups of member names to the peer addresses
//! each member's namespace drops, and the `iptables-restore` text that installs them.
//!
//! Every member's namespace has one chain of its own, [`CHAIN`], jumped to from `INPUT` and
//! `OUTPUT`. A partition rewrites that chain in every namespace (declaring a chain in an
//! `iptables-restore --noflush` script empties it, and the script is applied atomically), so a
//! new partition replaces the old one and a heal is the empty chain. Both ends of a cut drop
//! both directions: the link stays cut even if one side's rules were briefly out of date.
//! Packets are dropped, not rejected, as a real partition loses them: TCP retransmits and
//! times out.

use std::net::Ipv4Addr;

use crate::ServerError;

/// The chain holding a member's cuts.
pub(super) const CHAIN: &str = "FENCER-PEERS";

/// The script run once per namespace when it is made: the empty chain and the jumps to it.
pub(super) fn hook_script() -> String {
    format!("*filter\n:{CHAIN} - [0:0]\n-A INPUT -j {CHAIN}\n-A OUTPUT -j {CHAIN}\nCOMMIT\n")
}

/// The script that makes `CHAIN` drop everything from and to `peers`, and nothing else.
pub(super) fn chain_script(peers: &[Ipv4Addr]) -> String {
    let mut script = format!("*filter\n:{CHAIN} - [0:0]\n");
    for peer in peers {
        script.push_str(&format!("-A {CHAIN} -s {peer}/32 -j DROP\n"));
        script.push_str(&format!("-A {CHAIN} -d {peer}/32 -j DROP\n"));
    }
    script.push_str("COMMIT\n");
    script
}

/// For each of `members` (by index), the indices of the members it must be cut from under the
/// partition `groups`: every member of another group, and everyone for a member in no group.
/// A name that is no member, or a member in two groups, is an error naming it.
pub(super) fn cut_peers(
    members: &[String],
    groups: &[Vec<String>],
) -> Result<Vec<Vec<usize>>, ServerError> {
    let mut group_of: Vec<Option<usize>> = vec![None; members.len()];
    for (group, names) in groups.iter().enumerate() {
        for name in names {
            let index = members
                .iter()
                .position(|member| member == name)
                .ok_or_else(|| {
                    ServerError::Failed(format!(
                        "partition names `{name}`, which is no member: expected one of {}",
                        members.join(", ")
                    ))
                })?;
            if group_of[index].is_some_and(|earlier| earlier != group)
                || names.iter().filter(|other| *other == name).count() > 1
            {
                return Err(ServerError::Failed(format!(
                    "partition lists member `{name}` more than once: each member belongs to \
                     at most one group"
                )));
            }
            group_of[index] = Some(group);
        }
    }
    Ok((0..members.len())
        .map(|index| {
            (0..members.len())
                .filter(|&peer| {
                    peer != index
                        && (group_of[index].is_none() || group_of[index] != group_of[peer])
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn members_of_different_groups_are_cut_both_ways() {
        let members = names(&["n1", "n2", "n3"]);
        let cuts = cut_peers(&members, &[names(&["n1"]), names(&["n2", "n3"])]).unwrap();
        assert_eq!(cuts, vec![vec![1, 2], vec![0], vec![0]]);
    }

    #[test]
    fn a_member_in_no_group_is_cut_from_everyone() {
        let members = names(&["n1", "n2", "n3"]);
        let cuts = cut_peers(&members, &[names(&["n1", "n2"])]).unwrap();
        assert_eq!(cuts, vec![vec![2], vec![2], vec![0, 1]]);
        let isolated = cut_peers(&members, &[]).unwrap();
        assert_eq!(isolated, vec![vec![1, 2], vec![0, 2], vec![0, 1]]);
    }

    #[test]
    fn one_group_of_everyone_cuts_nothing() {
        let members = names(&["n1", "n2", "n3"]);
        let cuts = cut_peers(&members, std::slice::from_ref(&members)).unwrap();
        assert!(cuts.iter().all(Vec::is_empty), "{cuts:?}");
    }

    #[test]
    fn unknown_and_repeated_members_are_refused() {
        let members = names(&["n1", "n2", "n3"]);
        let error = cut_peers(&members, &[names(&["n1", "n4"])]).unwrap_err();
        assert!(
            error.to_string().contains("`n4`, which is no member"),
            "{error}"
        );
        let error = cut_peers(&members, &[names(&["n1"]), names(&["n1", "n2"])]).unwrap_err();
        assert!(error.to_string().contains("`n1` more than once"), "{error}");
        let error = cut_peers(&members, &[names(&["n2", "n2"])]).unwrap_err();
        assert!(error.to_string().contains("`n2` more than once"), "{error}");
    }

    #[test]
    fn the_chain_script_drops_each_peer_in_both_directions() {
        let peers = [Ipv4Addr::new(10, 77, 4, 12), Ipv4Addr::new(10, 77, 4, 13)];
        assert_eq!(
            chain_script(&peers),
            "*filter\n:FENCER-PEERS - [0:0]\n\
             -A FENCER-PEERS -s 10.77.4.12/32 -j DROP\n\
             -A FENCER-PEERS -d 10.77.4.12/32 -j DROP\n\
             -A FENCER-PEERS -s 10.77.4.13/32 -j DROP\n\
             -A FENCER-PEERS -d 10.77.4.13/32 -j DROP\n\
             COMMIT\n"
        );
        assert_eq!(
            chain_script(&[]),
            "*filter\n:FENCER-PEERS - [0:0]\nCOMMIT\n"
        );
        assert!(hook_script().contains("-A INPUT -j FENCER-PEERS\n-A OUTPUT -j FENCER-PEERS\n"));
    }
}
