"""What differs between compared runs besides their figures: the load they offered (so a
"REGRESSION" is never read as the deployment's when the load differed) and the deployment that
served them (server version, engine settings, max_model_len, GPUs, run options).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from tokenstorm.reports.compare.model import ALL, ComparedRun
from tokenstorm.reports.judging.intervals import change_interval_pct
from tokenstorm.reports.sections.options import PLUMBING_OPTIONS

__all__ = ["LENGTH_TOLERANCE", "MIX_TOLERANCE", "deployment_rows", "load_differences"]

#: measured mean prompt / output lengths further apart than this (relative) are a different load
LENGTH_TOLERANCE = 0.2
#: a workload's share of the requests further apart than this (absolute) is a different mix
MIX_TOLERANCE = 0.1
#: options that say where a run wrote, or how it was watched, not what load it offered
_OUTPUT_OPTIONS = frozenset(
    {
        "run_dir",
        "csv_prefix",
        "html_file",
        "json_file",
        "logfile",
        "web_port",
        "web_host",
        "master_port",
        "master_bind_port",
        "metrics_port",
        "loglevel",
        "headless",
        "json",
        "only_summary",
        "print_stats",
        "locust_stats",
        "live",
        "report_every",
        "autostart",
        "autoquit",
    }
)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _mix_text(mix: dict[str, float]) -> str:
    return ", ".join(f"{w} {share:.0%}" for w, share in mix.items()) or "—"


def _differ(runs: list[ComparedRun], get: Callable[[ComparedRun], Any]) -> list[str] | None:
    """Each run's value as text, when the runs that have one do not all have the same; else None."""
    values = [get(r) for r in runs]
    known = {_fmt(v) for v in values if v is not None}
    return [_fmt(v) for v in values] if len(known) > 1 else None


