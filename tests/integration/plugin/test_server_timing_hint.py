"""A run whose server sends no per-request timing says so once, naming the flag — from the master when workers
measure (their records reach it late), at the end of a short run — and a run whose server sends it says nothing
and keeps it on every record."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import free_port, run_locust
from tokenstorm.emulator import EmulatorProcess

HINT = "sent no timing of its own"
FAST = ("--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", "8", "--ignore-eos")


def test_workers_records_without_server_timing_make_the_master_say_the_flag_once(tmp_path: Path) -> None:
    port = str(free_port())
    with EmulatorProcess("--ttft-ms", "10", "--itl-ms", "2") as emu:
        run = run_locust(tmp_path, "chat.py", "--host", emu.url, "--processes", "2", "--master-bind-port", port,
                         "--master-port", port, "-u", "4", "-r", "4", "-t", "6s", *FAST)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    assert len([r for r in run.records() if r["ok"]]) >= 20
    lines = [line for line in run.output.splitlines() if HINT in line]
    assert len(lines) == 1, run.output[-3000:]
    assert "start the emulator with --enable-per-request-metrics" in lines[0]  # vLLM's flag, as the emulator names it


def test_a_short_run_on_the_emulator_says_its_flag_at_the_end_and_with_it_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "without").mkdir()
    (tmp_path / "with").mkdir()
    slow = "--ttft-ms 400 --itl-ms 5"
    without = run_locust(tmp_path / "without", "chat.py", "-u", "1", "-r", "1", "-t", "2s", *FAST,
                         "--emulator-args", f"{slow} --no-enable-per-request-metrics")  # fmt: skip
    assert without.returncode == 0, without.output[-3000:]
    done = [r for r in without.records() if r["ok"]]
    assert 0 < len(done) < 20 and all(r["server_ttft_s"] is None for r in done)
    lines = [line for line in without.output.splitlines() if HINT in line]
    told = "leave --no-enable-per-request-metrics out of --emulator-args"
    assert len(lines) == 1 and told in lines[0], without.output[-3000:]
    with_it = run_locust(tmp_path / "with", "chat.py", "-u", "1", "-r", "1", "-t", "2s", *FAST,
                         "--emulator-args", slow)  # fmt: skip
    # (the built-in emulator sends them unless told not to)
    assert with_it.returncode == 0, with_it.output[-3000:]
    done = [r for r in with_it.records() if r["ok"]]
    assert done and all(r["server_ttft_s"] is not None and r["overhead_s"] is not None for r in done)
    assert HINT not in with_it.output
