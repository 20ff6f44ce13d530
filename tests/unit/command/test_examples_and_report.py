"""What the wheel's command offers beyond ``run``: ``tokenstorm examples DIR`` copies the shipped SLO files
and trace sample (refusing to replace a file without ``--force``); ``tokenstorm report`` with no run
directory rebuilds the newest run under ``./runs/`` and says which; the tools it reaches name
``tokenstorm ...`` in their help and errors, while ``python -m ...`` keeps its own name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_run_dir, request
from tokenstorm import cli

#: what the checkout ships as examples, read from its folders (the reference for what is copied)
SHIPPED = sorted(
    [*(p.name for p in (ROOT / "slo").glob("*.yaml")), *(p.name for p in (ROOT / "traces").glob("*.jsonl"))]
)


def test_examples_copies_every_shipped_file_and_says_how_to_use_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert "slo.yaml" in SHIPPED and "mooncake_sample.jsonl" in SHIPPED
    assert cli.main(["examples", "ex"]) == 0
    assert sorted(p.name for p in (tmp_path / "ex").iterdir()) == SHIPPED
    for name in SHIPPED:
        source = ROOT / ("traces" if name.endswith(".jsonl") else "slo") / name
        assert (tmp_path / "ex" / name).read_bytes() == source.read_bytes()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"tokenstorm examples: wrote {len(SHIPPED)} files in ex/")
    for name in SHIPPED:  # one line each, with a command that uses the copy
        (line,) = [ln for ln in lines[1:] if ln.split()[0] == f"ex/{name}"]
        flag = "--trace" if name.endswith(".jsonl") else "--slo"
        assert "try: tokenstorm run " in line and f"{flag} ex/{name}" in line


def test_examples_never_replaces_a_file_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "slo.yaml").write_text("mine\n")
    assert cli.main(["examples", "ex"]) == 2
    err = capsys.readouterr().err
    assert err == "tokenstorm examples: ex already has slo.yaml: nothing written (--force replaces them)\n"
    assert [p.name for p in (tmp_path / "ex").iterdir()] == ["slo.yaml"]
    assert (tmp_path / "ex" / "slo.yaml").read_text() == "mine\n"
    assert cli.main(["examples", "ex", "--force"]) == 0
    assert (tmp_path / "ex" / "slo.yaml").read_bytes() == (ROOT / "slo" / "slo.yaml").read_bytes()
    assert cli.main(["examples"]) == 2 and "which folder?" in capsys.readouterr().err


def _run(tmp_path: Path, name: str, started_epoch_s: float) -> Path:
    records = [request(i, ttft_ms=100) for i in range(20)]
    return make_run_dir(tmp_path / "runs" / name, records, {"started_epoch_s": started_epoch_s, "status": "finished"})


def test_report_without_a_run_directory_rebuilds_the_newest_run_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    older = _run(tmp_path, "2026-12-03T09-00-00_mixed", 1000.0)
    newer = _run(tmp_path, "2026-12-03T08-00-00_chat", 2000.0)  # started later, though its name sorts first
    (tmp_path / "runs" / "notes").mkdir()  # a folder that is no run
    assert cli.main(["report"]) == 0
    out, err = capsys.readouterr()
    assert err == f"tokenstorm report: rebuilding the newest run, {Path('runs') / newer.name}\n"
    assert out.startswith("tokenstorm report: passed: ")
    assert (newer / "report.html").is_file() and not (older / "report.html").exists()
    assert json.loads((newer / "summary.json").read_text())["verdict"] == "passed"
    assert cli.main(["report", "--slo", str(ROOT / "slo" / "sweep.yaml")]) == 0  # options alone: still the newest
    assert "rebuilding the newest run" in capsys.readouterr().err
    assert cli.main(["report", str(older)]) == 0 and (older / "report.html").is_file()  # a run named: that one


def test_report_without_any_run_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tokenstorm report: no run under ./runs/ to rebuild")


def _help(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", *args, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize(
    ("tokenstorm", "own"),
    [
        (["tokenstorm", "emulator"], ["tokenstorm.emulator"]),
        (["tokenstorm", "report"], ["tokenstorm.reports", "build"]),
        (["tokenstorm", "compare"], ["tokenstorm.reports", "compare"]),
    ],
)
def test_help_names_the_command_that_was_typed(tokenstorm: list[str], own: list[str]) -> None:
    ours = _help(*tokenstorm)
    assert ours.startswith(f"usage: {' '.join(tokenstorm)} ") and "python -m" not in ours.split("\n\n")[0]
    assert _help(*own).startswith(f"usage: python -m {' '.join(own)} ")


def test_an_emulator_error_names_the_command_that_was_typed() -> None:
    typed = (
        (["tokenstorm", "emulator"], "tokenstorm emulator"),
        (["tokenstorm.emulator"], "python -m tokenstorm.emulator"),
    )
    for cmd, prog in typed:
        proc = subprocess.run([sys.executable, "-m", *cmd, "--itl", "5"], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 2
        assert proc.stderr == f"{prog}: --itl: unknown option (did you mean --itl-ms?)\n"
