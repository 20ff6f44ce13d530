"""A stock ``vllm serve`` (no tool calling) runs the default mix: agent sessions are left out, said in one
line naming the flags that would add them, and recorded in run.json, summary.json and the report. A run
that asked for agent sessions by name still stops before traffic (exit 3). The emulator's --no-tool-calls
answers tool calls as such a server does (HTTP 400)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, LocustRun, free_port
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.rundir import read_records

STOCK = "--emulator-args=--no-tool-calls --ttft-ms 50 --itl-ms 5"
LEFT_OUT = "agent sessions left out: the server does not call tools"
FLAGS = "--enable-auto-tool-choice --tool-call-parser NAME"
TIP = " — or leave them out with --weights agent=0"


def _said(run: LocustRun, words: str) -> list[str]:
    return [line for line in run.output.splitlines() if words in line]


def test_the_default_mix_runs_without_agent_sessions_and_says_so_once(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("mixed.py", "-u", "4", "-r", "4", "-t", "8s", STOCK)
    assert run.returncode == 0, run.output[-3000:]
    (line,) = _said(run, "agent sessions left out")  # one line, naming the flags that would add them
    assert LEFT_OUT in line and FLAGS in line and "hermes" in line, line
    workloads = {r["workload"] for r in run.records()}
    assert workloads == {"chat", "code", "contract"}, workloads
    assert "AgentUser" not in run.output or '"AgentUser": 0' in run.output  # Locust spawned none
    meta = run.run_json()
    assert LEFT_OUT in meta["left_out"]["agent"] and "tokenstorm_left_out" not in meta["options"]
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["left_out"] == meta["left_out"] and summary["verdict"] == "passed"
    report = (run.run_dir / "report.html").read_text()
    assert 'id="left-out-agent"' in report and LEFT_OUT in report


@pytest.mark.parametrize(
    ("locustfile", "args", "why"),
    [
        ("mixed.py", ["--weights", "agent=1,chat=2"], f"{FLAGS} (asked for by --weights agent=1){TIP}"),
        ("mixed.py", ["--agent-steps", "2"], f"{FLAGS} (asked for by --agent-steps){TIP}"),
        ("mixed.py", ["--workload-file", "{tmp}/mix.yaml"],
         f"{FLAGS} (asked for by the workload file {{tmp}}/mix.yaml){TIP}"),
        ("mixed.py", ["--slo", "{tmp}/slo.yaml"], f"{FLAGS} (the SLO file {{tmp}}/slo.yaml judges them){TIP}"),
        ("mixed.py", ["ChatUser", "AgentUser"], f"{FLAGS} (agent users chosen: agent, chat){TIP}"),
        ("agent.py", [], FLAGS),
    ],
)  # fmt: skip
def test_agent_sessions_asked_for_by_name_still_stop_the_run_with_one_line(
    locust_runner, tmp_path: Path, locustfile: str, args: list[str], why: str
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "mix.yaml").write_text("workloads:\n  agent: {weight: 1, steps: 2}\n  chat: {weight: 1}\n")
    (tmp_path / "slo.yaml").write_text("slos:\n  agent:\n    ttft_ms: {p95: 5000}\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    run = locust_runner(locustfile, "-u", "2", "-r", "2", "-t", "20s", STOCK, *args)
    assert run.returncode == 3, run.output[-3000:]
    (line,) = _said(run, "tokenstorm: the server refuses tool calls")  # then the verdict says it
    assert line.endswith(why.replace("{tmp}", str(tmp_path))), line
    assert not _said(run, "agent sessions left out")
    assert run.run_dir is not None and [r for r in read_records(run.run_dir)] == []  # no traffic sent


@pytest.mark.parametrize(
    ("locustfile", "load"),
    [("mixed.py", ["-u", "6", "-r", "6"]), ("open_loop.py", ["-u", "2", "-r", "2", "--arrival-rate", "4"])],
)  # fmt: skip
def test_workers_send_no_agent_traffic_when_the_master_left_it_out(
    locust_runner, locustfile: str, load: list[str]
) -> None:  # type: ignore[no-untyped-def]
    # Open-loop arrivals are drawn on each worker from its own weights: the master's decision travels with
    # the spawn message. Closed-loop users are counted by the master.
    run = locust_runner(locustfile, "--processes", "2", *load, "-t", "10s", "--max-tokens", "16", STOCK)
    assert run.returncode == 0, run.output[-3000:]
    records = run.records()
    assert records and {r["worker_id"] for r in records} <= set(run.run_json()["workers_seen"])  # workers' traffic
    workloads = {r["workload"] for r in records}
    assert "agent" not in workloads and len(workloads) >= 2, workloads
    assert len(_said(run, "agent sessions left out")) == 1
    assert "agent" in run.run_json()["left_out"]


#: vLLM 0.32 (vllm/renderers/online_renderer.py) started without a tool-call parser
VLLM_AUTO = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
VLLM_REQUIRED = 'tool_choice="required" requires --tool-call-parser to be set'
VLLM_NAMED = 'tool_choice=function "read_file" requires --tool-call-parser to be set'
READ_FILE = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    ("tool_choice", "message"),
    [(None, VLLM_AUTO), ("auto", VLLM_AUTO), ("required", VLLM_REQUIRED),
     ({"type": "function", "function": {"name": "read_file"}}, VLLM_NAMED), ("none", None)],
)  # fmt: skip
def test_the_emulator_without_tool_calls_refuses_them_as_a_stock_vllm_does(tool_choice: object, message: str) -> None:
    body: dict = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "tools": [READ_FILE]}
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    with EmulatorProcess("--no-tool-calls", "--ttft-ms", "1", "--itl-ms", "1") as emu:
        request = urllib.request.Request(f"{emu.url}/v1/chat/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                status, answer = resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            status, answer = exc.code, json.load(exc)
    if message is None:
        assert status == 200 and answer["choices"][0]["message"]["content"], answer
    else:
        assert status == 400 and answer == {"error": {"message": message, "type": "BadRequestError", "param": None,
                                                      "code": 400}}  # fmt: skip


def test_an_ab_run_leaves_agent_out_of_both_targets_when_one_does_not_call_tools(locust_runner) -> None:  # type: ignore[no-untyped-def]
    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "2") as tools, \
            EmulatorProcess("--no-tool-calls", "--ttft-ms", "20", "--itl-ms", "2") as stock:  # fmt: skip
        run = locust_runner("mixed.py", "-u", "4", "-r", "4", "-t", "6s", "--host", tools.url,
                            "--targets", f"full={tools.url},stock={stock.url}", "--max-tokens", "8")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    (line,) = _said(run, "agent sessions left out")
    assert "agent sessions left out: target stock does not call tools" in line, line
    records = run.records()
    assert {r["target"] for r in records} == {"full", "stock"}  # the twins send the same traffic: no agent on either
    assert "agent" not in {r["workload"] for r in records}


def _post(url: str, form: dict[str, str]) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=30) as resp:
        return dict(json.load(resp))


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*") if (p / "run.json").exists()) if root.exists() else []


def _wait(predicate, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_a_run_started_from_the_web_ui_form_leaves_agent_out_and_says_so_in_its_live_report(tmp_path: Path) -> None:
    port = free_port()
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--web-host", "127.0.0.1",
         "--web-port", str(port), "--run-dir", str(runs), "--timing-verdict", "warn", STOCK],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        assert _wait(lambda: _reachable(base), 40), "the web UI did not start"
        assert _post(f"{base}/swarm", {"user_count": "4", "spawn_rate": "4"})["success"]
        assert _wait(lambda: len(_run_dirs(runs)) == 1 and any(True for _ in read_records(_run_dirs(runs)[0])), 30)
        first = _run_dirs(runs)[0]
        report = urllib.request.urlopen(f"{base}/tokenstorm/report", timeout=60).read().decode()
        assert 'id="left-out-agent"' in report and LEFT_OUT in report
        _post(f"{base}/stop", {})
        assert _wait(lambda: json.loads((first / "run.json").read_text())["status"] == "finished", 30)
        # The next run asks for agent sessions by name in the form: it stops before traffic, with the reason.
        assert _post(f"{base}/swarm", {"user_count": "2", "spawn_rate": "2", "weights": "agent=1,chat=1"})["success"]
        assert _wait(lambda: len(_run_dirs(runs)) == 2, 30)
        second = _run_dirs(runs)[1]
        assert _wait(lambda: json.loads((second / "run.json").read_text())["status"] != "running", 30)
        meta = json.loads((second / "run.json").read_text())
        assert "refuses tool calls" in meta["problem"] and "left_out" not in meta, meta
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out[-3000:]
    assert {r.workload for r in read_records(first)} == {"chat", "code", "contract"}
    assert json.loads((first / "run.json").read_text())["left_out"]["agent"].startswith(LEFT_OUT)


def _reachable(base: str) -> bool:
    try:
        urllib.request.urlopen(f"{base}/", timeout=2).close()
        return True
    except OSError:
        return False
