//! `surge._core`: the Python-facing types built on `surge-proto`.
//!
//! Every name the module exports is listed here, once; the modules below
//! only declare their parts and re-export what this list needs.

use pyo3::prelude::*;

mod call;
mod engine_reader;
mod engine_state;
mod ffi_type;
mod http;
mod lane;
mod load;
mod postgres;
mod pydatetime;
mod redis;
mod tarantool;
mod tls;
mod tls_client;
mod websocket;
mod wire;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;

    // HTTP server.
    m.add_class::<tls::TlsServerConfig>()?;
    m.add_class::<tls::TlsSession>()?;
    m.add_class::<tls::TlsWriter>()?;
    m.add_class::<tls::TlsReceiver>()?;
    m.add("TlsConfigError", m.py().get_type::<tls::TlsConfigError>())?;
    // Client TLS of the drivers' connections (surge.endpoint).
    m.add_class::<tls_client::TlsClientConfig>()?;
    m.add_class::<tls_client::TlsClientSession>()?;
    m.add_class::<http::server::Router>()?;
    m.add_class::<http::server::Request>()?;
    m.add_class::<http::Headers>()?;
    m.add_class::<http::server::Response>()?;
    m.add_class::<http::server::HttpConnection>()?;
    m.add_class::<http::server::AsgiCycle>()?;
    m.add_class::<http::server::AsgiDispatch>()?;
    m.add_class::<http::server::AsgiReader>()?;
    m.add_class::<http::server::ConnParts>()?;
    m.add_class::<http::server::BatchedTransport>()?;
    m.add_class::<http::server::WriteBatch>()?;
    m.add_class::<http::server::MiddlewareChain>()?;
    m.add_class::<http::server::CallNext>()?;
    m.add("MiddlewareStep", http::server::middleware_step_type(py)?)?;
    m.add_class::<http::server::HookChain>()?;
    m.add_class::<http::server::AccessLog>()?;
    m.add_class::<http::server::ProxyTrust>()?;
    m.add_class::<http::server::ParseError>()?;
    m.add_class::<http::server::HeadDefaults>()?;
    m.add_function(wrap_pyfunction!(http::server::encode_response_head, m)?)?;
    m.add_function(wrap_pyfunction!(http::server::http_date, m)?)?;
    m.add_function(wrap_pyfunction!(http::server::http_stats, m)?)?;
    m.add_function(wrap_pyfunction!(http::server::wsgi_response_head, m)?)?;
    m.add_class::<http::server::WsgiCycle>()?;
    m.add_class::<http::server::WsgiWakeups>()?;
    m.add_class::<http::server::WsgiDispatch>()?;
    m.add("WsgiGone", py.get_type::<http::server::WsgiGone>())?;
    let limits = surge_proto::http1::server::Limits::default();
    m.add("DEFAULT_MAX_REQUEST_LINE", limits.max_request_line)?;
    m.add("DEFAULT_MAX_HEADER_LINE", limits.max_header_line)?;
    m.add("DEFAULT_MAX_HEADERS", limits.max_headers)?;
    m.add("DEFAULT_MAX_HEAD", limits.max_head)?;
    m.add("DEFAULT_MAX_BODY", limits.max_body)?;

    // WebSocket (server side).
    m.add_class::<websocket::WebSocketHandshake>()?;
    m.add_class::<websocket::WebSocketCodec>()?;
    m.add("WS_ERROR", websocket::ERROR)?;
    m.add("WS_CLOSE", websocket::CLOSE)?;
    m.add("WS_PING", websocket::PING)?;
    m.add("WS_PONG", websocket::PONG)?;
    m.add(
        "WS_DEFAULT_MAX_MESSAGE_SIZE",
        surge_proto::websocket::DEFAULT_MAX_MESSAGE_SIZE,
    )?;

    // HTTP client.
    m.add_class::<http::client::HttpClientCodec>()?;
    m.add_class::<http::client::HttpResponseParser>()?;
    m.add_class::<http::client::HttpResponse>()?;
    m.add(
        "HttpResponseError",
        py.get_type::<http::client::HttpResponseError>(),
    )?;
    m.add_function(wrap_pyfunction!(http::client::encode_request, m)?)?;
    let limits = surge_proto::http1::client::ResponseLimits::default();
    m.add("HTTP_CLIENT_MAX_HEAD", limits.max_head)?;
    m.add("HTTP_CLIENT_MAX_HEADERS", limits.max_headers)?;
    m.add("HTTP_CLIENT_MAX_BODY", limits.max_body)?;

    // PostgreSQL.
    m.add_class::<postgres::PgCodec>()?;
    m.add_class::<postgres::Statement>()?;
    m.add("Record", postgres::record_type(py)?)?;
    m.add_class::<postgres::ScramClient>()?;
    m.add_function(wrap_pyfunction!(postgres::pg_md5_password, m)?)?;
    m.add_function(wrap_pyfunction!(postgres::pg_types, m)?)?;
    m.add(
        "PgProtocolError",
        py.get_type::<postgres::PgProtocolError>(),
    )?;
    m.add("StatementGone", py.get_type::<postgres::StatementGone>())?;

    // The drivers' shared engine: its native read path.
    m.add_class::<engine_reader::EngineReader>()?;
    m.add_class::<engine_state::EngineState>()?;
    engine_state::install_members::<engine_state::EngineState>(py)?;
    m.add_class::<engine_reader::ReadSlot>()?;

    // Redis.
    m.add_class::<redis::RespCodec>()?;
    m.add_class::<redis::RespLane>()?;
    m.add(
        "RespProtocolError",
        py.get_type::<redis::RespProtocolError>(),
    )?;

    // Tarantool.
    m.add_class::<tarantool::IprotoCodec>()?;
    m.add_class::<tarantool::IprotoLane>()?;
    m.add_class::<tarantool::IprotoConnState>()?;
    engine_state::install_members::<tarantool::IprotoConnState>(py)?;
    m.add_class::<tarantool::Tuple>()?;
    m.add("TarantoolResponse", tarantool::response_type(py)?)?;
    m.add(
        "IprotoProtocolError",
        py.get_type::<tarantool::IprotoProtocolError>(),
    )?;
    m.add_function(wrap_pyfunction!(tarantool::msgpack_packb, m)?)?;
    m.add_function(wrap_pyfunction!(tarantool::msgpack_unpackb, m)?)?;

    // Load generator.
    m.add_class::<load::HttpLoad>()?;
    Ok(())
}
