"""``reports compare`` puts answer quality beside latency: a run whose answers fail more is a regression, in
percentage points, the pass rates being the records' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import compare_runs


def _run(path: Path, wrong_every: int) -> Path:
    records = []
    for i in range(60):
        failed = wrong_every and i % wrong_every == 0
        records.append(request(i, 100, workload="contract", check="needle" if failed else "pass",
                               check_results="needle:fail" if failed else "needle:pass"))  # fmt: skip
    return make_run_dir(path, records, {"status": "finished", "options": {"num_users": 4}})


def test_a_run_whose_answers_fail_more_regressed_on_quality(tmp_path: Path) -> None:
    fp16, fp8 = _run(tmp_path / "fp16", 0), _run(tmp_path / "fp8", 4)  # fp8: every 4th needle missed
    comparison = compare_runs([fp16, fp8], baseline=0)
    rows = {(r["scope"], r["key"]): r for r in comparison.rows if r["section"] == "quality"}
    for scope in ("all", "contract"):
        for key in ("quality_pass_rate", "needle_pass_rate"):
            row = rows[(scope, key)]
            assert row["values"] == [1.0, pytest.approx(45 / 60)]
            assert row["deltas"][1] == pytest.approx(-25.0) and row["regressed"] == [False, True]
    assert any(r["key"] == "needle_pass_rate" for r in comparison.regressions)
    text = comparison.to_text(details=True)
    assert "needle recall" in text and "75.00% (-25.0pp!)" in text and "REGRESSION" in comparison.verdict
