//! Finding the current Redis primary through Redis Sentinel:
//! `redis-sentinel://HOST:PORT,HOST:PORT,…/NAME[?via=ANNOUNCED@REACHED,…]`.
//!
//! Each sentinel is asked `SENTINEL get-master-addr-by-name NAME`, all at once, and the address
//! a majority of the listed sentinels names is the primary: one sentinel cut off from the others
//! keeps naming a primary they have replaced, and following it would write to a node the rest
//! of the deployment no longer treats as the primary.
//!
//! `via` rewrites an address as the sentinels announce it into the address the client dials
//! instead (`10.77.3.11:6379@127.0.0.1:41001`): fencer's private clusters announce members at
//! their lab addresses, and their clients reach each member through that member's fault proxy,
//! so the faults fencer puts between clients and a member still apply. An announced address
//! with no `via` entry is dialled as announced.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::error::BackendError;

/// The URL scheme naming a Sentinel-managed primary.
pub const SENTINEL_SCHEME: &str = "redis-sentinel";

/// How long one sentinel may take to connect and answer: a paused or cut-off sentinel must not
/// hold up the call for long, and a live one answers in milliseconds.
const SENTINEL_TIMEOUT: Duration = Duration::from_millis(500);

/// A `redis-sentinel://` URL taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentinelTarget {
    /// Every sentinel's `host:port`, in the URL's order.
    pub sentinels: Vec<String>,
    /// The monitored primary's name (`sentinel monitor NAME …`).
    pub name: String,
    /// Announced `host:port` → the `host:port` dialled instead.
    pub via: Vec<(String, String)>,
}

impl SentinelTarget {
    /// Parses `redis-sentinel://h:p,h:p/NAME[?via=A@B,…]`; any other query parameter, a
    /// password, a missing name or a host without a port is refused, naming the form.
    pub fn parse(url: &str) -> Result<SentinelTarget, BackendError> {
        let shown = crate::url::redact_url(url);
        let bad = |why: &str| {
            BackendError::BadUrl(format!(
                "{why} in {shown}: expected {SENTINEL_SCHEME}://HOST:PORT,HOST:PORT,…/NAME\
                 [?via=ANNOUNCED_HOST:PORT@DIALLED_HOST:PORT,…]"
            ))
        };
        let rest = url
            .strip_prefix(SENTINEL_SCHEME)
            .and_then(|rest| rest.strip_prefix("://"))
            .ok_or_else(|| bad("not a sentinel URL"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hosts, name) = rest.split_once('/').ok_or_else(|| bad("no primary name"))?;
        if name.is_empty() || name.contains('/') {
            return Err(bad("the primary's name must be one path segment"));
        }
        if hosts.contains('@') {
            return Err(bad("sentinel URLs take no user or password"));
        }
        let sentinels = hosts
            .split(',')
            .map(|host| address(host).ok_or_else(|| bad(&format!("`{host}` is not HOST:PORT"))))
            .collect::<Result<Vec<_>, _>>()?;
        let mut via = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let Some(("via", routes)) = pair.split_once('=') else {
                return Err(bad(&format!("unknown parameter `{pair}`")));
            };
            for route in routes.split(',') {
                let parsed = route.split_once('@').and_then(|(announced, dialled)| {
                    Some((address(announced)?, address(dialled)?))
                });
                via.push(parsed.ok_or_else(|| bad(&format!("`{route}` is not A@B")))?);
            }
        }
        Ok(SentinelTarget {
            sentinels,
            name: name.to_string(),
            via,
        })
    }

    /// The address to dial for a primary announced at `announced`.
    pub fn dialled(&self, announced: &str) -> String {
        self.via
            .iter()
            .find(|(from, _)| from == announced)
            .map_or_else(|| announced.to_string(), |(_, to)| to.clone())
    }

    /// The primary a majority of the sentinels names now (`host:port` as announced). Nothing is
    /// sent to any data node, so a failure here means the call was not applied.
    pub async fn primary(&self) -> Result<String, NoPrimary> {
        let mut asking = tokio::task::JoinSet::new();
        for sentinel in &self.sentinels {
            let (sentinel, name) = (sentinel.clone(), self.name.clone());
            asking.spawn(async move {
                let answer = tokio::time::timeout(SENTINEL_TIMEOUT, ask(&sentinel, &name)).await;
                let answer = match answer {
                    Ok(answer) => answer.map_err(|error| error.to_string()),
                    Err(_elapsed) => Err("no answer".to_string()),
                };
                (sentinel, answer)
            });
        }
        let majority = self.sentinels.len() / 2 + 1;
        let mut named: Vec<String> = Vec::new();
        let mut failures = Vec::new();
        while let Some(joined) = asking.join_next().await {
            match joined {
                Ok((_, Ok(Some(primary)))) => {
                    named.push(primary.clone());
                    // A majority decides: the slowest sentinel need not be waited for (the
                    // rest are aborted when `asking` is dropped).
                    if named.iter().filter(|other| **other == primary).count() >= majority {
                        return Ok(primary);
                    }
                }
                Ok((sentinel, Ok(None))) => {
                    failures.push(format!("{sentinel}: no primary named {}", self.name));
                }
                Ok((sentinel, Err(error))) => failures.push(format!("{sentinel}: {error}")),
                Err(error) => failures.push(format!("sentinel task: {error}")),
            }
        }
        named.sort();
        failures.sort();
        Err(NoPrimary {
            majority,
            sentinels: self.sentinels.len(),
            name: self.name.clone(),
            named,
            failures,
        })
    }
}

