"""The server's own spans of a run: vLLM's ``llm_request`` OpenTelemetry spans, one :class:`ServerSpan` a line in
``spans.jsonl``, written by the OTLP receiver (``--otlp-port``) as they arrive and joined to the request records by
trace id when a report reads them (:mod:`.span_join`).

vLLM (0.32, ``--otlp-traces-endpoint``) ends a request's span when the request finishes; its start is the
request's arrival at the server, and its ``gen_ai.latency.*`` attributes are seconds:

- ``time_in_queue``: queued → scheduled (the scheduler's queue)
- ``time_to_first_token``: *arrival* → first token (the front end — HTTP, chat template, tokenisation — included)
- ``time_in_model_prefill``: scheduled → first token
- ``time_in_model_decode``: first → last token
- ``e2e``: arrival → finished
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

from .faults import AppendFile

__all__ = ["LLM_REQUEST_SPAN", "SPAN_ATTRIBUTES", "ServerSpan", "SpanWriter", "read_spans"]

#: the name of vLLM's per-request span
LLM_REQUEST_SPAN = "llm_request"
#: ServerSpan field -> the span attribute it is read from (vLLM's ``SpanAttributes``)
SPAN_ATTRIBUTES = {
    "queue_s": "gen_ai.latency.time_in_queue",
    "ttft_s": "gen_ai.latency.time_to_first_token",
    "prefill_s": "gen_ai.latency.time_in_model_prefill",
    "decode_s": "gen_ai.latency.time_in_model_decode",
    "e2e_s": "gen_ai.latency.e2e",
    "prompt_tokens": "gen_ai.usage.prompt_tokens",
    "output_tokens": "gen_ai.usage.completion_tokens",
    "request_id": "gen_ai.request.id",
}


@dataclass
class ServerSpan:
    """One request as the server traced it (seconds; ``None``: the span did not carry that attribute)."""

    #: the W3C trace id (32 lowercase hex digits): the request's ``traceparent``, its record's ``trace_id``
    trace_id: str
    #: the request's arrival at the server (the span's start), and the span's end (the request finished)
    start_epoch_s: float
    end_epoch_s: float
    #: queued → scheduled
    queue_s: float | None = None
    #: arrival → first token (vLLM's ``time_to_first_token``; not the record's ``server_ttft_s``)
    ttft_s: float | None = None
    #: scheduled → first token
    prefill_s: float | None = None
    #: first → last token
    decode_s: float | None = None
    #: arrival → finished
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    #: the server's own id of the request
    request_id: str = ""

    def to_json(self) -> bytes:
        """One compact JSON line (no newline)."""
        return orjson.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerSpan:
        """A span from a decoded line, ignoring keys a newer writer added."""
        return cls(**{k: v for k, v in data.items() if k in _FIELD_NAMES})


_FIELD_NAMES = frozenset(f.name for f in fields(ServerSpan))


class SpanWriter:
    """Appends spans to ``spans.jsonl``, each batch pushed to the OS at once (whole lines only: a write that fails
    leaves the file ending on the last whole batch, and :class:`~.faults.WriteFailed` is raised)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: AppendFile | None = None
        self._lock = threading.Lock()
        #: spans written
        self.count = 0

    def write(self, spans: list[ServerSpan]) -> None:
        """Append ``spans`` and push them."""
        if not spans:
            return
        with self._lock:
            if self._fh is None or self._fh.closed:
                self._fh = AppendFile(self.path, "the server's spans")
            self._fh.write(b"".join(s.to_json() + b"\n" for s in spans))
            self._fh.mark(len(spans))
            self._fh.push()
            self.count += len(spans)

    def close(self) -> None:
        """Close the file (a later :meth:`write` opens it again)."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()


def read_spans(path: Path) -> list[ServerSpan]:
    """The spans of a ``spans.jsonl`` (none when it is missing); a line that does not parse (torn by a crash) is
    skipped."""
    out: list[ServerSpan] = []
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return out
    with fh:
        for line in fh:
            try:
                data = orjson.loads(line)
                out.append(ServerSpan.from_dict(data))
            except (orjson.JSONDecodeError, TypeError):
                continue
    return out
