"""The wire check's reader (``tests/wire``) on a pcap written by hand: known packets, known answers.

If it misread the capture, the wire tests would check the client against the wrong times.
"""

from __future__ import annotations

import struct
from pathlib import Path

import orjson
import pytest

from tests.wire import event_errors, exchanges, read_packets, tcp_connections
from tokenstorm.workloads.rundir import RequestRecord

CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 8000)
SYN, ACK, PSH = 0x02, 0x10, 0x08
MS = 1_000_000  # ns


def _frame(src: tuple[str, int], dst: tuple[str, int], seq: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq, 0, 5 << 4, flags, 65535, 0, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0, bytes([127, 0, 0, 1]),
                     bytes([127, 0, 0, 1]))  # fmt: skip
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp


def _pcap(path: Path, packets: list[tuple[int, bytes]]) -> Path:
    out = bytearray(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
    for t_ns, frame in packets:
        out += struct.pack("<IIII", t_ns // 1_000_000_000, t_ns % 1_000_000_000, len(frame), len(frame)) + frame
    path.write_bytes(bytes(out))
    return path


def _request(request_id: str) -> bytes:
    body = b'{"model": "m", "stream": true}'
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: {request_id}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip


def _event(delta: dict[str, str] | None, tokens: int | None = None) -> bytes:
    chunk: dict[str, object] = {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if delta is None:
        chunk["choices"] = []
    if tokens is not None:
        chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": tokens}
    data = b"data: " + orjson.dumps(chunk) + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
DONE = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    c, s = 1000, 5000  # initial sequence numbers
    role, tok1, tok2, tok3 = (_event({"role": "assistant", "content": ""}, 0), _event({"content": "a"}, 1),
                              _event({"content": "b"}, 3), _event({"content": ""}, 4))  # fmt: skip
    req1, req2 = _request("one"), _request("two")
    t = 1_700_000_000 * 1_000_000_000
    s1 = s + 1 + len(HEAD + role)
    pkts = [
        (t, _frame(CLIENT, SERVER, c, SYN, b"")),
        (t + 1 * MS, _frame(SERVER, CLIENT, s, SYN | ACK, b"")),
        (t + 2 * MS, _frame(CLIENT, SERVER, c + 1, ACK | PSH, req1[:40])),
        (t + 3 * MS, _frame(CLIENT, SERVER, c + 1 + 40, ACK | PSH, req1[40:])),  # POST sent: t + 3 ms
        (t + 4 * MS, _frame(SERVER, CLIENT, s + 1, ACK | PSH, HEAD + role)),
        # The first token event split over two segments, the second of them overtaken by the next one:
        (t + 10 * MS, _frame(SERVER, CLIENT, s1, ACK | PSH, tok1[:20])),
        (t + 12 * MS, _frame(SERVER, CLIENT, s1 + len(tok1), ACK | PSH, tok2)),  # waits for the gap
        (t + 13 * MS, _frame(SERVER, CLIENT, s1 + 20, ACK | PSH, tok1[20:])),  # fills it: both complete now
        (t + 14 * MS, _frame(SERVER, CLIENT, s1 + 20, ACK | PSH, tok1[20:])),  # a retransmit: changes nothing
        (t + 20 * MS, _frame(SERVER, CLIENT, s1 + len(tok1 + tok2), ACK | PSH, tok3 + _event(None, 4) + DONE)),
        (t + 30 * MS, _frame(CLIENT, SERVER, c + 1 + len(req1), ACK | PSH, req2)),  # the next request, kept alive
    ]
    return _pcap(tmp_path / "x.pcap", pkts)


def test_exchanges_carry_the_times_a_reader_could_have_parsed_each_event(capture: Path) -> None:
    (conn,) = tcp_connections(read_packets(capture), SERVER[1])
    first, second = exchanges(conn)
    t = 1_700_000_000 * 1_000_000_000
    assert (first.request_id, first.sent_ns, first.connect_ns, first.status) == ("one", t + 3 * MS, t, 200)
    # The role chunk is no token event; token 1 and the 2-token event became readable at 13 ms; the
    # empty delta is a token event (vLLM's held-back UTF-8); the usage-only chunk is not.
    assert first.token_ns == [t + 13 * MS, t + 13 * MS, t + 20 * MS]
    assert first.token_k == [1, 2, 1]
    assert first.done_ns == t + 20 * MS and first.complete
    assert first.ttft_s == pytest.approx(0.010) and first.connect_ns is not None
    assert (second.request_id, second.sent_ns, second.connect_ns, second.status) == ("two", t + 30 * MS, None, None)


def test_a_stamp_late_by_2_ms_reads_as_2_ms_and_ttft_counts_from_the_post(capture: Path) -> None:
    (conn,) = tcp_connections(read_packets(capture), SERVER[1])
    wire = exchanges(conn)[0]
    # The client connected before its clock started, which it started 0.5 ms before the POST packet;
    # its second event was stamped 2 ms late. The wire's events sit at 10, 10 and 17 ms after the POST.
    rec = RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True, start_epoch_s=0.0,
                        request_id="one", ttft_s=0.0105, itl_gaps_s=[0.001, 0.001, 0.005], token_events=3,
                        output_tokens=4)  # fmt: skip
    errors = event_errors(rec, wire)
    assert errors.connected
    assert errors.ttft_error_s == pytest.approx(0.0005)
    assert errors.errors_s == pytest.approx([0.0, 0.002, 0.0], abs=1e-9)
    with pytest.raises(ValueError, match="token events"):
        event_errors(RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True,
                                   start_epoch_s=0.0, request_id="one", ttft_s=0.0105, itl_gaps_s=[0.001],
                                   token_events=2), wire)  # fmt: skip


@pytest.mark.parametrize(
    ("chunks", "tokens"),
    [
        # the role announcement, two content tokens (one empty: a held-back UTF-8 byte), usage, [DONE] aside
        (
            [
                {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"delta": {"content": "a"}}]},
                {"choices": [{"delta": {"content": ""}}]},
                {"choices": [], "usage": {"completion_tokens": 2}},
            ],
            [0, 1, 1, 0],
        ),
        # continuous usage: a chunk of 3 tokens (speculative decoding), one that adds none, reasoning, completions
        (
            [
                {"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}},
                {"choices": [{"delta": {"content": "bcd"}}], "usage": {"completion_tokens": 4}},
                {"choices": [{"delta": {"content": ""}}], "usage": {"completion_tokens": 4}},
                {"choices": [{"delta": {"reasoning_content": "hm"}}], "usage": {"completion_tokens": 5}},
                {"choices": [{"text": "x"}]},
            ],
            [1, 3, 0, 1, 1],
        ),
        # a tool call's closing tokens held back to the finish: an empty delta that finishes with 2 more tokens
        (
            [
                {
                    "choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}}],
                    "usage": {"completion_tokens": 1},
                },
                {"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"completion_tokens": 3}},
            ],
            [1, 2],
        ),
    ],
)
def test_the_wire_counts_token_events_by_the_documented_definition(chunks: list[dict], tokens: list[int]) -> None:
    from tests.wire.exchanges import _tokens

    got, completion = [], None
    for chunk in chunks:
        n, completion = _tokens(chunk, completion)
        got.append(n)
    assert got == tokens
