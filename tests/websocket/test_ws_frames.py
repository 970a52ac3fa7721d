"""Frame-level conformance, after the Autobahn testsuite's case families, with a
raw-socket client (so broken frames can be sent): 1 framing, 2 pings/pongs,
3 reserved bits, 4 opcodes, 5 fragmentation, 6 UTF-8, 7 close handling,
9 limits, 12/13 compression."""

from __future__ import annotations

import os
import time
import zlib

import pytest
from wsraw import (
    BINARY,
    CLOSE,
    CONT,
    PING,
    PONG,
    TEXT,
    RawWebSocket,
    close_payload,
    deflate,
    frame,
)


def open_ws(port, path="/echo", extra=""):
    ws = RawWebSocket(port, path, extra)
    assert ws.status == 101, ws.response
    return ws


# 1. Framing -------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 1 << 20])
@pytest.mark.parametrize("opcode", [TEXT, BINARY])
def test_1_echo_sizes(server, opcode, size):
    ws = open_ws(server.port)
    payload = (b"*" * size) if opcode == TEXT else os.urandom(size)
    ws.send(frame(opcode, payload))
    assert ws.recv_message() == (opcode, payload)
    ws.close()


def test_1_payload_arriving_byte_by_byte(server):
    ws = open_ws(server.port)
    for b in frame(TEXT, b"slowly"):
        ws.send(bytes([b]))
    assert ws.recv_message() == (TEXT, b"slowly")
    ws.close()


def test_1_many_messages_in_one_write(server):
    ws = open_ws(server.port)
    ws.send(b"".join(frame(TEXT, f"m{i}".encode()) for i in range(500)))
    for i in range(500):
        assert ws.recv_message() == (TEXT, f"m{i}".encode())
    ws.close()


def test_1_unmasked_client_frame_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(TEXT, b"x", mask=False))
    assert ws.expect_close()[0] == 1002


# 2. Pings and pongs -----------------------------------------------------------------


@pytest.mark.parametrize("payload", [b"", b"ping!", b"\xff" * 125])
def test_2_ping_gets_pong_with_its_payload(server, payload):
    ws = open_ws(server.port)
    ws.send(frame(PING, payload))
    assert ws.recv_message() == (PONG, payload)
    ws.close()


def test_2_ping_over_125_bytes_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(PING, b"x" * 126))
    assert ws.expect_close()[0] == 1002


def test_2_fragmented_ping_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(PING, b"x", fin=False))
    assert ws.expect_close()[0] == 1002


def test_2_unsolicited_pong_is_ignored(server):
    ws = open_ws(server.port)
    ws.send(frame(PONG, b"unasked") + frame(TEXT, b"after"))
    assert ws.recv_message() == (TEXT, b"after")
    ws.close()


def test_2_ten_pings_answered_in_order(server):
    ws = open_ws(server.port)
    ws.send(b"".join(frame(PING, f"p{i}".encode()) for i in range(10)))
    for i in range(10):
        assert ws.recv_message() == (PONG, f"p{i}".encode())
    ws.close()


# 3. Reserved bits -------------------------------------------------------------------


@pytest.mark.parametrize("rsv", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("opcode", [TEXT, BINARY, PING])
def test_3_reserved_bits_without_extension_are_1002(server, rsv, opcode):
    ws = open_ws(server.port)
    ws.send(frame(TEXT, b"before"))
    assert ws.recv_message() == (TEXT, b"before")
    ws.send(frame(opcode, b"x", rsv=rsv))
    assert ws.expect_close()[0] == 1002


# 4. Opcodes -------------------------------------------------------------------------


@pytest.mark.parametrize("opcode", [3, 4, 5, 6, 7, 11, 12, 13, 14, 15])
def test_4_reserved_opcodes_are_1002(server, opcode):
    ws = open_ws(server.port)
    ws.send(frame(opcode, b"payload"))
    assert ws.expect_close()[0] == 1002


# 5. Fragmentation -------------------------------------------------------------------


def test_5_fragmented_text_with_pings_between(server):
    ws = open_ws(server.port)
    ws.send(
        frame(TEXT, b"frag", fin=False)
        + frame(PING, b"in between")
        + frame(CONT, b"men", fin=False)
        + frame(CONT, b"ted")
    )
    assert ws.recv_message() == (PONG, b"in between")
    assert ws.recv_message() == (TEXT, b"fragmented")
    ws.close()


def test_5_many_empty_fragments(server):
    ws = open_ws(server.port)
    data = frame(BINARY, b"", fin=False) + frame(CONT, b"", fin=False) * 100 + frame(CONT, b"z")
    ws.send(data)
    assert ws.recv_message() == (BINARY, b"z")
    ws.close()


def test_5_continuation_without_message_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(CONT, b"orphan"))
    assert ws.expect_close()[0] == 1002


