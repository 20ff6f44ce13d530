"""Other tools' result files read as runs for ``reports compare``: ``vllm bench serve --save-result``
JSON and GuideLLM's JSON report (``guidellm run --output kind=json``), recognised by content.

Each is mapped onto ``summary.json``'s names (:mod:`tokenstorm.reports.compare.model`); what a tool does not
write stays absent (shown "—"). Units: ``vllm bench serve`` writes milliseconds under the same
names tokenstorm uses; GuideLLM writes distributions (``mean``, ``median``, ``percentiles.p99``...)
of ``time_to_first_token_ms``, ``inter_token_latency_ms`` (ms) and ``request_latency`` (seconds,
converted), over successful requests.

GuideLLM's names do not mean what vLLM's do (each request of the recorded file has TPOT × tokens =
TTFT + ITL × (tokens − 1), e.g. 21.844 × 32 = 662.0 + 1.193 × 31 ms): its per-request
``inter_token_latency_ms`` is (last token − first token) / (tokens − 1), which is vLLM's and
tokenstorm's **TPOT**, and its ``time_per_output_token_ms`` is the last token's time / tokens, TTFT
included, which nobody else computes — so it is not shown. Its ITL distribution is of those
per-request means, weighted by each request's gaps: its mean is the mean over every gap (tokenstorm's
mean ITL), its percentiles are not of gaps ("—").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenstorm.reports.compare.model import ALL, CLOSED_LOOP, ComparedRun, CompareInputError
from tokenstorm.workloads.rundir.secrets import display_url

__all__ = ["read_foreign"]

#: keys every ``vllm bench serve`` result has (it writes them even with every percentile off)
_VLLM_KEYS = ("completed", "duration", "request_throughput", "output_throughput", "total_input_tokens")
#: GuideLLM distribution name -> (summary.json stem, factor to milliseconds)
_GUIDELLM_LATENCY = (
    ("time_to_first_token_ms", "ttft", 1.0),
    ("inter_token_latency_ms", "tpot", 1.0),  # per request (last - first) / (n - 1): vLLM's TPOT
    ("request_latency", "e2el", 1000.0),  # seconds
)


def read_foreign(path: Path, argument: int) -> list[ComparedRun]:
    """The runs in result file ``path`` (one per benchmark it holds); :class:`CompareInputError`
    when it is neither tool's format."""
    docs = _json_documents(path)
    if all(_is_guidellm(d) for d in docs):
        return [run for d in docs for run in _guidellm_runs(path, argument, d)]
    if all(_is_vllm_bench(d) for d in docs):
        return [_vllm_run(path, argument, d, i if len(docs) > 1 else None) for i, d in enumerate(docs)]
    if all("verdict" in d and "workloads" in d for d in docs):
        raise CompareInputError(f"{path}: a tokenstorm summary.json — give its run directory ({path.parent})")
    raise CompareInputError(
        f"{path}: JSON, but neither a `vllm bench serve --save-result` file (no "
        f"{', '.join(_VLLM_KEYS)}) nor a GuideLLM report (no benchmarks[].metrics)"
    )


