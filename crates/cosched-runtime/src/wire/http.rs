//! Just enough HTTP/1.1 for the web monitor: one request per connection, a bounded head read within a short time
//! and a bounded body within the request time, and an answer that closes the connection. Served under the same
//! connection `gate` as the API, so a crowd of idle or slow browsers cannot take the daemon's descriptors or
//! threads.

use crate::wire::conn::{read_line_within, LineBounds, Shared, Stream};
use std::io::{self, BufReader, Read, Write};
use std::time::{Duration, Instant};

/// The longest line of a request head, the most header lines, and the largest body (the monitor's bodies are a
/// few bytes of JSON).
const MAX_HEAD_LINE_BYTES: usize = 8 * 1024;
const MAX_HEADER_LINES: usize = 64;
pub const MAX_BODY_BYTES: usize = 64 * 1024;

#[derive(Debug, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    /// The path and query as sent (`/api/status?x=1`).
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The first header of this name (names compare without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The value of `name` in the query (`/?token=ab` → `ab`), as sent.
    pub fn query(&self, name: &str) -> Option<&str> {
        let (_, query) = self.target.split_once('?')?;
        query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    }

    /// The value of the cookie `name` in the `Cookie` headers.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        let headers = self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("Cookie"));
        let mut pairs = headers.flat_map(|(_, v)| v.split(';'));
        pairs.find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('='))
    }
}

pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Read a request's line and headers, all by `deadline` (its body comes with `read_body`). Errors say what was
/// wrong (answered with 400 by the caller).
pub fn read_head(reader: &mut BufReader<Shared>, deadline: Instant) -> io::Result<HttpRequest> {
    let mut line = || {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let bounds = LineBounds { max_bytes: MAX_HEAD_LINE_BYTES, idle: Some(left), complete_within: left };
        read_line_within(reader, bounds)?.ok_or_else(|| bad("the connection closed inside the request head"))
    };
    let request_line = line()?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("malformed request line"));
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(bad("not an HTTP/1.x request for a path"));
    }
    let mut headers = Vec::new();
    loop {
        let header = line()?;
        if header.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADER_LINES {
            return Err(bad("too many header lines"));
        }
        let (name, value) = header.split_once(':').ok_or_else(|| bad("malformed header line"))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(HttpRequest { method: method.to_string(), target: target.to_string(), headers, body: vec![] })
}

/// Read the body `request`'s head announces, within `within`.
pub fn read_body(reader: &mut BufReader<Shared>, request: &mut HttpRequest, within: Duration) -> io::Result<()> {
    request.body = body_of(reader, request, Instant::now() + within)?;
    Ok(())
}

fn body_of(reader: &mut BufReader<Shared>, request: &HttpRequest, deadline: Instant) -> io::Result<Vec<u8>> {
    if request.header("Transfer-Encoding").is_some() {
        return Err(bad("chunked bodies are not accepted: send Content-Length"));
    }
    let length: usize = match request.header("Content-Length") {
        None => return Ok(Vec::new()),
        Some(text) => text.parse().map_err(|_| bad("bad Content-Length"))?,
    };
    if length > MAX_BODY_BYTES {
        return Err(bad("body larger than 64 KiB"));
    }
    let stream = reader.get_ref().0.clone();
    stream.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| bad(&format!("body: {e}")))?;
    Ok(body)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Write the response and close: every answer says `Connection: close`.
pub fn write_response(stream: &Stream, response: &HttpResponse) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        reason(response.status),
        response.body.len()
    );
    for (name, value) in &response.headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    let mut writer = stream;
    writer.write_all(head.as_bytes())?;
    writer.write_all(&response.body)?;
    writer.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        421 => "Misdirected Request",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    fn parse(bytes: &[u8]) -> io::Result<HttpRequest> {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        theirs.write_all(bytes).unwrap();
        drop(theirs);
        let mut reader = BufReader::new(Shared(Arc::new(Stream::Unix(ours))));
        let mut request = read_head(&mut reader, Instant::now() + Duration::from_secs(1))?;
        read_body(&mut reader, &mut request, Duration::from_secs(1))?;
        Ok(request)
    }

    #[test]
    fn a_request_with_headers_and_a_body_is_read_whole() {
        let raw = b"POST /api/jobs/3/class?x=1 HTTP/1.1\r\nHost: a\r\nx-cosched-token: t1\r\nContent-Length: 17\r\n\r\n{\"class\":\"batch\"}";
        let request = parse(raw).unwrap();
        assert_eq!((request.method.as_str(), request.path()), ("POST", "/api/jobs/3/class"));
        assert_eq!(request.header("X-Cosched-Token"), Some("t1"));
        assert_eq!(request.body, b"{\"class\":\"batch\"}");
        assert_eq!(request.query("x"), Some("1"));
        assert_eq!(request.query("y"), None);
    }

    #[test]
    fn cookies_are_found_by_name_in_every_cookie_header() {
        let raw = b"GET / HTTP/1.1\r\nCookie: a=1; cosched_session_80=s1\r\nCookie: b=2\r\n\r\n";
        let request = parse(raw).unwrap();
        assert_eq!(request.cookie("cosched_session_80"), Some("s1"));
        assert_eq!(request.cookie("b"), Some("2"));
        assert_eq!(request.cookie("cosched_session_8"), None);
    }

    #[test]
    fn malformed_and_oversized_requests_are_refused() {
        for raw in [
            &b"GET\r\n\r\n"[..],
            b"GET / HTTP/2\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
        ] {
            assert!(parse(raw).is_err(), "accepted {:?}", String::from_utf8_lossy(raw));
        }
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(MAX_HEADER_LINES + 1));
        assert!(parse(many.as_bytes()).unwrap_err().to_string().contains("too many"));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_HEAD_LINE_BYTES));
        assert!(parse(long.as_bytes()).is_err());
    }
}