def test_5_new_message_inside_a_fragmented_one_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"))
    assert ws.expect_close()[0] == 1002


# 6. UTF-8 ---------------------------------------------------------------------------


def test_6_utf8_split_across_fragments(server):
    ws = open_ws(server.port)
    data = "κόσμε €𝄞".encode()
    ws.send(frame(TEXT, data[:3], fin=False) + frame(CONT, data[3:9], fin=False))
    ws.send(frame(CONT, data[9:]))
    assert ws.recv_message() == (TEXT, data)
    ws.close()


@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xce\xba\xe1\x80"],
)
def test_6_invalid_utf8_is_1007(server, bad):
    ws = open_ws(server.port)
    ws.send(frame(TEXT, bad))
    assert ws.expect_close()[0] == 1007


def test_6_invalid_utf8_in_a_fragment_fails_early(server):
    ws = open_ws(server.port)
    ws.send(frame(TEXT, b"\xce\xba\xff", fin=False))  # the message never ends
    assert ws.expect_close()[0] == 1007


# 7. Close handling ------------------------------------------------------------------


@pytest.mark.parametrize("code", [1000, 1001, 1003, 1011, 3000, 4999])
def test_7_close_is_echoed(server, code):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, close_payload(code, b"reason")))
    assert ws.expect_close()[0] == code


def test_7_empty_close_gets_empty_close(server):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, b""))
    op, data = ws.recv_message()
    assert (op, data) == (CLOSE, b"")


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
def test_7_invalid_close_code_is_1002(server, code):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, close_payload(code)))
    assert ws.expect_close()[0] == 1002


def test_7_one_byte_close_is_1002(server):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, b"\x03"))
    assert ws.expect_close()[0] == 1002


def test_7_close_reason_not_utf8_is_1007(server):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, close_payload(1000, b"\xff\xfe")))
    assert ws.expect_close()[0] == 1007


def test_7_nothing_after_close_is_answered(server):
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, close_payload(1000)) + frame(TEXT, b"after close") + frame(PING))
    assert ws.recv_message()[0] == CLOSE
    ws.sock.settimeout(5)
    rest = b""
    while chunk := ws.sock.recv(65536):
        rest += chunk
    assert rest == b""


def test_7_server_close_codes(server):
    ws = open_ws(server.port, "/close/4321")
    code, reason = ws.expect_close()
    assert (code, reason) == (4321, b"closing as asked")


def test_7_close_handshake_times_out(live):
    # A client that never answers the server's close is dropped after ws_close_timeout.
    import time

    srv = live(ws_close_timeout=0.3)
    ws = open_ws(srv.port, "/close/1000")
    started = time.monotonic()
    assert ws.expect_close(answer=False)[0] == 1000
    assert 0.2 < time.monotonic() - started < 3


def test_7_handler_error_after_accept_is_1011(server):
    ws = open_ws(server.port, "/fail-after")
    ws.send(frame(TEXT, b"go"))
    assert ws.expect_close()[0] == 1011


def test_7_peer_close_reaches_the_handler(server):
    from ws_apps import events

    events.pop("echo_close", None)
    ws = open_ws(server.port)
    ws.send(frame(CLOSE, close_payload(3456, b"see you")))
    ws.expect_close()
    deadline = time.monotonic() + 5
    while "echo_close" not in events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events.get("echo_close") == (3456, "see you")


# 9. Limits --------------------------------------------------------------------------


def test_9_oversize_message_is_1009(live):
    srv = live(ws_max_message_size=64 * 1024)
    ws = open_ws(srv.port)
    ws.send(frame(BINARY, b"x" * (64 * 1024)))
    assert ws.recv_message() == (BINARY, b"x" * (64 * 1024))
    # Announced too big: refused on the header, before the payload comes.
    ws.send(frame(BINARY, b"", length=64 * 1024 + 1)[:14])
    assert ws.expect_close()[0] == 1009


