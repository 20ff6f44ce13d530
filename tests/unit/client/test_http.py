"""The HTTP connection every stream is read through: read stamps, one clock, keep-alive, no leftovers.

A scripted HTTP server in a real thread writes bytes at known moments; the tests check that
what the client reports is when those bytes arrived — including while the client itself is
too busy to read them — and that a request never sees another's bytes or waits on them.
"""

from __future__ import annotations

import socket
import sys
import time

import gevent
import pytest

from tests.fakes.scripted import END, HEAD, chunk
from tokenstorm.workloads.client.http import HttpConnection, ProtocolError, kernel_timestamps_supported


def _stream(conn: socket.socket, _n: int) -> None:
    conn.sendall(HEAD + chunk(b"data: one\n\n"))  # the first event travels with the headers
    time.sleep(0.030)
    conn.sendall(chunk(b"data: two\n\n"))
    time.sleep(0.030)
    conn.sendall(chunk(b"data: [DONE]\n\n") + END)


def test_body_read_with_the_headers_is_on_the_same_clock_as_later_reads(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_stream)
    with HttpConnection("127.0.0.1", server.port) as conn:
        t_sent = time.perf_counter()
        resp = conn.request("POST", "/v1/chat/completions", {}, b"{}", t_sent=t_sent)
        pieces = list(resp.body())
        stamps = [t for _, t, _w in pieces]
        assert b"".join(p for p, _, _w in pieces) == b"data: one\n\ndata: two\n\ndata: [DONE]\n\n"
        assert stamps == sorted(stamps) and stamps[0] >= t_sent
        # The server wrote "two" 30 ms after "one" and [DONE] 30 ms later: so say the stamps.
        assert stamps[1] - stamps[0] == pytest.approx(0.030, abs=0.010)
        assert stamps[-1] - stamps[0] == pytest.approx(0.060, abs=0.015)
        assert stamps[-1] <= time.perf_counter()


def test_a_busy_client_still_gets_the_arrival_time_from_the_kernel(serve) -> None:  # type: ignore[no-untyped-def]
    """On Linux the stamp is the packet's arrival; elsewhere (no SO_TIMESTAMPNS) it is, as
    documented, the time of the read — checked too, so the test runs on every platform."""

    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(HEAD)
        time.sleep(0.050)
        conn.sendall(chunk(b"data: late\n\n") + END)

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        resp = conn.request("POST", "/", {}, b"{}")
        t_headers = time.perf_counter()
        assert conn.kernel_timestamps == kernel_timestamps_supported(), "SO_TIMESTAMPNS was not accepted"
        time.sleep(0.250)  # the load generator is busy (blocked loop): the bytes wait in the kernel
        t_read_start = time.perf_counter()
        (piece, t, _w), *_ = list(resp.body())
        assert piece == b"data: late\n\n"
        if not kernel_timestamps_supported():
            assert t >= t_read_start  # the documented fallback: stamped when read
            return
        # Stamped ~50 ms after the headers (when it arrived), not >= 250 ms (when it was read).
        assert t < t_read_start - 0.150, "reads are stamped when read: the kernel receive stamp was lost"
        assert t - t_headers == pytest.approx(0.050, abs=0.030)


def test_keep_alive_connection_is_reused_without_waiting(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_stream)
    with HttpConnection("127.0.0.1", server.port, read_timeout_s=3.0) as conn:
        for _ in range(3):
            # A reuse check that waited for the socket to become readable would block until the read timeout.
            with gevent.Timeout(1.5):
                resp = conn.request("POST", "/", {}, b"{}")
                assert resp.read().endswith(b"[DONE]\n\n")
        assert conn.connects == 1 and server.connections == 1
        assert [r.startswith(b"POST / HTTP/1.1\r\n") for r in server.requests] == [True] * 3


def test_connection_the_server_closed_while_idle_is_replaced(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, n: int) -> None:
        _stream(conn, n)
        conn.shutdown(socket.SHUT_RDWR)  # like uvicorn's keep-alive timeout, without "Connection: close"
        raise OSError("closed")

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        conn.request("POST", "/", {}, b"{}").read()
        time.sleep(0.05)
        resp = conn.request("POST", "/", {}, b"{}")
        assert resp.status == 200 and resp.read().endswith(b"[DONE]\n\n")
        assert conn.connects == 2 and len(server.requests) == 2


@pytest.mark.parametrize("idle_s", [0.0, 0.3])
def test_reused_connection_closed_before_answering(serve, idle_s: float) -> None:  # type: ignore[no-untyped-def]
    """After an idle spell (a keep-alive timeout racing the request) it is retried once; at once,
    it is the server dropping the request — a connection error the client records."""

    def script(conn: socket.socket, n: int) -> None:
        if n == 1:  # read the request, then drop the connection without a byte
            conn.shutdown(socket.SHUT_RDWR)
            raise OSError("dropped")
        _stream(conn, n)

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port, idle_race_s=0.2) as conn:
        conn.request("POST", "/", {}, b"{}").read()
        time.sleep(idle_s)
        if idle_s:
            resp = conn.request("POST", "/", {}, b"{}")
            assert resp.read().endswith(b"[DONE]\n\n")
            assert conn.connects == 2 and len(server.requests) == 3
        else:
            with pytest.raises(ConnectionError):
                conn.request("POST", "/", {}, b"{}")
            assert conn.connects == 1 and len(server.requests) == 2


