"""The e2e tier's vLLM servers (CPU build) on a tiny random-weight model made offline: which, and how they start.

``tests/e2e/conftest.py`` starts the servers its tests ask for, together, in the first e2e test (about 65 s for the
three side by side). ``scripts/test.sh`` starts them earlier instead, as root: ``python -m tests.e2e.servers start DIR``
before its parallel phase, at the lowest CPU priority (nice 19: they take the CPU that phase's workers leave idle, and
are ready long before it ends), and the conftest adopts them for the e2e tier at normal priority again
(``$TOKENSTORM_E2E_SERVERS`` names their manifest). ``python -m tests.e2e.servers stop DIR`` stops what is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("TOKENSTORM_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
MANIFEST = "servers.json"

#: what the agent tests need: streamed tool calls (the hermes parser) and cached_tokens in every usage; and each
#: request's own timing (queue, TTFT from scheduling, decode, mean ITL) in its final usage chunk (issue #29)
TOOL_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--enable-prompt-tokens-details",
    "--enable-per-request-metrics",
)

#: the servers the e2e tests ask for, by fixture: the flags each is started with (and its environment)
SERVERS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "vllm_server": (TOOL_FLAGS, {}),
    # vLLM as most people start it: no --enable-auto-tool-choice, no --tool-call-parser
    "stock_vllm": ((), {}),
    # vLLM exporting its spans as OTLP/HTTP protobuf to otlp_port, without --enable-per-request-metrics
    "tracing_vllm": (("--otlp-traces-endpoint", "http://127.0.0.1:{otlp_port}/v1/traces"),
                     {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}),
}  # fmt: skip


class ServerFailed(RuntimeError):
    """A server exited, or did not answer in time; the message ends with its log's tail."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_model(out: Path) -> Path:
    """The tiny model (and its tokenizer) written into ``out``, by vLLM's venv."""
    out.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).with_name("make_tiny_model.py")
    subprocess.run([str(VLLM_PYTHON), str(script), str(out)], check=True, capture_output=True, timeout=300)
    return out


