"""Reading vLLM's /metrics: the fast path (only the families a reading uses) changes no value."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

import tokenstorm.monitors._vllm_metrics as vm

# Recorded from a real vLLM 0.32.0 CPU-build server after a load test (53 KB, 644 lines).
REAL = (Path(__file__).parents[2] / "fixtures" / "vllm" / "metrics_0.32_cpu.txt").read_text()


def test_filtered_parse_reads_the_same_values_as_parsing_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = asdict(vm.parse_vllm_metrics(REAL, epoch_s=1.0))
    monkeypatch.setattr(vm, "_wanted_lines", lambda text: text)
    full = asdict(vm.parse_vllm_metrics(REAL, epoch_s=1.0))
    assert fast == full
    assert fast["generation_tokens"] > 0 and fast["ttft_hist"]["count"] > 0 and fast["running"] is not None
    assert fast["ttft_hist"]["+Inf"] == fast["ttft_hist"]["count"]


def test_filter_keeps_a_tenth_of_the_exposition() -> None:
    kept = vm._wanted_lines(REAL)
    assert len(kept) < len(REAL) / 4
    assert "python_gc_objects_collected_total" not in kept and "vllm:request_prompt_tokens_bucket" not in kept
