"""A trace replay's report and comparison name the trace and its speed — not open-loop arrival rates
(its records carry send lag, as open loop's do) — and other runs never show the trace options' defaults."""

from __future__ import annotations

from pathlib import Path

from tokenstorm.reports.compare.tokenstorm import load_shape
from tokenstorm.reports.sections.options import option_rows
from tokenstorm.workloads.rundir import RunMeta

DEFAULTS = {"arrival": "poisson", "arrival_rate": 1.0, "trace": "", "trace_speed": 1.0, "trace_block_size": 512,
            "num_users": 1, "locustfile": "locustfiles/open_loop.py"}  # fmt: skip


def flags(options: dict, tmp_path: Path, open_loop: bool = True) -> dict[str, str]:
    # run.json records each option's default beside it (the plugin, from Locust's parser): here, DEFAULTS'
    return dict(option_rows(RunMeta(options=options, option_defaults=DEFAULTS), tmp_path, open_loop=open_loop))


def test_a_trace_run_shows_its_trace_options_and_no_arrival_rate(tmp_path: Path) -> None:
    shown = flags({**DEFAULTS, "locustfile": "locustfiles/trace_replay.py", "trace": "t.jsonl",
                   "trace_zero_epoch_s": 1.8e9}, tmp_path)  # fmt: skip
    assert shown["--trace"] == "t.jsonl" and shown["--trace-speed"] == "1" and shown["--trace-block-size"] == "512"
    assert "--arrival-rate" not in shown and "--arrival" not in shown and "--trace-zero-epoch-s" not in shown


def test_other_runs_never_show_the_trace_defaults(tmp_path: Path) -> None:
    shown = flags(DEFAULTS, tmp_path)
    assert shown["--arrival-rate"] == "1" and not any(f.startswith("--trace") for f in shown)


def test_a_comparison_names_the_trace_and_its_speed() -> None:
    assert load_shape({"locustfile": "locustfiles/trace_replay.py", "trace": "/data/mooncake.jsonl",
                       "trace_speed": 2.0}, 1) == "trace replay: mooncake.jsonl at 2x"  # fmt: skip


def test_an_option_is_shown_when_set_away_from_the_default_its_run_recorded(tmp_path: Path) -> None:
    options = {**DEFAULTS, "locustfile": "locustfiles/chat.py", "request_timeout": 600.0, "think_tags": "<t>,</t>"}
    defaults = {**DEFAULTS, "request_timeout": 600.0, "think_tags": "<think>,</think>"}
    shown = dict(option_rows(RunMeta(options=options, option_defaults=defaults), tmp_path))
    assert shown["--think-tags"] == "<t>,</t>" and "--request-timeout" not in shown
    # a run from before defaults were recorded: every option with a value is shown (none hidden wrongly)
    older = dict(option_rows(RunMeta(options=options), tmp_path))
    assert older["--request-timeout"] == "600 s" and older["--think-tags"] == "<t>,</t>"
