"""``tokenstorm run NAME`` is ``locust -f locustfiles/NAME.py`` to the user at the terminal: a Ctrl-C ends
both the same way, with the same exit code and the run's outputs written once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import LOCUST, ROOT

ARGS = ["--headless", "-u", "2", "-r", "2", "-t", "60s", "--timing-verdict", "warn", "--chat-think-time", "0-0.2"]


def _interrupted(cmd: list[str], cwd: Path, runs: Path, env: dict[str, str] | None = None) -> tuple[int, str, Path]:
    """Run ``cmd`` in its own process group, press Ctrl-C (SIGINT to the group, as a terminal does) a few
    seconds into the run, and return its exit code, output and run directory."""
    log = cwd / f"{runs.name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*cmd, *ARGS, "--run-dir", str(runs)], cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 90
        while not list(runs.glob("*/run.json")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(4)  # requests under way
        assert proc.poll() is None, log.read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    run_dirs = list(runs.iterdir())
    assert len(run_dirs) == 1, log.read_text()[-3000:]
    return code, log.read_text(), run_dirs[0]


def test_ctrl_c_ends_tokenstorm_run_as_it_ends_locust(tmp_path: Path) -> None:
    own = _interrupted([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py")], tmp_path, tmp_path / "locust")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's tokenstorm, from another folder
    ours = _interrupted([sys.executable, "-m", "tokenstorm", "run", "chat"], tmp_path, tmp_path / "tokenstorm", env)
    assert ours[0] == own[0], (own[0], ours[1][-3000:])
    for _code, output, run_dir in (own, ours):
        assert "Traceback" not in output, output[-3000:]
        assert output.count("request records in") == 1, output[-3000:]
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["status"] == "interrupted" and meta["records"] > 0, meta["status"]  # before -t's end
    assert (
        json.loads((ours[2] / "run.json").read_text())["status"]
        == json.loads((own[2] / "run.json").read_text())["status"]
    )
