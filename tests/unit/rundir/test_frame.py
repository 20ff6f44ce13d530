"""A report's ITL figures come from exact microsecond histograms streamed from disk: they must
equal numpy's on the same gaps, for every set of requests a report asks about."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenstorm.workloads.rundir import SEGMENTS_DIR, ItlHistogram, RequestRecord, SegmentWriter, read_requests_frame

PS = [0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 100]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_histogram_statistics_equal_numpys_on_the_same_gaps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Mostly 10-40 ms, some bunched zeros, a tail of stalls past a second (the inexact region).
    gaps = np.concatenate([rng.lognormal(np.log(0.02), 0.5, 50_000), np.zeros(500), rng.uniform(1.1, 90.0, 50)])
    us = np.round(gaps * 1e6).astype(np.int64)
    hist = ItlHistogram()
    for part in np.array_split(rng.permutation(us), 7):  # merged in any order, from any pieces
        piece = ItlHistogram()
        piece.add_us(part)
        hist.merge(piece)
    ref = us / 1e6
    got, want = hist.percentiles(PS), np.percentile(ref, PS)
    exact = want < (1 << 20) / 1e6
    np.testing.assert_allclose(got[exact], want[exact], rtol=1e-12)  # below 1.05 s: numpy's, to rounding
    np.testing.assert_allclose(got[~exact], want[~exact], rtol=1e-4)  # above: within 0.01% (docs/monitoring.md)
    assert hist.size == us.size and hist.max() == ref.max()
    assert hist.mean() == pytest.approx(ref.mean(), rel=1e-12)
    assert hist.std() == pytest.approx(ref.std(), rel=1e-9)


def test_batches_of_short_gaps_only_count_as_numpy_does() -> None:
    rng = np.random.default_rng(3)
    us = np.round(rng.lognormal(np.log(0.02), 0.3, 20_000) * 1e6).astype(np.int32)  # every gap below a second
    hist = ItlHistogram()
    for part in np.array_split(us, 5):
        hist.add_us(part)
    ref = us / 1e6
    np.testing.assert_allclose(hist.percentiles(PS), np.percentile(ref, PS), rtol=1e-12)
    assert hist.size == us.size and hist.max() == ref.max() and hist.count_above(0.02) == int((ref > 0.02).sum())
    assert hist.mean() == pytest.approx(ref.mean(), rel=1e-12) and hist.std() == pytest.approx(ref.std(), rel=1e-9)


def test_every_mask_a_report_asks_gets_numpys_figures_for_exactly_those_requests(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    writer = SegmentWriter(tmp_path / SEGMENTS_DIR, rotate_rows=300, compact_in_child=False)
    gaps_by_row = []
    for i in range(1000):
        gaps = np.round(rng.lognormal(np.log(0.01 * (1 + i % 3)), 0.3, rng.integers(0, 40)), 6).tolist()
        gaps_by_row.append(np.round(np.array(gaps) * 1e6) / 1e6)
        writer.write(RequestRecord(workload=("chat", "code", "contract")[i % 3], endpoint="/v1/completions", model="m",
                                   stream=True, start_epoch_s=float(i), ok=i % 7 != 0, itl_gaps_s=gaps))  # fmt: skip
    writer.close()
    frame, itl = read_requests_frame(tmp_path)
    assert len(frame) == 1000
    ok = frame["ok"].to_numpy()
    late = frame["start_epoch_s"].to_numpy() >= 100  # a warm-up cut
    masks = {"ok": ok, "ok late": ok & late}
    for w in ("chat", "code", "contract"):
        masks[f"{w} ok late"] = ok & late & (frame["workload"] == w).to_numpy()
    for name, mask in masks.items():
        ref = np.concatenate([gaps_by_row[i] for i in np.flatnonzero(mask)])
        hist = itl.histogram(mask)
        assert hist.size == ref.size, name
        np.testing.assert_allclose(hist.percentiles([50, 90, 99]), np.percentile(ref, [50, 90, 99]), rtol=1e-12,
                                   err_msg=name)  # fmt: skip
        assert hist.mean() == pytest.approx(ref.mean(), rel=1e-12), name


def test_a_negative_gap_counts_as_zero_instead_of_breaking_the_report() -> None:
    # A measurement bug (flagged per record as a timing violation) must not take the report down.
    hist = ItlHistogram()
    hist.add_us(np.array([-5, 10, 20]))
    assert hist.size == 3 and hist.percentiles([0])[0] == 0.0


def test_a_large_json_lines_file_is_parsed_once_and_read_the_same(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    import tokenstorm.workloads.rundir.frame as frame_mod

    rng = np.random.default_rng(2)
    rows = [RequestRecord(workload=("chat", "code")[i % 2], endpoint="/v1/completions", model="m", stream=True,
                          start_epoch_s=float(i), ok=True, ttft_s=float(rng.random()),
                          itl_gaps_s=np.round(rng.random(5), 6).tolist()).as_row() for i in range(300)]  # fmt: skip
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    small, small_itl = read_requests_frame(tmp_path)
    monkeypatch.setattr(frame_mod, "_PARSE_ONCE_BYTES", 0)  # as a 64 MB file would be
    big, big_itl = read_requests_frame(tmp_path)
    assert big_itl.keep is not None and small_itl.keep is None
    assert big.equals(small)
    everything = np.ones(300, dtype=bool)
    np.testing.assert_array_equal(big_itl.histogram(everything).low, small_itl.histogram(everything).low)
