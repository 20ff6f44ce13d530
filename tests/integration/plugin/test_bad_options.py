"""Bad options and how runs end (issue #20): one line naming the option, exit 3, before any traffic and with no
run directory left behind; what the server receives is what the records say was asked; a run ends the same
way (``run.json``, the console) whether or not its users ran in worker processes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import LOCUST, ROOT, master_ports, run_locust
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.rundir import read_records


def _refused(tmp_path: Path, *args: str) -> tuple[list[str], str]:
    run_dir = tmp_path / "runs"
    out = subprocess.run([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "-t", "3s", "-u", "1",
                          "--run-dir", str(run_dir), *args],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    text = out.stdout + out.stderr
    assert out.returncode == 3, text[-2000:]
    assert "Traceback" not in text and "Fatal Python error" not in text, text[-2000:]
    assert not run_dir.exists() or not any(run_dir.iterdir()), "a run directory was made for a run that never ran"
    return [line for line in text.splitlines() if line.startswith("tokenstorm:")], text


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--metrics-port", "99999"), "--metrics-port 99999"),
        (("--run-fail-error-rate", "2"), "--run-fail-error-rate"),
        (("--max-tokens", "99999999999999999999"), "--max-tokens"),
        (("--extra-body", '{"max_tokens": 99999999999999999999999999999}'), "--extra-body"),
        (("--extra-body", '{"max_tokens": 0}'), "--extra-body max_tokens"),
        (("--stall-timeout", "-1"), "--stall-timeout"),
        (("--emulator-args", "--itl-mss 5"), "--itl-ms"),
        (("--emulator-args", "--ttft-ms abc"), "--ttft-ms"),
        (("--emulator-args", "--fault bogus=2"), "bogus"),
        # issue #28: each of these once ran (or sent null) instead of being refused
        (("-u", "0"), "-u 0"),
        (("--warmup", "99999"), "--warmup 99999"),
        (("--targets", ",,,"), "--targets"),
        (("--emulator-args", '"'), "--emulator-args"),
        (("--extra-body", '{"temperature": 1e400}'), "--extra-body"),
    ],
)
def test_a_bad_value_is_one_line_and_exit_3_before_any_traffic(tmp_path: Path, args: tuple[str, ...],
                                                               named: str) -> None:  # fmt: skip
    lines, text = _refused(tmp_path, *args)
    assert len(lines) == 1 and named in lines[0], text[-2000:]
    assert "usage:" not in text  # the emulator's usage text, cut mid-word, is gone


def test_options_are_taken_by_their_whole_names_only(tmp_path: Path) -> None:
    # A prefix of one option was that option: --api-k ran as --api-key, its value sent to the server as the key.
    cmd = [*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "-t", "1s", "--api-k", "hunter2-s3cret"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[-2000:]
    assert [line for line in text.splitlines() if line.strip()] == [
        "tokenstorm: --api-k: unknown option (did you mean --api-key?)"
    ]
    assert not (tmp_path / "runs").exists()  # nothing ran
    # Whole names, Locust's and tokenstorm's, are taken as before.
    whole = ["--users", "1", "--spawn-rate", "1", "--run-time", "2s", "--max-tokens", "4"]
    run = run_locust(tmp_path, "chat.py", *whole, "--api-key", "hunter2-s3cret")
    assert run.returncode == 0 and run.run_dir is not None, run.output[-2000:]
    assert run.run_json()["options"]["max_tokens"] == 4 and "hunter2-s3cret" not in run.output


def test_a_run_dir_that_is_a_file_is_refused_before_any_traffic(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("x")
    with EmulatorProcess("--truth-log", str(tmp_path / "truth.jsonl")) as emu:
        out = subprocess.run([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "-t", "3s",
                              "--host", emu.url, "--run-dir", str(tmp_path / "not-a-folder")],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    text = out.stdout + out.stderr
    lines = [line for line in text.splitlines() if line.startswith("tokenstorm:")]
    assert out.returncode == 3 and len(lines) == 1 and "--run-dir" in lines[0] and "is a file" in lines[0], text[-2000:]
    assert "Traceback" not in text
    truth = tmp_path / "truth.jsonl"
    assert not truth.exists() or not truth.read_text().strip(), "traffic was sent for a run that records nothing"


def test_the_records_say_the_max_tokens_the_server_was_sent(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    with EmulatorProcess("--truth-log", str(truth), "--ttft-ms", "20", "--itl-ms", "2") as emu:
        run = run_locust(tmp_path, "code_completion.py", "--host", emu.url, "-u", "2", "-r", "2", "-t", "4s",
                         "--extra-body", '{"max_tokens": 7}', "--ignore-eos", "--wait-time", "0-0.1")  # fmt: skip
    assert run.run_dir is not None, run.output[-2000:]
    records = list(read_records(run.run_dir))
    sent = [json.loads(line) for line in truth.read_text().splitlines()]
    assert records and {r.requested_max_tokens for r in records} == {7}, {r.requested_max_tokens for r in records}
    # ignore_eos: the server generated exactly what it was asked for
    assert sent and {row["output_tokens"] for row in sent} == {7}, sent[:2]
    assert {r.output_tokens for r in records if r.ok} == {7}


def test_every_request_refused_for_its_key_says_which_option_to_check(tmp_path: Path) -> None:
    with EmulatorProcess("--api-key", "the-right-key") as emu:
        run = run_locust(tmp_path, "chat.py", "--host", emu.url, "--api-key", "a-wrong-key", "-u", "2", "-t", "3s")
    # The pre-flight /v1/models already answers 401: the run stops there, saying so.
    assert run.returncode == 3, run.output[-2000:]
    assert "401" in run.output and "--api-key" in run.output and "a-wrong-key" not in run.output


def test_a_run_ends_finished_alike_with_and_without_worker_processes(tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "procs").mkdir()
    local = run_locust(tmp_path / "local", "chat.py", "-u", "2", "-r", "2", "-t", "4s", "--chat-think-time", "0-0.2")
    procs = run_locust(tmp_path / "procs", "chat.py", "--processes", "2", "-u", "2", "-r", "2", "-t", "4s",
                       "--chat-think-time", "0-0.2")  # fmt: skip
    for run in (local, procs):
        assert run.run_dir is not None, run.output[-2000:]
        assert json.loads((run.run_dir / "run.json").read_text())["status"] == "finished"
        assert run.output.count("request records in") == 1, run.output[-3000:]


def test_a_terminated_process_run_says_its_records_once(tmp_path: Path) -> None:
    proc = subprocess.Popen([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "--processes", "2",
                             *master_ports(), "-u", "2", "-r", "2", "-t", "60s", "--run-dir", str(tmp_path / "runs"),
                             "--timing-verdict", "warn", "--chat-think-time", "0-0.2"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    time.sleep(12)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=90)
    assert output.count("request records in") == 1, output[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    # SIGTERM 12 s into its planned 60 s: the run was interrupted, and exits as incomplete (issue #28)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert proc.returncode == 4, output[-3000:]


def test_a_stalled_stream_ends_as_a_stall_and_a_long_healthy_one_does_not(tmp_path: Path) -> None:
    # Every stream pauses 3 s once; with --stall-timeout 1 each one is a stall. The run's healthy
    # requests (100 ms ITL, ~2 s each) are longer than the stall timeout and are not cut.
    with EmulatorProcess("--fault", "stall=0.5", "--stall-s", "3", "--ttft-ms", "50", "--itl-ms", "100",
                         "--seed", "5") as emu:  # fmt: skip
        run = run_locust(tmp_path, "code_completion.py", "--host", emu.url, "-u", "3", "-r", "3", "-t", "8s",
                         "--stall-timeout", "1", "--max-tokens", "20", "--ignore-eos", "--wait-time", "0")  # fmt: skip
    assert run.run_dir is not None, run.output[-2000:]
    records = [r for r in read_records(run.run_dir) if r.error_category != "cancelled"]
    stalls = [r for r in records if r.error_category == "stall"]
    healthy = [r for r in records if r.ok]
    assert stalls and all("stall timeout" in (r.error_detail or "") for r in stalls), records[:3]
    assert all(1.0 <= r.e2e_s < 3.5 for r in stalls if r.e2e_s), [r.e2e_s for r in stalls]
    assert healthy and all(r.e2e_s > 1.5 for r in healthy)  # longer than the stall timeout, not cut
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert "stall" in json.dumps(summary.get("errors", summary)), summary.keys()
