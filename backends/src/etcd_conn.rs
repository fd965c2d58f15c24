//! One etcd server or cluster reached through its v3 JSON gateway (`POST /v3/kv/txn`,
//! `/v3/lease/…`) over plain HTTP/1.1, shared by a lock and a store.
//!
//! A cluster is named by every member's client address (`etcd://h1:p1,h2:p2,h3:p3`). Calls go
//! to one member at a time; a call that could not even connect to it was never sent, so it is
//! tried on the next member at once. A call that may have reached a member and failed there is
//! *not* tried again (it may have been applied: it stays unknown), but the next call starts at
//! the next member, so a dead or cut-off member costs one unknown call, not all of them.
//!
//! The gateway needs no generated protobuf code, so the `etcd` feature builds with only the
//! Rust toolchain (the gRPC client crate needs `protoc`). The gateway's JSON carries int64 as
//! strings, bytes as base64, and leaves out fields that hold their default (`0`, `false`).
//!
//! Like the Redis connection, the HTTP client is made on first use inside the caller's runtime
//! (its pooled connections are driven by tasks of that runtime), and a call from another
//! runtime makes a new one.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fencer_harness::CallError;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::error::BackendError;
use crate::per_runtime::PerRuntime;
use crate::url::shown_if_scheme;

/// How long opening a TCP connection may take before the call fails as not applied.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one request may take in all: a deadline of its own, so a frozen server never hangs
/// a caller that has none (fencer's call timeout is usually much shorter).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// gRPC status codes the gateway reports for requests etcd refused before applying anything:
/// `INVALID_ARGUMENT` (3), `NOT_FOUND` (5, e.g. revoking an unknown lease), `OUT_OF_RANGE`
/// (11, a compacted revision). Any other error (`etcdserver: request timed out`, leader lost)
/// may hide a proposal that still commits, so it counts as unknown.
const REFUSED_CODES: [u64; 3] = [3, 5, 11];

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The addresses of an etcd server (or of every member of a cluster) and the HTTP client
/// talking to them.
pub struct EtcdConnection {
    /// `http://host:port` of each member, what the requests go to.
    base_urls: Vec<String>,
    /// The member calls go to first: the last one that did not fail.
    preferred: AtomicUsize,
    shown_url: String,
    /// The client, kept for the runtime whose tasks drive its pooled connections.
    live: PerRuntime<HttpClient>,
}

impl EtcdConnection {
    /// Checks `url` (`etcd://host:port`, or `etcd://h1:p1,h2:p2,…` for the members of a
    /// cluster) without connecting. etcd's own authentication is not supported, so a URL with a
    /// user is refused rather than silently sent without one.
    pub fn open(url: &str) -> Result<EtcdConnection, BackendError> {
        let shown_url = shown_if_scheme(url, &["etcd"], "an etcd://host:port URL")?;
        let authorities = url["etcd://".len()..].trim_end_matches('/');
        if authorities.contains('@') {
            return Err(BackendError::BadUrl(format!(
                "etcd authentication is not supported: drop the user from {shown_url}"
            )));
        }
        let port_ok = |authority: &str| {
            authority
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
        };
        if !authorities.split(',').all(port_ok) || authorities.contains(['/', '?', '#']) {
            return Err(BackendError::BadUrl(format!(
                "expected an etcd://host:port URL (e.g. etcd://127.0.0.1:2379, or \
                 etcd://h1:2379,h2:2379,h3:2379 for a cluster), found {shown_url}"
            )));
        }
        Ok(EtcdConnection {
            base_urls: authorities
                .split(',')
                .map(|authority| format!("http://{authority}"))
                .collect(),
            preferred: AtomicUsize::new(0),
            shown_url,
            live: PerRuntime::default(),
        })
    }

