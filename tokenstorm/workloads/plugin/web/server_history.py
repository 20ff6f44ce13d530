"""The monitors' samples of the run, read as the monitor processes append them: the GPU tab's
(``gpu.jsonl``: :class:`GpuHistory`, :func:`latest_gpus`) and the vLLM server's (``server.jsonl``)
for the web UI's vLLM tab: its table (the newest sample of each target) and its charts over time
(requests running and waiting, KV-cache usage in %, prefix-cache hit rate in %, preemptions).
The hit rate charted is of the ``POINT_WINDOW_S`` seconds before each sample, as the LLM charts'
points: hits over queries summed over that window (one second's few queries swung it 0-95%).

The files stay in the run directory after the run, so the vLLM and GPU tabs keep the run's samples
after Stop (the monitor process is gone by then; its in-memory latest sample with it).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...rundir import LoadSample
from .live import MAX_POINTS, POINT_WINDOW_S, SLO_WINDOW_S

__all__ = [
    "GPU_SERIES",
    "SERVER_SERIES",
    "GpuHistory",
    "JsonlTail",
    "LoadHistory",
    "ServerHistory",
    "WindowedRatio",
    "latest_gpus",
    "server_row",
]

#: the vLLM tab's chart series, per target
SERVER_SERIES = ("running", "waiting", "kv_cache_pct", "prefix_hit_pct", "preemptions")
#: at most this much of server.jsonl is read (and parsed) per poll: ~500 lines of ~2 KB, about what the charts
#: keep (MAX_POINTS). The poll runs in the master's event loop, beside the reads being timed on a local
#: runner: the first look at a run hours old must not parse 8 MB there (~4,000 json.loads).
_TAIL_BYTES = 1 << 20
_GPU_TAIL_BYTES = 16384  # the GPU table's newest samples (a line per GPU per interval, ~300 bytes)
_LOAD_TAIL_BYTES = 1 << 20  # load.jsonl: a line a second of ~300 bytes per load generator
_GPU_HISTORY_BYTES = 4 << 20  # at most this much of gpu.jsonl is read per poll (~ hours of 8 GPUs at 1 Hz)
#: the GPU tab's chart series, per GPU
GPU_SERIES = ("util_gpu_pct", "mem_used_mib", "power_w")


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


class JsonlTail:
    """Follows a JSON-lines file a monitor process appends to: each :meth:`new_lines` returns the
    complete lines added since the last call, at most ``max_bytes`` of them (the first look, which
    may come hours into a run, reads only the file's tail; a line cut there is dropped)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.path: Path | None = None
        self._offset = 0
        self._partial = b""

    def follow(self, path: Path | None) -> bool:
        """Follow ``path`` from now on; True when it is another file than before (start afresh)."""
        if path == self.path:
            return False
        self.path, self._offset, self._partial = path, 0, b""
        return True

    def new_lines(self) -> list[bytes]:
        """The complete lines added since the last call (none when the file cannot be read)."""
        if self.path is None:
            return []
        cut = False
        try:
            with self.path.open("rb") as fh:
                if self._offset == 0:
                    size = fh.seek(0, 2)
                    self._offset, cut = max(0, size - self.max_bytes), size > self.max_bytes
                fh.seek(self._offset)
                chunk = fh.read(self.max_bytes)
        except OSError:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # a line being written right now (or b"")
        return lines[1:] if cut else lines  # a cut first line is no sample


class GpuHistory:
    """The GPU samples of the run (``gpu.jsonl``), read as the monitor process appends them:
    each poll reads only the bytes added since the last one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tail = JsonlTail(_GPU_HISTORY_BYTES)
        self._gpus: dict[str, dict[str, list[float | None]]] = {}
        self._min_gap_s: dict[str, float] = {}

    def read(self, path: Path | None) -> dict[str, dict[str, list[float | None]]]:
        """Per GPU (``"GPU 0"``, ``"host GPU 0"``): ``t`` and one list per series in ``GPU_SERIES``."""
        with self._lock:
            if self._tail.follow(path):
                self._gpus, self._min_gap_s = {}, {}
            self._add(self._tail.new_lines())
            return {g: {k: list(v) for k, v in s.items()} for g, s in sorted(self._gpus.items())}

    def _add(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict) or row.get("gap") or "gpu" not in row:
                continue
            name = f"{row.get('host')} GPU {row['gpu']}" if row.get("host") else f"GPU {row['gpu']}"
            gpu = self._gpus.setdefault(name, {"t": [], **{k: [] for k in GPU_SERIES}})
            t = float(row.get("epoch_s") or 0.0)
            if gpu["t"] and t < (gpu["t"][-1] or 0.0) + self._min_gap_s.get(name, 0.0):
                continue
            gpu["t"].append(t)
            for k in GPU_SERIES:
                value = row.get(k)
                gpu[k].append(round(float(value), 2) if isinstance(value, (int, float)) else None)
            if len(gpu["t"]) > MAX_POINTS:  # as the LLM points: every other one, and as sparse from now on
                for k in gpu:
                    gpu[k] = gpu[k][::2]
                span_s = (gpu["t"][-1] or 0.0) - (gpu["t"][0] or 0.0)
                self._min_gap_s[name] = 2 * span_s / MAX_POINTS


class LoadHistory:
    """The load generators' timekeeping samples of the last ``window_s`` seconds (``load.jsonl``, a
    line a second), for the live timing fidelity: what held them back over the window it judges, not
    in its newest second alone (a cause seen one second in two made the status flip every poll)."""

    def __init__(self, window_s: float = SLO_WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._tail = JsonlTail(_LOAD_TAIL_BYTES)
        self._samples: deque[LoadSample] = deque()

    def read(self, path: Path | None, now: float) -> list[LoadSample]:
        """The samples of ``path`` taken in the ``window_s`` seconds up to ``now`` (epoch s)."""
        with self._lock:
            if self._tail.follow(path):
                self._samples.clear()
            for line in self._tail.new_lines():
                sample = _load_sample(line)
                if sample is not None:
                    self._samples.append(sample)
            while self._samples and self._samples[0].epoch_s < now - self.window_s:
                self._samples.popleft()
            return [s for s in self._samples if s.epoch_s <= now]


def _load_sample(line: bytes) -> LoadSample | None:
    try:
        row = json.loads(line)
        clock = {
            str(w): {str(k): _num(v) for k, v in figures.items()} for w, figures in (row.get("clock") or {}).items()
        }
        cpu = {str(w): float(v) for w, v in (row.get("cpu") or {}).items() if _num(v) is not None}
        return LoadSample(float(row["epoch_s"]), int(row.get("users") or 0), cpu, clock)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class WindowedRatio:
    """A per-second ratio smoothed over a sliding window: the sum of the numerators over the sum of
    the denominators of the intervals that ended in the last ``window_s`` seconds — a ratio of sums,
    so a second of 1 query weighs 1 query, not as much as a second of 1,000 (a mean of ratios)."""

    def __init__(self, window_s: float = POINT_WINDOW_S) -> None:
        self.window_s = window_s
        self._parts: deque[tuple[float, float, float]] = deque()
        self._num = 0.0
        self._den = 0.0

    def add(self, t: float, numerator: float | None, denominator: float | None) -> float | None:
        """Count the interval that ended at ``t`` (epoch s; None parts: not counted); the ratio in %
        over the window ending at ``t`` (None: no denominator in it)."""
        if numerator is not None and denominator is not None:
            self._parts.append((t, numerator, denominator))
            self._num, self._den = self._num + numerator, self._den + denominator
        while self._parts and self._parts[0][0] <= t - self.window_s:
            _, num, den = self._parts.popleft()
            self._num, self._den = self._num - num, self._den - den
        if not self._parts:
            self._num = self._den = 0.0  # (no float residue once the window is empty)
            return None
        return round(100 * self._num / self._den, 2) if self._den > 0 else None


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
        self._hit_rate: dict[str, WindowedRatio] = {}

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
            self._series, self._first, self._last, self._min_gap_s, self._hit_rate = {}, {}, {}, {}, {}
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
            # What the cache does now: the hits over the queries of the window before this sample
            # (every interval counts, also those of samples the chart skips below).
            queries = _delta(_num(row.get("prefix_cache_queries")), _num((before or {}).get("prefix_cache_queries")))
            hits = _delta(_num(row.get("prefix_cache_hits")), _num((before or {}).get("prefix_cache_hits")))
            hit_pct = self._hit_rate.setdefault(target, WindowedRatio()).add(t, hits, queries)
            if series["t"] and t < (series["t"][-1] or 0.0) + self._min_gap_s.get(target, 0.0):
                continue
            point = server_row(row, first)
            point["prefix_hit_pct"] = hit_pct
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
