"""The vLLM server samples of the run (``server.jsonl``), read as the monitor process appends them,
for the web UI's vLLM tab: its table (the newest sample of each target) and its charts over time
(requests running and waiting, KV-cache usage in %, prefix-cache hit rate in %, preemptions).

The files stay in the run directory after the run, so the vLLM and GPU tabs keep the run's samples
after Stop (the monitor process is gone by then; its in-memory latest sample with it).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from .live import MAX_POINTS, JsonlTail

__all__ = ["SERVER_SERIES", "ServerHistory", "latest_gpus", "server_row"]

#: the vLLM tab's chart series, per target
SERVER_SERIES = ("running", "waiting", "kv_cache_pct", "prefix_hit_pct", "preemptions")
#: at most this much of server.jsonl is read (and parsed) per poll: ~500 lines of ~2 KB, about what the charts
#: keep (MAX_POINTS). The poll runs in the master's event loop, beside the reads being timed on a local
#: runner: the first look at a run hours old must not parse 8 MB there (~4,000 json.loads).
_TAIL_BYTES = 1 << 20
_GPU_TAIL_BYTES = 16384  # the GPU table's newest samples (a line per GPU per interval, ~300 bytes)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _delta(now: float | None, before: float | None) -> float | None:
    """A counter's increase (None when either side is missing; a server restart counts from 0)."""
    if now is None or before is None:
        return None
    return now - before if now >= before else now


def server_row(sample: dict[str, Any], first: dict[str, Any] | None) -> dict[str, Any]:
    """The vLLM table's row of one sample: gauges as they are, KV cache in %, and the counters
    since the run's first sample of the same target (``first``)."""
    first = first or sample
    kv = _num(sample.get("kv_cache_usage"))
    queries = _delta(_num(sample.get("prefix_cache_queries")), _num(first.get("prefix_cache_queries")))
    hits = _delta(_num(sample.get("prefix_cache_hits")), _num(first.get("prefix_cache_hits")))
    return {
        "target": str(sample.get("target") or ""),
        "running": _num(sample.get("running")),
        "waiting": _num(sample.get("waiting")),
        "kv_cache_pct": None if kv is None else round(kv * 100, 2),
        "prefix_hit_pct": round(100 * hits / queries, 2) if queries and hits is not None else None,
        "preemptions": _delta(_num(sample.get("preemptions")), _num(first.get("preemptions"))),
        "generation_tokens": _delta(_num(sample.get("generation_tokens")), _num(first.get("generation_tokens"))),
    }


class ServerHistory:
    """Per target (its ``--targets`` label, ``""`` in a one-target run): ``t`` (epoch s) and one list per
    series in :data:`SERVER_SERIES`; each poll reads only the bytes added since the last one (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tail = JsonlTail(_TAIL_BYTES)
        self._series: dict[str, dict[str, list[float | None]]] = {}
        self._first: dict[str, dict[str, Any]] = {}
        self._last: dict[str, dict[str, Any]] = {}
        self._min_gap_s: dict[str, float] = {}

    def read(self, path: Path | None) -> dict[str, dict[str, list[float | None]]]:
        """The series of the run whose ``server.jsonl`` is ``path`` (a new path starts afresh)."""
        with self._lock:
            self._catch_up(path)
            return {t: {k: list(v) for k, v in s.items()} for t, s in sorted(self._series.items())}

    def latest_rows(self, path: Path | None) -> list[dict[str, Any]]:
        """The vLLM table: one row per target, of its newest sample (:func:`server_row`)."""
        with self._lock:
            self._catch_up(path)
            return [server_row(self._last[t], self._first.get(t)) for t in sorted(self._last)]

    def _catch_up(self, path: Path | None) -> None:
        if self._tail.follow(path):
            self._series, self._first, self._last, self._min_gap_s = {}, {}, {}, {}
        self._add(self._tail.new_lines())

    def _add(self, lines: list[bytes]) -> None:
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict) or row.get("gap") or _num(row.get("epoch_s")) is None:
                continue
            target = str(row.get("target") or "")
            first = self._first.setdefault(target, row)
            before = self._last.get(target)
            self._last[target] = row
            series = self._series.setdefault(target, {"t": [], **{k: [] for k in SERVER_SERIES}})
            t = float(row["epoch_s"])
            if series["t"] and t < (series["t"][-1] or 0.0) + self._min_gap_s.get(target, 0.0):
                continue
            point = server_row(row, first)
            # The hit rate of the interval since the previous sample: what the cache does now.
            queries = _delta(_num(row.get("prefix_cache_queries")), _num((before or {}).get("prefix_cache_queries")))
            hits = _delta(_num(row.get("prefix_cache_hits")), _num((before or {}).get("prefix_cache_hits")))
            point["prefix_hit_pct"] = None
            if before is not None and queries and hits is not None:
                point["prefix_hit_pct"] = round(100 * hits / queries, 2)
            series["t"].append(t)
            for k in SERVER_SERIES:
                series[k].append(point[k])
            if len(series["t"]) > MAX_POINTS:  # as the LLM points: every other one, and as sparse from now on
                for k in series:
                    series[k] = series[k][::2]
                span_s = (series["t"][-1] or 0.0) - (series["t"][0] or 0.0)
                self._min_gap_s[target] = 2 * span_s / MAX_POINTS


def latest_gpus(path: Path) -> list[dict[str, Any]]:
    """The newest sample of each GPU in ``gpu.jsonl`` (its tail): what the GPU table shows, during
    the run and after it (the file stays; the monitor process does not)."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - _GPU_TAIL_BYTES))
            lines = fh.read().split(b"\n")
    except OSError:
        return []
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for line in lines[1:] if size > _GPU_TAIL_BYTES else lines:  # a cut first line is no sample
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "gpu" in row and not row.get("gap"):
            newest[(str(row.get("host") or ""), str(row["gpu"]))] = row
    return [newest[k] for k in sorted(newest, key=lambda k: (k[0], int(k[1]) if k[1].isdigit() else -1, k[1]))]
