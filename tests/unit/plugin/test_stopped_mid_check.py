"""A user the load test stops while its answer is being checked (the checks' own process has it) made a request
that completed: its record is kept. It was lost before — a Ctrl-C of a run with checks dropped requests the
server had served."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tokenstorm.workloads.traffic.checks import NOT_JUDGED_STOPPED

# In a process of its own: importing Locust patches the standard library (cooperative pipes, as in a run).
_SCRIPT = """
import json, os, sys, types
import gevent
from locust import User, events
from locust.env import Environment
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.plugin.core.context import context
from tokenstorm.workloads.plugin.users import workload
from tokenstorm.workloads.traffic.user_checks import load_user_check

class Idle(User):
    abstract = True

sys.path.insert(0, sys.argv[1])
env = Environment(user_classes=[Idle], events=events)
ctx = context(env)
ctx.is_worker = True  # records go to the outbox, to be read here
ctx.workload_settings["chat"] = types.SimpleNamespace(checks=(load_user_check("slow_rules:slow"),), api="")
with EmulatorProcess("--ttft-ms", "5", "--itl-ms", "1") as emu:
    client = LlmClient(emu.url)
    req = CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}], max_tokens=8)
    user = gevent.spawn(workload.send, env, client, req, "m")
    for _ in range(200):  # until the check has the answer (it writes a file as it starts)
        gevent.sleep(0.05)
        if os.path.exists(os.path.join(sys.argv[1], "judging")):
            break
    user.kill()  # as Locust stops a user: GreenletExit where it waits for the verdict
    client.close()
print(json.dumps({"killed": isinstance(user.value, gevent.GreenletExit), "records": ctx.take_outbox()}))
ctx.check_process.close()
"""


def test_a_user_stopped_while_its_answer_is_checked_keeps_its_record(tmp_path: Path) -> None:
    (tmp_path / "slow_rules.py").write_text(
        "import pathlib, time\n"
        "def slow(request, reply):\n"
        f"    pathlib.Path({str(tmp_path)!r}, 'judging').touch()\n"
        "    time.sleep(5)\n"
        "    return True\n"
    )
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=90)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert (tmp_path / "judging").exists() and result["killed"], result  # stopped mid-check, as meant
    (line,) = result["records"]
    record = json.loads(line)
    # The request completed: it is kept as such, timed, its answer unjudged (the run ended before its verdict).
    assert record["ok"] and record["error_category"] is None, record
    assert record["ttft_s"] > 0 and record["output_tokens"] == 8
    assert record["check"] is None and record["check_results"] == ""
    assert record["check_detail"] == NOT_JUDGED_STOPPED  # why its answer has no verdict, on the record
