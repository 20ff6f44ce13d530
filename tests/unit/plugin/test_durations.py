"""Every duration option takes what Locust's ``-t`` takes (``30``, ``30s``, ``5m``, ``1h30m``): one parser,
checked against Locust's own; anything else is one line naming the option."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.plugin.core.flags import TOPICS
from tokenstorm.workloads.plugin.core.options import DURATION_OPTIONS, OptionError, RunOptions, recorded_options
from tokenstorm.workloads.traffic import settings_from_options
from tokenstorm.workloads.traffic.durations import parse_duration, parse_duration_range

#: what Locust's -t takes (its docstring's examples and more)
LOCUST_FORMS = ["20", "0", "20s", "3m", "2h", "1h20m", "3h30m10s", "90m", "1m30s", "2h5s", "45s"]
#: what Locust's -t refuses
REFUSED = ["", "5x", "1m30", "m", "h1", "-5", "5 m", "1d", "nan", "inf", "30sec", "5m1h"]


@pytest.fixture(scope="module")
def locust_reads() -> dict[str, int | None]:
    """What Locust's own ``-t`` parser makes of each text (None: refused), in a process of its own (importing
    Locust monkey-patches the process)."""
    code = ("import json, sys\nfrom locust.util.timespan import parse_timespan\nout = {}\n"
            "for t in json.loads(sys.argv[1]):\n    try:\n        out[t] = parse_timespan(t)\n"
            "    except ValueError:\n        out[t] = None\nprint(json.dumps(out))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(LOCUST_FORMS + REFUSED)], capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    reads: dict[str, int | None] = json.loads(proc.stdout.strip().splitlines()[-1])
    return reads


@pytest.mark.parametrize("text", LOCUST_FORMS)
def test_a_duration_locust_takes_is_the_same_seconds_here(text: str, locust_reads: dict[str, int | None]) -> None:
    assert locust_reads[text] is not None
    assert parse_duration(text) == locust_reads[text]


@pytest.mark.parametrize("text", REFUSED)
def test_what_locust_refuses_is_refused(text: str, locust_reads: dict[str, int | None]) -> None:
    assert locust_reads[text] is None  # the reference refuses it...
    with pytest.raises(ValueError, match=r"expected a duration: seconds \(30, 2\.5\) or 30s, 5m, 1h30m"):
        parse_duration(text)  # ...and so does tokenstorm, saying what a duration looks like


def test_fractions_and_numbers_are_seconds_too() -> None:
    assert parse_duration("2.5") == 2.5 and parse_duration("1.5m") == 90.0 and parse_duration(" 5m ") == 300.0
    assert parse_duration(30.0) == 30.0 and parse_duration(0) == 0.0  # defaults and YAML numbers
    for bad in (-1.0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_a_range_is_two_durations() -> None:
    assert parse_duration_range("1-5") == (1.0, 5.0)
    assert parse_duration_range("30s-2m") == (30.0, 120.0)
    assert parse_duration_range("0.5") == (0.5, 0.5) and parse_duration_range(2) == (2.0, 2.0)
    with pytest.raises(ValueError, match="LO must not be above HI"):
        parse_duration_range("2m-30s")
    with pytest.raises(ValueError, match="expected a duration or LO-HI"):
        parse_duration_range("5x-1m")


def test_every_duration_option_takes_every_form() -> None:
    """``--warmup 5m`` works where ``-t 5m`` does: the same in each duration option."""
    declared = {f.dest for t in TOPICS for f in t.flags if f.duration}
    assert declared == set(DURATION_OPTIONS)  # each declared duration is parsed as one
    assert {"warmup", "request_timeout", "sweep_level_time", "capacity_step_time"} <= declared
    for dest in DURATION_OPTIONS:
        opts = RunOptions.parse(SimpleNamespace(**{dest: "1h30m"}))
        assert getattr(opts, f"{dest}_s") == 5400.0, dest
        with pytest.raises(OptionError, match=rf"^--{dest.replace('_', '-')} '5 min': expected a duration"):
            RunOptions.parse(SimpleNamespace(**{dest: "5 min"}))
    opts = RunOptions.parse(SimpleNamespace(wait_time="30s-2m", steps="8x1m,16x90"))
    assert opts.wait_time_s == (30.0, 120.0) and opts.steps == ((8, 60.0), (16, 90.0))
    think = settings_from_options(SimpleNamespace(chat_think_time="5s-1m", agent_tool_time="500"))
    assert think["chat"].think_time_s == (5.0, 60.0) and think["agent"].think_time_s == (500.0, 500.0)


def test_run_json_keeps_durations_in_seconds() -> None:
    """A report reads ``--warmup 5m`` as 300 s (its warm-up band, its options table)."""
    kept = recorded_options({"warmup": "5m", "request_timeout": "10m", "num_users": 4, "report_every": "bad"})
    assert kept == {"warmup": 300.0, "request_timeout": 600.0, "num_users": 4, "report_every": "bad"}
