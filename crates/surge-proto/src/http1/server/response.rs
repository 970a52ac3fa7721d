//! Response head encoding helpers, appending to a buffer the caller owns.

/// The reason phrase of a status code ("" for codes without one).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a Teapot",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Appends `HTTP/1.1 <status> <reason>\r\n`.
pub fn write_status_line(buf: &mut Vec<u8>, status: u16) {
    match status {
        200 => buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n"),
        _ => {
            buf.extend_from_slice(b"HTTP/1.1 ");
            let mut digits = [b'0'; 3];
            let s = status.min(999);
            digits[0] = b'0' + (s / 100) as u8;
            digits[1] = b'0' + (s / 10 % 10) as u8;
            digits[2] = b'0' + (s % 10) as u8;
            buf.extend_from_slice(&digits);
            buf.push(b' ');
            buf.extend_from_slice(reason_phrase(status).as_bytes());
            buf.extend_from_slice(b"\r\n");
        }
    }
}
