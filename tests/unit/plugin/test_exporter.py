"""The Prometheus export: bucket counts and sums equal numpy's on the same records, parsed back
with prometheus-client's own parser."""

from __future__ import annotations

import random

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tokenstorm.workloads.plugin.export.prometheus import LATENCY_BUCKETS_S, ClientMetrics


def _records(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        workload = ("chat", "code")[i % 2]
        if i % 10 == 9 or i == 4:
            out.append({"workload": workload, "ok": False, "error_category": "http_5xx"})
            continue
        gaps = [rng.lognormvariate(-4, 0.6) for _ in range(rng.randint(1, 60))]
        gaps[0] = 0.02  # exactly on a bound: counts in that bucket (le)
        ttft = rng.lognormvariate(-2, 0.8)
        out.append({"workload": workload, "ok": True, "error_category": None, "ttft_s": ttft, "itl_gaps_s": gaps,
                    "tpot_s": sum(gaps) / len(gaps), "e2e_s": ttft + sum(gaps), "output_tokens": len(gaps) + 1,
                    "send_lag_s": None})  # fmt: skip
    out.append({"workload": "chat", "ok": False, "error_category": "cancelled"})
    return out


def _scrape(metrics: ClientMetrics) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    samples: dict = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_histograms_and_counters_match_numpy_on_the_records() -> None:
    records = _records(400)
    metrics = ClientMetrics(users=lambda: 12, cpu=lambda: {"local": 37.5})
    for r in records:
        metrics.observe(r)
    got = _scrape(metrics)
    for workload in ("chat", "code"):
        ok = [r for r in records if r["workload"] == workload and r["ok"]]
        for name, values in (("tokenstorm_time_to_first_token_seconds", [r["ttft_s"] for r in ok]),
                             ("tokenstorm_inter_token_latency_seconds", [g for r in ok for g in r["itl_gaps_s"]]),
                             ("tokenstorm_e2e_request_latency_seconds", [r["e2e_s"] for r in ok])):  # fmt: skip
            arr = np.array(values)
            for bound in LATENCY_BUCKETS_S:
                key = (f"{name}_bucket", (("le", repr(float(bound))), ("workload", workload)))
                assert got[key] == int((arr <= bound).sum()), (name, bound)
            assert got[(f"{name}_count", (("workload", workload),))] == len(arr)
            assert got[(f"{name}_sum", (("workload", workload),))] == pytest.approx(arr.sum())
        tokens = sum(r["output_tokens"] for r in ok)
        assert got[("tokenstorm_output_tokens_total", (("workload", workload),))] == tokens
        errors = sum(1 for r in records if r["workload"] == workload and r.get("error_category") == "http_5xx")
        assert got.get(("tokenstorm_requests_total", (("category", "http_5xx"), ("outcome", "error"),
                                                       ("workload", workload))), 0) == errors  # fmt: skip
        assert got[("tokenstorm_requests_total", (("category", ""), ("outcome", "ok"),
                                                   ("workload", workload)))] == len(ok)  # fmt: skip
    assert got[("tokenstorm_requests_total", (("category", "cancelled"), ("outcome", "cancelled"),
                                               ("workload", "chat")))] == 1  # fmt: skip
    assert got[("tokenstorm_users", ())] == 12
    assert got[("tokenstorm_client_cpu_percent", (("worker", "local"),))] == 37.5
    assert ("tokenstorm_send_lag_seconds_count", (("workload", "chat"),)) not in got  # closed loop: no lag


def test_where_the_time_went_per_workload_and_target_adds_up_to_the_clients_ttft() -> None:
    rng = random.Random(29)
    records = []
    for i in range(300):
        queue, prefill, overhead = rng.expovariate(20), rng.uniform(0.005, 0.05), rng.uniform(-0.0005, 0.02)
        tokens = rng.randint(1, 80)
        records.append(
            {
                "workload": ("chat", "code")[i % 2],
                "target": ("a", "b")[i % 3 == 0],
                "ok": True,
                "ttft_s": overhead + queue + prefill,
                "server_queue_s": queue,
                "server_ttft_s": prefill,
                "server_decode_s": rng.uniform(0.1, 2.0),
                "server_itl_s": rng.uniform(0.002, 0.04),
                "overhead_s": overhead,
                "output_tokens": tokens,
            }
        )
    records.append({"workload": "chat", "target": "a", "ok": True, "ttft_s": 0.1, "output_tokens": 8})  # no metrics
    records.append(
        {"workload": "chat", "target": "a", "ok": False, "error_category": "http_5xx", "server_queue_s": 9.0}
    )
    metrics = ClientMetrics()
    for r in records:
        metrics.observe(r)
    got = _scrape(metrics)
    for workload, target in (("chat", "a"), ("chat", "b"), ("code", "a"), ("code", "b")):
        ok = [r for r in records if (r["workload"], r["target"], r["ok"]) == (workload, target, True)]
        timed = [r for r in ok if "server_queue_s" in r]
        labels = (("target", target), ("workload", workload))
        for name, field in (
            ("tokenstorm_server_queue_seconds", "server_queue_s"),
            ("tokenstorm_server_time_to_first_token_seconds", "server_ttft_s"),
            ("tokenstorm_server_decode_seconds", "server_decode_s"),
            ("tokenstorm_overhead_seconds", "overhead_s"),
        ):
            arr = np.array([r[field] for r in timed])
            for bound in LATENCY_BUCKETS_S:
                assert got[(f"{name}_bucket", (("le", repr(float(bound))), *labels))] == int((arr <= bound).sum())
            assert got[(f"{name}_count", labels)] == len(arr)
            assert got[(f"{name}_sum", labels)] == pytest.approx(arr.sum())
        # The parts' sums add up to the client's TTFT over the same requests.
        parts = (
            "tokenstorm_overhead_seconds",
            "tokenstorm_server_queue_seconds",
            "tokenstorm_server_time_to_first_token_seconds",
        )
        assert sum(got[(f"{p}_sum", labels)] for p in parts) == pytest.approx(sum(r["ttft_s"] for r in timed))
        # The server's ITL is token-weighted: its mean is vLLM's inter-token mean over the same gaps.
        gaps = [(r["server_itl_s"], r["output_tokens"] - 1) for r in timed if r["output_tokens"] > 1]
        itl = "tokenstorm_server_inter_token_latency_seconds"
        assert got[(f"{itl}_count", labels)] == sum(n for _, n in gaps)
        assert got[(f"{itl}_sum", labels)] == pytest.approx(sum(v * n for v, n in gaps))