/// No majority of the sentinels named one primary: nothing was sent to any data node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "no {majority} of {sentinels} sentinels agree on the primary {name}: named {named:?}; {}",
    .failures.join("; ")
)]
pub struct NoPrimary {
    /// How many sentinels make a majority.
    pub majority: usize,
    /// How many there are.
    pub sentinels: usize,
    /// The primary's name they monitor.
    pub name: String,
    /// The primaries the sentinels that answered named, sorted.
    pub named: Vec<String>,
    /// `sentinel: why` for each one that named none, sorted.
    pub failures: Vec<String>,
}

/// `host:port` with a numeric port.
fn address(text: &str) -> Option<String> {
    let (host, port) = text.rsplit_once(':')?;
    (!host.is_empty() && port.parse::<u16>().is_ok()).then(|| text.to_string())
}

/// What one sentinel names as `name`'s primary (`None`: it monitors no such primary).
async fn ask(sentinel: &str, name: &str) -> Result<Option<String>, redis::RedisError> {
    let client = redis::Client::open(format!("redis://{sentinel}"))?;
    let mut connection: MultiplexedConnection = client.get_multiplexed_async_connection().await?;
    let answer: Option<(String, String)> = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(name)
        .query_async(&mut connection)
        .await?;
    Ok(answer.map(|(host, port)| format!("{host}:{port}")))
}

/// Whether the server behind `connection` says it is a primary (`ROLE`): a sentinel majority
/// can lag a failover by a moment, and a write sent to a replica would only bounce.
pub async fn is_primary(connection: &mut MultiplexedConnection) -> Result<bool, redis::RedisError> {
    let role: redis::Value = redis::cmd("ROLE").query_async(connection).await?;
    Ok(match role {
        redis::Value::Array(items) => matches!(
            items.first(),
            Some(redis::Value::BulkString(kind)) if kind.as_slice() == b"master"
        ),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_names_its_sentinels_primary_and_routes() {
        let target = SentinelTarget::parse(
            "redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/fencer?via=10.0.0.1:6379@127.0.0.1:4001",
        )
        .unwrap();
        assert_eq!(target.sentinels, ["10.0.0.1:26379", "10.0.0.2:26379"]);
        assert_eq!(target.name, "fencer");
        assert_eq!(target.dialled("10.0.0.1:6379"), "127.0.0.1:4001");
        assert_eq!(target.dialled("10.0.0.2:6379"), "10.0.0.2:6379");
    }

    #[test]
    fn a_bad_sentinel_url_says_what_was_expected() {
        for (url, why) in [
            ("redis-sentinel://h:1", "no primary name"),
            ("redis-sentinel://h:1/", "one path segment"),
            ("redis-sentinel://h/x", "`h` is not HOST:PORT"),
            ("redis-sentinel://u:pw@h:1/x", "no user or password"),
            ("redis-sentinel://h:1/x?db=2", "unknown parameter `db=2`"),
            ("redis-sentinel://h:1/x?via=h:1", "`h:1` is not A@B"),
        ] {
            let error = SentinelTarget::parse(url).unwrap_err().to_string();
            assert!(error.contains(why), "{url}: {error}");
            assert!(error.contains("expected redis-sentinel://"), "{error}");
            assert!(!error.contains("pw"), "{error}");
        }
    }

    #[test]
    fn without_a_majority_of_sentinels_answering_no_primary_is_chosen() {
        let target =
            SentinelTarget::parse("redis-sentinel://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/fencer")
                .unwrap();
        let runtime = fencer_harness::runtime::real_runtime().unwrap();
        let error = runtime.block_on(target.primary()).unwrap_err();
        assert_eq!((error.majority, error.sentinels), (2, 3), "{error}");
        assert!(error.named.is_empty(), "{error}");
        let error = error.to_string();
        assert!(error.contains("no 2 of 3 sentinels agree"), "{error}");
        assert!(error.contains("127.0.0.1:3: "), "{error}");
    }
}
