"""``tokenstorm --help`` and ``tokenstorm run --help`` list every option tokenstorm reads, by topic, with
its help and default (``locust -f ... --help`` cannot: Locust prints help before it loads the plugin)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT
from tokenstorm.workloads.plugin.core.flags import TOPICS, add_options
from tokenstorm.workloads.plugin.core.options import OPTION_DESTS, RunOptions

SECRET = "sk-tokenstorm-help-test-0123456789"


def _help(*args: str) -> str:
    # Wide enough that no line wraps: help texts are then found whole.
    env = {**os.environ, "COLUMNS": "10000", "OPENAI_API_KEY": SECRET}
    proc = subprocess.run([sys.executable, "-m", "tokenstorm", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def run_help() -> str:
    return _help("run", "--help")


class _Reads:
    """A namespace that records every option :meth:`RunOptions.parse` reads (and has none: all defaults)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.names.append(name)
        raise AttributeError(name)


class _Declared:
    """A parser that records what :func:`add_options` declares: flag -> add_argument keywords."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}
        self.defaults: dict[str, Any] = {}

    def add_argument(self, flag: str, **kw: Any) -> None:
        self.options[flag] = kw

    def set_defaults(self, **kw: Any) -> None:
        self.defaults.update(kw)


def _declared() -> _Declared:
    parser = _Declared()
    add_options(parser)
    return parser


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _entries(text: str, flag: str) -> list[str]:
    """Each entry of ``flag`` in a help text: its line and the help lines under it, whitespace collapsed."""
    lines = text.splitlines()
    out = []
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith(f"{flag} ") and ln.startswith("  -"):
            body = [ln]
            for more in lines[i + 1 :]:
                if not more.startswith("   ") or more.lstrip().startswith("-"):
                    break
                body.append(more)
            out.append(" ".join(" ".join(body).split()))
    return out


def test_run_help_lists_every_option_run_options_reads(run_help: str) -> None:
    """Derived from RunOptions itself: each option its parse reads (tokenstorm's and Locust's -u/-r/-f...)
    is in the help; a new RunOptions field read from a new option fails here until --help shows it."""
    reads = _Reads()
    RunOptions.parse(reads)
    assert len(set(reads.names)) >= 40  # the recorder saw the parse (one or more options per field)
    missing = [_flag(d) for d in sorted(set(reads.names)) if not re.search(rf"{re.escape(_flag(d))}\b", run_help)]
    assert missing == []


def test_every_declared_option_is_listed_with_its_help_and_default(run_help: str) -> None:
    flat = " ".join(run_help.split())
    declared = _declared()
    assert set(declared.options) == {_flag(d) for d in OPTION_DESTS}
    for flag, kw in declared.options.items():
        help_text = " ".join(str(kw.get("help", "")).split())
        assert help_text, f"{flag} has no help"
        default = kw.get("default")
        if flag == "--api-key":
            shown = "$OPENAI_API_KEY"  # never its value
        elif default in ("", None, False):
            shown = None
        else:
            shown = f"{default:g}" if isinstance(default, float) else str(default)
        entries = _entries(run_help, flag)
        assert len(entries) == 1, f"{flag} is not in tokenstorm run --help once"
        assert help_text in entries[0], f"{flag}: its help text is not beside it"
        if shown is not None:
            assert f"(default: {shown})" in entries[0], f"{flag}: default {shown} not shown"
    assert "Locust's options" in flat


def test_options_are_grouped_by_topic(run_help: str) -> None:
    ours = run_help[: run_help.index("Locust's options")]
    lines = ours.splitlines()
    headings = [i for i, ln in enumerate(lines) if ln in {f"{t.title}:" for t in TOPICS}]
    assert [lines[i][:-1] for i in headings] == [t.title for t in TOPICS]  # every topic, in order
    topic_at = {}
    for n, i in enumerate(headings):
        end = headings[n + 1] if n + 1 < len(headings) else len(lines)
        for ln in lines[i + 1 : end]:
            if ln.startswith("  --"):
                topic_at[ln.split()[0]] = lines[i][:-1]
    expected = {f.flag: t.title for t in TOPICS for f in t.flags}
    assert topic_at == expected
    for dest in ("model", "api_key", "slo", "steps", "gpu_monitor", "run_dir"):
        assert _flag(dest) in topic_at  # the topics README's users look under


def test_web_host_help_says_tokenstorm_binds_loopback(run_help: str) -> None:
    declared = _declared()
    assert declared.defaults["web_host"] == "127.0.0.1"  # what the help must say
    web_host = _entries(run_help, "--web-host")
    assert len(web_host) == 2  # tokenstorm's topic, and Locust's own Web UI options
    for ln in web_host:
        assert "(default: 127.0.0.1)" in ln and "all interfaces" in ln and "Defaults to '*'" not in ln
    assert "Defaults to '*' (all interfaces)" not in run_help


def test_run_help_never_shows_the_api_key(run_help: str) -> None:
    assert SECRET not in run_help


def test_run_help_names_every_bundled_locustfile_with_its_purpose(run_help: str) -> None:
    for path in sorted((ROOT / "locustfiles").glob("*.py")):
        first = path.read_text(encoding="utf-8").split('"""')[1].strip().splitlines()[0].rstrip(":")
        assert f"{path.stem} " in run_help and first in run_help


def test_run_name_help_is_run_help(run_help: str) -> None:
    assert _help("run", "mixed", "--headless", "--help") == run_help


def test_top_help_lists_the_commands_and_every_tokenstorm_option() -> None:
    text = _help("--help")
    for command in ("run NAME_OR_PATH", "report [RUN_DIR]", "compare RUN", "emulator", "examples DIR"):
        assert command in text
    for flag in _declared().options:
        assert re.search(rf"^\s+{re.escape(flag)}\b", text, re.M), flag
    assert SECRET not in text
