"""The emulator as a user starts it: bad arguments are one line, each start draws its own faults
unless ``--seed`` is given (and says which seed it drew), and ``echo_auth`` echoes credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

import tokenstorm.emulator._launcher
from tests.conftest import ROOT
from tokenstorm.emulator import EmulatorProcess

ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
REQUESTS = 24


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--itl-mss", "5"], "--itl-mss: unknown option (did you mean --itl-ms?)"),
        (["--ttft-ms", "abc"], "--ttft-ms 'abc': expected a number"),
        (["--fault", "bogus=2"], "--fault bogus=2: unknown fault 'bogus'; known: "),
        # as EmulatorProcess runs it: the stdin watcher must not turn the exit into a fatal error
        (["--exit-with-stdin", "--fault", "drop=2"], "--fault drop=2: probability must be in [0, 1]"),
    ],
)
def test_python_m_emulator_with_bad_arguments_prints_one_line_and_exits_2(args: list[str], line: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "tokenstorm.emulator", *args], input="", capture_output=True,
        text=True,
                          env=ENV, timeout=30)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"python -m tokenstorm.emulator: {line}"), proc.stderr
    assert "Traceback" not in proc.stderr and "usage:" not in proc.stderr


def test_help_still_prints_the_usage_and_exits_0() -> None:
    proc = subprocess.run([sys.executable, "-m", "tokenstorm.emulator", "--help"], capture_output=True, text=True,
        env=ENV,
                          timeout=30)  # fmt: skip
    assert proc.returncode == 0 and "--itl-ms" in proc.stdout and "echo_auth" in proc.stdout


def test_emulator_process_with_bad_arguments_raises_the_line_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_process(*_a: object, **_kw: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(tokenstorm.emulator._launcher.subprocess, "Popen", no_process)
    with pytest.raises(ValueError, match=r"^--itl-mss: unknown option \(did you mean --itl-ms\?\)$"):
        EmulatorProcess("--itl-mss", "5")


def _fault_pattern(url: str) -> str:
    """Which of REQUESTS requests the emulator failed: '1' for an injected 500, '0' for an answer."""
    body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 1, "ignore_eos": True}).encode()
    pattern = ""
    for _ in range(REQUESTS):
        req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
            pattern += "0"
        except urllib.error.HTTPError as exc:
            assert exc.code == 500
            exc.read()
            exc.close()
            pattern += "1"
    return pattern


def _seed(url: str) -> int:
    with urllib.request.urlopen(f"{url}/emulator/config", timeout=10) as resp:
        return int(json.loads(resp.read())["seed"])


def test_each_start_without_seed_draws_other_faults_and_the_seed_it_says_replays_them() -> None:
    args = ("--ttft-ms", "1", "--itl-ms", "1", "--fault", "500=0.5")
    with EmulatorProcess(*args) as first, EmulatorProcess(*args) as second:
        patterns = [_fault_pattern(first.url), _fault_pattern(second.url)]
        seeds = [_seed(first.url), _seed(second.url)]
    assert seeds[0] != seeds[1]
    assert patterns[0] != patterns[1]  # the same 24 draws twice: 1 chance in 2**24
    assert all("0" in p and "1" in p for p in patterns), patterns
    with EmulatorProcess(*args, "--seed", str(seeds[0])) as replay:  # the same seed: the same draws
        assert _fault_pattern(replay.url) == patterns[0]
        assert _seed(replay.url) == seeds[0]


def test_the_seed_drawn_is_on_the_startup_line_on_stderr() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tokenstorm.emulator", "--port", "0", "--exit-with-stdin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)  # fmt: skip
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # the line a parent waits for, printed after the seed's
        seed = _seed(ready.rsplit(" ", 1)[1].strip())
    finally:
        proc.kill()
        _, stderr = proc.communicate(timeout=10)
    assert stderr.splitlines()[0].startswith(f"tokenstorm emulator: seed {seed} (--seed {seed} "), stderr


def test_echo_auth_answers_500_with_the_credentials_the_request_sent_in_its_message() -> None:
    secret, gateway_key = "sk-live-0123456789abcdef", "gw-key-42"
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "1", "--api-key", secret) as emu:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {secret}",
                   "x-api-key": gateway_key, "X-Emulator-Fault": "echo_auth"}  # fmt: skip
        req = urllib.request.Request(f"{emu.url}/v1/chat/completions", body, headers)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=10)
        assert caught.value.code == 500
        error = json.loads(caught.value.read())["error"]
        caught.value.close()
    assert error["code"] == 500 and error["type"]
    assert f"Authorization: Bearer {secret}" in error["message"]
    assert f"x-api-key: {gateway_key}" in error["message"]


def test_echo_auth_by_probability_is_drawn_like_any_other_fault() -> None:
    with EmulatorProcess("--ttft-ms", "1", "--itl-ms", "1", "--fault", "echo_auth=1") as emu:
        body = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 2}).encode()
        req = urllib.request.Request(f"{emu.url}/v1/completions", body, {"api-key": "azure-style-key"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=10)
        assert caught.value.code == 500
        message = json.loads(caught.value.read())["error"]["message"]
        caught.value.close()
    assert "api-key: azure-style-key" in message
