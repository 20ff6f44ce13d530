"""Starts a real vLLM server (CPU build) serving a tiny random-weight model made offline.

The vLLM venv is ``.venv-vllm`` (made by scripts/test.sh) or ``$TOKENSTORM_VLLM_PYTHON``;
``$TOKENSTORM_VLLM_URL`` points the tests at a server already running the tiny model as "tiny".
The server is shared by every e2e test of the session and stopped at the end.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("TOKENSTORM_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not VLLM_PYTHON.exists():
        pytest.fail(
            f"the vLLM CPU build is not installed at {VLLM_PYTHON}: run `bash scripts/test.sh`, "
            "which installs it, or set TOKENSTORM_VLLM_PYTHON"
        )
    out = tmp_path_factory.mktemp("tiny-model")
    subprocess.run(
        [str(VLLM_PYTHON), str(Path(__file__).with_name("make_tiny_model.py")), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


#: what the agent tests need: streamed tool calls (the hermes parser) and cached_tokens in every usage; and each
#: request's own timing (queue, TTFT from scheduling, decode, mean ITL) in its final usage chunk (issue #29)
TOOL_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--enable-prompt-tokens-details",
    "--enable-per-request-metrics",
)


@pytest.fixture(scope="session")
def vllm_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.environ.get("TOKENSTORM_VLLM_URL"):
        # A server already running the tiny model as "tiny" (saves its start-up when iterating), started with
        # TOOL_FLAGS.
        yield os.environ["TOKENSTORM_VLLM_URL"].rstrip("/")
        return
    yield from serve_vllm(request.getfixturevalue("tiny_model"), tmp_path_factory, *TOOL_FLAGS)


def serve_vllm(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, *flags: str, env_more: dict[str, str] | None = None
) -> Iterator[str]:
    """Start ``vllm serve`` on the tiny model (as "tiny") with ``flags`` (and ``env_more`` in its environment),
    yield its URL, stop it."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm-log") / "server.log"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **(env_more or {}),
    }
    cmd = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny_model),
        "--served-model-name",
        "tiny",
        "--max-model-len",
        "4096",
        "--dtype",
        "bfloat16",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *flags,
    ]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        try:
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"vLLM exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"vLLM not ready in 300 s:\n{log_path.read_text()[-3000:]}")
                time.sleep(1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def scrape(url: str) -> dict[str, float]:
    """Sum each metric family of vLLM's /metrics over its labels (for before/after deltas)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


@contextlib.contextmanager
def client_core_of_its_own(url: str) -> Iterator[None]:
    """The vLLM server at ``url`` (every thread of its processes) on CPU 1, this process — and so the load
    generator it starts — on CPU 0; both as they were after. Skips where that cannot be done."""
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        # CI's machine has two; a one-core machine cannot keep the client off the server's core at all
        pytest.skip("needs two CPU cores: one for the load generator, one for the vLLM server")
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    listening = [c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.pid]
    if not listening:
        # only with $TOKENSTORM_VLLM_URL at another machine (the tests' own server is always found here)
        pytest.skip(
            f"the vLLM server at {url} is not a process of this machine (port {port}): its CPUs cannot be pinned; "
            "unset TOKENSTORM_VLLM_URL to let the tests start one here"
        )
    server = psutil.Process(listening[0])
    mine, cpus = os.sched_getaffinity(0), sorted(os.sched_getaffinity(0))
    theirs: dict[int, set[int]] = {}
    try:
        for proc in (server, *server.children(recursive=True)):
            for thread in proc.threads():
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    theirs[thread.id] = os.sched_getaffinity(thread.id)
                    os.sched_setaffinity(thread.id, {cpus[1]})
        os.sched_setaffinity(0, {cpus[0]})
        yield
    finally:
        os.sched_setaffinity(0, mine)
        for tid, was in theirs.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, was)
