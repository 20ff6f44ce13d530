"""``tokenstorm.emulator.check_args``: bad emulator arguments are one line that says what to fix, good ones pass."""

from __future__ import annotations

import pytest

from tokenstorm.emulator import FAULT_KINDS, EmulatorConfig, check_args
from tokenstorm.emulator._args import parse_args


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--ttft-ms", "300", "--itl-ms", "20", "--fault", "drop=0.05"],
        ["--itl-ms=2.5", "--jitter-ms", "0", "--tokens-per-chunk", "4", "--max-num-seqs", "16"],
        ["--fault", "drop", "--fault", "500=0", "--fault", "malformed=1", "--seed", "-3"],
        ["--reasoning-format", "tags", "--reasoning-share", "0.5", "--empty-chunk-share", "0.1"],
        ["--api-key", "sk-x", "--model", "m", "--port", "0", "--exit-with-stdin", "--host", "::1"],
        ["--frontend-ms", "40", "--enable-per-request-metrics", "--max-num-seqs", "4"],
        *(["--fault", f"{kind}=0.5"] for kind in FAULT_KINDS),
    ],
)
def test_arguments_the_emulator_runs_with_are_fine(args: list[str]) -> None:
    assert check_args(args) is None


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--itl-mss", "5"], "--itl-mss: unknown option (did you mean --itl-ms?)"),
        (["--itl", "5"], "--itl: unknown option (did you mean --itl-ms?)"),  # no abbreviation taken silently
        (["--ttft-ms", "abc"], "--ttft-ms 'abc': expected a number"),
        (["--itl-ms=abc"], "--itl-ms 'abc': expected a number"),
        (["--ttft-ms", "nan"], "--ttft-ms 'nan': expected a finite number"),
        (["--itl-ms", "-5"], "--itl-ms -5: must be >= 0"),
        (["--frontend-ms", "-1"], "--frontend-ms -1: must be >= 0"),
        (["--enable-per-request-metrics", "yes"], "'yes': unexpected argument (every setting is a --flag VALUE)"),
        (["--max-num-seqs", "0"], "--max-num-seqs 0: must be >= 1"),
        (["--tokens-per-chunk", "1.5"], "--tokens-per-chunk '1.5': expected a whole number"),
        (["--seed", "x"], "--seed 'x': expected a whole number"),
        (["--port", "70000"], "--port 70000: must be <= 65535"),
        (["--reasoning-share", "1.5"], "--reasoning-share 1.5: must be in [0, 1]"),
        (["--ttft-ms"], "--ttft-ms: expected one argument"),
        (["--fault", "bogus=2"], f"--fault bogus=2: unknown fault 'bogus'; known: {', '.join(FAULT_KINDS)}"),
        (["--fault", "drp=0.1"], "--fault drp=0.1: unknown fault 'drp' (did you mean drop?)"),
        (["--fault", "drop=2"], "--fault drop=2: probability must be in [0, 1]"),
        (["--fault", "drop=-0.1"], "--fault drop=-0.1: probability must be in [0, 1]"),
        (["--fault", "drop=often"], "--fault drop=often: probability must be a number, e.g. drop=0.05"),
        (["--ttft-ms", "5", "300"], "'300': unexpected argument (every setting is a --flag VALUE)"),
        (["--help"], "--help: not a setting here (see python -m tokenstorm.emulator --help)"),
        (
            ["--truth-log", "/no/such/dir/t.jsonl"],
            "--truth-log /no/such/dir/t.jsonl: no folder '/no/such/dir' to write it in",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_nothing_is_printed_or_exits(
    args: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_args(args) == line
    assert capsys.readouterr() == ("", "")  # no usage text, no SystemExit (pytest would have failed on it)


def test_reasoning_format_outside_the_choices_names_them() -> None:
    line = check_args(["--reasoning-format", "xml"])
    assert line is not None and "\n" not in line
    assert line.startswith("--reasoning-format: invalid choice: 'xml'") and "field" in line and "prefilled" in line


def test_echo_auth_is_a_fault_kind_and_a_config_leaves_the_seed_to_each_start() -> None:
    assert "echo_auth" in FAULT_KINDS
    assert EmulatorConfig().seed is None  # None: each server draws its own (EmulatorServer.seed)


def test_the_front_end_and_per_request_metrics_reach_the_config_and_are_off_by_default() -> None:
    _, config = parse_args(["--frontend-ms", "40", "--enable-per-request-metrics"])
    assert (config.frontend_s, config.per_request_metrics) == (0.04, True)
    _, config = parse_args([])
    assert (config.frontend_s, config.per_request_metrics) == (0.0, False)
    assert EmulatorConfig().per_request_metrics is False
