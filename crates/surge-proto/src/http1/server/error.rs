//! Parse errors. Each names the status code the server answers with; after any
//! of them the connection is closed, since the stream can no longer be framed.

use std::fmt;

use crate::http1::common::ChunkError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The request line is longer than `max_request_line` (414).
    RequestLineTooLong,
    /// A header line is longer than `max_header_line` (431).
    HeaderLineTooLong,
    /// More than `max_headers` header fields (431).
    TooManyHeaders,
    /// The header block is larger than `max_head` (431).
    HeadTooLarge,
    /// The request line does not parse (400).
    BadRequestLine,
    /// The HTTP version is not 1.0 or 1.1 (505).
    UnsupportedVersion,
    /// A header name holds a character a token may not have (400).
    InvalidHeaderName,
    /// A header value holds a control character (400).
    InvalidHeaderValue,
    /// A header line is continued on the next line (obs-fold, 400).
    ObsFold,
    /// HTTP/1.1 without a Host header (400).
    MissingHost,
    /// More than one Host header (400).
    DuplicateHost,
    /// Both Content-Length and Transfer-Encoding (400).
    LengthAndTransferEncoding,
    /// Content-Length given more than once (400).
    DuplicateContentLength,
    /// Content-Length is not a decimal number (400).
    InvalidContentLength,
    /// The last transfer coding is not `chunked`, or `chunked` is repeated (400).
    ChunkedNotLast,
    /// A transfer coding other than `chunked` (501).
    UnsupportedTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 request (400).
    TransferEncodingInHttp10,
    /// The body is larger than the limit of its route (413).
    BodyTooLarge,
    /// A chunk-size line does not parse or is too long (400).
    InvalidChunkSize,
    /// Chunk data is not followed by CRLF (400).
    InvalidChunkTerminator,
    /// The trailer section does not parse or is too large (400).
    InvalidTrailers,
}

impl Error {
    /// The status code to answer with.
    pub fn status(self) -> u16 {
        use Error::*;
        match self {
            RequestLineTooLong => 414,
            HeaderLineTooLong | TooManyHeaders | HeadTooLarge => 431,
            UnsupportedVersion => 505,
            UnsupportedTransferEncoding => 501,
            BodyTooLarge => 413,
            _ => 400,
        }
    }

    /// A short description, safe to send to the client.
    pub fn message(self) -> &'static str {
        use Error::*;
        match self {
            RequestLineTooLong => "request line too long",
            HeaderLineTooLong => "header line too long",
            TooManyHeaders => "too many headers",
            HeadTooLarge => "header block too large",
            BadRequestLine => "malformed request line",
            UnsupportedVersion => "unsupported HTTP version",
            InvalidHeaderName => "invalid header name",
            InvalidHeaderValue => "invalid header value",
            ObsFold => "obsolete line folding is not allowed",
            MissingHost => "missing Host header",
            DuplicateHost => "more than one Host header",
            LengthAndTransferEncoding => "both Content-Length and Transfer-Encoding",
            DuplicateContentLength => "more than one Content-Length",
            InvalidContentLength => "invalid Content-Length",
            ChunkedNotLast => "the last transfer coding must be chunked, once",
            UnsupportedTransferEncoding => "unsupported transfer coding",
            TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            BodyTooLarge => "request body too large",
            InvalidChunkSize => "invalid chunk size",
            InvalidChunkTerminator => "chunk data not followed by CRLF",
            InvalidTrailers => "invalid trailer section",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), self.status())
    }
}

impl std::error::Error for Error {}

impl From<ChunkError> for Error {
    fn from(e: ChunkError) -> Self {
        match e {
            ChunkError::BodyTooLarge => Error::BodyTooLarge,
            ChunkError::InvalidChunkSize => Error::InvalidChunkSize,
            ChunkError::InvalidChunkTerminator => Error::InvalidChunkTerminator,
            ChunkError::InvalidTrailers => Error::InvalidTrailers,
        }
    }
}
