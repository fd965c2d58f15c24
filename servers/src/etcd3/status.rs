//! Asking one etcd member about the cluster, straight at its lab address (not through its
//! fault proxy, whose faults must not hide the truth from the nemesis): its member id, the
//! leader it follows, and its Raft term.
//!
//! A plain blocking HTTP/1.0 request to the JSON gateway: no runtime, no client crate, and
//! HTTP/1.0 makes etcd answer with the whole body and close, so the reply is read to its end.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// What one member reports (`/v3/maintenance/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MemberStatus {
    /// Its own id.
    pub(super) member_id: u64,
    /// The id of the leader it follows (0: it knows of none).
    pub(super) leader_id: u64,
    /// Its Raft term.
    pub(super) raft_term: u64,
}

/// Why a member's answer could not be had or read.
#[derive(Debug, thiserror::Error)]
pub(super) enum StatusError {
    /// The exchange failed.
    #[error("etcd at {address}{path}: {source}")]
    Io {
        address: SocketAddr,
        path: String,
        source: std::io::Error,
    },
    /// What came back is no HTTP reply.
    #[error("etcd at {address}{path}: no HTTP reply: {reply}")]
    NoHttp {
        address: SocketAddr,
        path: String,
        reply: String,
    },
    /// An HTTP status other than 200.
    #[error("etcd at {address}{path}: {status}: {body}")]
    NotOk {
        address: SocketAddr,
        path: String,
        status: String,
        body: String,
    },
    /// A body that is not JSON.
    #[error("etcd at {address}{path}: {source}: {body}")]
    NotJson {
        address: SocketAddr,
        path: String,
        source: serde_json::Error,
        body: String,
    },
    /// A status answer without the fields one carries.
    #[error("etcd at {address}: unexpected status {reply}")]
    Unexpected { address: SocketAddr, reply: Value },
}

/// POSTs `body` to `path` on the member at `address`, every step bounded by `timeout`.
pub(super) fn post(
    address: SocketAddr,
    path: &str,
    body: &Value,
    timeout: Duration,
) -> Result<Value, StatusError> {
    let fail = |source: std::io::Error| StatusError::Io {
        address,
        path: path.to_string(),
        source,
    };
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(fail)?;
    stream.set_read_timeout(Some(timeout)).map_err(fail)?;
    stream.set_write_timeout(Some(timeout)).map_err(fail)?;
    let body = body.to_string();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .map_err(fail)?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(fail)?;
    let reply = String::from_utf8_lossy(&reply);
    let (head, json) = reply
        .split_once("\r\n\r\n")
        .ok_or_else(|| StatusError::NoHttp {
            address,
            path: path.to_string(),
            reply: reply.to_string(),
        })?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(StatusError::NotOk {
            address,
            path: path.to_string(),
            status: head.lines().next().unwrap_or("").to_string(),
            body: json.to_string(),
        });
    }
    serde_json::from_str(json).map_err(|source| StatusError::NotJson {
        address,
        path: path.to_string(),
        source,
        body: json.to_string(),
    })
}

/// The member's status.
pub(super) fn status(address: SocketAddr, timeout: Duration) -> Result<MemberStatus, StatusError> {
    let reply = post(
        address,
        "/v3/maintenance/status",
        &serde_json::json!({}),
        timeout,
    )?;
    parse_status(&reply).ok_or(StatusError::Unexpected { address, reply })
}

/// The fields of a status answer (int64 travel as strings in the gateway's JSON).
fn parse_status(reply: &Value) -> Option<MemberStatus> {
    let number = |value: Option<&Value>| -> Option<u64> { value?.as_str()?.parse().ok() };
    let header = reply.get("header")?;
    Some(MemberStatus {
        member_id: number(header.get("member_id"))?,
        // Left out while the member knows of no leader.
        leader_id: number(reply.get("leader")).unwrap_or(0),
        raft_term: number(header.get("raft_term")).unwrap_or(0),
    })
}

/// The leader the cluster has now, by the members' own reports: of the members that follow a
/// leader, the one with the newest term decides. A deposed leader cut off from the majority may
/// still name itself for a moment, but only at an older term than the majority's new leader.
pub(super) fn current_leader(reports: &[MemberStatus]) -> Option<u64> {
    reports
        .iter()
        .filter(|report| report.leader_id != 0)
        .max_by_key(|report| report.raft_term)
        .map(|report| report.leader_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_answer_is_read() {
        let reply = serde_json::json!({
            "header": {"cluster_id": "1", "member_id": "115", "revision": "1", "raft_term": "2"},
            "version": "3.4.23", "leader": "115", "raftTerm": "2"
        });
        assert_eq!(
            parse_status(&reply),
            Some(MemberStatus {
                member_id: 115,
                leader_id: 115,
                raft_term: 2
            })
        );
        let leaderless = serde_json::json!({"header": {"member_id": "7", "raft_term": "5"}});
        assert_eq!(
            parse_status(&leaderless).map(|status| status.leader_id),
            Some(0)
        );
        assert_eq!(parse_status(&serde_json::json!({"error": "x"})), None);
    }

    #[test]
    fn the_newest_term_with_a_leader_decides() {
        let report = |member_id, leader_id, raft_term| MemberStatus {
            member_id,
            leader_id,
            raft_term,
        };
        // The deposed leader 1 still names itself at term 2; the majority elected 2 at term 3.
        assert_eq!(
            current_leader(&[report(1, 1, 2), report(2, 2, 3), report(3, 2, 3)]),
            Some(2)
        );
        // An isolated member campaigning at ever higher terms follows nobody: it does not count.
        assert_eq!(current_leader(&[report(1, 0, 9), report(2, 2, 3)]), Some(2));
        assert_eq!(current_leader(&[report(1, 0, 9), report(2, 0, 3)]), None);
        assert_eq!(current_leader(&[]), None);
    }
}