def _json_documents(path: Path) -> list[dict[str, Any]]:
    """The JSON object of ``path``, or each line's (``vllm bench serve --append-result`` appends lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CompareInputError(f"{path}: not a text file (expected a JSON result file)") from None
    try:
        docs = [json.loads(text)]
    except json.JSONDecodeError as whole:
        try:
            docs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            where = f"line {whole.lineno} column {whole.colno}"
            raise CompareInputError(f"{path}: not JSON ({where}: {whole.msg})") from None
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise CompareInputError(
            f"{path}: expected a JSON object (a result file), found {type(docs[0]).__name__}"
            if docs
            else f"{path}: empty file"
        )
    return docs


def _is_vllm_bench(doc: dict[str, Any]) -> bool:
    return all(k in doc for k in _VLLM_KEYS) and "verdict" not in doc and "benchmarks" not in doc


def _is_guidellm(doc: dict[str, Any]) -> bool:
    benchmarks = doc.get("benchmarks")
    return (
        isinstance(benchmarks, list)
        and bool(benchmarks)
        and all(isinstance(b, dict) and isinstance(b.get("metrics"), dict) for b in benchmarks)
    )


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and x == x else None


# -- vllm bench serve ---------------------------------------------------------------------------------
def _vllm_run(path: Path, argument: int, doc: dict[str, Any], index: int | None) -> ComparedRun:
    figures: dict[str, Any] = {}
    for key, value in doc.items():
        # the same names and units as summary.json: mean_/median_/std_/pNN_ of ttft/tpot/itl/e2el in ms
        if key.endswith("_ms") and _num(value) is not None:
            figures[key] = float(value)
    for key in (
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "request_goodput",
    ):
        if _num(doc.get(key)) is not None:
            figures[key] = float(doc[key])
    for stem in ("ttft", "tpot", "itl", "e2el"):  # vLLM writes both median_ and p50_; the table reads median_
        if f"median_{stem}_ms" not in figures and f"p50_{stem}_ms" in figures:
            figures[f"median_{stem}_ms"] = figures[f"p50_{stem}_ms"]
    completed, failed = _num(doc.get("completed")), _num(doc.get("failed"))
    if completed is not None and failed is not None and completed + failed:
        figures["error_rate"] = failed / (completed + failed)
    concurrency = doc.get("max_concurrency")
    rate = doc.get("request_rate")
    if rate in ("inf", None) or _num(rate) == float("inf"):
        shape = "all requests at once" + (f", at most {concurrency} in flight" if concurrency else "")
        kind = CLOSED_LOOP if concurrency else "all at once, unbounded"
    else:
        burst = _num(doc.get("burstiness"))
        arrivals = "poisson" if burst in (None, 1.0) else f"gamma (burstiness {burst:g})"
        shape = f"open loop: {arrivals} {float(rate):g} req/s" + (
            f", at most {concurrency} in flight" if concurrency else ""
        )
        kind = shape
    if doc.get("num_prompts") is not None:
        shape += f", {doc['num_prompts']} prompts"
    missing = [s.upper() for s in ("ttft", "itl", "tpot", "e2el") if f"mean_{s}_ms" not in figures]
    notes = [
        "vllm bench serve: latencies in ms as written; percentiles only those asked for (--metric-percentiles, "
        "default 99)"
    ]
    if missing:
        notes.append(f"vllm bench serve: no {', '.join(missing)} figures in this file (--percentile-metrics)")
    label = doc.get("label")
    name = path.name + (f"#{index + 1}" if index is not None else "") + (f" ({label})" if label else "")
    return ComparedRun(
        name=name,
        source=path,
        argument=argument,
        tool="vllm bench serve" + (f" ({doc['backend']})" if doc.get("backend") else ""),
        figures={ALL: figures},
        users_peak=int(concurrency) if isinstance(concurrency, int) else None,
        duration_s=_num(doc.get("duration")),
        load_shape=shape,
        load_kind=kind,
        target_url=None,  # the result file does not record --base-url
        model=str(doc["model_id"]) if doc.get("model_id") else None,
        prompt_tokens_mean=_per_request(doc.get("total_input_tokens"), completed),
        output_tokens_mean=_per_request(doc.get("total_output_tokens"), completed),
        notes=notes,
    )


def _per_request(total: Any, completed: float | None) -> float | None:
    t = _num(total)
    return t / completed if t is not None and completed else None


# -- GuideLLM -------------------------------------------------------------------------------------------
def _guidellm_runs(path: Path, argument: int, doc: dict[str, Any]) -> list[ComparedRun]:
    version = _dict(doc.get("metadata")).get("guidellm_version")
    spec = _dict(_dict(doc.get("config")).get("spec"))
    runs = []
    benchmarks = doc["benchmarks"]
    for i, bench in enumerate(benchmarks):
        config = _dict(bench.get("config"))
        strategy = _dict(config.get("strategy"))
        backend = _dict(config.get("backend") or spec.get("backend"))
        kind = str(strategy.get("type_") or "?")
        streams = strategy.get("streams") or strategy.get("max_concurrency")
        rate = strategy.get("rate")
        label = f"{kind}@{streams if streams is not None else rate if rate is not None else i}"
        name = path.name + (f" [{label}]" if len(benchmarks) > 1 else "")
        figures = _guidellm_figures(path, i, bench)
        data = _dict((spec.get("data") or [{}])[0]) if isinstance(spec.get("data"), list) else {}
        out_len = backend.get("max_tokens") or data.get("output_tokens")
        users = streams if isinstance(streams, int) else strategy.get("max_concurrency")
        totals = _dict(bench["metrics"].get("request_totals"))
        notes = [
            "GuideLLM: TPOT is its inter_token_latency (per request (last - first token) / (tokens - 1), "
            "weighted by each request's gaps); ITL is only its mean (over every gap), its percentiles are "
            "not of gaps; its time_per_output_token includes TTFT and is not shown; E2E is its "
            "request_latency (s, shown in ms)"
        ]
        if out_len and not backend.get("max_tokens"):
            notes.append("GuideLLM: max tokens is its synthetic data's output_tokens (a fixed length), not a cap")
        if totals.get("incomplete"):
            notes.append(f"GuideLLM: {totals['incomplete']} request(s) incomplete (cancelled at the end), not failed")
        warnings = [w for w in bench.get("warnings") or [] if isinstance(w, dict)]
        # GuideLLM's own check of its load generation (data generation and dispatch delays): the
        # nearest it has to tokenstorm's timing fidelity
        fidelity = (
            "GuideLLM warned: " + "; ".join(f"{w.get('code')}: {w.get('message')}" for w in warnings)
            if warnings
            else "GuideLLM raised no warnings (its own checks of its load generation)"
        )
        runs.append(
            ComparedRun(
                name=name,
                source=path,
                argument=argument,
                tool="GuideLLM" + (f" {version}" if version else ""),
                figures={ALL: figures},
                users_peak=int(users) if isinstance(users, int) else None,
                duration_s=_num(bench.get("duration")),
                load_shape=_guidellm_shape(kind, strategy),
                load_kind=CLOSED_LOOP if kind in ("concurrent", "synchronous") else _guidellm_shape(kind, strategy),
                target_url=display_url(str(backend["target"])) if backend.get("target") else None,
                model=str(backend["model"]) if backend.get("model") else None,
                max_tokens=str(out_len) if out_len else None,
                fidelity=fidelity,
                fidelity_ok=not warnings,
                prompt_tokens_mean=_stat(bench["metrics"], "prompt_token_count", "mean"),
                output_tokens_mean=_stat(bench["metrics"], "output_token_count", "mean"),
                notes=notes,
            )
        )
    return runs


def _guidellm_shape(kind: str, strategy: dict[str, Any]) -> str:
    if kind == "concurrent":
        return f"concurrent, {strategy.get('streams')} streams (closed loop)"
    if kind == "synchronous":
        return "synchronous, 1 request at a time (closed loop)"
    if kind in ("constant", "poisson"):
        return f"open loop: {kind} {strategy.get('rate')} req/s"
    if kind == "throughput":
        return "throughput: all at once" + (
            f", at most {strategy['max_concurrency']}" if strategy.get("max_concurrency") else ""
        )
    return kind


def _stat(metrics: dict[str, Any], name: str, stat: str, status: str = "successful") -> float | None:
    dist = (metrics.get(name) or {}).get(status) if isinstance(metrics.get(name), dict) else None
    if not isinstance(dist, dict) or not dist.get("count"):
        return None
    if stat.startswith("p"):
        return _num((dist.get("percentiles") or {}).get(stat))
    return _num(dist.get(stat))


def _guidellm_figures(path: Path, index: int, bench: dict[str, Any]) -> dict[str, Any]:
    metrics = bench["metrics"]
    if not isinstance(metrics.get("time_to_first_token_ms"), dict):
        raise CompareInputError(f"{path}: GuideLLM benchmark {index} has no metrics.time_to_first_token_ms")
    figures: dict[str, Any] = {}
    for name, stem, to_ms in _GUIDELLM_LATENCY:
        for stat, key in (
            ("mean", "mean"),
            ("median", "median"),
            ("std_dev", "std"),
            ("p90", "p90"),
            ("p95", "p95"),
            ("p99", "p99"),
            ("max", "max"),
        ):
            value = _stat(metrics, name, stat)
            if value is not None:
                figures[f"{key}_{stem}_ms"] = value * to_ms
    # The gap-weighted mean of per-request mean gaps is the mean over every gap: tokenstorm's mean ITL.
    itl_mean = _stat(metrics, "inter_token_latency_ms", "mean")
    if itl_mean is not None:
        figures["mean_itl_ms"] = itl_mean
    # Throughput over successful requests, as vLLM and tokenstorm count it (GuideLLM's console prints "total").
    for name, key in (
        ("requests_per_second", "request_throughput"),
        ("output_tokens_per_second", "output_throughput"),
        ("tokens_per_second", "total_token_throughput"),
    ):
        value = _stat(metrics, name, "mean")
        if value is not None:
            figures[key] = value
    totals = metrics.get("request_totals") or {}
    ok, errored = _num(totals.get("successful")), _num(totals.get("errored"))
    if ok is not None:
        figures["completed"] = ok
    if errored is not None:
        figures["failed"] = errored
    if ok is not None and errored is not None and ok + errored:
        figures["error_rate"] = errored / (ok + errored)
    for name, key in (("prompt_token_count", "total_input_tokens"), ("output_token_count", "total_output_tokens")):
        value = _stat(metrics, name, "total_sum")
        if value is not None:
            figures[key] = value
    if _num(bench.get("duration")) is not None:
        figures["duration"] = float(bench["duration"])
    return figures
