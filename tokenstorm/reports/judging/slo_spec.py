"""SLO specs: the YAML file format, parsed and validated into :class:`SloSpec` (evaluation: slo.py).

    warmup_s: 30              # requests that started in the first 30 s are not judged
    gpus: 1                   # GPUs behind the target, when no GPU samples say so
    gpu_cost_per_hour: 2.5    # price of one GPU-hour (any currency): cost per 1M tokens in the report
    slos:
      chat:                   # a workload name, "*" (every workload) or "run" (all requests)
        ttft_ms: {p95: 800}
        e2e_ms: {p95: 1200}
        itl_ms: {p99: 150}
        tpot_ms: {p50: 60}
        error_rate: {max: 0.01}
        queue_ms: {p95: 200}        # the server's own timing: queued -> scheduled
        server_ttft_ms: {p95: 300}  # scheduled -> first token (prefill); overhead_ms: the rest of TTFT
      agent:
        tool_call_ms: {p95: 2000}   # per step: send to the complete tool call (its last argument fragment)
        session_ms: {p95: 60000}    # per completed session: first send to the last token of its last step
        quality: {min: 99%}         # checked answers that passed every check; one check: quality_<check>
      run:
        output_tokens_per_s_per_gpu: {min: 45}
        gpu_memory_gb: {max: 58}    # from GPU samples (--gpu-monitor); a run without: not judged, and said so
        consistency_changed: {max: 0%}  # probe answers that changed under load (probes.jsonl)

Latency statistics: p50, p90, p95, p99, p99.9 (or any pNN[.N]), mean, max — computed with
numpy's linear-interpolation percentile over successful requests, as vLLM's benchmark does
(``tool_call_ms``: over those that streamed a tool call; ``session_ms``: over completed sessions,
see ``tokenstorm/reports/judging/agent.py``; ``queue_ms``, ``server_ttft_ms``, ``overhead_ms``, ``server_itl_ms`` — a
request's mean gap as the server timed it: over those the server timed, see
``tokenstorm/reports/judging/breakdown.py``).
An invalid file is rejected with ``FILE:LINE: reason`` before any traffic (binary: the first bad byte). The
reason never quotes the file's text (a file given by mistake, or from the web form, may hold secrets): it
names what is wrong and, for a misspelt name, the nearest one tokenstorm knows.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tokenstorm.reports.judging import quality as _quality
from tokenstorm.reports.judging.quality import CONSISTENCY_METRIC, QUALITY_METRIC, is_quality_metric

LATENCY_METRICS = {
    "ttft_ms": "ttft_s",
    "itl_ms": "itl",
    "tpot_ms": "tpot_s",
    "e2e_ms": "e2e_s",
    "tool_call_ms": "tool_call_s",
    "queue_ms": "server_queue_s",
    "server_ttft_ms": "server_ttft_s",
    "overhead_ms": "overhead_s",
    "server_itl_ms": "server_itl_s",
}
#: latencies from the server's own timing of each request (tokenstorm/reports/judging/breakdown.py): judged over the
#: successful requests it timed; none timed is no data, and the SLO is not met (as any latency with no sample)
SERVER_TIMING_METRICS = frozenset({"queue_ms", "server_ttft_ms", "overhead_ms", "server_itl_ms"})
#: the note of a server-timing SLO with nothing to judge
NO_SERVER_TIMING = (
    "no server timing on the successful requests: start vLLM with --enable-per-request-metrics, "
    "or send its spans to --otlp-port"
)
#: latencies of a whole session (many requests): judged on the run, never on a slice of it
SESSION_METRICS = {"session_ms"}
RATE_METRICS = {"output_tokens_per_s_per_gpu", "output_tokens_per_s", "requests_per_s", "goodput_requests_per_s"}
#: measured from GPU samples (--gpu-monitor) alone: not judged in a run that sampled no GPU
GPU_SAMPLED_METRICS = frozenset({"gpu_memory_gb"})
#: what the note of a GPU SLO says in a run without GPU samples
NOT_JUDGED_NO_GPU = "not judged: no GPU sampled (--gpu-monitor samples one)"
_MAX_ONLY = ("error_rate", "gpu_memory_gb", CONSISTENCY_METRIC)
_QUALITY = "quality, quality_<check> (a check's name)"
_PCT = re.compile(r"^p(\d{1,2}(\.\d+)?)$")
_YAML = "an SLO file is YAML"
QUALITY_PREFIX = QUALITY_METRIC + "_"
#: the token names PyYAML's problems quote ('<stream end>'...): its own words, not the file's
_YAML_TOKENS = frozenset(c.id for c in vars(yaml.tokens).values() if isinstance(c, type) and hasattr(c, "id"))

#: Used when a run is given no --slo: the run passes if at most 1% of requests fail.
DEFAULT_SLO_TEXT = "slos:\n  run:\n    error_rate: {max: 0.01}\n"


class SloSpecError(ValueError):
    """An invalid SLO file; ``str()`` is ``FILE:LINE: reason``."""


@dataclass(frozen=True)
class SloTarget:
    """One threshold: ``scope``'s ``metric`` ``stat`` must be ``op`` ``threshold``."""

    scope: str  # workload name, "*" expanded per workload, or "run"
    metric: str
    stat: str  # p95, mean, max, min
    threshold: float
    line: int
    scope_line: int = 0

    @property
    def op(self) -> str:
        """``<=`` for latencies, error rates, memory and changed probes; ``>=`` for throughputs and pass rates."""
        return ">=" if self.metric in RATE_METRICS or is_quality_metric(self.metric) else "<="

    @property
    def label(self) -> str:
        """Human-readable name, e.g. ``chat ttft_ms p95 <= 800``."""
        return f"{self.scope} {self.metric} {self.stat} {self.op} {self.threshold:g}"


