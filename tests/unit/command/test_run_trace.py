"""``tokenstorm run trace`` runs the bundled trace replay (``trace_replay.py``: a ``trace.py`` would replace
the standard library's ``trace`` module in the run), with every other argument unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tokenstorm import cli


def test_run_trace_is_locust_f_the_bundled_trace_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(cli, "_run_locust", lambda argv: calls.append(argv) or 0)
    cli.main(["run", "trace", "--headless", "--trace", "t.jsonl", "--trace-speed", "2"])
    cli.main(["run", "trace.py,shape_steps", "--trace", "t.jsonl"])
    replay = str(ROOT / "locustfiles" / "trace_replay.py")
    assert calls == [["-f", replay, "--headless", "--trace", "t.jsonl", "--trace-speed", "2"],
                     ["-f", f"{replay},{ROOT / 'locustfiles' / 'shape_steps.py'}", "--trace", "t.jsonl"]]  # fmt: skip
    assert "trace" in sys.stdlib_module_names and not (ROOT / "locustfiles" / "trace.py").exists()


def test_a_file_named_like_the_alias_is_still_the_users_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(cli, "_run_locust", lambda argv: calls.append(argv) or 0)
    own = tmp_path / "trace.py"
    own.write_text('"""mine"""\n')
    cli.main(["run", str(own)])
    assert calls == [["-f", str(own)]]
