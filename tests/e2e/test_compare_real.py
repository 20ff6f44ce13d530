"""``reports compare`` on two real runs against a real vLLM server that differ in one option, beside
a `vllm bench serve` result recorded from the same kind of server: the option is named as a
difference (and as a load difference), the server's version is each run's (GET /version), and
the other tool's file sits in the same table."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_locust
from tokenstorm.reports import compare_runs

pytestmark = pytest.mark.e2e

FOREIGN = Path(__file__).resolve().parents[1] / "fixtures" / "foreign"


def _run(vllm_server: str, tmp_path: Path, max_tokens: int) -> Path:
    tmp_path.mkdir()
    run = run_locust(tmp_path, "chat.py", "--host", vllm_server, "--model", "tiny", "--chat-turns", "1",
                     "--chat-think-time", "0-0", "--max-tokens", str(max_tokens),
                     "-u", "2", "-r", "2", "-t", "4s")  # fmt: skip
    assert run.returncode in (0, 1, 5) and run.run_dir is not None, run.output[-3000:]
    return run.run_dir


def test_compare_of_two_real_runs_names_the_differing_option(vllm_server: str, tmp_path: Path) -> None:
    with urllib.request.urlopen(f"{vllm_server}/version", timeout=10) as resp:
        version = json.loads(resp.read())["version"]
    short = _run(vllm_server, tmp_path / "short", 8)
    long = _run(vllm_server, tmp_path / "long", 24)
    c = compare_runs([short, long, FOREIGN / "vllm-bench-serve-0.32.0.json"])
    diffs: dict[str, Any] = dict(c.deployment_diffs)
    assert diffs["option max_tokens"][:2] == ["8", "24"]
    assert any(line.startswith("max tokens: 8 (") for line in c.load_diffs), c.load_diffs
    ctx = dict(c.context_rows())
    assert ctx["server version"][:2] == [version, version]  # captured from the server, alike: not a difference
    assert "server version" not in diffs
    assert ctx["simulated"][:2] == ["no (a real server)"] * 2
    assert c.columns[2].tool.startswith("vllm bench serve")
    text = c.to_text()
    assert "option max_tokens" in text and "LOAD DIFFERS" in text