    /// The URL with any password hidden.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    async fn client(&self) -> HttpClient {
        let made = self.live.get_or_open(
            |_| true,
            || async {
                let mut connector = HttpConnector::new();
                connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
                connector.set_nodelay(true);
                Ok::<_, Infallible>(Client::builder(TokioExecutor::new()).build(connector))
            },
        );
        let Ok(client) = made.await;
        client
    }

    /// POSTs `body` to the gateway `path` (`/v3/kv/txn`) and returns the JSON answer.
    ///
    /// A refused or timed-out TCP connect means nothing was sent: the next member is tried, and
    /// when none connects the call is `NotApplied`. Once the request may have left, a lost
    /// connection or a missed deadline is `Unknown`, and so is an error answer unless its code
    /// says etcd refused the request outright (`REFUSED_CODES`); neither is retried, but the
    /// next call starts at the next member, as it does after a call the caller gave up on.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, CallError> {
        let client = self.client().await;
        let first = self.preferred.load(Ordering::Relaxed);
        let mut unreachable = Vec::new();
        for step in 0..self.base_urls.len() {
            let member = (first + step) % self.base_urls.len();
            let mut leave = LeaveUnlessAnswered {
                connection: self,
                member,
                answered: false,
            };
            match self.post_to(&client, member, path, body).await {
                Attempt::NotConnected(why) => unreachable.push((member, why)),
                Attempt::Answered(answer) => {
                    leave.answered = !matches!(answer, Err(CallError::Unknown(_)));
                    return answer;
                }
            }
        }
        Err(CallError::NotApplied(match unreachable.as_slice() {
            [(_, why)] => format!("cannot connect to etcd at {}: {why}", self.shown_url),
            members => {
                let whys: Vec<String> = members
                    .iter()
                    .map(|(member, why)| format!("{}: {why}", self.base_urls[*member]))
                    .collect();
                format!(
                    "cannot connect to any etcd member of {}: {}",
                    self.shown_url,
                    whys.join("; ")
                )
            }
        }))
    }

    /// The next call starts after `member`, unless another call moved past it already.
    fn move_past(&self, member: usize) {
        let next = (member + 1) % self.base_urls.len();
        let _ = self
            .preferred
            .compare_exchange(member, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// One try of `post` on the `member`-th address.
    async fn post_to(
        &self,
        client: &HttpClient,
        member: usize,
        path: &str,
        body: &Value,
    ) -> Attempt {
        let base_url = &self.base_urls[member];
        let request = match hyper::Request::post(format!("{base_url}{path}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
        {
            Ok(request) => request,
            Err(error) => {
                return Attempt::Answered(Err(CallError::NotApplied(format!(
                    "etcd request {path}: {error}"
                ))));
            }
        };
        let exchange = async {
            let response = match client.request(request).await {
                Ok(response) => response,
                Err(error) if error.is_connect() => {
                    return Err(Attempt::NotConnected(error.to_string()));
                }
                Err(error) => {
                    return Err(Attempt::Answered(Err(CallError::Unknown(format!(
                        "etcd {path} at {base_url}: {error}"
                    )))));
                }
            };
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|error| {
                    Attempt::Answered(Err(CallError::Unknown(format!(
                        "etcd {path} at {base_url}: reply cut: {error}"
                    ))))
                })?
                .to_bytes();
            Ok((status, bytes))
        };
        let (status, bytes) = match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(attempt)) => return attempt,
            Err(_elapsed) => {
                return Attempt::Answered(Err(CallError::Unknown(format!(
                    "etcd {path} at {base_url}: no answer within {REQUEST_TIMEOUT:?}"
                ))));
            }
        };
        Attempt::Answered(judge(path, status, &bytes))
    }

    /// Reads the server's status: a clear error up front beats a run full of failed calls.
    pub async fn ping(&self) -> Result<(), BackendError> {
        match self
            .post("/v3/maintenance/status", &serde_json::json!({}))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// Moves the connection past `member` when dropped, unless the member answered: on a failure,
/// and also when the caller gives up on the call mid-way (its own timeout drops the future), so
/// a member that hangs is left behind like one that fails.
struct LeaveUnlessAnswered<'a> {
    connection: &'a EtcdConnection,
    member: usize,
    answered: bool,
}

impl Drop for LeaveUnlessAnswered<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.connection.move_past(self.member);
        }
    }
}

/// How one try of a call on one member ended.
enum Attempt {
    /// No connection was made: nothing was sent, another member may be tried.
    NotConnected(String),
    /// The member got the request (or may have): this is the call's outcome.
    Answered(Result<Value, CallError>),
}

/// The call's outcome from the member's HTTP answer.
fn judge(path: &str, status: hyper::StatusCode, bytes: &[u8]) -> Result<Value, CallError> {
    // A streaming call (lease keep-alive) answers one JSON object per line.
    let first_line = bytes.split(|byte| *byte == b'\n').next().unwrap_or(&[]);
    let reply: Value = serde_json::from_slice(first_line).map_err(|error| {
        CallError::Unknown(format!(
            "etcd {path}: HTTP {status}, unreadable reply ({error}): {}",
            String::from_utf8_lossy(bytes)
        ))
    })?;
    let error = reply
        .get("error")
        .or_else(|| reply.get("result").and_then(|result| result.get("error")));
    match error {
        None if status.is_success() => Ok(reply),
        _ => {
            let code = int(&reply, "code");
            let why = format!("etcd {path}: HTTP {status}: {reply}");
            if REFUSED_CODES.contains(&code) {
                Err(CallError::NotApplied(why))
            } else {
                Err(CallError::Unknown(why))
            }
        }
    }
}

/// etcd keys and values travel base64-encoded.
pub fn base64(text: &str) -> String {
    BASE64.encode(text)
}

/// The text of a base64 field (`value`, `key`) of `object`, if present and UTF-8.
pub fn text(object: &Value, field: &str) -> Option<String> {
    let encoded = object.get(field)?.as_str()?;
    String::from_utf8(BASE64.decode(encoded).ok()?).ok()
}

