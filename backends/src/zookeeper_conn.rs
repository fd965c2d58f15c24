//! A ZooKeeper server address, the long-lived session the store works through, and the short
//! lease sessions the lock opens, touches and closes.
//!
//! Two kinds of session, because they must behave differently while a worker is paused:
//! - the *store session* is an ordinary client session (pinged by the client library's own task),
//!   opened lazily on the runtime that makes the call and reopened after it expired or broke;
//! - a *lease session* is opened **detached** (the library neither pings it once the call is over
//!   nor closes it when the client is dropped): between fencer's calls no connection exists, so
//!   the server expires it exactly when the worker stops renewing — see `zookeeper_lock`.
//!
//! Every call runs under [`CALL_DEADLINE`], so a stopped or dead server makes a call fail, never
//! hang.

use std::time::Duration;

use fencer_harness::CallError;
use zookeeper_client::{Client, Connector, SessionInfo};

use crate::error::BackendError;
use crate::per_runtime::PerRuntime;
use crate::url::shown_if_scheme;

/// How long one call (connect included) may take before it is given up as unknown.
pub const CALL_DEADLINE: Duration = Duration::from_secs(2);

/// Session timeout asked for the store session (the server clamps it to its own bounds).
const STORE_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// A ZooKeeper server (or ensemble) address and the store's live session, if one is open.
pub struct ZookeeperConnection {
    /// `host:port[,host:port…]` as the client library wants it.
    cluster: String,
    shown_url: String,
    /// The store session, kept for the runtime whose task drives it.
    live: PerRuntime<Client>,
}

/// A lease session just opened: the client to work through and the timeout the server granted.
pub struct LeaseSession {
    /// Connected client (detached: dropping it leaves the session to expire on the server).
    pub client: Client,
    /// The session timeout the server negotiated, which is the lease's real length.
    pub negotiated: Duration,
}

impl ZookeeperConnection {
    /// Checks `url` (`zk://host:port[,host:port…]`) without connecting.
    pub fn open(url: &str) -> Result<ZookeeperConnection, BackendError> {
        let shown_url = shown_if_scheme(url, &["zk", "zookeeper"], "a zk://host:port URL")?;
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let cluster = rest.split(['/', '?']).next().unwrap_or("");
        if cluster.is_empty() || cluster.contains('@') {
            return Err(BackendError::BadUrl(format!(
                "expected zk://host:port[,host:port…] (no user, no path), found {shown_url}"
            )));
        }
        Ok(ZookeeperConnection {
            cluster: cluster.to_string(),
            shown_url,
            live: PerRuntime::default(),
        })
    }

    /// The URL as shown in messages.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The store session, opening one if needed. Failing to open one means nothing was sent.
    pub async fn store_client(&self) -> Result<Client, CallError> {
        let connector = || {
            Client::connector()
                .with_session_timeout(STORE_SESSION_TIMEOUT)
                .with_fail_eagerly()
        };
        let open = || async {
            self.connect(connector)
                .await
                .map_err(|failure| CallError::NotApplied(failure.to_string()))
        };
        self.live
            .get_or_open(|client| !client.state().is_terminated(), open)
            .await
    }

    /// Opens a new lease session asking for `timeout`. Detached: once the caller drops the
    /// client, nothing keeps the session alive but the next [`Self::touch_lease`].
    pub async fn open_lease(&self, timeout: Duration) -> Result<LeaseSession, BackendError> {
        let connector = || {
            Client::connector()
                .with_session_timeout(timeout)
                .with_detached()
                .with_fail_eagerly()
        };
        let client = self
            .connect(connector)
            .await
            .map_err(|failure| BackendError::Unreachable(failure.to_string()))?;
        let negotiated = client.session_timeout();
        Ok(LeaseSession { client, negotiated })
    }

    /// Reconnects to the lease session `session`, which resets its expiry on the server to its
    /// timeout from now. `close_on_drop`: the session is closed (its ephemeral nodes deleted)
    /// when the returned client is dropped.
    pub async fn touch_lease(
        &self,
        session: SessionInfo,
        timeout: Duration,
        close_on_drop: bool,
    ) -> Result<Client, Touch> {
        let connector = || {
            let connector = Client::connector()
                .with_session(session.clone())
                .with_session_timeout(timeout)
                .with_fail_eagerly();
            if close_on_drop {
                connector
            } else {
                connector.with_detached()
            }
        };
        self.connect(connector).await
    }

