"""The report's "Run" section in words: the options that shaped the run as a two-column table (the
flag, its value), and where the SLOs came from.

run.json keeps every option Locust and tokenstorm parsed, defaults and Locust's own plumbing (web
UI, master/worker ports) included. The table shows what a reader of the results needs: the load
(users, spawn rate, run time, locustfile), every option set away from its default, and a load
shape's own options only when the run had that shape (a sweep's, a capacity search's, open-loop
arrivals') — never the unused defaults of another shape. An option is set away from its default when it
differs from the default run.json records beside it (``option_defaults``; a run from before it was recorded
shows every option with a value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenstorm.reports.judging.slo_spec import SloSpec, load_slo_spec
from tokenstorm.workloads.rundir import CAPACITY_FILE, RunMeta

__all__ = ["option_rows", "slo_source"]

#: always shown: the load itself, and the settings every figure depends on
_ALWAYS = ("locustfile", "num_users", "spawn_rate", "run_time", "max_tokens", "warmup", "slo", "seed")
#: Locust's plumbing and output paths: nothing about the load or the results
PLUMBING_OPTIONS = frozenset(
    {
        "autoquit",
        "autostart",
        "build_path",
        "class_picker",
        "config",
        "config_users",
        "csv_prefix",
        "csv_full_history",
        "enable_rebalancing",
        "exit_code_on_error",
        "expect_slaves",
        "expect_workers_max_wait",
        "headful",
        "headless",
        "html_file",
        "json",
        "json_file",
        "legacy_ui",
        "list_commands",
        "logfile",
        "loglevel",
        "master",
        "master_bind_host",
        "master_bind_port",
        "master_host",
        "master_port",
        "only_summary",
        "otel",
        "print_stats",
        "processes",
        "profile",
        "reset_stats",
        "show_task_ratio",
        "show_task_ratio_json",
        "skip_log_setup",
        "slave",
        "stats_history_enabled",
        "stop_timeout",
        "tls_cert",
        "tls_key",
        "web_auth",
        "web_base_path",
        "web_host",
        "web_host_display_name",
        "web_login",
        "web_port",
        "worker",
        "run_dir",
        "metrics_host",
        "report_every",
        "csv",
        "html",
        "host",
        "trace_zero_epoch_s",
    }
)
#: a load shape's own options, shown (defaults too) only in a run of that shape
_SHAPES = {
    "sweep": ("sweep_levels", "sweep_count", "sweep_max_users", "sweep_level_time"),
    "capacity": ("capacity_start", "capacity_step", "capacity_step_time", "capacity_max"),
    "open_loop": ("arrival", "arrival_rate"),
    "trace": ("trace", "trace_speed", "trace_block_size"),
}
#: flags whose name is not the option's
_FLAGS = {
    "num_users": "-u/--users",
    "spawn_rate": "-r/--spawn-rate",
    "run_time": "-t/--run-time",
    "locustfile": "-f/--locustfile",
    "warmup": "--warmup",
}
_UNITS = {
    "run_time": " s",
    "warmup": " s",
    "request_timeout": " s",
    "stall_timeout": " s",
    "monitor_interval": " s",
    "sweep_level_time": " s",
    "capacity_step_time": " s",
}


def _shapes(meta: RunMeta, run_dir: Path, open_loop: bool) -> set[str]:
    """The load shapes this run had (from the files it left, its locustfile, its records)."""
    locustfile = Path(str(meta.options.get("locustfile") or "")).name
    shapes = set()
    if (run_dir / "sweep.json").exists() or "sweep" in locustfile or meta.options.get("sweep_levels"):
        shapes.add("sweep")
    if (run_dir / CAPACITY_FILE).exists() or "capacity" in locustfile:
        shapes.add("capacity")
    if meta.options.get("trace") or "trace_replay" in locustfile:
        shapes.add("trace")  # sent at a trace's times: its send lag is not open-loop arrivals'
    elif open_loop or "open_loop" in locustfile:
        shapes.add("open_loop")
    return shapes


def _empty(value: Any) -> bool:
    return value is None or value is False or value in ("", [], {}, 0, 0.0)


def _shown(value: Any) -> str:
    if value is True:
        return "yes"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value == int(value):
        return f"{int(value)}"
    return str(value)


def option_rows(meta: RunMeta, run_dir: Path, open_loop: bool = False) -> list[tuple[str, str]]:
    """(flag, value) of the options that apply to this run, the load first, then alphabetically."""
    options = meta.options if isinstance(meta.options, dict) else {}
    shapes = _shapes(meta, run_dir, open_loop)
    in_shape = {name for shape in shapes for name in _SHAPES[shape]}
    keep = []
    for name, value in options.items():
        if name in PLUMBING_OPTIONS or name in _ALWAYS:
            continue
        if name in in_shape:
            keep.append(name)
        elif not _empty(value) and meta.option_defaults.get(name, object()) != value:
            keep.append(name)  # set by the user: shown even for a shape the run did not have
    first = [n for n in _ALWAYS if n in options and (n in ("locustfile", "num_users") or not _empty(options[n]))]
    rows = []
    for name in [*first, *sorted(keep)]:
        flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
        rows.append((flag, _shown(options[name]) + (_UNITS.get(name, "") if not _empty(options[name]) else "")))
    return rows


def slo_source(spec: SloSpec) -> str:
    """Where the SLOs came from, in words: the file, or that the built-in default was used."""
    if spec.source == "<default>" or (spec.source == "<text>" and _is_default(spec)):
        return "default: run error rate ≤ 1% — pass --slo FILE for latency targets"
    if spec.source == "<text>":
        return "given inline"
    return spec.source


def _is_default(spec: SloSpec) -> bool:
    def key(s: SloSpec) -> list[tuple[str, str, str, float]]:
        return [(t.scope, t.metric, t.stat, t.threshold) for t in s.targets]

    return key(spec) == key(load_slo_spec()) and not spec.warmup_s
