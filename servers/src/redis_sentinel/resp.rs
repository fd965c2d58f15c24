//! Asking one Redis or Sentinel process a question straight at its lab address (not through
//! its fault proxy, whose faults must not hide the truth from the nemesis): a blocking RESP2
//! exchange with a bound on every step, no runtime and no client crate.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// `+OK`.
    Simple(String),
    /// `-ERR …`.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$…`; `None` is the nil bulk string.
    Bulk(Option<String>),
    /// `*…`; `None` is the nil array.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The text of a simple or bulk string.
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Reply::Simple(text) | Reply::Bulk(Some(text)) => Some(text),
            _ => None,
        }
    }

    /// The items of an array (none for anything else).
    pub(super) fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(items)) => items,
            _ => &[],
        }
    }

    /// The value after `field` in an array of alternating fields and values (what
    /// `SENTINEL master NAME` answers).
    pub(super) fn field(&self, field: &str) -> Option<&str> {
        self.items()
            .chunks(2)
            .find(|pair| pair[0].text() == Some(field))
            .and_then(|pair| pair.get(1)?.text())
    }
}

/// A command a process did not answer: where it went, what it asked, what the OS said.
#[derive(Debug, thiserror::Error)]
#[error("{address} {command}: {source}")]
pub(super) struct Unanswered {
    address: SocketAddr,
    command: String,
    source: std::io::Error,
}

/// Sends `args` as one command to `address` and reads its reply, every step bounded by
/// `timeout`. An error reply is returned as [`Reply::Error`], not as `Err`.
pub(super) fn command(
    address: SocketAddr,
    args: &[&str],
    timeout: Duration,
) -> Result<Reply, Unanswered> {
    let fail = |source: std::io::Error| Unanswered {
        address,
        command: args.join(" "),
        source,
    };
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(fail)?;
    stream.set_read_timeout(Some(timeout)).map_err(fail)?;
    stream.set_write_timeout(Some(timeout)).map_err(fail)?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).map_err(fail)?;
    read_reply(&mut BufReader::new(stream)).map_err(fail)
}

fn read_reply(reader: &mut BufReader<TcpStream>) -> std::io::Result<Reply> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    let malformed = || std::io::Error::other(format!("malformed reply line `{line}`"));
    let (kind, rest) = line.split_at_checked(1).ok_or_else(malformed)?;
    let length = || rest.parse::<i64>().map_err(|_| malformed());
    Ok(match kind {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Integer(length()?),
        "$" => match usize::try_from(length()?) {
            Err(_) => Reply::Bulk(None),
            Ok(size) => {
                let mut body = vec![0; size + 2];
                reader.read_exact(&mut body)?;
                body.truncate(size);
                Reply::Bulk(Some(String::from_utf8_lossy(&body).into_owned()))
            }
        },
        "*" => match usize::try_from(length()?) {
            Err(_) => Reply::Array(None),
            Ok(count) => Reply::Array(Some(
                (0..count)
                    .map(|_| read_reply(reader))
                    .collect::<std::io::Result<_>>()?,
            )),
        },
        _ => return Err(malformed()),
    })
}
