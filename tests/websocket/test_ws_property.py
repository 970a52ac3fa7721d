"""Property tests over a live server: any well-formed message sequence, however
fragmented, comes back intact; any garbage gets a clear close code (or the
connection ends) within a bound, and the server keeps serving."""

from __future__ import annotations

import socket
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from wsraw import BINARY, CLOSE, CONT, PING, PONG, TEXT, RawWebSocket, frame

messages = st.lists(
    st.one_of(
        st.tuples(st.just(TEXT), st.text(max_size=300).map(str.encode)),
        st.tuples(st.just(BINARY), st.binary(max_size=3000)),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40)
@given(messages, st.integers(min_value=1, max_value=700), st.booleans())
def test_fragmented_messages_come_back_intact(server, sequence, piece, ping_between):
    ws = RawWebSocket(server.port)
    wire = b""
    for opcode, payload in sequence:
        chunks = [payload[i : i + piece] for i in range(0, len(payload), piece)] or [b""]
        for i, chunk in enumerate(chunks):
            wire += frame(opcode if i == 0 else CONT, chunk, fin=i == len(chunks) - 1)
            if ping_between and i == 0 and len(chunks) > 1:
                wire += frame(PING, b"p")
    ws.send(wire)
    for opcode, payload in sequence:
        got = ws.recv_message()
        while got[0] == PONG:
            got = ws.recv_message()
        assert got == (opcode, payload)
    ws.close()


@settings(max_examples=60)
@given(st.binary(min_size=1, max_size=3000))
def test_garbage_gets_a_close_code_and_the_server_survives(server, data):
    ws = RawWebSocket(server.port)
    ws.send(data)
    ws.sock.shutdown(socket.SHUT_WR)
    ws.sock.settimeout(5.0)
    received = ws.buf
    while chunk := ws.sock.recv(65536):  # a hang fails with a timeout
        received += chunk
    ws.close()
    # If the server sent a close frame, its code is one a protocol failure names,
    # or the echo of the client's own (valid) close.
    i = 0
    while i + 2 <= len(received):
        b0, b1 = received[i], received[i + 1]
        n, i = b1 & 0x7F, i + 2
        if n == 126:
            (n,) = struct.unpack("!H", received[i : i + 2])
            i += 2
        elif n == 127:
            (n,) = struct.unpack("!Q", received[i : i + 8])
            i += 8
        payload, i = received[i : i + n], i + n
        if b0 & 0x0F == CLOSE and len(payload) >= 2:
            code = struct.unpack("!H", payload[:2])[0]
            assert code in (1002, 1007, 1009) or 1000 <= code < 5000
    # Still serving.
    ok = RawWebSocket(server.port)
    ok.send(frame(TEXT, b"alive"))
    assert ok.recv_message() == (TEXT, b"alive")
    ok.close()