    /// Connects with a fresh connector from `connector` until a session is established, the
    /// server says the session expired, nothing listens (refused at once), or [`CALL_DEADLINE`]
    /// passes. Retrying matters: the library gives a handshake only 2/5 of the session timeout
    /// (120 ms for a 300 ms lease), less than a busy or cold server may take; a failed attempt
    /// leaves at most an empty session that expires by itself.
    async fn connect(&self, connector: impl Fn() -> Connector) -> Result<Client, Touch> {
        let started = tokio::time::Instant::now();
        loop {
            let left = CALL_DEADLINE.saturating_sub(started.elapsed());
            let error = match tokio::time::timeout(left, connector().connect(&self.cluster)).await {
                Ok(Ok(client)) => return Ok(client),
                Ok(Err(zookeeper_client::Error::SessionExpired)) => return Err(Touch::Expired),
                Ok(Err(error)) => error.to_string(),
                Err(_elapsed) => "no session".to_string(),
            };
            if started.elapsed() >= CALL_DEADLINE {
                return Err(Touch::Failed(format!(
                    "cannot connect to ZooKeeper at {}: {error} within {CALL_DEADLINE:?}",
                    self.shown_url
                )));
            }
            if !self.listening().await {
                return Err(Touch::Refused(format!(
                    "cannot connect to ZooKeeper at {}: {error}",
                    self.shown_url
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether any server of the cluster accepts a TCP connection.
    async fn listening(&self) -> bool {
        for host in self.cluster.split(',') {
            let probe = tokio::net::TcpStream::connect(host);
            if let Ok(Ok(_stream)) = tokio::time::timeout(Duration::from_millis(200), probe).await {
                return true;
            }
        }
        false
    }

    /// Classifies an error from a request that was sent on the store session: its effect is
    /// unknown. A session that ended is dropped so the next call opens a new one.
    pub async fn sent_error(&self, error: zookeeper_client::Error) -> CallError {
        if matches!(
            error,
            zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed
        ) {
            self.live.forget().await;
        }
        CallError::Unknown(format!("zookeeper: {error}"))
    }

    /// Opens the store session and reads the root node: a clear error up front beats a run
    /// full of failed calls.
    pub async fn ping(&self) -> Result<(), BackendError> {
        let client = self.store_client().await?;
        match tokio::time::timeout(CALL_DEADLINE, client.check_stat("/")).await {
            Ok(Ok(_stat)) => Ok(()),
            Ok(Err(error)) => Err(BackendError::Unreachable(format!(
                "ZooKeeper at {} refused a read: {error}",
                self.shown_url
            ))),
            Err(_elapsed) => Err(BackendError::Unreachable(format!(
                "ZooKeeper at {} did not answer within {CALL_DEADLINE:?}",
                self.shown_url
            ))),
        }
    }
}

/// Why a session could not be opened or reattached.
#[derive(Debug)]
pub enum Touch {
    /// The server says the session expired: the lease is gone.
    Expired,
    /// Nothing listens: no request reached a server.
    Refused(String),
    /// No session within the deadline: a request may have reached the server.
    Failed(String),
}

impl std::fmt::Display for Touch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Touch::Expired => write!(f, "zookeeper: session expired"),
            Touch::Refused(why) | Touch::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// Runs one sent request under [`CALL_DEADLINE`]; a missed deadline is an unknown outcome.
pub async fn within<T, E>(
    request: impl std::future::Future<Output = Result<T, E>>,
) -> Result<Result<T, E>, CallError> {
    tokio::time::timeout(CALL_DEADLINE, request)
        .await
        .map_err(|_elapsed| {
            CallError::Unknown(format!("zookeeper: no reply within {CALL_DEADLINE:?}"))
        })
}

/// A lock or key name as one znode name: `/` and `%` are escaped, so `fencer/t/lock` stays one
/// level deep.
pub fn node_name(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_names_flattened() {
        let connection = ZookeeperConnection::open("zk://127.0.0.1:2181,127.0.0.1:2182").unwrap();
        assert_eq!(connection.cluster, "127.0.0.1:2181,127.0.0.1:2182");
        let error = ZookeeperConnection::open("redis://u:pw@h:1")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("expected a zk://host:port URL"), "{error}");
        assert!(!error.contains("pw"), "{error}");
        assert!(ZookeeperConnection::open("zk://").is_err());
        assert_eq!(node_name("fencer/t%1/lock"), "fencer%2Ft%251%2Flock");
    }
}
