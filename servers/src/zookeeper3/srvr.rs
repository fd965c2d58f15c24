//! Who a member says it is (`srvr`, one of ZooKeeper's four-letter words), and which member
//! leads.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long one `srvr` question may take before the member counts as not answering (paused,
/// killed, or too busy).
const SRVR_TIMEOUT: Duration = Duration::from_secs(1);

/// What one member says it is, from its `srvr` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// `Mode: leader`, in the epoch its zxid carries (the high 32 bits): a leader cut off
    /// from the quorum may still say so for a moment, in an older epoch than the new one.
    Leader { epoch: u64 },
    /// `Mode: follower` (or `observer`): in the quorum, not leading.
    Follower,
    /// Not serving: electing, cut off, paused, down, or not answering in time.
    Absent,
}

/// Reads a `srvr` answer.
fn role_of(answer: &str) -> Role {
    let field = |name: &str| {
        answer
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    let epoch = field("Zxid:")
        .and_then(|zxid| u64::from_str_radix(zxid.trim_start_matches("0x"), 16).ok())
        .map_or(0, |zxid| zxid >> 32);
    match field("Mode:") {
        Some("leader") => Role::Leader { epoch },
        Some("follower" | "observer") => Role::Follower,
        _ => Role::Absent,
    }
}

/// Asks the member at `addr` `srvr` (async: a paused member must not hold a thread).
async fn srvr(addr: SocketAddr) -> Role {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"srvr").await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(SRVR_TIMEOUT, ask).await {
        Ok(Ok(answer)) => role_of(&answer),
        Ok(Err(_)) | Err(_) => Role::Absent,
    }
}

/// Every member's role, asked all at once.
pub(super) async fn roles(addrs: &[SocketAddr]) -> Vec<Role> {
    let mut asked = tokio::task::JoinSet::new();
    for (index, &addr) in addrs.iter().enumerate() {
        asked.spawn(async move { (index, srvr(addr).await) });
    }
    let mut roles = vec![Role::Absent; addrs.len()];
    while let Some(answer) = asked.join_next().await {
        if let Ok((index, role)) = answer {
            roles[index] = role;
        }
    }
    roles
}

/// The index of the member that leads: among those saying `leader`, the one in the newest
/// epoch (a deposed leader that has not noticed yet is in an older one).
pub(super) fn leading(roles: &[Role]) -> Option<usize> {
    roles
        .iter()
        .enumerate()
        .filter_map(|(index, role)| match role {
            Role::Leader { epoch } => Some((*epoch, index)),
            Role::Follower | Role::Absent => None,
        })
        .max()
        .map(|(_, index)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_the_newest_epoch_that_says_so() {
        let answer = |mode: &str, zxid: &str| {
            format!(
                "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: {zxid}\nMode: {mode}\nNode count: 5\n"
            )
        };
        assert_eq!(
            role_of(&answer("leader", "0x200000003")),
            Role::Leader { epoch: 2 }
        );
        assert_eq!(role_of(&answer("follower", "0x2")), Role::Follower);
        assert_eq!(
            role_of("This ZooKeeper instance is not currently serving requests\n"),
            Role::Absent
        );
        let deposed_and_new = [
            Role::Leader { epoch: 1 },
            Role::Follower,
            Role::Leader { epoch: 2 },
        ];
        assert_eq!(leading(&deposed_and_new), Some(2));
        assert_eq!(leading(&[Role::Follower, Role::Absent]), None);
    }
}
