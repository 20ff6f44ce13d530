"""A GPU SLO (``gpu_memory_gb``) is judged on GPU samples only: a run that sampled no GPU (no
``--gpu-monitor``) does not fail for it — the verdict, JUnit and the report say "not judged: no GPU
sampled" — while a run whose sampled GPU broke it still fails. ``slo/slo.yaml``, the example, has one."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import ROOT, make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec
from tokenstorm.workloads.rundir import GpuSample, to_line

SLO = "slos:\n  '*':\n    ttft_ms: {p95: 800}\n    error_rate: {max: 1%}\n  run:\n    gpu_memory_gb: {max: 58}\n"


def _run_dir(tmp_path: Path, gpu_mib: float | None) -> Path:
    run_dir = make_run_dir(tmp_path / "run", [request(i, ttft_ms=100) for i in range(100)])
    if gpu_mib is not None:
        gpu = [GpuSample(1000.0 + s, 0, "GPU-0", "H100", "nvml", mem_used_mib=gpu_mib) for s in range(10)]
        (run_dir / "gpu.jsonl").write_text("".join(to_line(g) + "\n" for g in gpu))
    return run_dir


def test_without_gpu_samples_a_gpu_slo_is_not_judged_and_every_output_says_so(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, None)
    result = build_report(run_dir, load_slo_spec(text=SLO))
    summary = result.summary
    assert result.exit_code == 0 and summary.verdict == "passed"
    assert summary.reason.startswith("all 2 SLOs held; not judged: no GPU sampled (run gpu_memory_gb max <= 58")
    gpu = next(r for r in summary.slo_results if r.metric == "gpu_memory_gb")
    assert not gpu.judged and gpu.measured is None and gpu.note.startswith("not judged: no GPU sampled")
    skipped = [
        c for c in ET.parse(run_dir / "junit.xml").getroot().iter("testcase") if "gpu_memory_gb" in c.get("name", "")
    ]
    assert len(skipped) == 1 and skipped[0].find("skipped") is not None and skipped[0].find("failure") is None
    html = (run_dir / "report.html").read_text()
    assert "not judged: no GPU sampled" in html and ">not judged</td>" in html


def test_a_sampled_gpu_that_broke_it_still_fails(tmp_path: Path) -> None:
    result = build_report(_run_dir(tmp_path, gpu_mib=70_000.0), load_slo_spec(text=SLO))  # 73.4 GB > 58
    assert result.exit_code == 1 and result.summary.verdict == "failed"
    assert result.summary.reason.startswith("1 of 3 SLOs failed: run gpu_memory_gb max 73.4")
    assert "not judged" not in result.summary.reason


def test_a_sampled_gpu_within_it_holds(tmp_path: Path) -> None:
    result = build_report(_run_dir(tmp_path, gpu_mib=40_000.0), load_slo_spec(text=SLO))
    assert result.summary.verdict == "passed" and result.summary.reason == "all 3 SLOs held"


def test_the_example_slo_file_passes_a_healthy_run_without_a_gpu(tmp_path: Path) -> None:
    """``slo/slo.yaml`` as shipped (``tokenstorm examples``): no GPU monitor is no failure."""
    result = build_report(_run_dir(tmp_path, None), load_slo_spec(ROOT / "slo" / "slo.yaml"))
    assert "gpu_memory_gb" in (ROOT / "slo" / "slo.yaml").read_text()
    assert result.summary.verdict == "passed", result.summary.reason
    assert "; not judged: no GPU sampled (run gpu_memory_gb max <= 58" in result.summary.reason
