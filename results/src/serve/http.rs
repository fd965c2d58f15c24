//! Just enough HTTP/1.1 for a local viewer: read one request head (bounded in size and time),
//! answer it, close the connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A request head larger than this is refused (431).
const MAX_HEAD_BYTES: u64 = 16 * 1024;

/// A client that sends nothing for this long is dropped.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The parts of a request the server uses.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request target as sent (`/a/b?c`).
    pub target: String,
}

/// Why a request could not be read; the status code to answer with, if any.
#[derive(Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// The client went away or timed out: answer nothing.
    Gone,
    /// Answer with this status.
    Status(u16),
}

/// Reads one request head from `stream`.
pub fn read_request(stream: &TcpStream) -> Result<Request, BadRequest> {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let mut reader = BufReader::new(stream.take(MAX_HEAD_BYTES));
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => return Err(BadRequest::Gone),
        Ok(_) => {}
    }
    if !line.ends_with('\n') {
        return Err(BadRequest::Status(431));
    }
    let request = parse_request_line(line.trim_end())?;
    // Drain the headers; none are needed.
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) => return Err(BadRequest::Status(431)),
            Ok(_) if header == "\r\n" || header == "\n" => return Ok(request),
            Ok(_) if !header.ends_with('\n') => return Err(BadRequest::Status(431)),
            Ok(_) => {}
            Err(_) => return Err(BadRequest::Gone),
        }
    }
}

/// `GET /path HTTP/1.1` → the request, or 400 / 505.
pub fn parse_request_line(line: &str) -> Result<Request, BadRequest> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Status(400));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) || target.is_empty() {
        return Err(BadRequest::Status(400));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(BadRequest::Status(505));
    }
    Ok(Request {
        method: method.to_string(),
        target: target.to_string(),
    })
}

/// The reason phrase of the statuses this server sends.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Writes a whole response and closes; `head_only` for `HEAD`. Every response carries the
/// viewer's security headers: no MIME sniffing, its [Content-Security-Policy](super::csp), no
/// referrer.
pub fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &mut dyn Read,
    length: u64,
    head_only: bool,
) -> std::io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\
         X-Content-Type-Options: nosniff\r\nContent-Security-Policy: {}\r\n\
         Referrer-Policy: no-referrer\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status),
        *super::csp::POLICY
    )?;
    if !head_only {
        std::io::copy(&mut body.take(length), stream)?;
    }
    stream.flush()
}

/// A short plain-text error response.
pub fn respond_error(stream: &mut TcpStream, status: u16, head_only: bool) -> std::io::Result<()> {
    let body = format!("{status} {}\n", reason(status));
    respond(
        stream,
        status,
        "text/plain; charset=utf-8",
        &mut body.as_bytes(),
        body.len() as u64,
        head_only,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_parsed_strictly() {
        assert_eq!(
            parse_request_line("GET /a?b HTTP/1.1"),
            Ok(Request {
                method: "GET".into(),
                target: "/a?b".into()
            })
        );
        assert_eq!(parse_request_line("GET /a"), Err(BadRequest::Status(400)));
        assert_eq!(
            parse_request_line("GET  /a HTTP/1.1"),
            Err(BadRequest::Status(400))
        );
        assert_eq!(
            parse_request_line("get /a HTTP/1.1"),
            Err(BadRequest::Status(400))
        );
        assert_eq!(
            parse_request_line("GET /a HTTP/2"),
            Err(BadRequest::Status(505))
        );
    }
}