def test_9_oversize_fragmented_message_is_1009(live):
    srv = live(ws_max_message_size=64 * 1024)
    ws = open_ws(srv.port)
    ws.send(frame(TEXT, b"a" * 40000, fin=False) + frame(CONT, b"a" * 40000))
    assert ws.expect_close()[0] == 1009


def test_9_length_over_2_63_is_1002(server):
    ws = open_ws(server.port)
    ws.send(b"\x82\xff\x80\x00\x00\x00\x00\x00\x00\x00" + b"mask")
    assert ws.expect_close()[0] == 1002


# 12/13. Compression (permessage-deflate) --------------------------------------------

DEFLATE = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"


def test_12_negotiated(server):
    ws = open_ws(server.port, extra=DEFLATE)
    assert ws.header("Sec-WebSocket-Extensions").startswith("permessage-deflate")
    ws.close()


def test_12_not_negotiated_when_disabled(live):
    srv = live(ws_per_message_deflate=False)
    ws = open_ws(srv.port, extra=DEFLATE)
    assert ws.header("Sec-WebSocket-Extensions") is None
    ws.close()


@pytest.mark.parametrize("size", [0, 16, 1000, 65536, 1 << 20])
def test_12_compressed_echo(server, size):
    ws = open_ws(server.port, extra=DEFLATE)
    inflater = zlib.decompressobj(-15)
    for round_ in range(3):  # context takeover: the server's stream carries over
        payload = (f"round {round_} " * (size // 8 + 1))[:size].encode()
        ws.send(frame(TEXT, deflate(payload), rsv=4))
        fin, rsv, op, data = ws.recv_frame()
        assert (fin, rsv, op) == (True, 4, TEXT)
        if size > 1000:
            assert len(data) < size // 4  # it really is compressed
        assert inflater.decompress(data + b"\x00\x00\xff\xff") == payload
    ws.close()


def test_12_rsv1_on_continuation_is_1002(server):
    ws = open_ws(server.port, extra=DEFLATE)
    ws.send(frame(TEXT, b"", fin=False, rsv=4) + frame(CONT, b"x", rsv=4))
    assert ws.expect_close()[0] == 1002


def test_13_garbage_compressed_data_is_1007(server):
    ws = open_ws(server.port, extra=DEFLATE)
    ws.send(frame(BINARY, b"\xff\xff\xff\xff garbage", rsv=4))
    assert ws.expect_close()[0] == 1007


def test_13_deflate_bomb_is_1009(live):
    srv = live(ws_max_message_size=64 * 1024)
    ws = open_ws(srv.port, extra=DEFLATE)
    ws.send(frame(BINARY, deflate(b"\x00" * (8 << 20)), rsv=4))  # 8 MiB in ~8 KiB
    assert ws.expect_close()[0] == 1009


def test_13_no_context_takeover_negotiated_and_honoured(server):
    offer = (
        "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
        "client_no_context_takeover; server_max_window_bits=10\r\n"
    )
    ws = open_ws(server.port, extra=offer)
    agreed = ws.header("Sec-WebSocket-Extensions")
    assert "server_no_context_takeover" in agreed
    assert "client_no_context_takeover" in agreed
    assert "server_max_window_bits=10" in agreed
    payload = b"the same text again and again " * 50
    for _ in range(3):
        ws.send(frame(TEXT, deflate(payload), rsv=4))
        _fin, rsv, _op, data = ws.recv_frame()
        assert rsv == 4
        # No context takeover: every message inflates alone, with a fresh inflater
        # and a 10-bit window.
        assert zlib.decompressobj(-10).decompress(data + b"\x00\x00\xff\xff") == payload
    ws.close()


def test_13_offers_declined_or_second_choice(server):
    # An offer with an unknown parameter is declined; the next one is taken.
    offer = "Sec-WebSocket-Extensions: permessage-deflate; bogus=1, permessage-deflate\r\n"
    ws = open_ws(server.port, extra=offer)
    # The second offer, with surge's 12-bit compression window (as websockets asks).
    assert ws.header("Sec-WebSocket-Extensions") == "permessage-deflate; server_max_window_bits=12"
    ws.close()
    ws = open_ws(server.port, extra="Sec-WebSocket-Extensions: x-unknown-ext\r\n")
    assert ws.header("Sec-WebSocket-Extensions") is None
    ws.close()
