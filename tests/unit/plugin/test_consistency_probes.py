"""How many consistency probes a run sends, and what the console says of their answers (no Locust here: the
run itself is in tests/integration/plugin/test_consistency.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tokenstorm.workloads.plugin.core.options import OptionError, RunOptions
from tokenstorm.workloads.plugin.quality import ProbeLine, consistency_counts, probe_count

SLO_WITH_CONSISTENCY = SimpleNamespace(targets=[SimpleNamespace(metric="ttft_ms"),
                                                SimpleNamespace(metric="consistency_changed")])  # fmt: skip
SLO_WITHOUT = SimpleNamespace(targets=[SimpleNamespace(metric="ttft_ms")])


@pytest.mark.parametrize(
    ("given", "slo", "probes"),
    [("", SLO_WITHOUT, 0), ("", None, 0), ("", SLO_WITH_CONSISTENCY, 8), ("3", SLO_WITHOUT, 3),
     ("0", SLO_WITH_CONSISTENCY, 0), ("20", SLO_WITH_CONSISTENCY, 20)],
    ids=["off", "no-slo-file", "slo-asks", "given", "given-off-beats-slo", "given-beats-slo"],
)  # fmt: skip
def test_probes_per_pass(given: str, slo: object, probes: int) -> None:
    assert probe_count(RunOptions.parse(SimpleNamespace(consistency_probes=given)), slo) == probes


def test_a_count_given_as_a_number_is_taken() -> None:
    assert probe_count(RunOptions.parse(SimpleNamespace(consistency_probes=0)), SLO_WITH_CONSISTENCY) == 0
    assert probe_count(RunOptions.parse(SimpleNamespace(consistency_probes=5)), None) == 5
    assert probe_count(RunOptions.parse(SimpleNamespace(consistency_probes=None)), SLO_WITH_CONSISTENCY) == 8


@pytest.mark.parametrize(
    ("value", "message"),
    [("x", "--consistency-probes 'x': expected a whole number of probes, e.g. 8 (0: off)"),
     ("-2", "--consistency-probes '-2': expected a whole number of probes, e.g. 8 (0: off)"),
     ("5000", "--consistency-probes '5000': must be at most 1,000")],
)  # fmt: skip
def test_a_bad_probe_count_names_the_option(value: str, message: str) -> None:
    with pytest.raises(OptionError) as exc:
        RunOptions.parse(SimpleNamespace(consistency_probes=value))
    assert str(exc.value) == message


def line(phase: str, probe: int, text: str, target: str = "", ok: bool = True) -> ProbeLine:
    return ProbeLine(phase, probe, target, text, ok, None if ok else "HTTP 500", 1.0, 0 if phase == "before" else 8)


def test_the_console_counts_answers_that_changed_per_target() -> None:
    lines = [line("before", 0, "2, 3, 5"), line("before", 1, "Canberra"), line("before", 2, "x", ok=False),
             line("under_load", 0, "2, 3, 5"), line("under_load", 1, "Sydney"), line("under_load", 2, "x"),
             line("before", 0, "a", "fp8"), line("under_load", 0, "a", "fp8")]  # fmt: skip
    said = [c.sentence() for c in consistency_counts(lines)]
    assert said == ["consistency: 1 of 2 probe answers changed under load; 1 probe(s) failed and were not compared",
                    "consistency (fp8): 0 of 1 probe answers changed under load"]  # fmt: skip


def test_no_probe_answered_twice_is_not_measured() -> None:
    lines = [line("before", 0, "a"), line("under_load", 0, "", ok=False)]
    assert [c.sentence() for c in consistency_counts(lines)] == [
        "consistency: not measured — no probe was answered in both passes (1 failed)"
    ]


def test_a_probe_line_is_the_documented_json() -> None:
    import json

    assert json.loads(line("under_load", 3, "答案").to_json()) == {
        "phase": "under_load", "probe": 3, "target": "", "text": "答案", "ok": True, "error": None, "epoch_s": 1.0,
        "users": 8}  # fmt: skip
