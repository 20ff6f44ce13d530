"""Live client-side metrics for Prometheus (``--metrics-port``): what the load generator measured,
beside vLLM's own ``/metrics`` and the GPU sidecar's, for watching long runs in Grafana.

Served by the master (or a local runner) from every record it stores — workers' included — so
the series are aggregated over the whole run. Latency histograms are kept as numpy bucket
counts per (metric, workload): a record's ITL gaps are added with one ``searchsorted``/``bincount``
instead of one ``observe()`` per gap (hundreds per request), so the exporter costs the event loop
that reads the streams microseconds per request.

Series (names in ``tokenstorm/workloads/rundir/series.py``), per ``workload``: TTFT, ITL, TPOT, E2E, send-lag,
time-to-first-tool-call and complete-tool-call histograms (successful requests), output tokens, requests by
outcome and category, prompt tokens by prefix cache (hit, miss, unreported: the records' hit rate is
hit / (hit + miss)), tool calls and their argument tokens, answer checks by check and result (``pass`` /
``fail``: a check's pass rate is pass / (pass + fail)); where the time went, per ``workload`` and ``target``:
the server's queue, TTFT (prefill), decode and ITL from its own timing of each request, and the overhead outside
the engine (overhead + queue + server TTFT = TTFT); and users, each load generator's CPU.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ...rundir.series import (
    CHECKS,
    CLIENT_CPU,
    HISTOGRAMS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    REQUESTS,
    SERVER_HISTOGRAMS,
    SERVER_ITL,
    TOOL_CALL_TOKENS,
    TOOL_CALLS,
    USERS,
)
from ...rundir.wire import itl_gaps_s, null_filled

__all__ = ["FIELDS", "HISTOGRAMS", "LATENCY_BUCKETS_S", "SERVER_HISTOGRAMS", "ClientMetrics", "serve"]

#: Upper bounds (seconds) of every latency histogram: vLLM's TTFT buckets, denser below 100 ms.
LATENCY_BUCKETS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.03,
    0.04,
    0.05,
    0.06,
    0.075,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_BOUNDS = np.array(LATENCY_BUCKETS_S)
#: the record fields the exporter reads
FIELDS = (
    "workload",
    "ok",
    "error_category",
    "warmup",
    "output_tokens",
    "prompt_tokens",
    "cached_tokens",
    "tool_calls",
    "tool_call_tokens",
    "check_results",
    "target",
    *(field for field, _ in (*HISTOGRAMS.values(), *SERVER_HISTOGRAMS.values())),
)


class _Hist:
    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = np.zeros(len(_BOUNDS) + 1, dtype=np.int64)  # the last: above every bound (+Inf)
        self.total = 0.0

    def add(self, values: Any) -> None:
        arr = np.asarray(values, dtype=np.float64)
        if arr.size:
            # le semantics: a value equal to a bound counts in that bucket
            self.counts += np.bincount(np.searchsorted(_BOUNDS, arr, side="left"), minlength=len(self.counts))
            self.total += float(arr.sum())

    def add_weighted(self, values: np.ndarray, times: np.ndarray) -> None:
        """Each of ``values`` observed its ``times`` times (requests' mean gaps, once per gap)."""
        if values.size:
            index = np.searchsorted(_BOUNDS, values, side="left")
            self.counts += np.bincount(index, weights=times, minlength=len(self.counts)).astype(np.int64)
            self.total += float((values * times).sum())

    def add_repeated(self, value: float, times: int) -> None:
        """``value`` observed ``times`` times (a request's mean gap, once per gap)."""
        self.counts[int(np.searchsorted(_BOUNDS, value, side="left"))] += times
        self.total += value * times


class ClientMetrics(Collector):
    """Bucket counts and counters of every record stored, exposed as Prometheus metric families."""

    def __init__(self, users: Callable[[], int] | None = None, cpu: Callable[[], dict[str, float]] | None = None):
        self._lock = threading.Lock()
        self._hists: dict[tuple[str, str], _Hist] = {}
        self._server: dict[tuple[str, str, str], _Hist] = {}  # (histogram, workload, target)
        self._tokens: dict[str, float] = {}
        self._requests: dict[tuple[str, str, str], float] = {}
        self._prompt: dict[tuple[str, str], float] = {}  # (workload, cache: hit, miss, unreported)
        self._tool_calls: dict[str, float] = {}
        self._tool_tokens: dict[str, float] = {}
        self._checks: dict[tuple[str, str, str], float] = {}  # (workload, check, result)
        self._users = users
        self._cpu = cpu

    def observe(self, record: dict[str, Any]) -> None:
        """Count one record (a decoded ``requests.jsonl`` line, or ``RequestRecord`` fields); warm-up
        requests are left out, as the report leaves them out of its judgement."""
        if record.get("warmup"):
            return
        workload = str(record.get("workload") or "")
        category = record.get("error_category")
        outcome = "ok" if record.get("ok") else "cancelled" if category == "cancelled" else "error"
        with self._lock:
            key = (workload, outcome, str(category or ""))
            self._requests[key] = self._requests.get(key, 0.0) + 1
            if outcome != "ok":
                return
            self._tokens[workload] = self._tokens.get(workload, 0.0) + float(record.get("output_tokens") or 0)
            self._count_prompt(workload, record)
            results = record.get("check_results")
            if results:  # "needle:pass,script:fail": every check that applied to the answer
                for part in str(results).split(","):
                    name, _, result = part.rpartition(":")
                    if name:
                        check_key = (workload, name, "pass" if result == "pass" else "fail")
                        self._checks[check_key] = self._checks.get(check_key, 0.0) + 1
            if record.get("tool_calls"):
                self._tool_calls[workload] = self._tool_calls.get(workload, 0.0) + float(record["tool_calls"])
                tokens = float(record.get("tool_call_tokens") or 0)
                self._tool_tokens[workload] = self._tool_tokens.get(workload, 0.0) + tokens
            for name, (field, _help) in HISTOGRAMS.items():
                value = record.get(field)
                if value is None or (isinstance(value, list) and not value):
                    continue
                hist = self._hists.get((name, workload))
                if hist is None:
                    hist = self._hists[(name, workload)] = _Hist()
                hist.add(value if isinstance(value, list) else [value])
            self._count_server_timing(workload, record)

    def observe_batch(self, batch: pa.RecordBatch) -> None:
        """Count a shipped batch of records (:mod:`tokenstorm.workloads.rundir.wire`) — what :meth:`observe` does for
        each
        record, from the batch's columns."""
        warm = null_filled(batch, "warmup", False).astype(bool)
        if warm.any():
            batch = batch.filter(pa.array(~warm))
        if not batch.num_rows:
            return
        workload = pc.fill_null(batch.column("workload"), "").dictionary_encode()
        names, wi = workload.dictionary.to_pylist(), workload.indices.to_numpy().astype(np.int64)
        category = pc.fill_null(batch.column("error_category"), "").dictionary_encode()
        cats, ci = category.dictionary.to_pylist(), category.indices.to_numpy().astype(np.int64)
        ok = null_filled(batch, "ok", False).astype(bool)
        cancelled = np.asarray(cats, dtype=object)[ci] == "cancelled" if cats else np.zeros(len(ok), dtype=bool)
        outcome = np.where(ok, 0, np.where(cancelled, 2, 1))
        codes, counts = np.unique((wi * 3 + outcome) * len(cats) + ci, return_counts=True)
        with self._lock:
            for code, n in zip(codes.tolist(), counts.tolist(), strict=True):
                w, rest = divmod(code, 3 * len(cats))
                key = (names[w], _OUTCOMES[rest // len(cats)], str(cats[rest % len(cats)]))
                self._requests[key] = self._requests.get(key, 0.0) + n
            for w, name in enumerate(names):
                mine = (wi == w) & ok
                if mine.any():
                    self._count_ok_batch(name, batch, mine)

    def _count_ok_batch(self, workload: str, batch: pa.RecordBatch, mine: np.ndarray) -> None:
        """:meth:`ClientMetrics.observe`'s counts of a batch's successful records of ``workload`` (``mine``)."""
        tokens_ok = float(null_filled(batch, "output_tokens", 0)[mine].sum())
        self._tokens[workload] = self._tokens.get(workload, 0.0) + tokens_ok
        prompt = null_filled(batch, "prompt_tokens", 0)[mine].astype(np.float64)
        cached = _floats(batch, "cached_tokens")[mine]
        unreported = np.isnan(cached)
        parts = {}
        if unreported.any():
            parts["unreported"] = float(prompt[unreported].sum())
        if not unreported.all():
            hit = np.minimum(cached[~unreported], prompt[~unreported])
            parts["hit"] = float(hit.sum())
            parts["miss"] = float(np.maximum(0.0, prompt[~unreported] - cached[~unreported]).sum())
        for cache, n in parts.items():
            self._prompt[(workload, cache)] = self._prompt.get((workload, cache), 0.0) + n
        results = pc.filter(batch.column("check_results"), pa.array(mine))
        for item in pc.value_counts(results).to_pylist():  # "needle:pass,script:fail": few distinct ones
            for part in str(item["values"] or "").split(",") if item["values"] else ():
                name, _, result = part.rpartition(":")
                if name:
                    key = (workload, name, "pass" if result == "pass" else "fail")
                    self._checks[key] = self._checks.get(key, 0.0) + item["counts"]
        calls = null_filled(batch, "tool_calls", 0)[mine].astype(np.float64)
        if calls.any():
            self._tool_calls[workload] = self._tool_calls.get(workload, 0.0) + float(calls.sum())
            tokens = null_filled(batch, "tool_call_tokens", 0)[mine][calls != 0].astype(np.float64)
            self._tool_tokens[workload] = self._tool_tokens.get(workload, 0.0) + float(tokens.sum())
        for name, (field, _help) in HISTOGRAMS.items():
            if field == "itl_gaps_s":
                offsets, gaps = itl_gaps_s(batch)
                values = gaps[np.repeat(mine, np.diff(offsets))]
            else:
                values = _floats(batch, field)[mine]
                values = values[~np.isnan(values)]
            if values.size:
                self._hists.setdefault((name, workload), _Hist()).add(values)
        target = pc.fill_null(batch.column("target"), "").to_numpy(zero_copy_only=False)[mine]
        times_itl = null_filled(batch, "output_tokens", 0)[mine].astype(np.int64) - 1
        for name, (field, _help) in SERVER_HISTOGRAMS.items():
            values = _floats(batch, field)[mine]
            times = times_itl if name == SERVER_ITL else np.ones(len(values), dtype=np.int64)
            use = ~np.isnan(values) & (times >= 1)
            for t in np.unique(target[use]).tolist():
                pick = use & (target == t)
                hist = self._server.setdefault((name, workload, str(t)), _Hist())
                hist.add_weighted(values[pick], times[pick])

    def _count_prompt(self, workload: str, record: dict[str, Any]) -> None:
        """A successful request's prompt tokens, split by what the server found in its prefix cache."""
        prompt = float(record.get("prompt_tokens") or 0)
        cached = record.get("cached_tokens")
        parts = (
            {"unreported": prompt}
            if cached is None
            else {"hit": min(float(cached), prompt), "miss": max(0.0, prompt - float(cached))}
        )
        for cache, n in parts.items():
            self._prompt[(workload, cache)] = self._prompt.get((workload, cache), 0.0) + n

    def _count_server_timing(self, workload: str, record: dict[str, Any]) -> None:
        """A successful request's parts (server queue, TTFT, decode, ITL; overhead), where the server timed it."""
        target = str(record.get("target") or "")
        for name, (field, _help) in SERVER_HISTOGRAMS.items():
            value = record.get(field)
            if value is None:
                continue
            times = 1
            if name == SERVER_ITL:  # token-weighted, as vLLM's own inter-token histogram
                times = int(record.get("output_tokens") or 0) - 1
                if times < 1:
                    continue
            hist = self._server.get((name, workload, target))
            if hist is None:
                hist = self._server[(name, workload, target)] = _Hist()
            hist.add_repeated(float(value), times)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            hists = {k: (h.counts.copy(), h.total) for k, h in self._hists.items()}
            server = {k: (h.counts.copy(), h.total) for k, h in self._server.items()}
            tokens = dict(self._tokens)
            requests = dict(self._requests)
            prompt = dict(self._prompt)
            tool_calls, tool_tokens = dict(self._tool_calls), dict(self._tool_tokens)
            checks = dict(self._checks)
        for name, (_field, help_text) in HISTOGRAMS.items():
            family = HistogramMetricFamily(name, help_text, labels=["workload"])
            for (metric, workload), (counts, total) in sorted(hists.items()):
                if metric != name:
                    continue
                family.add_metric([workload], _buckets(counts), total)
            yield family
        for name, (_field, help_text) in SERVER_HISTOGRAMS.items():
            family = HistogramMetricFamily(name, help_text, labels=["workload", "target"])
            for (metric, workload, target), (counts, total) in sorted(server.items()):
                if metric == name:
                    family.add_metric([workload, target], _buckets(counts), total)
            yield family
        out = CounterMetricFamily(OUTPUT_TOKENS, "Output tokens of successful requests", labels=["workload"])
        for workload, n in sorted(tokens.items()):
            out.add_metric([workload], n)
        yield out
        req = CounterMetricFamily(
            REQUESTS,
            "Requests by outcome (ok, error, cancelled) and category",
            labels=["workload", "outcome", "category"],
        )
        for (workload, outcome, category), n in sorted(requests.items()):
            req.add_metric([workload, outcome, category], n)
        yield req
        prompt_family = CounterMetricFamily(
            PROMPT_TOKENS,
            "Prompt tokens of successful requests, by prefix cache: "
            "hit, miss, or unreported (no cached_tokens in the usage)",
            labels=["workload", "cache"],
        )
        for (workload, cache), n in sorted(prompt.items()):
            prompt_family.add_metric([workload, cache], n)
        yield prompt_family
        for name, help_text, per_workload in (
            (TOOL_CALLS, "Tool calls streamed by successful requests", tool_calls),
            (TOOL_CALL_TOKENS, "Argument tokens of those tool calls", tool_tokens),
        ):
            counter = CounterMetricFamily(name, help_text, labels=["workload"])
            for workload, n in sorted(per_workload.items()):
                counter.add_metric([workload], n)
            yield counter
        checked = CounterMetricFamily(
            CHECKS,
            "Answer checks of successful requests, by check and result (pass, fail)",
            labels=["workload", "check", "result"],
        )
        for (workload, name, result), n in sorted(checks.items()):
            checked.add_metric([workload, name, result], n)
        yield checked
        if self._users is not None:
            yield GaugeMetricFamily(USERS, "Simulated users running now", value=float(self._users()))
        if self._cpu is not None:
            cpu = GaugeMetricFamily(CLIENT_CPU, "Each load generator's own CPU % (100 = a core)", labels=["worker"])
            for worker, pct in sorted(self._cpu().items()):
                cpu.add_metric([worker], pct)
            yield cpu


_OUTCOMES = ("ok", "error", "cancelled")


def _floats(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """Column ``name`` as float64, nulls as NaN."""
    return np.asarray(pc.fill_null(pc.cast(batch.column(name), pa.float64()), np.nan), dtype=np.float64)


def _buckets(counts: Any) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs of a histogram's bucket counts, +Inf last."""
    cumulative = np.cumsum(counts)
    buckets = [(repr(float(b)), float(c)) for b, c in zip(LATENCY_BUCKETS_S, cumulative[:-1], strict=True)]
    buckets.append(("+Inf", float(cumulative[-1])))
    return buckets


def serve(metrics: ClientMetrics, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``metrics`` at ``http://host:port/metrics``; returns the server (``.shutdown()`` stops it)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