@dataclass
class SloSpec:
    """A parsed SLO file."""

    targets: list[SloTarget]
    warmup_s: float = 0.0
    gpus: int | None = None
    gpu_cost_per_hour: float | None = None
    source: str = "<default>"

    def workloads_named(self) -> set[str]:
        """Workload names the spec refers to explicitly."""
        return {t.scope for t in self.targets if t.scope not in ("*", "run")}


def load_slo_spec(path: Path | str | None = None, text: str | None = None) -> SloSpec:
    """Parse an SLO file (or ``text``); raise :class:`SloSpecError` with the line on error."""
    source = str(path) if path is not None else "<text>"
    if text is None:
        text, source = (DEFAULT_SLO_TEXT, "<default>") if path is None else (_read_text(source), source)
    try:
        root = yaml.compose(text)
    except yaml.reader.ReaderError as exc:  # a control character (NUL, ...): binary or UTF-16, not text
        line = text.count("\n", 0, exc.position) + 1
        raise SloSpecError(f"{source}:{line}: not text (control character 0x{exc.character:02x}) — {_YAML}") from None
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", 0) + 1
        raise SloSpecError(f"{source}:{line}: not valid YAML ({_unquoted(getattr(exc, 'problem', None))})") from None

    def err(node: yaml.Node, reason: str) -> SloSpecError:
        return SloSpecError(f"{source}:{node.start_mark.line + 1}: {reason}")

    if not isinstance(root, yaml.MappingNode):
        raise SloSpecError(f"{source}:1: expected a mapping with a 'slos' key")
    spec = SloSpec(targets=[], source=source)
    for key_node, value_node in root.value:
        key = key_node.value
        if key == "warmup_s":
            spec.warmup_s = _number(value_node, err, "warmup_s", minimum=0)
        elif key == "gpus":
            gpus = _number(value_node, err, "gpus", minimum=1)
            if gpus != int(gpus):
                raise err(value_node, "gpus must be a whole number")
            spec.gpus = int(gpus)
        elif key == "gpu_cost_per_hour":
            spec.gpu_cost_per_hour = _number(value_node, err, "gpu_cost_per_hour", minimum=0)
        elif key == "version":
            if value_node.value not in ("1",):
                raise err(value_node, "unsupported version (this tokenstorm reads version 1)")
        elif key == "slos":
            spec.targets = _parse_slos(value_node, err)
        else:
            keys = ("slos", "warmup_s", "gpus", "gpu_cost_per_hour", "version")
            raise err(key_node, f"unknown key{_nearest(key, keys)} (expected {', '.join(keys)})")
    if not spec.targets:
        raise SloSpecError(f"{source}:1: no SLOs defined (add a 'slos:' mapping)")
    return spec


def _read_text(path: str) -> str:
    """The file's text (UTF-8, a leading BOM dropped), else :class:`SloSpecError` saying why not."""
    try:
        data = Path(path).read_bytes()
        return data.decode("utf-8-sig")
    except OSError as exc:
        why = {FileNotFoundError: "no such SLO file", IsADirectoryError: "is a directory, not an SLO file"}
        raise SloSpecError(f"{path}: {why.get(type(exc)) or f'cannot read ({exc.strerror or exc})'}") from None
    except UnicodeDecodeError as exc:
        bad = exc.start + len(data) - len(exc.object)  # past the BOM, if any
        raise SloSpecError(f"{path}: not UTF-8 text (byte 0x{data[bad]:02x} at offset {bad}) — {_YAML}") from None


