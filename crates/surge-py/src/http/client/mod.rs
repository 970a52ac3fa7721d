//! The HTTP client's native half: the response parser, the request encoder and
//! the engine codec built on `surge_proto::http1::client`.

mod codec;
mod encode;
mod parser;
mod response;

pub(crate) use codec::HttpClientCodec;
pub(crate) use encode::encode_request;
pub(crate) use parser::{HttpResponseError, HttpResponseParser};
pub(crate) use response::HttpResponse;
