"""A silent server fails the request as a stall, a slow but steady one does not; credentials given
with the URL are sent as Basic auth, and no secret a server echoes back ends up in a record.

A scripted HTTP server in a real thread plays the server: it goes quiet at chosen moments, or
answers with error texts that quote the request's ``Authorization`` header, the key or the password.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.fakes.scripted import END, HEAD, ScriptedServer, chunk
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.rundir import RequestRecord

KEY = "sk-live-7f3a9c1e5b2d4f6a8c0e"
USER, PASSWORD = "alice", "s3cr3t-pa55word"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test: a server script that holds its connection quiet lets go."""
    event = threading.Event()
    yield event
    event.set()


def _token(i: int, finish: str | None = None) -> bytes:
    body = {"id": "c", "choices": [{"index": 0, "delta": {"content": f"t{i}"}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": i + 1}}  # fmt: skip
    return chunk(b"data: " + json.dumps(body).encode() + b"\n\n")


def _steady(tokens: int, gap_s: float) -> Callable[[socket.socket, int], None]:
    """Headers, then one token every ``gap_s``, then [DONE]."""

    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(HEAD)
        for i in range(tokens):
            time.sleep(gap_s)
            conn.sendall(_token(i, "length" if i == tokens - 1 else None))
        conn.sendall(chunk(b"data: [DONE]\n\n") + END)

    return script


def _ask(client: LlmClient, max_tokens: int = 128) -> RequestRecord:
    return client.complete(
        CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}], max_tokens=max_tokens), "m"
    )


# -- stall timeout -----------------------------------------------------------------------------------


def test_a_stream_that_goes_silent_fails_as_a_stall_and_keeps_its_tokens(serve, release) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, n: int) -> None:
        if n > 0:
            return _steady(3, 0.01)(conn, n)  # the next request is served normally
        conn.sendall(HEAD)
        for i in range(3):
            time.sleep(0.02)
            conn.sendall(_token(i))
        release.wait(10)  # then nothing: the server holds the stream open and silent

    server = serve(script)
    with LlmClient(f"http://127.0.0.1:{server.port}", stall_timeout_s=0.3, timeout_s=30) as client:
        t = time.perf_counter()
        rec = _ask(client)
        took_s = time.perf_counter() - t
        assert (rec.ok, rec.error_category) == (False, "stall")
        assert rec.error_detail == "no byte for 0.3 s (stall timeout) after 3 tokens"
        assert rec.status_code == 200
        # The tokens timed before the silence are kept, as a timeout keeps them.
        assert rec.token_events == 3 and rec.output_tokens == 3 and len(rec.itl_gaps_s) == 2
        assert rec.ttft_s is not None and rec.ttft_s < 0.2
        # Given up 0.3 s after the last byte: not at the whole-request timeout, not 0.3 s after the send.
        last_token_s = rec.ttft_s + sum(rec.itl_gaps_s)
        assert 0.3 <= rec.e2e_s - last_token_s < 0.45, (rec.e2e_s, last_token_s)
        assert took_s < 1.0
        assert not rec.timing_violation
        after = _ask(client)  # the same user carries on, on a fresh connection
        assert after.ok, after.error_detail
        assert after.token_events == 3 and server.connections == 2


def test_a_server_silent_before_its_headers_fails_as_a_stall(serve, release) -> None:  # type: ignore[no-untyped-def]
    def script(conn: socket.socket, n: int) -> None:
        if n > 0:
            return _steady(2, 0.0)(conn, n)
        release.wait(10)  # the first request gets no byte at all

    server = serve(script)
    with LlmClient(f"http://127.0.0.1:{server.port}", stall_timeout_s=0.3) as client:
        t = time.perf_counter()
        rec = _ask(client)
        took_s = time.perf_counter() - t
        assert _ask(client).ok  # and the next one is served
    assert rec.error_category == "stall"
    assert rec.error_detail == "no byte for 0.3 s (stall timeout) before the response headers"
    assert rec.status_code is None and rec.token_events == 0
    assert rec.e2e_s == pytest.approx(0.3, abs=0.15)
    assert took_s == pytest.approx(0.3, abs=0.15)


def test_a_slow_but_steady_stream_longer_than_the_stall_timeout_is_not_cut(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_steady(10, 0.12))  # ~1.2 s in all, a byte every 0.12 s
    with LlmClient(f"http://127.0.0.1:{server.port}", stall_timeout_s=0.3) as client:
        rec = _ask(client, max_tokens=10)
    assert rec.ok, rec.error_detail
    assert rec.token_events == 10 and rec.e2e_s > 1.0


def test_the_whole_request_timeout_still_cuts_a_healthy_stream(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_steady(40, 0.05))  # ~2 s, never silent for the stall timeout
    with LlmClient(f"http://127.0.0.1:{server.port}", timeout_s=0.5, stall_timeout_s=0.3) as client:
        rec = _ask(client)
    assert rec.error_category == "timeout"
    assert rec.error_detail == "no complete response within 0.5 s"
    assert 3 <= rec.token_events <= 10  # the tokens of the first half second are kept
    assert rec.e2e_s == pytest.approx(0.5, abs=0.1)


# -- credentials and redaction -----------------------------------------------------------------------