class VllmServer:
    """``vllm serve`` on the tiny model (as "tiny") with ``flags`` (and ``env_more`` in its environment), started
    at once (``nice``: its CPU priority); :meth:`ready` waits for it to answer and gives its URL."""

    def __init__(
        self, model: Path, log_dir: Path, flags: tuple[str, ...], env_more: dict[str, str], nice: int = 0
    ) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_dir / "server.log"
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "TRANSFORMERS_OFFLINE": "1",
               **env_more}  # fmt: skip
        cmd = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", "tiny", "--max-model-len", "4096", "--dtype", "bfloat16", "--enforce-eager",
               "--host", "127.0.0.1", "--port", str(port), *flags]  # fmt: skip
        log_dir.mkdir(parents=True, exist_ok=True)
        # nice: set in the child before vLLM starts (its threads and engine process inherit it); only from `start`,
        # a process with no other thread (a preexec_fn is unsafe beside threads)
        lower = (lambda: os.nice(nice)) if nice else None
        with self.log_path.open("w") as log:
            popen = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=lower)
        self.proc = psutil.Process(popen.pid)
        self._popen: subprocess.Popen[bytes] | None = popen
        self._ready = False

    @classmethod
    def adopt(cls, url: str, pid: int, log: str, created: float) -> VllmServer:
        """A server started by another process (``start``); ``psutil.NoSuchProcess`` if it no longer runs (a
        module's server stopped after its module, when a test of it is run once more) or its pid is another's."""
        server = cls.__new__(cls)
        server.url, server.log_path, server._popen, server._ready = url, Path(log), None, False
        server.proc = psutil.Process(pid)
        if server._exited() or server.proc.create_time() != created:
            raise psutil.NoSuchProcess(pid)
        return server

    def normal_priority(self) -> None:
        """Every thread of its processes back at nice 0 (``start`` lowered it; raising it again takes
        CAP_SYS_NICE: ``PermissionError`` without). A thread inherits its creator's nice value: passes until none
        is left at another."""
        for _ in range(10):
            lowered = [t.id for proc in (self.proc, *self.proc.children(recursive=True)) for t in proc.threads()
                       if _nice(t.id) not in (None, 0)]  # fmt: skip
            if not lowered:
                return
            for tid in lowered:
                with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                    os.setpriority(os.PRIO_PROCESS, tid, 0)
        raise ServerFailed(f"vLLM at {self.url}: threads still at a lowered priority after 10 passes")

    def _exited(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is not None
        try:
            return self.proc.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def _log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else "(no log)"

    def ready(self, timeout_s: float = 300) -> str:
        """Its URL, once ``GET /v1/models`` answers 200 (:class:`ServerFailed` if it exited, was stopped, or did
        not answer in ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not self._ready:
            if self._exited():
                raise ServerFailed(f"vLLM at {self.url} exited:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as resp:
                    self._ready = resp.status == 200
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerFailed(f"vLLM at {self.url} not ready in {timeout_s:.0f} s:\n{self._log_tail()}")
            if not self._ready:
                time.sleep(1)
        if self._exited():
            raise ServerFailed(f"vLLM at {self.url} was stopped (or exited)")
        return self.url

    def stop(self) -> None:
        try:
            self.proc.terminate()
            self.proc.wait(30)
        except psutil.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        except psutil.NoSuchProcess:
            pass
        if self._popen is not None:
            self._popen.wait()


def _nice(tid: int) -> int | None:
    try:
        return os.getpriority(os.PRIO_PROCESS, tid)
    except ProcessLookupError:
        return None


def can_raise_priority() -> bool:
    """Whether this process may set a nice-19 process back to 0 (root with CAP_SYS_NICE; a container's root
    usually lacks it)."""
    child = subprocess.Popen(["sleep", "5"], preexec_fn=lambda: os.nice(19))
    try:
        os.setpriority(os.PRIO_PROCESS, child.pid, 0)
        return True
    except PermissionError:
        return False
    finally:
        child.kill()
        child.wait()


def start(folder: Path, names: list[str], nice: int = 19) -> dict[str, Any]:
    """The model made and the servers ``names`` started (not waited for) at ``nice``; their manifest, written into
    ``folder`` after each start (what ``stop`` finds, however far it got)."""
    manifest: dict[str, Any] = {"model": str(make_model(folder / "model")), "otlp_port": free_port(), "servers": {}}
    for name in names:
        flags, env_more = SERVERS[name]
        flags = tuple(f.format(otlp_port=manifest["otlp_port"]) for f in flags)
        server = VllmServer(Path(manifest["model"]), folder / name, flags, env_more, nice=nice)
        manifest["servers"][name] = {"url": server.url, "pid": server.proc.pid, "log": str(server.log_path),
                                     "created": server.proc.create_time()}  # fmt: skip
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def wait(folder: Path) -> None:
    """Every server of ``folder``'s manifest answering (one that exited is left to the e2e tier to replace)."""
    path = folder / MANIFEST
    for entry in json.loads(path.read_text())["servers"].values() if path.exists() else ():
        with contextlib.suppress(psutil.Error, ServerFailed):
            VllmServer.adopt(**entry).ready()


def stop(folder: Path) -> None:
    """Every server of ``folder``'s manifest that still runs, stopped."""
    path = folder / MANIFEST
    if not path.exists():
        return
    for entry in json.loads(path.read_text())["servers"].values():
        with contextlib.suppress(psutil.Error):  # stopped already (or its pid another process's)
            VllmServer.adopt(**entry).stop()
    path.unlink()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "wait", "stop"):
        print("usage: python -m tests.e2e.servers start|wait|stop DIR", file=sys.stderr)
        return 2
    folder = Path(argv[1]).resolve()
    if argv[0] != "start":
        (stop if argv[0] == "stop" else wait)(folder)
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    stop(folder)  # what a run that was killed left running
    if not can_raise_priority():
        print(
            "tokenstorm tests: the e2e tier starts its vLLM servers itself (their priority could not be raised"
            " again after nice 19: no CAP_SYS_NICE)"
        )
        return 0
    # A server named by $TOKENSTORM_VLLM_URL is used instead of the session's own (as the conftest does)
    names = [n for n in SERVERS if not (n == "vllm_server" and os.environ.get("TOKENSTORM_VLLM_URL"))]
    manifest = start(folder, names)
    print(f"tokenstorm tests: {len(names)} vLLM servers starting at nice 19 ({folder / MANIFEST})")
    return 0 if manifest else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
