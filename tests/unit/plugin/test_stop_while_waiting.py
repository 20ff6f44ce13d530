"""A user that the load test stops while it waits between sessions ends without a request cancelled, even when
its wait ends in the same turn of the event loop as the stop (a busy client). Locust kills such a user on a later
turn: the user woke first, began a session and its first request was cancelled — a run with ``--stop-timeout``
(the agent example) then showed a cancelled record on a busy CI runner."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

# In a process of its own: importing Locust patches the standard library, as in a run.
_SCRIPT = """
import json, sys
import gevent, gevent.monkey
from locust import constant, events, task
from locust.env import Environment
from locust.user.task import LOCUST_STATE_WAITING
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest
from tokenstorm.workloads.plugin.core.context import context
from tokenstorm.workloads.plugin.users import workload

seen = []
stop = workload.LlmUser.stop
def spy(self, force=False):
    seen.append(self._state)
    return stop(self, force)
workload.LlmUser.stop = spy

with EmulatorProcess("--ttft-ms", "5", "--itl-ms", "1") as emu:
    class Waiting(workload.LlmUser):
        wait_time = constant(1.0)
        host = emu.url

        @task
        def one(self):
            self.send(CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}], max_tokens=8))

    env = Environment(user_classes=[Waiting], events=events, stop_timeout=10)
    ctx = context(env)
    ctx.is_worker = True  # records go to the outbox, to be read here
    runner = env.create_local_runner()
    runner.start(1, spawn_rate=1)
    while not runner.user_greenlets or next(iter(runner.user_greenlets)).args[0]._state != LOCUST_STATE_WAITING:
        gevent.sleep(0.001)
    gevent.sleep(0.5)  # half way through its wait, the run stops...
    stopping = gevent.spawn(runner.stop)
    # ... on a busy client: the event loop does not turn for 0.8 s, so the stop and the end of the wait meet
    gevent.spawn(gevent.monkey.get_original("time", "sleep"), 0.8)
    stopping.join()
print(json.dumps({"stop_saw": seen, "users": runner.user_count, "records": ctx.take_outbox()}))
"""


def test_a_user_stopped_as_its_wait_ends_begins_no_request() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["stop_saw"] == ["waiting"] and result["users"] == 0, result  # stopped while waiting, as meant
    records = [json.loads(line) for line in result["records"]]
    # Its one session before the stop, completed; no second one begun and cancelled.
    assert [(r["ok"], r["error_category"]) for r in records] == [(True, None)], records
