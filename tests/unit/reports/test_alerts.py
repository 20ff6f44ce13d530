"""Alert rules from an SLO file: valid rule-file shape, PromQL over the exported series only,
each target's threshold and statistic where they belong (promtool is not installable here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tokenstorm.reports import load_slo_spec
from tokenstorm.reports.judging.alerts import alert_rules
from tokenstorm.workloads.rundir import series

SLO = """gpus: 2
slos:
  chat:
    ttft_ms: {p95: 800, mean: 300, max: 2000}
    itl_ms: {p99.9: 150}
    error_rate: {max: 1%}
  '*':
    e2e_ms: {p50: 5000}
  run:
    output_tokens_per_s_per_gpu: {min: 45}
    requests_per_s: {min: 2}
    gpu_memory_gb: {max: 58}
"""
EXPORTED = {
    *series.HISTOGRAMS,
    f"{series.OUTPUT_TOKENS}_total",
    f"{series.REQUESTS}_total",
    series.USERS,
    series.GPU_UTIL,
}


def _check_promql_shape(expr: str) -> None:
    depth = 0
    for ch in expr:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        assert depth >= 0, expr
    assert depth == 0 and expr.count("{") == expr.count("}") and expr.count("[") == expr.count("]"), expr
    names = set(re.findall(r"\b(tokenstorm_[a-z0-9_]+)", expr))
    assert names, expr
    for name in names:
        assert name in EXPORTED or name.rsplit("_", 1)[0] in EXPORTED, name  # _bucket, _sum, _count


def test_rules_for_every_judgeable_target(tmp_path: Path) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text(SLO)
    rules = alert_rules(load_slo_spec(slo), window="10m", for_="2m")
    doc = yaml.safe_load(rules.to_yaml())
    (group,) = doc["groups"]
    by_slo = {r["labels"]["slo"]: r for r in group["rules"]}
    for r in group["rules"]:
        assert re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", r["alert"]) and r["for"] == "2m"
        assert set(r) == {"alert", "expr", "for", "labels", "annotations"}
        assert all(isinstance(v, str) for v in (*r["labels"].values(), *r["annotations"].values()))
        assert "[10m]" in r["expr"]
        _check_promql_shape(r["expr"])
    p95 = by_slo["chat ttft_ms p95 <= 800"]["expr"]
    assert p95.startswith("(histogram_quantile(0.95, sum by (le) (rate(tokenstorm_time_to_first_token_seconds_bucket"
                          '{workload="chat"}[10m])))) * 1000 > 800')  # fmt: skip
    assert "histogram_quantile(0.999," in by_slo["chat itl_ms p99.9 <= 150"]["expr"]
    mean = by_slo["chat ttft_ms mean <= 300"]["expr"]
    assert "_sum{" in mean and "_count{" in mean and mean.endswith("* 1000 > 300")
    err = by_slo["chat error_rate max <= 0.01"]["expr"]
    assert 'outcome="error"' in err and 'outcome!="cancelled"' in err and err.endswith("> 0.01")
    assert "sum by (le, workload)" in by_slo["* e2e_ms p50 <= 5000"]["expr"]  # one alert series per workload
    per_gpu = by_slo["run output_tokens_per_s_per_gpu min >= 45"]["expr"]
    assert per_gpu.startswith("(sum(rate(tokenstorm_output_tokens_total[10m])) / 2 < 45)")  # gpus: 2
    # throughput floors only while load is offered: an idle generator breaks none
    assert per_gpu.endswith(" and on() sum(tokenstorm_users) > 0")
    assert 'outcome="ok"' in by_slo["run requests_per_s min >= 2"]["expr"]
    assert sorted(t.label for t, _ in rules.skipped) == ["chat ttft_ms max <= 2000", "run gpu_memory_gb max <= 58"]


def test_command_line_writes_rules_and_names_what_it_skipped(tmp_path: Path) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text(SLO)
    proc = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "alert-rules", str(slo)], capture_output=True,
        text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0 and len(yaml.safe_load(proc.stdout)["groups"][0]["rules"]) == 7
    assert "no rule for run gpu_memory_gb max <= 58" in proc.stderr
    bad = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "alert-rules", str(slo), "--window", "five"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--window 'five'" in bad.stderr


@pytest.mark.parametrize("window", ["5m", "30s", "1h"])
def test_durations_accepted(window: str) -> None:
    assert alert_rules(load_slo_spec(), window=window).document["groups"][0]["rules"]


def test_per_gpu_throughput_without_a_gpu_count_divides_by_the_gpus_the_sidecar_samples(tmp_path: Path) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  run:\n    output_tokens_per_s_per_gpu: {min: 45}\n")
    (rule,) = alert_rules(load_slo_spec(slo)).document["groups"][0]["rules"]
    assert "/ scalar(count(tokenstorm_gpu_utilization_percent) or vector(1)) < 45" in rule["expr"]
    _check_promql_shape(rule["expr"])
