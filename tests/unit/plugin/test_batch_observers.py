"""A master counts a worker's shipped batch by its columns: the live view (chart points, the newest rows the live
status judges), the Prometheus export, the progress lines' outcomes, token rates and the server-timing hint show
the same figures as when the same records are counted one by one (an older worker's JSON lines)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# In a process of its own: the run context imports Locust, which patches the standard library.
_SCRIPT = """
import json, random, time
import orjson
from prometheus_client import CollectorRegistry, generate_latest
from tokenstorm.workloads.plugin.core import ingest
from tokenstorm.workloads.plugin.core.context import RunContext
from tokenstorm.workloads.plugin.export.prometheus import ClientMetrics
from tokenstorm.workloads.plugin.web.live import LiveWindow
from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.rundir.segments import rows_to_batch
from tokenstorm.workloads.rundir.wire import decode_records, encode_records

rng = random.Random(7)
now = time.time()
rows = []
for i in range(600):
    ok = rng.random() < 0.8
    category = None if ok else rng.choice(["http_5xx", "timeout", "cancelled", "stall"])
    tokens = rng.randint(1, 40)
    gaps = [rng.randint(200, 20000) / 1e6 for _ in range(tokens - 1)] if ok else []
    timed = i >= 40  # the run's first streamed answers carry no server timing: the hint speaks
    r = RequestRecord(
        workload=rng.choice(["chat", "agent"]), endpoint="/v1/chat/completions", model="m", stream=True,
        start_epoch_s=now - 30 + i * 0.04, request_id=f"r{i}", worker_id=rng.choice(["w1", "w2"]), ok=ok,
        error_category=category, output_tokens=tokens, prompt_tokens=rng.randint(10, 900),
        cached_tokens=rng.choice([None, 0, 64]), ttft_s=rng.random() / 10 if ok else None,
        e2e_s=rng.random() if ok else None, done_s=rng.choice([None, 1.2]), tpot_s=rng.random() / 100 if ok else None,
        itl_gaps_s=gaps, warmup=i < 30, target=rng.choice(["", "a", "b"]), tool_calls=rng.choice([0, 0, 2]),
        tool_call_tokens=rng.choice([None, 17]), check_results=rng.choice(["", "needle:pass,script:fail"]),
        send_lag_s=rng.choice([None, 0.002]), server_queue_s=0.01 if timed else None,
        server_ttft_s=0.02 if timed else None, server_itl_s=0.003 if timed else None,
        overhead_s=0.004 if timed else None,
    )
    rows.append(r.as_row())

def end(row):
    return row["start_epoch_s"] + (row["done_s"] or row["e2e_s"] or 0)

# as a worker ships them: every 3 s, the records that ended since its last report
shipments, left = [], sorted(rows, key=end)
for k in range(1, 15):
    at = now - 30 + 3 * k
    shipments.append((at, [r for r in left if end(r) <= at]))
    left = [r for r in left if end(r) > at]
shipments.append((now + 3, left))

def counted(take):
    clock = [now - 31]
    ctx = RunContext(is_worker=False)
    ctx.live = LiveWindow(clock=lambda: clock[0])
    ctx.metrics = ClientMetrics()
    ctx.live.start(now - 31)
    ctx.server_timing.reset(True)
    for at, shipped in shipments:
        clock[0] = at
        take(ctx, shipped)
    clock[0] = now + 8
    ctx.live.advance()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ctx.metrics)
    recent = [{k: list(v) if k == "itl_gaps_s" else v for k, v in r.items()} for r in ctx.live.recent_rows()]
    return {
        "outcomes": [ctx.outcomes.snapshot(), dict(ctx.outcomes.failed)],
        "tokens": [ctx.token_rate.total_tokens, {k: v.total_tokens for k, v in ctx.token_rate_by_workload.items()}],
        "requests_by_workload": ctx.requests_by_workload, "workers_seen": sorted(ctx.workers_seen),
        "hint": ctx.server_timing.said, "points": ctx.live.snapshot(), "recent": recent,
        "metrics": generate_latest(registry).decode(),
    }

def one_by_one(ctx, shipped):
    ingest.receive_lines(ctx, [orjson.dumps(row).decode() for row in shipped])

def as_batch(ctx, shipped):
    if shipped:
        half = len(shipped) // 2  # a report's batch is made of the worker's converted pieces
        ingest.receive_batch(ctx, decode_records(encode_records([rows_to_batch(shipped[:half]),
                                                                 rows_to_batch(shipped[half:])])))

one_by_one, as_batch = counted(one_by_one), counted(as_batch)
print(json.dumps({"one_by_one": one_by_one, "as_batch": as_batch}, default=str))
"""


@pytest.fixture(scope="module")
def figures() -> dict:  # type: ignore[type-arg]
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict = json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[type-arg]
    return result


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


@pytest.mark.parametrize("what", ["outcomes", "tokens", "requests_by_workload", "workers_seen", "hint"])
def test_the_counts_are_those_of_the_records_one_by_one(figures: dict, what: str) -> None:  # type: ignore[type-arg]
    assert figures["as_batch"][what] == figures["one_by_one"][what]
    assert figures["one_by_one"][what]  # something was counted (and the hint spoke)


def test_the_live_charts_and_the_newest_rows_are_the_same(figures: dict) -> None:  # type: ignore[type-arg]
    one, batch = figures["one_by_one"], figures["as_batch"]
    assert batch["points"] == one["points"]
    assert any(v is not None for s in one["points"]["workloads"].values() for v in s["itl_p99_ms"])
    assert len(one["recent"]) > 100
    assert batch["recent"] == one["recent"]


def test_the_prometheus_export_is_the_same(figures: dict) -> None:  # type: ignore[type-arg]
    one, batch = _samples(figures["one_by_one"]["metrics"]), _samples(figures["as_batch"]["metrics"])
    assert batch.keys() == one.keys()
    assert batch == pytest.approx(one, rel=1e-9)
    assert any("server_inter_token" in k for k in one) and any("checks_total" in k for k in one)