def _answer(status: int, body: bytes) -> Callable[[socket.socket, int], None]:
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(b"HTTP/1.1 %d Nope\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))

    return script


def _sse(*events: bytes) -> Callable[[socket.socket, int], None]:
    def script(conn: socket.socket, _n: int) -> None:
        conn.sendall(HEAD + b"".join(chunk(b"data: " + e + b"\n\n") for e in events) + END)

    return script


def _echo_headers(conn: socket.socket, _n: int, server: list[ScriptedServer]) -> None:
    """A gateway that answers 401 quoting the request's headers, JSON-escaped, and the password."""
    head = server[0].requests[-1].split(b"\r\n\r\n")[0].decode()
    msg = f"rejected {head!r}; password {PASSWORD} does not match for {USER}:{PASSWORD}"
    _answer(401, json.dumps({"error": {"message": msg}}).encode())(conn, _n)


def _no_secret_in(rec: object, *secrets: str) -> None:
    stored = json.dumps(dataclasses.asdict(rec), default=str)  # type: ignore[call-overload]
    for secret in secrets:
        assert secret not in stored, stored


@pytest.mark.parametrize(
    "script",
    [
        _answer(401, f"Authorization: Bearer {KEY}\r\nInvalid key {KEY}".encode()),
        _answer(403, json.dumps({"error": {"message": f"bad key {KEY}", "headers": {}}}).encode()),
        _answer(500, json.dumps({"detail": {"authorization": f"Bearer {KEY}"}}).encode()),
        _answer(401, ("x" * 285 + KEY).encode()),  # the key where an error text is cut short
        _sse(json.dumps({"error": {"message": f"upstream said: Authorization: Bearer {KEY}"}}).encode()),
        _sse(b'{"id": "x", "echo": "' + KEY.encode() + b'", broken'),
    ],
    ids=["raw-header", "json-message", "json-header", "at-the-cut", "error-event", "malformed-chunk"],
)
def test_a_server_that_echoes_the_api_key_does_not_get_it_into_the_record(serve, script) -> None:  # type: ignore[no-untyped-def]
    server = serve(script)
    with LlmClient(f"http://127.0.0.1:{server.port}", api_key=KEY) as client:
        rec = _ask(client)
    assert not rec.ok and rec.error_detail
    assert KEY[:8] not in rec.error_detail, rec.error_detail  # not the key, nor its first part
    assert "***" in rec.error_detail, rec.error_detail
    _no_secret_in(rec, KEY)
    assert server.requests[0].count(f"Authorization: Bearer {KEY}".encode()) == 1


def test_credentials_in_the_url_go_as_basic_auth_and_nowhere_else(serve) -> None:  # type: ignore[no-untyped-def]
    holder: list[ScriptedServer] = []
    server = serve(lambda conn, n: _steady(2, 0.0)(conn, n) if n == 0 else _echo_headers(conn, n, holder))
    holder.append(server)
    with LlmClient(f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/v1") as client:
        assert client.base_url == f"http://127.0.0.1:{server.port}/v1"
        ok = _ask(client)
        echoed = _ask(client)
    assert ok.ok, ok.error_detail
    sent = server.requests[0].split(b"\r\n\r\n")[0].decode()
    assert sent.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{server.port}\r\n" in sent
    assert f"\r\nAuthorization: Basic {BASIC}\r\n" in sent
    assert echoed.error_category == "http_4xx"
    assert "rejected" in echoed.error_detail and "***" in echoed.error_detail
    for rec in (ok, echoed):
        _no_secret_in(rec, PASSWORD, BASIC, f"{USER}:{PASSWORD}")


def test_an_authorization_value_is_sent_as_given_and_masked_when_echoed(serve) -> None:  # type: ignore[no-untyped-def]
    token = base64.b64encode(b"svc:hunter2-long").decode()
    server = serve(_answer(502, f"bad gateway; got {token} and hunter2-long".encode()))
    with LlmClient(f"http://127.0.0.1:{server.port}", authorization=f"Basic {token}") as client:
        rec = _ask(client)
    assert f"\r\nAuthorization: Basic {token}\r\n".encode() in server.requests[0]
    assert rec.error_category == "http_5xx" and rec.error_detail.startswith("HTTP 502: bad gateway; got ***")
    _no_secret_in(rec, token, "hunter2-long")


def test_an_api_key_wins_over_credentials_in_the_url(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(_steady(1, 0.0))
    with LlmClient(f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}", api_key=KEY) as client:
        assert client.base_url == f"http://127.0.0.1:{server.port}"
        assert _ask(client).ok
    head = server.requests[0].split(b"\r\n\r\n")[0].decode()
    assert f"\r\nAuthorization: Bearer {KEY}\r\n" in head and PASSWORD not in head and BASIC not in head


def test_the_runs_other_secrets_given_to_the_client_are_masked_too(serve) -> None:  # type: ignore[no-untyped-def]
    other = "other-target-pa55word"
    server = serve(_answer(500, f"upstream {other} refused".encode()))
    with LlmClient(f"http://127.0.0.1:{server.port}", api_key=KEY, secrets=(other,)) as client:
        rec = _ask(client)
    assert rec.error_detail == "HTTP 500: upstream *** refused"
