//! Response parse and request encode errors. After a parse error the stream
//! can no longer be framed: the connection must be closed.

use std::fmt;

use crate::http1::common::ChunkError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// The status line does not parse (version, code or reason).
    BadStatusLine,
    /// The version is not HTTP/1.0 or HTTP/1.1.
    UnsupportedVersion,
    /// A header line does not parse (bad name, control character in a value,
    /// obsolete line folding).
    InvalidHeader,
    /// More than `max_headers` header fields.
    TooManyHeaders,
    /// The head is larger than `max_head`.
    HeadTooLarge,
    /// More than `max_interim` 1xx responses in a row.
    TooManyInterim,
    /// `101 Switching Protocols`, which this client never asks for.
    UnexpectedSwitchingProtocols,
    /// Both Content-Length and Transfer-Encoding (a smuggling sign).
    LengthAndTransferEncoding,
    /// Content-Length values that disagree.
    ConflictingContentLength,
    /// Content-Length is not a decimal number.
    InvalidContentLength,
    /// A transfer coding other than a final `chunked`.
    UnsupportedTransferEncoding,
    /// Transfer-Encoding in an HTTP/1.0 response.
    TransferEncodingInHttp10,
    /// The body is larger than the limit.
    BodyTooLarge,
    /// A chunk-size line does not parse or is too long.
    InvalidChunkSize,
    /// Chunk data is not followed by CRLF.
    InvalidChunkTerminator,
    /// The trailer section does not parse or is too large.
    InvalidTrailers,
    /// The connection closed in the middle of a response head.
    IncompleteHead,
    /// The connection closed before the body's declared end.
    IncompleteBody,
}

impl ResponseError {
    /// A short description.
    pub fn message(self) -> &'static str {
        use ResponseError::*;
        match self {
            BadStatusLine => "malformed status line",
            UnsupportedVersion => "unsupported HTTP version",
            InvalidHeader => "malformed header line",
            TooManyHeaders => "too many header fields",
            HeadTooLarge => "response head too large",
            TooManyInterim => "too many interim (1xx) responses",
            UnexpectedSwitchingProtocols => "unexpected 101 Switching Protocols",
            LengthAndTransferEncoding => "both Content-Length and Transfer-Encoding",
            ConflictingContentLength => "conflicting Content-Length values",
            InvalidContentLength => "invalid Content-Length",
            UnsupportedTransferEncoding => "unsupported transfer coding",
            TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 response",
            BodyTooLarge => "response body too large",
            InvalidChunkSize => "invalid chunk size",
            InvalidChunkTerminator => "chunk data not followed by CRLF",
            InvalidTrailers => "invalid trailer section",
            IncompleteHead => "connection closed in the middle of a response head",
            IncompleteBody => "connection closed before the end of the response body",
        }
    }
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ResponseError {}

impl From<ChunkError> for ResponseError {
    fn from(e: ChunkError) -> Self {
        match e {
            ChunkError::BodyTooLarge => ResponseError::BodyTooLarge,
            ChunkError::InvalidChunkSize => ResponseError::InvalidChunkSize,
            ChunkError::InvalidChunkTerminator => ResponseError::InvalidChunkTerminator,
            ChunkError::InvalidTrailers => ResponseError::InvalidTrailers,
        }
    }
}

/// Why a request could not be encoded; nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The method is empty or not a token.
    InvalidMethod,
    /// The target is empty or holds a space or control character.
    InvalidTarget,
    /// A header name is empty or not a token.
    InvalidHeaderName,
    /// A header value holds CR, LF, NUL or another control character.
    InvalidHeaderValue,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EncodeError::InvalidMethod => "invalid request method",
            EncodeError::InvalidTarget => "invalid request target",
            EncodeError::InvalidHeaderName => "invalid header name",
            EncodeError::InvalidHeaderValue => "invalid header value (control character)",
        })
    }
}

impl std::error::Error for EncodeError {}
