"""``tokenstorm`` routes each command line where README says: ``run NAME`` is ``locust -f
locustfiles/NAME.py`` with every other argument unchanged, ``report``/``compare``/``emulator`` are those
tools' own mains; a command line it cannot run is one line on stderr and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tokenstorm.emulator.__main__
import tokenstorm.reports.__main__
from tests.conftest import LOCUST, ROOT
from tokenstorm import cli

#: what the checkout ships, read from the folder itself (the reference the CLI's lookup is checked against)
BUNDLED = sorted(p.stem for p in (ROOT / "locustfiles").glob("*.py"))


@pytest.fixture
def locust_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Locust's argv for each ``tokenstorm run`` (Locust itself not started: it would patch this process)."""
    calls: list[list[str]] = []

    def fake(argv: list[str]) -> int:
        calls.append(argv)
        return 5

    monkeypatch.setattr(cli, "_run_locust", fake)
    return calls


def test_the_checkout_bundles_the_locustfiles_readme_names() -> None:
    assert {"mixed", "chat", "contract", "code_completion", "open_loop", "shape_capacity", "shape_steps",
            "shape_sweep"} <= set(BUNDLED)  # fmt: skip


@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize("suffix", ["", ".py"])
def test_run_name_is_locust_f_the_bundled_file_with_every_other_argument_unchanged(
    name: str, suffix: str, locust_calls: list[list[str]]
) -> None:
    rest = ["--headless", "-u", "2", "--api-key", "a key with spaces", "--weights=chat=1", "ChatUser"]
    assert cli.main(["run", name + suffix, *rest]) == 5  # Locust's exit code, as it gave it
    assert locust_calls == [["-f", str(ROOT / "locustfiles" / f"{name}.py"), *rest]]


def test_bundled_names_combine_with_commas_as_locust_f_does(locust_calls: list[list[str]]) -> None:
    cli.main(["run", "mixed,shape_steps.py", "--steps", "1x5"])
    files = ROOT / "locustfiles"
    assert locust_calls[0][:2] == ["-f", f"{files / 'mixed.py'},{files / 'shape_steps.py'}"]


def test_a_path_or_url_goes_to_locust_as_given(tmp_path: Path, locust_calls: list[list[str]]) -> None:
    own = tmp_path / "my_test.py"
    own.write_text("")
    cli.main(["run", str(own), "-t", "1s"])
    cli.main(["run", "https://example.com/locustfile.py"])
    cli.main(["run", str(tmp_path)])  # a folder of locustfiles
    assert locust_calls == [["-f", str(own), "-t", "1s"], ["-f", "https://example.com/locustfile.py"],
                            ["-f", str(tmp_path)]]  # fmt: skip


def test_a_bare_bundled_name_means_the_bundled_file_and_says_so_beside_a_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locust_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mixed.py").write_text("")
    monkeypatch.chdir(tmp_path)
    cli.main(["run", "mixed.py"])
    cli.main(["run", "./mixed.py"])
    assert [c[1] for c in locust_calls] == [str(ROOT / "locustfiles" / "mixed.py"), "./mixed.py"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bundled mixed.py" in err and "./mixed.py" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "mxed"], ["'mxed'", *BUNDLED, "did you mean mixed?"]),
        (["run", "nosuch.py"], ["'nosuch.py'", *BUNDLED]),
        (["run", "some/dir/nosuch.py"], ["some/dir/nosuch.py", *BUNDLED]),
        (["run"], ["tokenstorm run NAME_OR_PATH", "mixed"]),
        (["run", "--headless", "-u", "2"], ["tokenstorm run NAME_OR_PATH"]),
        (["run", "mixed", "-f", "chat.py"], ["not -f"]),
        (["run", "mixed", "--locustfile=chat.py"], ["not -f"]),
        (["rn", "mixed"], ["'rn'", "run, report, compare, emulator", "did you mean run?"]),
    ],
)
def test_a_command_line_it_cannot_run_is_one_line_and_exit_code_2(
    argv: list[str], says: list[str], locust_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"tokenstorm{' run' if argv[0] == 'run' else ''}: ")
    for word in says:
        assert word in err, err
    assert locust_calls == []


def test_no_command_prints_the_usage_to_stderr_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: tokenstorm COMMAND" in err


@pytest.mark.parametrize(
    ("argv", "main_of", "expected"),
    [
        (["report", "runs/x", "--slo", "s.yaml"], "reports", ["build", "runs/x", "--slo", "s.yaml"]),
        (["compare", "runs/a", "runs/b", "--threshold", "5"], "reports", ["compare", "runs/a", "runs/b", "--threshold",
                                                                           "5"]),
        (["emulator", "--port", "0", "--ttft-ms", "300"], "emulator", ["--port", "0", "--ttft-ms", "300"]),
    ],
)  # fmt: skip
def test_report_compare_and_emulator_are_those_tools_own_mains(
    argv: list[str], main_of: str, expected: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def fake(args: list[str], **_names: object) -> int:
        seen.append(list(args))
        return 1

    module = tokenstorm.reports.__main__ if main_of == "reports" else tokenstorm.emulator.__main__
    monkeypatch.setattr(module, "main", fake)
    code = cli.main(argv)
    assert seen == [expected]
    assert code == (1 if main_of == "reports" else 0)  # a report's exit code (1: an SLO failed) comes through


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--headless", "--no-such-option"], 2),  # Locust's own argument error
        (["--headless", "-t", "3s", "--run-fail-error-rate", "2"], 3),  # tokenstorm's refusal, before any traffic
    ],
)
def test_exit_codes_and_errors_are_locusts_own(args: list[str], code: int, tmp_path: Path) -> None:
    """The reference is Locust itself, run on the checkout's file: ``tokenstorm run`` must end the same way."""
    own = _run([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), *args, "--run-dir", "r1"], tmp_path)
    ours = _run([sys.executable, "-m", "tokenstorm", "run", "chat", *args, "--run-dir", str(tmp_path / "r2")], ROOT)
    assert own.returncode == code, own.stderr[-2000:]
    assert ours.returncode == own.returncode, ours.stderr[-2000:]
    last = [ln for ln in ours.stderr.splitlines() if ln.strip()][-1]
    assert last.replace("tokenstorm run", "PROG") == [ln for ln in own.stderr.splitlines() if ln.strip()][-1].replace(
        "__main__.py", "PROG"
    )
    assert "Traceback" not in ours.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["report", "runs/x", "--sl", "s.yaml"], "tokenstorm: --sl: unknown option (did you mean --slo?)"),
        (["compare", "runs/a", "runs/b", "--detail"], "tokenstorm: --detail: unknown option (did you mean --details?)"),
        (["compare", "a", "b", "--thresh=5"], "tokenstorm: --thresh: unknown option (did you mean --threshold?)"),
    ],
)
def test_report_and_compare_take_whole_option_names_only(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse took a prefix of one option as that option (--sl as --slo): a mistyped or future one ran silently.
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == "" and err == says + "\n"
