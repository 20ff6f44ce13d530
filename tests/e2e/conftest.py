"""Real vLLM servers (CPU build) serving a tiny random-weight model made offline (``tests/e2e/servers.py``).

The vLLM venv is ``.venv-vllm`` (made by scripts/test.sh) or ``$TOKENSTORM_VLLM_PYTHON``;
``$TOKENSTORM_VLLM_URL`` points the tests at a server already running the tiny model as "tiny".
The session's server (``vllm_server``) is shared by every e2e test; a stock one (no tool calling) and a tracing
one (OTLP spans) serve the tests that ask for them. All start together (or were started by scripts/test.sh:
``$TOKENSTORM_E2E_SERVERS``); the session's server is stopped at the session's end, the other two after the module
that used them.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import free_port, run_locust
from tests.e2e.servers import SERVERS, VLLM_PYTHON, ServerFailed, VllmServer, make_model


@pytest.fixture(scope="session")
def prestarted() -> dict[str, Any] | None:
    """The manifest of the servers scripts/test.sh started before its parallel phase, if it did."""
    path = os.environ.get("TOKENSTORM_E2E_SERVERS")
    return json.loads(Path(path).read_text()) if path and Path(path).exists() else None


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory, prestarted: dict[str, Any] | None) -> Path:
    if prestarted is not None:
        return Path(prestarted["model"])
    if not VLLM_PYTHON.exists():
        pytest.fail(
            f"the vLLM CPU build is not installed at {VLLM_PYTHON}: run `bash scripts/test.sh`, "
            "which installs it, or set TOKENSTORM_VLLM_PYTHON"
        )
    return make_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def otlp_port(prestarted: dict[str, Any] | None) -> int:
    """Where the tracing server sends its spans: tokenstorm's receiver (``--otlp-port``) in the OTLP test."""
    return int(prestarted["otlp_port"]) if prestarted is not None else free_port()


def _ready(server: VllmServer) -> str:
    try:
        return server.ready()
    except ServerFailed as exc:
        pytest.fail(str(exc))


def _adopted(prestarted: dict[str, Any] | None, name: str) -> VllmServer | None:
    """The server ``name`` scripts/test.sh started, at normal priority again; None where there is none to adopt (not
    started, stopped after its module before a rerun, its priority not to be raised): the tier starts one."""
    server = None
    try:
        server = VllmServer.adopt(**(prestarted or {})["servers"][name])
        server.normal_priority()
        return server
    except (psutil.Error, KeyError, TypeError, PermissionError, ServerFailed):
        if server is not None:
            server.stop()
        return None


@pytest.fixture(scope="session")
def vllm_launches(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    otlp_port: int,
    prestarted: dict[str, Any] | None,
) -> Iterator[dict[str, VllmServer]]:
    """Every server the session's tests use, started together when the first is asked for (a start is ~40 s,
    mostly imports: side by side they overlap) — or adopted from scripts/test.sh, at normal priority again — and
    stopped at the session's end, or after the module that used it. An idle server that has served takes ~1% of a
    core (1.15% over 20 s, measured here)."""
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ()) if name in SERVERS}
    if os.environ.get("TOKENSTORM_VLLM_URL"):
        wanted.discard("vllm_server")
    launches: dict[str, VllmServer] = {}
    try:
        adopted = {name: server for name in sorted(wanted) if (server := _adopted(prestarted, name))}
        for name in sorted(wanted - set(adopted)):
            flags, env_more = SERVERS[name]
            flags = tuple(f.format(otlp_port=otlp_port) for f in flags)
            model = request.getfixturevalue("tiny_model")
            launches[name] = VllmServer(model, tmp_path_factory.mktemp(f"{name}-log"), flags, env_more)
        launches.update(adopted)
        for launch in launches.values():  # none still starting (CPU-heavy) beside the first test
            _ready(launch)
        for server in adopted.values():  # a thread its start-up made from one not yet raised
            server.normal_priority()
        yield launches
    finally:
        for launch in launches.values():
            launch.stop()


@pytest.fixture(scope="session")
def vllm_server(vllm_launches: dict[str, VllmServer]) -> str:
    """The session's server: the tiny model as "tiny", with TOOL_FLAGS."""
    if os.environ.get("TOKENSTORM_VLLM_URL"):
        # A server already running the tiny model as "tiny" (saves its start-up when iterating), started with
        # TOOL_FLAGS.
        return os.environ["TOKENSTORM_VLLM_URL"].rstrip("/")
    return _ready(vllm_launches["vllm_server"])


def _for_the_module(launches: dict[str, VllmServer], name: str) -> Iterator[str]:
    """The server ``name`` until its module ends: the next module may time the session's server."""
    yield _ready(launches[name])
    launches[name].stop()


@pytest.fixture(scope="module")
def stock_vllm(vllm_launches: dict[str, VllmServer]) -> Iterator[str]:
    """vLLM as most people start it: no --enable-auto-tool-choice, no --tool-call-parser."""
    yield from _for_the_module(vllm_launches, "stock_vllm")


@pytest.fixture(scope="module")
def tracing_vllm(vllm_launches: dict[str, VllmServer]) -> Iterator[str]:
    """vLLM exporting its spans as OTLP/HTTP protobuf to ``otlp_port``, without per-request metrics."""
    yield from _for_the_module(vllm_launches, "tracing_vllm")


_PROSE = (
    "the supplier shall deliver goods within thirty days of the order date and the buyer may terminate "
    "this agreement by written notice if any party breaches its duties of confidentiality or payment"
)
#: what the timing tests ask for: 64 tokens to every prompt (``--ignore-eos``)
CHAT_TOKENS = 64


@pytest.fixture(scope="session")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ShareGPT prompts of 45 words (~110 tokens of the tiny model): what the timing tests send."""
    rng = random.Random(11)
    words = _PROSE.split()
    data = [{"conversations": [{"from": "human", "value": " ".join(rng.choice(words) for _ in range(45))}]}
            for _ in range(128)]  # fmt: skip
    path = tmp_path_factory.mktemp("prompts") / "prompts.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="session")
def served_vllm(vllm_server: str, prompts: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session server after ~40 s of the timing tests' traffic — 160 users, more than its 128 sequences —
    once for the session: the state in which issue #19 found late reads (a server that has served traffic)."""
    warm = run_locust(
        tmp_path_factory.mktemp("warm"), "chat.py", "--host", vllm_server, "--model", "tiny", "--dataset",
        str(prompts), "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens",
        str(CHAT_TOKENS), "--ignore-eos", "-u", "160", "-r", "160", "-t", "40s", "--stop-timeout", "60",
        "--no-server-metrics",
    )  # fmt: skip
    assert warm.returncode in (0, 5), warm.output[-3000:]
    return vllm_server


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
