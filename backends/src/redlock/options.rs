//! The `redlock://` URL: which masters, how much clock drift to allow for, how long to wait for
//! each master, and where fencing tokens come from.
//!
//! ```text
//! redlock://HOST:PORT,HOST:PORT,…[?drift_factor=F&node_timeout_ms=MS&fence=none|redis://HOST:PORT]
//! ```

use std::time::Duration;

use crate::error::BackendError;
use crate::url::redact_url;

/// The scheme a Redlock URL starts with.
pub const REDLOCK_SCHEME: &str = "redlock";

/// The clock-drift factor the published algorithm suggests: 1 % of the TTL.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;

/// How long one master may take to answer one command by default: "small compared to the
/// auto-release time" (the published text suggests 5–50 ms for a 10 s TTL), so a master that
/// is down costs the client little of its validity.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// Where a grant's fencing token comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fence {
    /// Redlock's own answer: none. The adapter numbers its grants in its own memory so the
    /// checkers can tell which grant came later, and that number is no fence: it lives in one
    /// client process (see [`super::RedlockLock`]).
    None,
    /// `INCR` on one separate Redis (`redis://HOST:PORT`), which should persist every write
    /// (`appendfsync always`) so its counter survives a restart.
    Counter(String),
}

/// A Redlock URL taken apart.
#[derive(Clone, Debug, PartialEq)]
pub struct RedlockOptions {
    /// Each master's `HOST:PORT`, in the URL's order, no address twice.
    pub masters: Vec<String>,
    /// The share of the TTL allowed for the clocks of client and masters drifting apart.
    pub drift_factor: f64,
    /// How long the client waits for one master's reply to one command.
    pub node_timeout: Duration,
    /// Where fencing tokens come from.
    pub fence: Fence,
}

impl RedlockOptions {
    /// Reads `url`; every error names the URL (password hidden) and what was expected.
    pub fn parse(url: &str) -> Result<RedlockOptions, BackendError> {
        let shown = redact_url(url);
        let bad = |what: String| BackendError::BadUrl(format!("{what} in {shown}"));
        let rest = url
            .strip_prefix(REDLOCK_SCHEME)
            .and_then(|rest| rest.strip_prefix("://"))
            .ok_or_else(|| bad("expected redlock://HOST:PORT,HOST:PORT,…".into()))?;
        let (hosts, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut masters: Vec<String> = Vec::new();
        for address in hosts.split(',') {
            check_address(address)
                .map_err(|why| bad(format!("master `{}`: {why}", shown_address(address))))?;
            if masters.iter().any(|known| known == address) {
                // Counted twice, one master would make a majority of its own.
                return Err(bad(format!("master `{address}` is named twice")));
            }
            masters.push(address.to_string());
        }
        let mut options = RedlockOptions::defaults(masters);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("expected NAME=VALUE, found `{pair}`")))?;
            options
                .set(name, value)
                .map_err(|error| bad(error.to_string()))?;
        }
        Ok(options)
    }

    /// Whether `name=value` is a parameter a Redlock URL takes, with a value it accepts: for a
    /// caller that builds such a URL from its user's words and wants their mistakes named
    /// before anything starts. The error says what was expected.
    pub fn check_parameter(name: &str, value: &str) -> Result<(), ParameterError> {
        RedlockOptions::defaults(Vec::new()).set(name, value)
    }

    /// `masters` with every parameter at its default.
    fn defaults(masters: Vec<String>) -> RedlockOptions {
        RedlockOptions {
            masters,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            fence: Fence::None,
        }
    }

    /// Takes one `NAME=VALUE` of the query.
    fn set(&mut self, name: &str, value: &str) -> Result<(), ParameterError> {
        match name {
            "drift_factor" => {
                self.drift_factor = value
                    .parse::<f64>()
                    .ok()
                    .filter(|factor| (0.0..1.0).contains(factor))
                    .ok_or_else(|| ParameterError::DriftFactor(value.to_string()))?;
            }
            "node_timeout_ms" => {
                let timeout_ms = value.parse::<u64>().ok().filter(|ms| *ms > 0);
                self.node_timeout = Duration::from_millis(
                    timeout_ms.ok_or_else(|| ParameterError::NodeTimeout(value.to_string()))?,
                );
            }
            "fence" => self.fence = parse_fence(value)?,
            other => return Err(ParameterError::Unknown(other.to_string())),
        }
        Ok(())
    }

    /// How many masters make a majority: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }
}

/// `none` or `redis://HOST:PORT`.
fn parse_fence(value: &str) -> Result<Fence, ParameterError> {
    if value == "none" {
        return Ok(Fence::None);
    }
    match value.strip_prefix("redis://") {
        Some(address) if check_address(address).is_ok() => Ok(Fence::Counter(value.to_string())),
        _ => Err(ParameterError::Fence(redact_url(value))),
    }
}