def _lengths_differ(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and min(a, b) < (1 - LENGTH_TOLERANCE) * max(a, b)


def _runs_lengths_differ(a: ComparedRun, b: ComparedRun, attr: str) -> bool:
    """Whether runs ``a`` and ``b``'s mean prompt (output) lengths differ by more than the tolerance: at their
    points, and where both have the mean's interval, by the whole interval of the change (two short runs of
    one workload draw lengths that differ by chance: no different load)."""
    x, y = getattr(a, attr), getattr(b, attr)
    if not _lengths_differ(x, y):
        return False
    ci_a, ci_b = a.intervals.get(ALL, {}).get(attr), b.intervals.get(ALL, {}).get(attr)
    if ci_a is None or ci_b is None:
        return True
    low, high = change_interval_pct(x, ci_a, y, ci_b)
    up, down = (1 / (1 - LENGTH_TOLERANCE) - 1) * 100, -LENGTH_TOLERANCE * 100  # y/x beyond 1.25 or below 0.8
    return (low is not None and low > up) or (high is not None and high < down)


def _mixes_differ(a: dict[str, float], b: dict[str, float]) -> bool:
    return bool(a and b) and any(abs(a.get(w, 0.0) - b.get(w, 0.0)) > MIX_TOLERANCE for w in {*a, *b})


def _pairs(runs: list[ComparedRun]) -> list[tuple[ComparedRun, ComparedRun]]:
    """The columns whose offered loads can differ: of two different runs (an A/B run's targets share one
    sequence of requests: the same users, shape and prompts), and of the same target when both are one."""
    return [
        (a, b)
        for i, a in enumerate(runs)
        for b in runs[i + 1 :]
        if a.argument != b.argument and not (a.target_label and b.target_label and a.target_label != b.target_label)
    ]


def load_differences(runs: list[ComparedRun], names: list[str] | None = None) -> list[str]:
    """One line per aspect of the offered load that differs between ``runs`` of different runs (empty:
    the same load as far as the files tell; the targets of one A/B run share theirs): users, load shape,
    output cap, workload mix, measured prompt and output lengths, and the measuring tool. ``names``: what
    the lines call the runs (their short labels; default their names)."""
    called = names or [r.name for r in runs]
    pairs = _pairs(runs)

    def line(what: str, values: list[str]) -> str:
        return f"{what}: " + " vs ".join(f"{v} ({n})" for v, n in zip(values, called, strict=True))

    def differs(same: Callable[[ComparedRun, ComparedRun], bool]) -> bool:
        return any(not same(a, b) for a, b in pairs)

    def alike(get: Callable[[ComparedRun], Any]) -> Callable[[ComparedRun, ComparedRun], bool]:
        return lambda a, b: get(a) is None or get(b) is None or _fmt(get(a)) == _fmt(get(b))

    def near(attr: str) -> Callable[[ComparedRun, ComparedRun], bool]:
        return lambda a, b: not _runs_lengths_differ(a, b, attr)

    out = []
    aspects: list[tuple[str, Callable[[ComparedRun], Any]]] = [
        ("users / concurrency (peak)", lambda r: r.users_peak),
        ("load shape", lambda r: r.load_kind or r.load_shape),
        ("max tokens", lambda r: r.max_tokens),
    ]
    for what, get in aspects:
        if differs(alike(get)):
            out.append(line(what, [_fmt(get(r)) for r in runs]))
    if differs(lambda a, b: not _mixes_differ(a.workload_mix, b.workload_mix)):
        out.append(line("workload mix", [_mix_text(r.workload_mix) for r in runs]))
    for what, attr in (
        ("prompt tokens per request (mean)", "prompt_tokens_mean"),
        ("output tokens per request (mean)", "output_tokens_mean"),
    ):
        if differs(near(attr)):
            lengths: list[float | None] = [getattr(r, attr) for r in runs]
            out.append(line(what, ["—" if v is None else f"{v:.0f}" for v in lengths]))
    if differs(lambda a, b: _tool_family(a) == _tool_family(b)):
        tools = [_tool_family(r) for r in runs]
        out.append(line("measured by", tools) + " — each tool defines and times its figures its own way")
    return out


def _tool_family(run: ComparedRun) -> str:
    """``GuideLLM 0.8.1`` -> ``GuideLLM``: a version alone does not make another tool."""
    words = run.tool.split(" (")[0].split()
    return " ".join(words[:-1] if len(words) > 1 and words[-1][:1].isdigit() else words)


def _option(run: ComparedRun, name: str) -> Any:
    if run.options is None:
        return None  # another tool's file: no tokenstorm options to compare
    value = run.options.get(name)
    return "(not set)" if value in (None, "", []) else value


def _engine_labels(runs: list[ComparedRun]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for r in runs:
        for info, labels in sorted((r.deployment.get("engine") or {}).items()):
            if isinstance(labels, dict):
                for label in sorted(labels):
                    seen[(str(info), str(label))] = None
    return list(seen)


def _engine_value(run: ComparedRun, info: str, label: str) -> Any:
    return ((run.deployment.get("engine") or {}).get(info) or {}).get(label)


def _gpu_value(run: ComparedRun, field: str) -> str | None:
    return _gpu_text(run.gpus, field)


def _gpu_text(gpus: list[dict[str, Any]], field: str) -> str | None:
    if not gpus:
        return None
    values = [str(g.get(field)) for g in gpus if g.get(field) is not None]
    if not values:
        return None
    distinct = sorted(set(values))
    return f"{len(gpus)}× {distinct[0]}" if len(distinct) == 1 and field == "name" else ", ".join(distinct)


def deployment_rows(runs: list[ComparedRun]) -> tuple[list[tuple[str, list[str]]], int]:
    """The "what differs" table: (setting, each run's value) for every deployment setting and run
    option whose values differ between the runs that have one ("—": not captured, or not a
    tokenstorm run), and how many captured settings were alike."""
    getters: list[tuple[str, Callable[[ComparedRun], Any]]] = [
        ("server version", lambda r: r.deployment.get("server_version")),
        ("model", lambda r: (r.deployment.get("model") or {}).get("id") or r.model),
        ("max_model_len", lambda r: (r.deployment.get("model") or {}).get("max_model_len")),
    ]
    for info, label in _engine_labels(runs):
        getters.append((f"{info} {label}", partial(_engine_value, info=info, label=label)))
    for field, what in (("name", "GPU"), ("memory_total_mib", "GPU memory MiB"), ("driver", "GPU driver")):
        getters.append((what, partial(_gpu_value, field=field)))
    # Where output went and how Locust was plumbed is no difference of the deployment or the load (one list
    # with the report's options table, which leaves the same out).
    option_names = sorted({k for r in runs if r.options for k in r.options} - _OUTPUT_OPTIONS - PLUMBING_OPTIONS)
    for name in option_names:
        getters.append((f"option {name}", partial(_option, name=name)))
    rows, alike = [], 0
    for what, get in getters:
        values = _differ(runs, get)
        if values is not None:
            rows.append((what, values))
        elif any(get(r) is not None for r in runs):
            alike += 1
    return rows, alike
