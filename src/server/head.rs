//! The first request head of a connection, checked as hyper would parse it, so that what hyper
//! would refuse with a bare status is refused here with a JSON body and words.

/// The most headers a request may carry.
pub(crate) const MAX_HEADERS: usize = 100;

/// The longest request target (path and query) accepted.
pub(crate) const TARGET_LIMIT: usize = 16 * 1024;

/// What to do with a head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadCheck {
    /// Hand it to hyper.
    Pass,
    /// Answer `status` with `{"error": message}` and close.
    Refuse { status: u16, message: String },
}

fn refuse(status: u16, message: impl Into<String>) -> HeadCheck {
    HeadCheck::Refuse {
        status,
        message: message.into(),
    }
}

/// Checks a complete head (through its blank line).
pub(crate) fn check_head(buf: &[u8]) -> HeadCheck {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return refuse(400, "the request head is incomplete"),
        Err(httparse::Error::TooManyHeaders) => {
            return refuse(
                431,
                format!("the request has more than {MAX_HEADERS} headers"),
            );
        }
        Err(httparse::Error::Version) => return version_error(buf),
        Err(e) => return refuse(400, format!("the request head is malformed: {}", words(e))),
    }
    let Some(target) = req.path else {
        return refuse(400, "the request line has no target");
    };
    if target.len() > TARGET_LIMIT {
        return refuse(
            414,
            format!("the request target is longer than {TARGET_LIMIT} bytes"),
        );
    }
    if target.parse::<axum::http::Uri>().is_err() {
        return refuse(400, "the request target is not a valid URI");
    }
    check_framing(req.headers)
}

/// `HTTP/9.9` is a version this server does not speak (505); anything else that breaks the
/// request line — a space in the path, a missing version — is malformed (400).
fn version_error(buf: &[u8]) -> HeadCheck {
    let line = buf
        .split(|b| *b == b'\n')
        .find(|l| !l.trim_ascii().is_empty());
    let parts: Vec<&[u8]> = line
        .unwrap_or_default()
        .trim_ascii()
        .split(|b| *b == b' ')
        .collect();
    match parts.as_slice() {
        [_, _, version] if version.starts_with(b"HTTP/") => {
            refuse(505, "this server speaks HTTP/1.0 and HTTP/1.1 only")
        }
        _ => refuse(
            400,
            "the request line is malformed: it must be METHOD TARGET HTTP/1.1, with no space in the target",
        ),
    }
}

fn words(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "a header name holds a character a name cannot",
        httparse::Error::HeaderValue => "a header value holds a control character",
        httparse::Error::NewLine => "a line does not end with CRLF",
        httparse::Error::Status => "the status is invalid",
        httparse::Error::Token => "the method or the target holds an invalid character",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "the version is invalid",
    }
}

/// The body's framing must be unambiguous: `Content-Length` digits only, one value however
/// often it is repeated, and never beside `Transfer-Encoding` (request smuggling, RFC 9112 §6.1);
/// `Transfer-Encoding` must end in `chunked`.
fn check_framing(headers: &[httparse::Header<'_>]) -> HeadCheck {
    let mut length: Option<&[u8]> = None;
    let mut encoding = false;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            for value in h.value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                if value.is_empty() || !value.iter().all(u8::is_ascii_digit) || value.len() > 19 {
                    return refuse(400, "Content-Length is not a number of bytes");
                }
                if length.is_some_and(|l| l != value) {
                    return refuse(400, "Content-Length is given twice with different values");
                }
                length = Some(value);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoding = true;
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default();
            if !last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return refuse(400, "Transfer-Encoding must end with chunked");
            }
        }
    }
    if encoding && length.is_some() {
        return refuse(400, "Content-Length and Transfer-Encoding are both given");
    }
    HeadCheck::Pass
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> u16 {
        match check_head(head.as_bytes()) {
            HeadCheck::Pass => 0,
            HeadCheck::Refuse { status, .. } => status,
        }
    }

    #[test]
    fn heads_hyper_would_refuse_are_refused_with_their_status() {
        assert_eq!(status("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"), 0);
        assert_eq!(status("GET /a b HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/9.9\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/1.1\r\nbad name: x\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nx: a\0b\r\n\r\n"), 400);
        assert_eq!(status("POST / HTTP/1.1\r\ncontent-length: 1x\r\n\r\n"), 400);
        assert_eq!(
            status("POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n"),
            0
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n"),
            400
        );
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(TARGET_LIMIT));
        assert_eq!(status(&long), 414);
        let many: String = (0..101).map(|i| format!("x-{i}: v\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\n{many}\r\n")), 431);
    }
}