/// `address` as it may be shown: a password someone put in it (`user:secret@host:port`, which
/// [`check_address`] refuses) hidden as [`redact_url`] hides it.
fn shown_address(address: &str) -> String {
    let shown = redact_url(&format!("redis://{address}"));
    shown.trim_start_matches("redis://").to_string()
}

/// A master is `HOST:PORT`: nothing else, so no part of the URL is silently ignored.
fn check_address(address: &str) -> Result<(), AddressError> {
    let (host, port) = address.rsplit_once(':').ok_or(AddressError::NotHostPort)?;
    if host.is_empty() || host.contains(['/', '@', '?', '#']) {
        return Err(AddressError::NotHostPort);
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(()),
        _ => Err(AddressError::Port(port.to_string())),
    }
}

/// What is wrong with a master's address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum AddressError {
    /// Not a host and a port, or one with more in it.
    #[error("expected HOST:PORT")]
    NotHostPort,
    /// A port that is not one.
    #[error("expected a port from 1 to 65535, found `{0}`")]
    Port(String),
}

/// What is wrong with one `NAME=VALUE` of a Redlock URL's query.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    /// `drift_factor` is not a share of the TTL.
    #[error("drift_factor must be a number from 0 up to 1, found `{0}`")]
    DriftFactor(String),
    /// `node_timeout_ms` is not a positive number of milliseconds.
    #[error("node_timeout_ms must be a whole number of milliseconds above 0, found `{0}`")]
    NodeTimeout(String),
    /// `fence` is neither `none` nor a counter's address (shown with its password hidden).
    #[error("fence must be `none` or the counter's redis://HOST:PORT, found `{0}`")]
    Fence(String),
    /// A parameter Redlock URLs do not take.
    #[error("unknown parameter `{0}`: expected drift_factor, node_timeout_ms or fence")]
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_and_parameters_are_read_with_defaults() {
        let options = RedlockOptions::parse("redlock://127.0.0.1:1,127.0.0.1:2,h:3").unwrap();
        assert_eq!(options.masters, ["127.0.0.1:1", "127.0.0.1:2", "h:3"]);
        assert_eq!(options.quorum(), 2);
        assert_eq!(options.drift_factor, DEFAULT_DRIFT_FACTOR);
        assert_eq!(options.node_timeout, DEFAULT_NODE_TIMEOUT);
        assert_eq!(options.fence, Fence::None);
        let options = RedlockOptions::parse(
            "redlock://a:1,b:2,c:3,d:4,e:5?drift_factor=0.05&node_timeout_ms=200&fence=redis://f:6",
        )
        .unwrap();
        assert_eq!(options.quorum(), 3);
        assert_eq!(options.drift_factor, 0.05);
        assert_eq!(options.node_timeout, Duration::from_millis(200));
        assert_eq!(options.fence, Fence::Counter("redis://f:6".into()));
        let options = RedlockOptions::parse("redlock://a:1?fence=none").unwrap();
        assert_eq!((options.quorum(), options.fence), (1, Fence::None));
    }

    #[test]
    fn bad_urls_are_refused_saying_what_was_expected() {
        let error = |url: &str| RedlockOptions::parse(url).unwrap_err().to_string();
        assert_eq!(
            error("redis://a:1"),
            "expected redlock://HOST:PORT,HOST:PORT,… in redis://a:1"
        );
        assert!(error("redlock://a:1,a:1").contains("`a:1` is named twice"));
        assert!(error("redlock://a:1,,b:2").contains("master ``: expected HOST:PORT"));
        assert!(error("redlock://a:1,b:x").contains("found `x`"));
        assert!(error("redlock://u:pw@a:1").contains("expected HOST:PORT"));
        assert!(!error("redlock://u:pw@a:1").contains("pw@"));
        assert!(error("redlock://a:1?drift_factor=2").contains("from 0 up to 1"));
        assert!(error("redlock://a:1?node_timeout_ms=0").contains("above 0"));
        assert!(error("redlock://a:1?fence=etcd://b:2").contains("fence must be `none`"));
        assert!(error("redlock://a:1?retries=3").contains("unknown parameter `retries`"));
        assert!(error("redlock://a:1?fence").contains("expected NAME=VALUE"));
        assert_eq!(
            RedlockOptions::check_parameter("drift_factor", "0.2"),
            Ok(())
        );
        assert_eq!(
            RedlockOptions::check_parameter("node_timeout_ms", "x"),
            Err(ParameterError::NodeTimeout("x".into()))
        );
    }
}
