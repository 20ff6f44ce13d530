"""Shared helpers: run Locust headless as a user would, and read what it left behind."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tokenstorm.workloads.rundir import read_records

ROOT = Path(__file__).resolve().parent.parent
LOCUST = [sys.executable, "-m", "locust"]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is an e2e test (``-m e2e`` selects the tier, whatever its module says). Under
    ``pytest -n`` a timing-sensitive test (``serial``) or an e2e one would run beside the other workers' loads and
    judge their contention, not tokenstorm: it is skipped there, saying why (``scripts/test.sh`` deselects them
    from its parallel phase and runs them alone after)."""
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.e2e)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    why = "timing-sensitive: runs alone, not beside pytest -n's workers (run it without -n)"
    alone = pytest.mark.skip(reason=why)
    for item in items:
        if item.get_closest_marker("serial") or item.get_closest_marker("e2e"):
            item.add_marker(alone)


@dataclass
class LocustRun:
    returncode: int
    output: str
    run_dir: Path | None
    csv_prefix: Path

    def records(self) -> list[dict]:
        assert self.run_dir is not None, self.output[-3000:]
        return [r.as_row() for r in read_records(self.run_dir)]

    def run_json(self) -> dict:
        assert self.run_dir is not None
        return json.loads((self.run_dir / "run.json").read_text())

    def locust_stats(self) -> dict[tuple[str, str], dict[str, int]]:
        """Locust's own final counts per (type, name), from ``--json-file``."""
        entries = json.loads(Path(f"{self.csv_prefix}.json").read_text())
        return {
            (e["method"], e["name"]): {"requests": e["num_requests"], "failures": e["num_failures"]} for e in entries
        }


def made_once(tmp_path_factory: pytest.TempPathFactory, run_uid: str, name: str, make: Callable[[Path], None]) -> Path:
    """A folder ``make`` fills once per test run, however many pytest-xdist workers ask for it (a module-scoped fixture
    is made again on every worker that runs one of the module's tests: a wheel's venv is ~30 CPU-s): the first to ask
    makes it under a lock, the others wait and share it. ``run_uid``: xdist's ``testrun_uid`` fixture."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the folder the workers' own temp folders share
    folder = root / f"{name}-{run_uid}"
    with (root / f"{name}-{run_uid}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".made").exists():  # not made, or a worker before failed to
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


def free_port() -> int:
    """A TCP port free on loopback right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def master_ports() -> tuple[str, ...]:
    port = str(free_port())
    return ("--master-bind-port", port, "--master-port", port)


def run_locust(tmp_path: Path, locustfile: str, *args: str, timeout_s: float = 180) -> LocustRun:
    """Run ``locust -f locustfiles/<locustfile> --headless ...`` in ``tmp_path``."""
    csv_prefix = tmp_path / "stats"
    files = ",".join(str(ROOT / f) if "/" in f else str(ROOT / "locustfiles" / f) for f in locustfile.split(","))
    cmd = [
        *LOCUST,
        "-f",
        files,
        "--headless",
        "--only-summary",
        "--run-dir",
        str(tmp_path / "runs"),
        "--json-file",
        str(csv_prefix),
        # What these runs check is not the load generator's clock (the wire and timing-truth tests
        # do, with the default): on a busy 2-core CI box a run may read late, said, not failed.
        *(() if "--timing-verdict" in args else ("--timing-verdict", "warn")),
        # Nor the SLOs' intervals (the interval tests give --confidence): a run of seconds judged at 95% is
        # mostly inconclusive (exit 6), which is right, and not what a test of anything else is about.
        *(() if "--confidence" in args else ("--confidence", "0")),
        # --processes makes a master on Locust's port 5557 unless told: a free one, so runs beside it (pytest -n)
        # never meet another run's workers.
        *(master_ports() if "--processes" in args and "--master-bind-port" not in args else ()),
        *args,
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=timeout_s)
    runs = sorted((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else []
    return LocustRun(proc.returncode, proc.stdout + proc.stderr, runs[-1] if runs else None, csv_prefix)


@pytest.fixture
def locust_runner(tmp_path: Path):  # type: ignore[no-untyped-def]
    def _run(locustfile: str, *args: str, timeout_s: float = 180) -> LocustRun:
        return run_locust(tmp_path, locustfile, *args, timeout_s=timeout_s)

    return _run


def make_run_dir(path: Path, records: list[dict], meta: dict | None = None) -> Path:
    """Write a run directory by hand (constructed data with known answers)."""
    from tokenstorm.workloads.rundir import RequestRecord

    path.mkdir(parents=True, exist_ok=True)
    with (path / "requests.jsonl").open("w") as fh:
        for r in records:
            rec = RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **r})
            fh.write(rec.to_json() + "\n")
    doc = {"target": "http://gpu:8000", "model": "m", "simulated": False, "started_epoch_s": 1000.0,
           "options": {}, "records": len(records)}  # fmt: skip
    doc = {**doc, **(meta or {})}
    # Constructed runs of a few dozen records have known answers on their figures: judged as they are, unless
    # the test gives a --confidence (a p95 of 20 requests is inconclusive at 95%, as the interval tests show).
    doc["options"] = {"confidence": 0, **(doc.get("options") or {})}
    (path / "run.json").write_text(json.dumps(doc))
    return path


def request(i: int, ttft_ms: float, workload: str = "chat", ok: bool = True, **kw: object) -> dict:
    """One successful (or failed) request record starting at 1000 + i/10 s."""
    base: dict = {"workload": workload, "start_epoch_s": 1000.0 + i / 10, "ok": ok}
    if ok:
        base.update(ttft_s=ttft_ms / 1000, e2e_s=ttft_ms / 1000 + 0.5, output_tokens=51, prompt_tokens=100,
                    tpot_s=0.01, itl_gaps_s=[0.01] * 50, finish_reason="length")  # fmt: skip
    else:
        base.update(error_category="http_5xx", status_code=500, error_detail="HTTP 500: boom")
    base.update(kw)
    return base
