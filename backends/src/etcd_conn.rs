//! One etcd server reached through its v3 JSON gateway (`POST /v3/kv/txn`, `/v3/lease/…`) over
//! plain HTTP/1.1, shared by a lock and a store.
//!
//! The gateway needs no generated protobuf code, so the `etcd` feature builds with only the
//! Rust toolchain (the gRPC client crate needs `protoc`). The gateway's JSON carries int64 as
//! strings, bytes as base64, and leaves out fields that hold their default (`0`, `false`).
//!
//! Like the Redis connection, the HTTP client is made on first use inside the caller's runtime
//! (its pooled connections are driven by tasks of that runtime), and a call from another
//! runtime makes a new one.

use std::convert::Infallible;
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

/// An etcd server address and the HTTP client talking to it.
pub struct EtcdConnection {
    /// `http://host:port`, what the requests go to.
    base_url: String,
    shown_url: String,
    /// The client, kept for the runtime whose tasks drive its pooled connections.
    live: PerRuntime<HttpClient>,
}

impl EtcdConnection {
    /// Checks `url` (`etcd://host:port`) without connecting. etcd's own authentication is not
    /// supported, so a URL with a user is refused rather than silently sent without one.
    pub fn open(url: &str) -> Result<EtcdConnection, BackendError> {
        let shown_url = shown_if_scheme(url, &["etcd"], "an etcd://host:port URL")?;
        let authority = url["etcd://".len()..].trim_end_matches('/');
        if authority.contains('@') {
            return Err(BackendError::BadUrl(format!(
                "etcd authentication is not supported: drop the user from {shown_url}"
            )));
        }
        let port_ok = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok || authority.contains(['/', '?', '#']) {
            return Err(BackendError::BadUrl(format!(
                "expected an etcd://host:port URL (e.g. etcd://127.0.0.1:2379), found {shown_url}"
            )));
        }
        Ok(EtcdConnection {
            base_url: format!("http://{authority}"),
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
    /// A refused TCP connect means nothing was sent: `NotApplied`. Once the request may have
    /// left, a lost connection or a missed deadline is `Unknown`, and so is an error answer
    /// unless its code says etcd refused the request outright ([`REFUSED_CODES`]).
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, CallError> {
        let client = self.client().await;
        let request = hyper::Request::post(format!("{}{path}", self.base_url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|error| CallError::NotApplied(format!("etcd request {path}: {error}")))?;
        let exchange = async {
            let response = client.request(request).await.map_err(|error| {
                if error.is_connect() {
                    CallError::NotApplied(format!(
                        "cannot connect to etcd at {}: {error}",
                        self.shown_url
                    ))
                } else {
                    CallError::Unknown(format!("etcd {path}: {error}"))
                }
            })?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|error| CallError::Unknown(format!("etcd {path}: reply cut: {error}")))?
                .to_bytes();
            Ok::<_, CallError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_elapsed| {
                CallError::Unknown(format!("etcd {path}: no answer within {REQUEST_TIMEOUT:?}"))
            })??;
        // A streaming call (lease keep-alive) answers one JSON object per line.
        let first_line = bytes.split(|byte| *byte == b'\n').next().unwrap_or(&[]);
        let reply: Value = serde_json::from_slice(first_line).map_err(|error| {
            CallError::Unknown(format!(
                "etcd {path}: HTTP {status}, unreadable reply ({error}): {}",
                String::from_utf8_lossy(&bytes)
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
        assert_eq!(connection.base_url, "http://127.0.0.1:2379");
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
        ] {
            assert!(EtcdConnection::open(bad).is_err(), "{bad}");
        }
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
