"""Workers ship their records to the master as Arrow batches: every field of every record of two workers reaches
the master's run directory as the worker made it (ITL gaps to the microsecond, as the segments keep them) —
also records a worker held while the master was silent, and an older worker's JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tokenstorm.workloads.rundir import read_records

# In a process of its own: importing Locust patches the standard library. The reports travel as Locust sends
# them: msgpack'd by its Message, unpacked on the master's side.
_SCRIPT = """
import json, sys, time
from dataclasses import fields
from pathlib import Path
from locust import User, events
from locust.env import Environment
from locust.rpc.protocol import Message
from tokenstorm.workloads.plugin.core import master_watch, shipping
from tokenstorm.workloads.plugin.core.context import context
from tokenstorm.workloads.rundir import RequestRecord

class Idle(User):
    abstract = True

def every_field_set(worker, i):
    # a value of its type in every field (none left at its default), distinct per record
    values = {}
    for f in fields(RequestRecord):
        kind = str(f.type).removesuffix(" | None")
        values[f.name] = {"str": f"{f.name}-{worker}-{i}", "float": 1.0 + i / 7, "int": 3 + i, "bool": True,
                          "list[float]": [0.0123456 + i * 1e-6, 0.0005, 0.25][: 1 + i % 3]}[kind]
    values.update(worker_id=worker, start_epoch_s=1.8e9 + i / 3, schema=1, warmup=i % 2 == 0,
                  error_detail="401: echoed 'Authorization: Bearer ***'", timing_violation=None)
    return RequestRecord(**values)

def sent(data):  # as Locust carries a report from a worker to its master
    return Message.unserialize(Message("stats", data, "w").serialize()).data

master_env = Environment(user_classes=[Idle], events=events)
shipping._ENVIRONMENTS["master"] = master_env
master = context(master_env)
master.is_worker = False
run_dir = master.start(Path(sys.argv[1]), "shipped")
workers = {}
for worker in ("w1", "w2"):
    env = Environment(user_classes=[Idle], events=events)
    workers[worker] = env
    context(env).is_worker = True
made = []
master_watch._heard_s = time.monotonic()
for turn in range(3):
    for worker, env in workers.items():
        shipping._ENVIRONMENTS["worker"] = env
        for i in range(100 * turn, 100 * turn + 70 + 30 * turn):  # past a converted batch of 64, and not
            record = every_field_set(worker, i)
            context(env).emit(record)
            made.append(record.as_row())
        held = worker == "w2" and turn == 1
        if held:  # the master went silent: w2 holds this turn's records for its next report
            master_watch._heard_s = time.monotonic() - master_watch.HOLD_RECORDS_AFTER_S - 1
        data = {}
        shipping.on_report_to_master(worker, data)
        master_watch._heard_s = time.monotonic()
        shipping.on_worker_report(worker, sent(data))
old = every_field_set("w0", 999)  # a worker of an older tokenstorm: JSON lines
made.append(old.as_row())
shipping.on_worker_report("w0", sent({"tokenstorm_records": [old.to_json()]}))
master.close()
print(json.dumps({"made": made, "run_dir": str(run_dir), "requests": master.outcomes.requests,
                  "workers_seen": sorted(master.workers_seen)}))
"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    root = tmp_path_factory.mktemp("runs")
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(root)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[type-arg]
    return result


def test_every_record_of_two_workers_reaches_the_run_directory_whole(shipped: dict) -> None:  # type: ignore[type-arg]
    stored = {r.request_id: r.as_row() for r in read_records(Path(shipped["run_dir"]))}
    made = {r["request_id"]: r for r in shipped["made"]}
    assert len(shipped["made"]) == 2 * (70 + 100 + 130) + 1
    assert stored.keys() == made.keys()  # none lost, none twice, the held ones too
    for request_id, row in made.items():
        got = stored[request_id]
        assert got["itl_gaps_s"] == pytest.approx(row["itl_gaps_s"], abs=0.5e-6), request_id
        assert {k: v for k, v in got.items() if k != "itl_gaps_s"} == {
            k: v for k, v in row.items() if k != "itl_gaps_s"
        }, request_id
    assert all(r["error_detail"].endswith("Bearer ***'") for r in stored.values())  # masked as the worker wrote it
    assert shipped["workers_seen"] == ["w0", "w1", "w2"]
    assert shipped["requests"] == len(made)  # the progress lines counted each once
