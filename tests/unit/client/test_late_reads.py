"""A late read is counted, not hidden: the events whose own arrival time was lost are late.

A scripted server writes token chunks 5 ms apart, each in its own TCP segment. When the client
reads on time every event keeps its own stamp and none is late. When the client is too busy to
read (its loop blocked, as on a starved CPU), Linux coalesces the queued segments under the
newest one's stamp: the record must then say which events were stamped late — all but the one
that really arrived last — and that the TTFT was one of them.
"""

from __future__ import annotations

import json
import socket
import time

import gevent
import pytest

from tests.fakes.scripted import END, HEAD, chunk
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.client.http import kernel_timestamps_supported
from tokenstorm.workloads.rundir import LATE_EVENT_S

#: checks measured latencies against a truth: runs alone (scripts/test.sh's second phase)
pytestmark = pytest.mark.serial

TOKENS = 10
GAP_S = 0.005


def _token(i: int, finish: str | None = None) -> bytes:
    delta = {"content": f"t{i}"}
    body = {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": i + 1}}  # fmt: skip
    return chunk(b"data: " + json.dumps(body).encode() + b"\n\n")


def _paced(conn: socket.socket, _n: int) -> None:
    """Headers at once, then one token chunk every 5 ms, then [DONE]."""
    conn.sendall(HEAD)
    for i in range(TOKENS):
        time.sleep(GAP_S)
        conn.sendall(_token(i, "length" if i == TOKENS - 1 else None))
    time.sleep(GAP_S)
    conn.sendall(chunk(b"data: [DONE]\n\n") + END)


def _complete(port: int, block_s: float = 0.0, block_after_s: float = 2.5 * GAP_S):  # type: ignore[no-untyped-def]
    client = LlmClient(f"http://127.0.0.1:{port}")
    if block_s:
        # The load generator gets busy (by default once the stream has begun, ~2 tokens in):
        # nothing runs in its loop for block_s, then the reads happen.
        gevent.get_hub().loop.update_now()  # timers count from the loop's cached time, stale between tests
        gevent.spawn_later(block_after_s, time.sleep, block_s)
    try:
        return client.complete(CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=TOKENS), "m")  # fmt: skip
    finally:
        client.close()


def test_a_client_that_reads_on_time_has_no_late_events(serve) -> None:  # type: ignore[no-untyped-def]
    """On a busy machine (the suite's other processes) this process can itself lose its CPU for a few ms
    and read late — the record is right to call an event late then. So: every try that counts a late event
    shows the bunched read behind it, and of five tries the first read on time counts none."""
    port = serve(_paced).port
    tries = []
    for _ in range(5):
        record = _complete(port)
        assert record.ok, record.error_detail
        assert record.token_events == TOKENS
        tries.append(record)
        if record.late_events:
            # Counted late only where a read took several events at once: they share its stamp, a gap
            # the server (pacing 5 ms) did not make.
            assert min(record.itl_gaps_s) < LATE_EVENT_S or record.ttft_late, record.itl_gaps_s
        if kernel_timestamps_supported():
            assert record.read_lag_max_s is not None
            if record.read_lag_max_s >= GAP_S:
                continue  # this try's reads lagged their packets: not on time, another try
        elif record.late_events:
            continue
        # Read on time: no event was stamped late, and every gap is the server's 5 ms, none bunched.
        assert record.late_events == 0 and not record.ttft_late, record.itl_gaps_s
        assert min(record.itl_gaps_s) > GAP_S / 2
        return
    pytest.fail(f"no try of 5 read on time: lags {[r.read_lag_max_s for r in tries]}")


def test_a_blocked_client_counts_the_events_whose_stamp_was_lost(serve) -> None:  # type: ignore[no-untyped-def]
    # Blocked 0.2 s, 0.15 s past the stream's end: the lag stays far above an on-time read's even when a busy
    # machine delays the server's last packets.
    record = _complete(serve(_paced).port, block_s=TOKENS * GAP_S + 0.15)
    assert record.ok, record.error_detail
    assert record.token_events == TOKENS
    # Everything queued while the loop was blocked came back in one read stamped as its newest
    # packet: all the events in it but the last were stamped late.
    zero_gaps = sum(1 for g in record.itl_gaps_s if g < LATE_EVENT_S)
    assert zero_gaps >= TOKENS - 4, record.itl_gaps_s  # the bunching this test makes happened
    assert record.late_events >= zero_gaps
    assert record.late_events <= TOKENS - 1  # the event that ended the read keeps its own stamp
    if kernel_timestamps_supported():
        assert record.read_lag_max_s is not None and record.read_lag_max_s >= 0.04  # it was read ~150 ms late
    else:
        assert record.read_lag_max_s is None  # documented: no kernel stamp, no measurable lag


def test_a_first_token_read_late_says_the_ttft_is_late(serve) -> None:  # type: ignore[no-untyped-def]
    def slow_start(conn: socket.socket, n: int) -> None:
        time.sleep(0.030)  # prefill: the client is blocked from 10 ms until well after the first token
        _paced(conn, n)

    record = _complete(serve(slow_start).port, block_s=0.1, block_after_s=0.010)
    assert record.ok, record.error_detail
    assert record.ttft_late and record.late_events >= 1
    # The first token left at ~35 ms; the stamp it got is a later packet's (the [DONE] at ~85 ms):
    # exactly the error the flag is there to own up to.
    assert record.ttft_s is not None and record.ttft_s > 0.06


def test_kernel_stamps_map_onto_the_clock_even_when_the_mapping_is_preempted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The wall→perf offset is read between two perf_counter reads; a try that was preempted (here:
    the first takes 20 ms) is not used, or every stamp of the read would move by 10 ms."""
    from tokenstorm.workloads.client import stamps

    real_time_ns = time.time_ns
    calls = {"n": 0}

    def preempted_time_ns() -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(0.020)  # the process lost its CPU right here
        return real_time_ns()

    truth = real_time_ns() - time.perf_counter_ns()
    monkeypatch.setattr(stamps.time, "time_ns", preempted_time_ns)
    offset = stamps.WallToPerf().offset_ns()
    assert calls["n"] >= 2
    assert abs(offset - truth) < 1_000_000  # within 1 ms, not the 10 ms a preempted read would give


@pytest.mark.skipif(not kernel_timestamps_supported(), reason="kernel receive stamps are Linux-only (SO_TIMESTAMPNS)")
def test_stamps_follow_a_wall_clock_that_is_slewed(serve) -> None:  # type: ignore[no-untyped-def]
    """NTP slews CLOCK_REALTIME (the kernel's stamps) against perf_counter; a mapping read once went
    stale within a second here (5 ms/s) and put stamps after their read's return, so they were lost.
    Two requests a second apart both keep kernel stamps."""
    port = serve(_paced).port
    first = _complete(port)
    time.sleep(1.2)
    second = _complete(port)
    assert first.read_lag_max_s is not None and second.read_lag_max_s is not None


def test_connecting_is_not_inside_ttft(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A new connection's lookup and handshake (50 ms here) happen before the request's clock starts:
    TTFT is the server's (~5 ms to the first token), the connect is kept apart in ``connect_s``."""
    from tokenstorm.workloads.client import sockets

    real = sockets.gevent.socket.create_connection

    def slow_connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        gevent.sleep(0.050)
        return real(*args, **kwargs)

    monkeypatch.setattr(sockets.gevent.socket, "create_connection", slow_connect)
    record = _complete(serve(_paced).port)
    assert record.ok, record.error_detail
    assert record.connect_s is not None and record.connect_s >= 0.045
    assert record.ttft_s is not None and record.ttft_s < 0.045
