//! The HTTP server's native half: router, lazy request, response encoding and
//! the per-connection parser that runs sync handlers on the fast path.

mod access_log;
mod asgi;
mod asgi_dispatch;
mod asgi_head;
mod batch;
mod chain;
mod connection;
mod date;
mod direct;
mod dispatch_read;
mod head_defaults;
mod hook_chain;
mod log_format;
mod proxy;
mod ready;
mod request;
mod response;
mod router;
mod stats;
mod wsgi;
mod wsgi_cycle;
mod wsgi_dispatch;

pub(crate) use access_log::AccessLog;
pub(crate) use asgi::{AsgiCycle, ConnParts};
pub(crate) use asgi_dispatch::{AsgiDispatch, AsgiReader};
pub(crate) use batch::{BatchedTransport, WriteBatch};
pub(crate) use chain::{step_type as middleware_step_type, CallNext, MiddlewareChain};
pub(crate) use connection::{HttpConnection, ParseError};
pub(crate) use date::http_date;
pub(crate) use head_defaults::HeadDefaults;
pub(crate) use hook_chain::HookChain;
pub(crate) use proxy::ProxyTrust;
pub(crate) use request::Request;
pub(crate) use response::{encode_response_head, Response};
pub(crate) use router::Router;
pub(crate) use stats::http_stats;
pub(crate) use wsgi::wsgi_response_head;
pub(crate) use wsgi_cycle::{WsgiCycle, WsgiGone, WsgiWakeups};
pub(crate) use wsgi_dispatch::WsgiDispatch;
