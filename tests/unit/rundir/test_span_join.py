"""The server's spans joined to the records when a report reads a run: vLLM's ``llm_request`` spans, encoded as
it exports them (opentelemetry-proto's classes) and decoded by the receiver, fill each record's server timing by
trace id where its stream said nothing, and give every record with a span the server's front end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.fakes.otlp_spans import export_body, llm_request_span
from tokenstorm.reports import load_run
from tokenstorm.workloads.plugin.core.otlp import decode_spans
from tokenstorm.workloads.rundir import SEGMENTS_DIR, SPANS_FILE, RequestRecord, SegmentWriter
from tokenstorm.workloads.rundir.frame import string_key
from tokenstorm.workloads.rundir.spans import SpanWriter

ARRIVAL = 1_700_000_000.0


def _record(n: int, **kw: object) -> RequestRecord:
    base: dict[str, object] = dict(
        workload="chat",
        endpoint="/v1/chat/completions",
        model="tiny",
        stream=True,
        start_epoch_s=ARRIVAL + n,
        request_id=f"r{n}",
        ok=True,
        status_code=200,
        output_tokens=9,
        ttft_s=0.200,
        e2e_s=0.600,
        trace_id=f"{n:032x}",
    )
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def _run(tmp_path: Path, records: list[RequestRecord], bodies: list[bytes]) -> Path:
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR, compact_in_child=False)
    for r in records:
        writer.write(r)
    writer.close()
    spans = SpanWriter(tmp_path / SPANS_FILE)
    for body in bodies:  # as the receiver takes each export
        spans.write(decode_spans(body))
    spans.close()
    return tmp_path


def test_a_span_fills_what_the_stream_did_not_say_and_every_record_with_one_gets_its_front_end(tmp_path: Path) -> None:
    records = [
        _record(1),  # no metrics in its stream: all from its span
        _record(
            2, server_queue_s=0.050, server_ttft_s=0.020, server_decode_s=0.300, server_itl_s=0.0375, overhead_s=0.130
        ),  # the stream's own: kept
        _record(3),  # its span never came
        _record(4, output_tokens=1, ttft_s=0.100, e2e_s=0.100),  # one token: no gap, no ITL
        _record(5, ok=False, status_code=500, output_tokens=None, ttft_s=None, e2e_s=None, error_category="http"),
    ]
    bodies = [
        export_body(
            llm_request_span(
                f"{1:032x}",
                ARRIVAL + 1.001,
                queue_s=0.080,
                frontend_s=0.004,
                prefill_s=0.030,
                decode_s=0.320,
                output_tokens=9,
            ),
            llm_request_span(
                f"{2:032x}",
                ARRIVAL + 2.001,
                queue_s=0.051,
                frontend_s=0.006,
                prefill_s=0.021,
                decode_s=0.299,
                output_tokens=9,
            ),
        ),
        export_body(
            llm_request_span(
                f"{4:032x}",
                ARRIVAL + 4.001,
                queue_s=0.0,
                frontend_s=0.003,
                prefill_s=0.040,
                decode_s=0.0,
                output_tokens=1,
            ),
            llm_request_span(f"{9:032x}", ARRIVAL + 4.5, 0.1, 0.1, 0.1, 0.1, 3),
        ),  # another client's request
    ]
    df = load_run(_run(tmp_path, records, bodies)).requests
    row = {int(k): i for i, k in enumerate(df["trace_id"])}

    def get(n: int, col: str) -> float:
        return float(df[col].iloc[row[string_key(f"{n:032x}")]])

    assert get(1, "server_queue_s") == pytest.approx(0.080)
    assert get(1, "server_ttft_s") == pytest.approx(0.030)  # scheduled → first token: the span's prefill
    assert get(1, "server_decode_s") == pytest.approx(0.320)
    assert get(1, "server_itl_s") == pytest.approx(0.320 / 8)
    assert get(1, "overhead_s") == pytest.approx(0.200 - 0.080 - 0.030)
    assert get(1, "server_frontend_s") == pytest.approx(0.004)  # arrival → queued, only the span knows it
    # the stream's own figures stay; the front end comes from the span all the same
    assert [
        get(2, c) for c in ("server_queue_s", "server_ttft_s", "server_decode_s", "server_itl_s", "overhead_s")
    ] == pytest.approx([0.050, 0.020, 0.300, 0.0375, 0.130])
    assert get(2, "server_frontend_s") == pytest.approx(0.006)
    assert all(math.isnan(get(3, c)) for c in ("server_queue_s", "server_ttft_s", "overhead_s", "server_frontend_s"))
    assert math.isnan(get(4, "server_itl_s")) and get(4, "server_decode_s") == 0.0
    assert get(4, "overhead_s") == pytest.approx(0.060)
    assert np.isnan(df["server_queue_s"].iloc[row[string_key(f"{5:032x}")]])  # failed, no span: nothing invented
    # the parts add up to the client's TTFT wherever a span filled them
    filled = df["server_frontend_s"].notna() & df["ttft_s"].notna()
    total = df["overhead_s"] + df["server_queue_s"] + df["server_ttft_s"]
    assert np.allclose(total[filled], df["ttft_s"][filled])
    assert (df["overhead_s"][filled] >= df["server_frontend_s"][filled]).all()


def test_a_run_without_spans_and_a_torn_last_line_read_as_far_as_they_go(tmp_path: Path) -> None:
    records = [_record(1), _record(2)]
    df = load_run(_run(tmp_path, records, [])).requests  # no span: the stream's figures alone (none here)
    assert df["server_queue_s"].isna().all() and df["server_frontend_s"].isna().all()
    body = export_body(llm_request_span(f"{1:032x}", ARRIVAL, 0.01, 0.002, 0.02, 0.2, 9))
    SpanWriter(tmp_path / SPANS_FILE).write(decode_spans(body))
    with (tmp_path / SPANS_FILE).open("ab") as fh:
        fh.write(b'{"trace_id": "00000000000000000000000000000002", "queue_s": 0.0')  # a crash tore it
    df = load_run(tmp_path).requests
    assert df["server_queue_s"].notna().sum() == 1 and df["server_queue_s"].max() == pytest.approx(0.01)


def test_a_line_that_is_not_a_span_and_a_negative_or_non_numeric_attribute_fill_nothing(tmp_path: Path) -> None:
    records = [_record(1), _record(2)]
    _run(tmp_path, records, [])
    lines = [b"[1, 2]", b"5", b"null", b'{"trace_id": {"a": 1}}']
    lines.append(
        b'{"trace_id": "%032x", "queue_s": -0.5, "prefill_s": "0.02", "decode_s": 0.3, "output_tokens": -4}' % 1
    )
    lines.append(b'{"trace_id": "%032x", "queue_s": 0.01, "prefill_s": 0.02, "ttft_s": -1.0}' % 2)
    (tmp_path / SPANS_FILE).write_bytes(b"\n".join(lines) + b"\n")
    df = load_run(tmp_path).requests
    row = {int(k): i for i, k in enumerate(df["trace_id"])}
    first, second = df.iloc[row[string_key(f"{1:032x}")]], df.iloc[row[string_key(f"{2:032x}")]]
    assert math.isnan(first["server_queue_s"]) and math.isnan(first["server_ttft_s"])  # no made-up queue or prefill
    assert first["server_decode_s"] == pytest.approx(0.3) and math.isnan(first["overhead_s"])
    assert first["server_itl_s"] == pytest.approx(0.3 / 8)  # the record's own 9 tokens, not the span's -4
    assert second["overhead_s"] == pytest.approx(0.200 - 0.01 - 0.02)
    assert math.isnan(second["server_frontend_s"])  # a negative arrival -> first token is no front end
