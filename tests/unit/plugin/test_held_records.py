"""A worker whose master was silent a while holds its records back (a report to a dead master is lost); that
report must not read as its last one, or the master stops waiting and builds the report without them."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

# In a process of its own: importing Locust patches the standard library.
_SCRIPT = """
import json, time
from locust import User, events
from locust.env import Environment
from tokenstorm.workloads.plugin.core import master_watch, shipping
from tokenstorm.workloads.plugin.core.context import context
from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.rundir.wire import decode_records

class Idle(User):
    abstract = True

env = Environment(user_classes=[Idle], events=events)
shipping._ENVIRONMENTS["worker"] = env
ctx = context(env)
ctx.is_worker = True
ctx.emit(RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True, start_epoch_s=1.0))
master_watch._heard_s = time.monotonic() - master_watch.HOLD_RECORDS_AFTER_S - 1  # the master went silent
held = {}
shipping.on_report_to_master("w1", held)
master_watch._heard_s = time.monotonic()  # and answers again
last = {}
shipping.on_report_to_master("w1", last)
for report in (held, last):  # the records as a count: how many the report carries
    payload = report.pop(master_watch.RECORDS_KEY)
    report["records"] = decode_records(payload).num_rows if payload else 0
print(json.dumps([held, last]))
"""


def test_a_report_with_held_records_is_not_taken_as_the_last() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    held, last = json.loads(out.stdout.strip().splitlines()[-1])
    assert held["records"] == 0
    # a count of 0 tells the master this report carries the worker's last records: it does not
    assert held.get("tokenstorm_users") != 0, held
    assert last["records"] == 1 and last["tokenstorm_users"] == 0, last