def _number(node: yaml.Node, err: Any, what: str, minimum: float | None = None) -> float:
    if not isinstance(node, yaml.ScalarNode):
        raise err(node, f"{what} must be a number")
    raw = str(node.value).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise err(node, f"{what} must be a number") from None
    if math.isnan(value) or (minimum is not None and value < minimum):
        raise err(node, f"{what} must be >= {minimum:g}")
    return value


def _parse_slos(node: yaml.Node, err: Any) -> list[SloTarget]:
    if not isinstance(node, yaml.MappingNode):
        raise err(node, "slos must map workload names to their targets")
    targets: list[SloTarget] = []
    durations = {*LATENCY_METRICS, *SESSION_METRICS}
    for scope_node, metrics_node in node.value:
        scope = str(scope_node.value)
        if not isinstance(metrics_node, yaml.MappingNode):
            raise err(metrics_node, "expected metric: {stat: value} entries under a workload, e.g. ttft_ms: {p95: 800}")
        for metric_node, stats_node in metrics_node.value:
            metric = str(metric_node.value)
            if metric in ("gpu_memory_gb", CONSISTENCY_METRIC) and scope != "run":
                raise err(metric_node, f"{metric} is a whole-run target: put it under 'run'")
            if metric in durations:
                allowed = "p50, p90, p95, p99, p99.9, mean or max"
            elif metric in _MAX_ONLY:
                allowed = "max"
            elif metric in RATE_METRICS or is_quality_metric(metric):
                if _quality.valid_quality_metric(metric) is not None:
                    checks = ", ".join(_quality.BUILT_IN_CHECKS)
                    why = f"quality_<check>: not a check name (built-in: {checks}; or your own check function's name)"
                    raise err(metric_node, why)
                allowed = "min"
            else:
                client = [m for m in LATENCY_METRICS if m not in SERVER_TIMING_METRICS]
                server = [m for m in LATENCY_METRICS if m in SERVER_TIMING_METRICS]
                names = [*client, *SESSION_METRICS, *server, *_MAX_ONLY, *sorted(RATE_METRICS)]
                raise err(
                    metric_node, f"unknown metric{_nearest(metric, names)} (known: {', '.join(names)}, {_QUALITY})"
                )
            said = metric if not metric.startswith(QUALITY_PREFIX) else "quality_<check>"  # a check's name: the file's
            if not isinstance(stats_node, yaml.MappingNode) or not stats_node.value:
                raise err(stats_node, f"{said}: expected {{stat: value}}, e.g. {{p95: 800}}")
            for stat_node, value_node in stats_node.value:
                stat = str(stat_node.value)
                ok = (
                    (metric in durations and (stat in ("mean", "max") or _valid_pct(stat)))
                    or (metric in _MAX_ONLY and stat == "max")
                    or ((metric in RATE_METRICS or is_quality_metric(metric)) and stat == "min")
                )
                if not ok:
                    raise err(stat_node, f"{said}: unknown statistic (use {allowed})")
                value = _number(value_node, err, f"{said} {stat}", minimum=0)
                if (metric in ("error_rate", CONSISTENCY_METRIC) or is_quality_metric(metric)) and value > 1:
                    eg = "0.01) or a percentage ('1%')" if stat == "max" else "0.99) or a percentage ('99%': 0–100%)"
                    raise err(value_node, f"{said} {stat} is a fraction ({eg}")
                targets.append(
                    SloTarget(scope, metric, stat, value, stat_node.start_mark.line + 1, scope_node.start_mark.line + 1)
                )
    return targets


def _nearest(name: str, names: list[str] | tuple[str, ...]) -> str:
    """`` — did you mean NAME?`` with the known name nearest ``name`` (the file's own text is never said)."""
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" — did you mean {near[0]}?" if near else ""


def _unquoted(problem: Any) -> str:
    """PyYAML's problem with any text it quotes from the file left out (its own tokens, e.g. '<stream end>',
    and a single character are kept: they say what is wrong, not what the file holds)."""
    text = str(problem or "not parsable")
    return re.sub(r"'[^']*'|\"[^\"]*\"", _kept_if_yaml_own, text)


def _kept_if_yaml_own(match: re.Match[str]) -> str:
    quoted = match.group(0)
    return quoted if len(quoted) <= 4 or quoted[1:-1] in _YAML_TOKENS else "…"


def _valid_pct(stat: str) -> bool:
    return (m := _PCT.match(stat)) is not None and 0 < float(m.group(1)) < 100