/// An int64 field of `object`: the gateway sends them as strings and leaves out zeros.
pub fn int(object: &Value, field: &str) -> u64 {
    match object.get(field) {
        Some(Value::String(digits)) => digits.parse().unwrap_or(0),
        Some(Value::Number(number)) => number.as_u64().unwrap_or(0),
        _ => 0,
    }
}

/// Whether a txn answer took its `success` branch (`succeeded` is left out when false).
pub fn succeeded(reply: &Value) -> bool {
    reply.get("succeeded").and_then(Value::as_bool) == Some(true)
}

/// The key-values the `index`-th operation of a txn answer read (empty when it read none or
/// was not a range).
pub fn ranged(reply: &Value, index: usize) -> Vec<Value> {
    reply
        .get("responses")
        .and_then(|responses| responses.get(index))
        .and_then(|response| response.get("response_range"))
        .and_then(|range| range.get("kvs"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_host_and_port_and_nothing_else() {
        let connection = EtcdConnection::open("etcd://127.0.0.1:2379").unwrap();
        assert_eq!(connection.base_urls, ["http://127.0.0.1:2379"]);
        assert_eq!(connection.shown_url(), "etcd://127.0.0.1:2379");
        let error = EtcdConnection::open("redis://127.0.0.1:2379")
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains("expected an etcd://host:port URL"),
            "{error}"
        );
        let error = EtcdConnection::open("etcd://root:hunter2@h:2379")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("not supported"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
        for bad in [
            "etcd://h",
            "etcd://:2379",
            "etcd://h:2379/x",
            "etcd://h:port",
            "etcd://h:1,",
            "etcd://h:1,h",
            "etcd://h:1,,h:2",
        ] {
            assert!(EtcdConnection::open(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cluster_url_names_every_member() {
        let connection = EtcdConnection::open("etcd://10.0.0.1:2379,h2:2379,h3:12379/").unwrap();
        assert_eq!(
            connection.base_urls,
            ["http://10.0.0.1:2379", "http://h2:2379", "http://h3:12379"]
        );
    }

    #[test]
    fn moving_past_a_failed_member_is_done_once() {
        let connection = EtcdConnection::open("etcd://h1:1,h2:2,h3:3").unwrap();
        connection.move_past(0);
        // A second caller that also failed on h1 finds the preferred member moved already.
        connection.move_past(0);
        assert_eq!(connection.preferred.load(Ordering::Relaxed), 1);
        connection.move_past(1);
        connection.move_past(2);
        assert_eq!(connection.preferred.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_call_given_up_on_leaves_its_member_behind() {
        // Accepts connections (the kernel's backlog) and never answers.
        let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = hanging.local_addr().unwrap().port();
        let connection = EtcdConnection::open(&format!("etcd://127.0.0.1:{port},h2:2")).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let given_up = runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(200),
                connection.post("/v3/kv/range", &serde_json::json!({})),
            )
            .await
        });
        assert!(given_up.is_err(), "{given_up:?}");
        assert_eq!(connection.preferred.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn only_answers_with_a_refusal_code_are_not_applied() {
        let ok = judge("/p", hyper::StatusCode::OK, br#"{"succeeded":true}"#);
        assert!(ok.is_ok(), "{ok:?}");
        let refused = judge(
            "/p",
            hyper::StatusCode::BAD_REQUEST,
            br#"{"error":"etcdserver: requested lease not found","code":5}"#,
        );
        assert!(
            matches!(refused, Err(CallError::NotApplied(_))),
            "{refused:?}"
        );
        let timed_out = judge(
            "/p",
            hyper::StatusCode::SERVICE_UNAVAILABLE,
            br#"{"error":"etcdserver: request timed out","code":14}"#,
        );
        assert!(
            matches!(timed_out, Err(CallError::Unknown(_))),
            "{timed_out:?}"
        );
        let garbled = judge("/p", hyper::StatusCode::OK, b"<html>");
        assert!(matches!(garbled, Err(CallError::Unknown(_))), "{garbled:?}");
    }

    #[test]
    fn gateway_json_is_decoded() {
        let reply = serde_json::json!({
            "succeeded": true,
            "responses": [{"response_range": {"kvs": [
                {"key": base64("k"), "value": base64("v"), "create_revision": "8"}
            ]}}]
        });
        assert!(succeeded(&reply));
        assert!(!succeeded(&serde_json::json!({})));
        let kvs = ranged(&reply, 0);
        assert_eq!(text(&kvs[0], "value").as_deref(), Some("v"));
        assert_eq!(int(&kvs[0], "create_revision"), 8);
        assert_eq!(int(&kvs[0], "lease"), 0);
        assert!(ranged(&reply, 1).is_empty());
    }
}
