"""The OTLP/HTTP receiver (--otlp-port) over real HTTP: vLLM's ``llm_request`` spans, protobuf-encoded with
opentelemetry-proto's classes, land in the run's spans.jsonl before the answer; anything else gets a plain status."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.conftest import ROOT
from tests.fakes.otlp_spans import export_body, llm_request_span, post
from tokenstorm.workloads.rundir import SPANS_FILE
from tokenstorm.workloads.rundir.spans import read_spans

T1, T2, T3 = "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b700f067aa0ba902b7"

# In a process of its own, as tokenstorm runs it: importing Locust patches the standard library. Each line on its
# stdin names the run directory its spans go to from then on ("-": none); it answers "open" when it has switched.
_SCRIPT = """
import logging, sys
from pathlib import Path
import gevent
from gevent.fileobject import FileObject
from tokenstorm.workloads.plugin.core.otlp import OtlpReceiver

logging.basicConfig(level=logging.INFO, format="%(message)s")
receiver = OtlpReceiver("127.0.0.1", 0)
print(receiver.port, flush=True)
for line in FileObject(sys.stdin.fileno(), "r"):
    if line.strip() == "-":
        receiver.close_run()
    else:
        receiver.open_run(Path(line.strip()))
    print("open", flush=True)
receiver.stop()
"""


class Receiver:
    """The receiver in its own process: ``url``, and :meth:`open_run` as the plugin calls it at a run's start."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def url(self, path: str = "/v1/traces") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def open_run(self, run_dir: Path | None) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{run_dir or '-'}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "open"

    def stop(self) -> str:
        """Stop it; what it said on stderr."""
        _, err = self.proc.communicate(timeout=30)
        return err


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        if r.proc.poll() is None:
            r.stop()


@pytest.mark.parametrize("gzipped", [False, True])
def test_llm_request_spans_are_on_disk_when_the_export_is_answered(
    receiver: Receiver, tmp_path: Path, gzipped: bool
) -> None:
    receiver.open_run(tmp_path)
    body = export_body(
        llm_request_span(
            T1, 1_700_000_000.25, queue_s=0.120, frontend_s=0.004, prefill_s=0.030, decode_s=0.5, output_tokens=11
        ),
        llm_request_span(T3, 1_700_000_000.0, 0.1, 0.1, 0.1, 0.1, 2, name="chat_template"),  # not vLLM's request
        llm_request_span(
            T2, 1_700_000_001.0, queue_s=0.0, frontend_s=0.002, prefill_s=0.010, decode_s=0.0, output_tokens=1
        ),
    )
    status, ctype, answer = post(receiver.url(), body, gzipped=gzipped)
    assert (status, ctype) == (200, "application/x-protobuf")
    ExportTraceServiceResponse().ParseFromString(answer)  # an empty ExportTraceServiceResponse, as OTLP says
    lines = (tmp_path / SPANS_FILE).read_text().splitlines()  # pushed before the answer: no flush needed
    assert len(lines) == 2
    first, second = read_spans(tmp_path / SPANS_FILE)
    assert first.trace_id == T1 and second.trace_id == T2
    assert first.start_epoch_s == pytest.approx(1_700_000_000.25, abs=1e-6)
    assert first.end_epoch_s == pytest.approx(1_700_000_000.25 + 0.654, abs=1e-6)
    assert (first.queue_s, first.prefill_s, first.decode_s) == (0.120, 0.030, 0.5)
    assert first.ttft_s == pytest.approx(0.154) and first.e2e_s == pytest.approx(0.654)
    assert (first.output_tokens, first.prompt_tokens, first.request_id) == (11, 12, f"chatcmpl-{T1[:8]}")
    assert json.loads(lines[1])["output_tokens"] == 1


def test_what_is_not_an_otlp_protobuf_export_gets_a_plain_status_and_no_traceback(
    receiver: Receiver, tmp_path: Path
) -> None:
    receiver.open_run(tmp_path)
    json_body = json.dumps({"resourceSpans": []}).encode()
    assert post(receiver.url(), json_body, content_type="application/json")[0] == 415
    assert post(receiver.url(), json_body, content_type="application/json")[0] == 415
    assert post(receiver.url(), b"\x1f\x8b garbage", content_type="text/plain")[0] == 415
    status, ctype, text = post(receiver.url(), b"not protobuf at all \xff\xff")
    assert status == 400 and ctype.startswith("text/plain") and b"protobuf" in text
    assert post(receiver.url(), b"\x1f\x8b\x08 torn", gzipped=True)[0] == 400  # gzip of garbage
    assert post(receiver.url("/v1/metrics"), export_body())[0] == 404
    assert post(receiver.url(), b"", method="GET")[0] == 405
    # and it still takes a good export
    good = export_body(llm_request_span(T1, 1_700_000_000.0, 0.01, 0.002, 0.02, 0.2, 5))
    assert post(receiver.url(), good)[0] == 200
    assert [s.trace_id for s in read_spans(tmp_path / SPANS_FILE)] == [T1]
    said = receiver.stop()
    assert "Traceback" not in said
    # a JSON exporter is told once, in one line, what to set
    told = [line for line in said.splitlines() if "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf" in line]
    assert len(told) == 1, said


def test_each_run_keeps_its_own_spans_and_none_are_kept_between_runs(receiver: Receiver, tmp_path: Path) -> None:
    body = export_body(llm_request_span(T1, 1_700_000_000.0, 0.01, 0.002, 0.02, 0.2, 5))
    assert post(receiver.url(), body)[0] == 200  # no run open yet: answered, not kept
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    receiver.open_run(first)
    post(receiver.url(), body)
    receiver.open_run(second)
    post(receiver.url(), export_body(llm_request_span(T2, 1_700_000_000.0, 0.01, 0.002, 0.02, 0.2, 5)))
    receiver.open_run(None)
    post(receiver.url(), body)  # after the last run closed: answered, not kept
    assert [s.trace_id for s in read_spans(first / SPANS_FILE)] == [T1]
    assert [s.trace_id for s in read_spans(second / SPANS_FILE)] == [T2]
