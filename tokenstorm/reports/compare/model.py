"""What ``reports compare`` knows of one run it compares: a column of the comparison.

A column is a tokenstorm run, one A/B target of one (an A/B run gives a column per target, never
the targets pooled), or another tool's result file (``vllm bench serve --save-result``,
GuideLLM's JSON report). Its figures use ``summary.json``'s names (vLLM's benchmark field
names: ``median_ttft_ms``, ``p99_e2el_ms``, ``request_throughput``...), in milliseconds and per
second whatever the tool wrote; a figure the tool does not give is absent, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tokenstorm.reports.judging.intervals import Interval

__all__ = [
    "ALL",
    "CLOSED_LOOP",
    "RATES",
    "SECTIONS",
    "SECTION_TITLES",
    "CompareInputError",
    "ComparedRun",
    "column_label",
    "count_of",
    "few_samples",
    "fmt_delta",
    "fmt_interval",
    "fmt_value",
]

#: the scope of a run's figures over every workload
ALL = "all"
#: the load kind of a closed loop without think time: N users (streams, max concurrency) each sending
#: its next request when the last one ends
CLOSED_LOOP = "closed loop"


class CompareInputError(ValueError):
    """A file or folder given to ``reports compare`` cannot be read as a run (one line, says which)."""


@dataclass
class ComparedRun:
    """One column: its figures per scope and what the run was (load, target, deployment, verdict)."""

    name: str  # the column heading (folder or file name, `[target]` for an A/B target)
    source: Path  # the folder or file it came from
    argument: int  # index of the command-line argument it came from (--baseline indexes those)
    tool: str  # "tokenstorm 0.2.0", "vllm bench serve", "GuideLLM 0.8.1"
    #: scope ("all", or a workload) -> summary.json-named figures (ms, per second); absent: not given
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    target_label: str = ""  # the A/B target of a tokenstorm A/B run; "" otherwise
    users_peak: int | None = None  # users, or the tool's maximum concurrency
    duration_s: float | None = None  # the measured window
    load_shape: str = "—"  # one phrase: "closed loop, 8 users", "Poisson 8 req/s", "steps 8x60,16x60"
    #: the shape without its size, alike across tools ("closed loop, ? users", "open loop: poisson 8
    #: req/s"): what says the load differed in kind (the users are compared on their own)
    load_kind: str = ""
    target_url: str | None = None  # display URL, no credentials
    model: str | None = None
    simulated: bool | None = None  # None: the tool cannot say (it only knows a URL)
    verdict: str | None = None  # "passed — all 5 SLOs held"; None: the tool judges no SLOs
    verdict_ok: bool | None = None  # True passed, False anything else, None not judged
    fidelity: str | None = None  # tokenstorm's timing-fidelity line; None: not measured by the tool
    fidelity_ok: bool | None = None
    max_tokens: str | None = None  # output cap (or a tool's fixed output length), as given
    workload_mix: dict[str, float] = field(default_factory=dict)  # workload -> share of requests
    prompt_tokens_mean: float | None = None  # measured, per completed request
    output_tokens_mean: float | None = None
    #: run.json's deployment block of this target (url, server_version, engine, model, problems)
    deployment: dict[str, Any] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] | None = None  # tokenstorm's run options; None: another tool's file
    notes: list[str] = field(default_factory=list)  # how the tool's figures differ in meaning or units
    #: scope -> figure key -> its confidence interval, in the figure's unit
    #: (:mod:`tokenstorm.reports.compare.uncertainty`,
    #: from the run's raw records); empty: none (another tool's file, or ``--confidence 0``)
    intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)
    #: scope -> figure key -> each judged, completed request's value keyed by the request it is a twin of (its
    #: session and step): how an A/B target's figures pair with another target's of the same run
    pairs: dict[str, dict[str, pd.Series]] = field(default_factory=dict)
    #: why the column has no intervals ("no raw records"); None: it has them, or none were asked for
    no_interval: str | None = None

    @property
    def is_tokenstorm(self) -> bool:
        """True for a tokenstorm run (it has options, SLO verdicts, timing fidelity, deployment)."""
        return self.options is not None


#: the sections of the figures' tables, in order
SECTIONS = ("latency", "server", "throughput", "errors", "cost", "agent", "cache", "quality")
#: a section's title where it is not its name
SECTION_TITLES = {"server": "where the time went (the server's timing)"}
#: shares (0..1): shown in percent, compared in percentage points
RATES = (
    "error_rate",
    "prefix_cache_hit_rate",
    "prefix_cache_hit_rate_server",
    "quality_pass_rate",
    "needle_pass_rate",
    "consistency_changed_share",
)


def fmt_value(key: str, value: Any) -> str:
    """A figure as the tables show it, as the report writes it ("—": the run's tool does not give it):
    milliseconds whole from 100 up with separators (``13,480``), one decimal from 10, two below; shares
    in percent (``75.00%``); counts whole; anything else four significant digits, never an exponent."""
    if value is None:
        return "—"
    if key in RATES:
        return f"{value:.2%}"
    if key in COUNT_KEYS:
        return f"{value:,.0f}"
    v = float(value)
    if abs(v) >= 1000 or (key.endswith("_ms") and abs(v) >= 100):
        return f"{v:,.0f}"
    if key.endswith("_ms"):
        return f"{v:.1f}" if round(abs(v), 2) >= 10 else f"{v:.2f}"
    return f"{v:.4g}" if abs(v) >= 0.001 or v == 0 else f"{v:.2g}".replace("e-0", "e-")


def fmt_delta(key: str, delta: float | None) -> str:
    """A delta against the baseline: percent, or percentage points for a rate (errors, prefix-cache hits)."""
    if delta is None:
        return ""
    delta = delta if round(delta, 1) else 0.0  # no "-0.0%"
    return f"{delta:+.1f}pp" if key in RATES else f"{delta:+.1f}%"


def fmt_interval(low: float | None, high: float | None) -> str:
    """A change's interval as the tables show it, ``[-21..+62]`` (in the delta's unit: percent, or percentage
    points for a rate): whole from 10 up, one decimal below. Where the samples do not bound a side, ``-100``
    (nothing falls by more) and ``+∞``."""

    def end(x: float) -> str:
        x = x if round(x, 1) else 0.0  # no "-0.0"
        return f"{x:+.0f}" if abs(x) >= 10 else f"{x:+.1f}"

    return f"[{'-100' if low is None else end(low)}..{'+∞' if high is None else end(high)}]"


#: figures that are counts (no sample size of their own)
COUNT_KEYS = ("completed", "failed")
#: the fewest samples a figure is read from before its delta is more than noise: a p95 from fewer than 20
#: samples is the largest of them, a p99 from fewer than 100 too; anything else (mean, p50, a rate) 10
FEW_SAMPLES = {"p99_": 100, "p95_": 20, "": 10}
#: what a figure's sample size counts: figure key prefix/suffix -> (the scope's count key, its noun)
_COUNTS = (
    (("session_ms", "steps_per_session"), "completed_sessions", "sessions"),
    (("tool_call_ms", "ttft_tool_ms"), "tool_calls", "tool calls"),
    (("quality_pass_rate",), "quality_checked", "answers checked"),
    (("needle_pass_rate",), "needle_checked", "needles checked"),
    (("consistency_changed_share",), "consistency_compared", "probes compared"),
    (("error_rate",), "attempts", "requests"),
    (
        ("_overhead_ms", "_server_queue_ms", "_server_ttft_ms", "_server_decode_ms", "_server_itl_ms"),
        "server_timed_requests",
        "server-timed requests",
    ),
)


def count_of(key: str) -> tuple[str, str] | None:
    """(the scope's figure that counts ``key``'s samples, what it counts); None for a count itself."""
    if key in COUNT_KEYS:
        return None
    for suffixes, count_key, noun in _COUNTS:
        if key.endswith(suffixes):
            return count_key, noun
    return "completed", "requests"


def few_samples(key: str, n: float | None) -> bool:
    """True when figure ``key`` comes from too few samples for its delta to mean much (unknown n: False)."""
    if n is None or count_of(key) is None:
        return False
    least = next(v for prefix, v in FEW_SAMPLES.items() if key.startswith(prefix))
    return n < least


def column_label(index: int) -> str:
    """A column's short label: A, B, ... Z, then C27, C28..."""
    return chr(ord("A") + index) if index < 26 else f"C{index + 1}"