def test_unread_response_never_leaks_into_the_next_request(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, n: int) -> None:
        conn.sendall(HEAD + chunk(b"data: first-%d\n\n" % n))
        time.sleep(0.05)
        conn.sendall(chunk(b"data: [DONE]\n\n") + END)

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        resp = conn.request("POST", "/", {}, b"{}")
        piece, _t, _w = next(resp.body())  # abandon the stream after its first event
        assert piece == b"data: first-0\n\n" and not resp.complete
        resp2 = conn.request("POST", "/", {}, b"{}")
        assert resp2.read() == b"data: first-1\n\ndata: [DONE]\n\n"
        assert conn.connects == 2


def test_a_read_waiting_for_bytes_fails_at_once_when_another_greenlet_closes_the_connection(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(HEAD)
        time.sleep(1.0)  # no body while the test runs

    server = serve(script)
    conn = HttpConnection("127.0.0.1", server.port)
    resp = conn.request("POST", "/", {}, b"{}")
    reader = gevent.spawn(lambda: list(resp.body()))
    gevent.sleep(0.05)  # the reader now waits for the socket to become readable
    conn.close()
    reader.join(timeout=0.5)
    assert reader.dead, "a read left waiting on a closed connection"
    assert isinstance(reader.exception, OSError)


def test_server_closing_mid_body_is_a_connection_error(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(HEAD + chunk(b"data: one\n\n"))
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("dropped")

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        resp = conn.request("POST", "/", {}, b"{}")
        with pytest.raises(ConnectionError):
            list(resp.body())


def test_not_http_is_a_protocol_error(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn, pytest.raises(ProtocolError):
        conn.request("GET", "/", {})


def test_pinned_parser_still_has_the_callbacks_relied_on() -> None:
    """httptools calls only the callbacks the protocol object defines; if it renamed one, the
    body or the keep-alive decision would silently go missing. Fail loudly instead."""
    import httptools

    seen: list[str] = []

    class Probe:
        def on_header(self, name: bytes, value: bytes) -> None:
            seen.append("header")

        def on_headers_complete(self) -> None:
            seen.append("headers_complete")

        def on_body(self, body: bytes) -> None:
            seen.append("body")

        def on_message_complete(self) -> None:
            seen.append(f"complete keep_alive={parser.should_keep_alive()}")

    parser = httptools.HttpResponseParser(Probe())
    parser.feed_data(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert parser.get_status_code() == 200
    assert seen == ["header", "headers_complete", "body", "complete keep_alive=True"], sys.modules["httptools"]


def test_body_ended_by_closing_the_connection_is_complete_not_dropped(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, _n: int) -> None:  # HTTP/1.0 style, as some proxies answer
        conn.sendall(b"HTTP/1.0 502 Bad Gateway\r\nContent-Type: text/html\r\n\r\n<h1>upstream down</h1>")
        conn.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        resp = conn.request("POST", "/", {}, b"{}")
        assert resp.status == 502 and resp.read() == b"<h1>upstream down</h1>" and resp.complete


def test_reading_an_error_body_up_to_a_limit_keeps_the_connection(serve) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nslow")

    server = serve(script)
    with HttpConnection("127.0.0.1", server.port) as conn:
        for _ in range(2):
            assert conn.request("POST", "/", {}, b"{}").read(limit=4) == b"slow"
        assert conn.connects == 1


def _slow_reader(sock: socket.socket) -> None:
    """Answers each request {} after waiting 50 ms before reading it (its kernel buffers fill meanwhile)."""
    conn, _ = sock.accept()
    with conn:
        buf = b""
        while True:
            time.sleep(0.050)
            while b"\r\n\r\n" not in buf:
                data = conn.recv(1 << 20)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(
                b"content-length")))  # fmt: skip
            while len(buf) < length:
                buf += conn.recv(1 << 20)
            buf = buf[length:]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")


def test_a_request_one_send_took_left_at_once_and_one_that_waited_for_the_server_says_how_long() -> None:
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    threading.Thread(target=_slow_reader, args=(sock,), daemon=True).start()
    with HttpConnection("127.0.0.1", sock.getsockname()[1]) as conn:
        # An agent step's 30 KB history goes to the kernel in one send, though the server reads 50 ms later:
        # it left at once (a late TTFT is not to be flagged for it).
        small = conn.request("POST", "/v1/chat/completions", {}, b"x" * 30_000)
        assert small.read() == b"{}" and small.send_wait_s == 0.0
        # 24 MB does not fit the send buffers: its last bytes left when the server read, ~50 ms later. On
        # Linux the kernel's transmit stamp says when: the request's clock starts then (as a capture's
        # "last byte sent" does); elsewhere the request says how much later than its clock they may have left.
        t_call = time.perf_counter()
        big = conn.request("POST", "/v1/chat/completions", {}, b"x" * (24 << 20))
        assert big.read() == b"{}"
        if sys.platform.startswith("linux"):
            assert big.t_sent - t_call >= 0.030 and big.send_wait_s == 0.0, (big.t_sent - t_call, big.send_wait_s)
        else:
            assert big.send_wait_s >= 0.030, big.send_wait_s
    sock.close()
