"""The server's own timing (vLLM's ``--enable-per-request-metrics``) on the record, and the ``traceparent`` every
request carries, over real HTTP from a scripted server replaying a real vLLM 0.32 stream."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.fakes.scripted import END, HEAD, ScriptedServer, chunk
from tokenstorm.workloads import RequestRecord
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.client.server_timing import span_id_of, trace_id_of, traceparent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm"
#: what vLLM 0.32 puts on the final usage chunk (PerRequestMetrics.model_dump); every part a different figure, so
#: a part read into another's field fails
METRICS = {"time_to_first_token_ms": 12.5, "generation_time_ms": 230.0, "queue_time_ms": 41.25, "mean_itl_ms": 8.0,
           "tokens_per_second": 110.3, "speculative_decoding": None}  # fmt: skip
TRACEPARENT = re.compile(rb"traceparent: 00-([0-9a-f]{32})-([0-9a-f]{16})-01\r\n", re.IGNORECASE)


def _stream_with(metrics: object, *, drop: bool = False) -> bytes:
    """The real stream, its final usage chunk (``choices: []``) carrying ``metrics`` (or no key when ``drop``)."""
    blocks = [b for b in (FIXTURES / "tool_auto_answer_0.32_cpu.sse").read_bytes().split(b"\n\n") if b.strip()]
    final = orjson.loads(blocks[-2].removeprefix(b"data: "))
    assert final["choices"] == [] and "usage" in final
    if not drop:
        final["metrics"] = metrics
    blocks[-2] = b"data: " + orjson.dumps(final)
    return b"\n\n".join(blocks) + b"\n\n"


def _complete(
    body: bytes, *, stream: bool = True, request_id: str = "", target: str = ""
) -> tuple[RequestRecord, bytes]:
    def script(conn, n):  # type: ignore[no-untyped-def]
        if stream:
            conn.sendall(HEAD + chunk(body) + END)
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))  # fmt: skip

    server = ScriptedServer(script)
    try:
        with LlmClient(f"http://127.0.0.1:{server.port}", target=target) as client:
            req = CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}], stream=stream,
                                    request_id=request_id)  # fmt: skip
            record = client.complete(req, "tiny")
    finally:
        server.close()
    return record, server.requests[0]


def test_the_final_usage_chunks_metrics_fill_each_server_part_in_seconds_and_the_overhead() -> None:
    record, _ = _complete(_stream_with(METRICS))
    assert record.ok, record.error_detail
    assert record.server_queue_s == pytest.approx(0.04125)
    assert record.server_ttft_s == pytest.approx(0.0125)
    assert record.server_decode_s == pytest.approx(0.230)
    assert record.server_itl_s == pytest.approx(0.008)
    assert record.ttft_s is not None and record.overhead_s is not None
    assert record.overhead_s == pytest.approx(record.ttft_s - 0.04125 - 0.0125)
    assert record.cached_tokens == 384  # the usage beside it is still read


NEGATIVE = {"queue_time_ms": -5.0, "time_to_first_token_ms": -1, "generation_time_ms": -0.5, "mean_itl_ms": -2}


@pytest.mark.parametrize(
    "metrics", [None, "drop", {}, {"queue_time_ms": None, "mean_itl_ms": "8"}, [1, 2], "fast", 7, NEGATIVE]
)
def test_a_server_that_sends_no_usable_metrics_leaves_the_parts_unknown_and_the_record_whole(metrics: object) -> None:
    record, _ = _complete(_stream_with(metrics, drop=metrics == "drop"))
    assert record.ok, record.error_detail
    assert record.ttft_s is not None and record.output_tokens == 29
    parts = (record.server_queue_s, record.server_ttft_s, record.server_decode_s, record.server_itl_s)
    assert parts == (None, None, None, None) and record.overhead_s is None


def test_absent_parts_stay_unknown_and_without_queue_and_server_ttft_there_is_no_overhead() -> None:
    record, _ = _complete(_stream_with({"generation_time_ms": 100, "mean_itl_ms": None, "queue_time_ms": 3}))
    assert (record.server_queue_s, record.server_decode_s) == (pytest.approx(0.003), pytest.approx(0.1))
    assert record.server_ttft_s is None and record.server_itl_s is None and record.overhead_s is None


def test_a_non_streamed_answer_carrying_metrics_fills_the_parts_but_no_overhead_without_a_first_token_time() -> None:
    body = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": "tiny",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                         "metrics": METRICS})  # fmt: skip
    record, _ = _complete(body, stream=False)
    assert record.ok, record.error_detail
    assert (record.server_queue_s, record.server_ttft_s) == (pytest.approx(0.04125), pytest.approx(0.0125))
    assert (record.server_decode_s, record.server_itl_s) == (pytest.approx(0.23), pytest.approx(0.008))
    assert record.ttft_s is None and record.overhead_s is None


def test_every_request_sends_a_w3c_traceparent_whose_trace_id_the_record_keeps() -> None:
    rid = "0af7651916cd43dd8448eb211c80319c"
    record, sent = _complete(_stream_with(METRICS), request_id=rid)
    match = TRACEPARENT.search(sent)
    assert match is not None, sent[:400]
    assert match.group(1).decode() == rid == record.trace_id  # a 32-hex request id is its own trace id
    assert match.group(2).decode() == span_id_of(rid)
    # A fresh id (the client's own) is 32 hex as well: the record's trace id is its request id.
    record, sent = _complete(_stream_with(METRICS))
    assert record.trace_id == record.request_id and record.trace_id.encode() in sent


def test_an_ab_target_sends_a_trace_of_its_own_so_twins_on_one_server_are_not_one_trace() -> None:
    rid = "0af7651916cd43dd8448eb211c80319c"
    record, sent = _complete(_stream_with(METRICS), request_id=rid, target="b")
    match = TRACEPARENT.search(sent)
    assert match is not None and record.request_id == rid
    assert record.trace_id == match.group(1).decode() == trace_id_of(f"{rid}.b") != rid


@pytest.mark.parametrize("request_id", ["probe-consistency-1-abc", "0AF7651916CD43DD8448EB211C80319C", "0" * 32, ""])
def test_an_id_that_is_not_a_usable_trace_id_is_hashed_to_one(request_id: str) -> None:
    trace = trace_id_of(request_id)
    assert re.fullmatch(r"[0-9a-f]{32}", trace) and trace.strip("0") and trace != request_id
    assert trace_id_of(request_id) == trace  # the same id, the same trace: a rerun's record finds its span again
    assert trace_id_of(request_id + "x") != trace
    span = span_id_of(request_id)
    assert re.fullmatch(r"[0-9a-f]{16}", span) and span.strip("0")
    assert traceparent(trace, request_id) == f"00-{trace}-{span}-01"
