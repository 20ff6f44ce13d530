"""Confidence intervals hold the truth as often as they claim: many seeded samples from distributions whose true
percentiles, rates and shares are known, counted like a user re-running the same test 1,000 times."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats

from tokenstorm.reports.judging import intervals as iv
from tokenstorm.workloads.rundir import frame_from_rows

TRIALS = 1000
LOGNORMAL_SIGMA = 1.0  # a skewed latency-like distribution: p99 is 10× the median


def true_lognormal(q_pct: float, sigma: float = LOGNORMAL_SIGMA) -> float:
    return float(np.exp(sigma * stats.norm.ppf(q_pct / 100)))


def coverage(intervals: list[iv.Interval], truth: float) -> float:
    return sum(ci.contains(truth) for ci in intervals) / len(intervals)


@pytest.mark.parametrize("q_pct", [50, 90, 99])
def test_percentile_interval_of_200_samples_holds_the_true_value_95_in_100(q_pct: float) -> None:
    samples = np.random.default_rng(1).lognormal(0, LOGNORMAL_SIGMA, (TRIALS, 200))
    cis = [iv.quantile_interval(row.copy(), q_pct, 0.95) for row in samples]
    assert 0.93 <= coverage(cis, true_lognormal(q_pct)) <= 0.97
    if q_pct == 99:  # 0.99^200 = 13% of samples have nothing above the true p99: the top cannot be bounded
        assert all(ci.high is None and ci.low is not None for ci in cis)
    else:
        assert all(ci.low is not None and ci.high is not None for ci in cis)


def test_percentile_interval_ignores_nan_and_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(2)
    small = iv.quantile_interval(np.concatenate([rng.lognormal(0, 1, 200), [np.nan] * 50]), 50, 0.95)
    large = iv.quantile_interval(rng.lognormal(0, 1, 20_000), 50, 0.95)
    assert small.n == 200 and small.n_eff == 200
    assert small.low is not None and small.high is not None and large.low is not None and large.high is not None
    assert large.high - large.low < (small.high - small.low) / 5  # 100× the samples: ~10× narrower
    assert large.contains(1.0)


def test_rate_of_a_poisson_process_over_a_window_holds_the_true_rate_95_in_100() -> None:
    rate_per_s, window_s = 3.0, 10.0
    arrivals_s = np.cumsum(np.random.default_rng(3).exponential(1 / rate_per_s, (TRIALS, 100)), axis=1)
    counts = (arrivals_s < window_s).sum(axis=1)
    cis = [iv.rate_interval(int(c), window_s, 0.95) for c in counts]
    assert 0.93 <= coverage(cis, rate_per_s) <= 0.97
    assert all(
        ci.low is not None and ci.high is not None and ci.low < c / window_s < ci.high
        for ci, c in zip(cis, counts, strict=True)
    )


def test_rate_interval_is_near_nominal_not_conservative_at_small_counts() -> None:
    # Exact coverage averaged over true means 3..40 events: the classic exact (Garwood) interval holds the truth
    # 97-98% of the time at such counts; this one ~95%, so a short run's rate is not judged wider than it is.
    def exact_coverage(mean: float) -> float:
        ks = np.arange(int(mean * 4 + 30))
        return float(
            sum(
                p
                for k, p in zip(ks, stats.poisson.pmf(ks, mean), strict=True)
                if iv.rate_interval(int(k), 1.0, 0.95).contains(mean)
            )
        )

    average = np.mean([exact_coverage(m) for m in np.linspace(3, 40, 38)])
    assert 0.94 <= average <= 0.96


def test_error_share_of_bernoulli_requests_holds_the_true_share_95_in_100() -> None:
    failed = np.random.default_rng(4).random((TRIALS, 200)) < 0.1
    cis = [iv.proportion_interval(int(k), 200, 0.95) for k in failed.sum(axis=1)]
    assert 0.93 <= coverage(cis, 0.1) <= 0.97
    none = iv.proportion_interval(0, 200, 0.95)
    assert none.low == 0.0 and none.high is not None and 0.01 < none.high < 0.03  # 0 of 200 is not "0%"


def sessions_of_five(rng: np.random.Generator, trials: int, sessions: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Latencies of ``sessions`` sessions of 5 turns, turns of one session strongly alike (a session's own level,
    sd 1, plus a turn's noise, sd 0.3, on the log scale); the clusters; and the log-scale sd of one value."""
    logs = rng.normal(0, 1.0, (trials, sessions, 1)) + rng.normal(0, 0.3, (trials, sessions, 5))
    return np.exp(logs).reshape(trials, -1), np.repeat(np.arange(sessions), 5), float(np.hypot(1.0, 0.3))


@pytest.mark.parametrize("q_pct", [50, 90])
def test_sessions_widen_the_interval_to_hold_the_truth_where_the_naive_one_misses(q_pct: float) -> None:
    values, clusters, sigma = sessions_of_five(np.random.default_rng(5), TRIALS, 60)
    truth = true_lognormal(q_pct, sigma)
    naive = [iv.quantile_interval(row.copy(), q_pct, 0.95) for row in values]
    aware = [iv.quantile_interval(row.copy(), q_pct, 0.95, clusters) for row in values]
    assert coverage(naive, truth) < 0.85  # 300 values counted as independent: far too sure
    assert 0.93 <= coverage(aware, truth) <= 0.97
    assert 60 < np.mean([ci.n_eff for ci in aware]) < 150  # ~5 alike turns count as ~1.3 independent ones


def test_mean_of_sessions_uses_the_clusters_variance() -> None:
    values, clusters, sigma = sessions_of_five(np.random.default_rng(6), TRIALS, 60)
    truth = float(np.exp(sigma**2 / 2))
    naive = [iv.mean_interval(row, 0.95) for row in values]
    aware = [iv.mean_interval(row, 0.95, clusters) for row in values]
    assert coverage(naive, truth) < 0.80
    assert 0.90 <= coverage(aware, truth) <= 0.97  # a skewed mean of 60 clusters: t is a little optimistic


def test_small_samples_leave_the_unboundable_end_open_and_say_how_many_are_needed() -> None:
    rng = np.random.default_rng(7)
    p99_of_50 = iv.quantile_interval(rng.lognormal(0, 1, 50), 99, 0.95)
    assert p99_of_50.high is None and p99_of_50.low is not None
    # every value far below a p99 target: the interval's top exists from 0.99^n <= 2.5%, n >= 368
    fast = rng.uniform(0.1, 0.2, 50)
    assert iv.needed_samples_quantile(fast.copy(), 99, 5.0, 0.95) == 368
    assert iv.needed_samples_quantile(fast.copy(), 99, 5.0, 0.95, deff=2.0) == 736
    assert iv.needed_samples_quantile(fast.copy(), 99.9, 5.0, 0.95) == 3688  # a p99.9 needs thousands (0.999^n)
    # every value far above a p50 target: 6 samples all above it (0.5^6 <= 2.5%) show it failed
    assert iv.needed_samples_quantile(fast.copy() + 10, 50, 5.0, 0.95) == 6
    on_target = rng.lognormal(0, 1, 200)
    assert iv.needed_samples_quantile(on_target.copy(), 99, float(np.percentile(on_target, 99)), 0.95) is None
    assert iv.needed_samples_proportion(5, 100, 0.05, 0.95) is None
    assert 370 <= (iv.needed_samples_proportion(0, 50, 0.01, 0.95) or 0) <= 390  # no errors yet, target 1%


def test_the_samples_needed_do_settle_it_about_half_the_time_or_more() -> None:
    # p90 target at the true p95: a pilot of 200 says how many are needed; fresh samples of that size then
    # give an interval wholly below the target in at least ~half of the runs (the estimate is typical).
    rng = np.random.default_rng(8)
    target = true_lognormal(95)
    needed = [iv.needed_samples_quantile(rng.lognormal(0, 1, 200), 90, target, 0.95) for _ in range(20)]
    assert all(n is not None and 50 < n < 5000 for n in needed)
    settled = [iv.quantile_interval(rng.lognormal(0, 1, n), 90, 0.95) for n in needed if n is not None]
    assert sum(ci.high is not None and ci.high <= target for ci in settled) >= 8


def change(base: np.ndarray, new: np.ndarray, q_pct: float) -> tuple[float | None, float | None]:
    b, n = float(np.percentile(base, q_pct)), float(np.percentile(new, q_pct))
    return iv.change_interval_pct(
        b, iv.quantile_interval(base.copy(), q_pct, 0.95), n, iv.quantile_interval(new.copy(), q_pct, 0.95)
    )


@pytest.mark.parametrize(("q_pct", "told_apart"), [(50, 0.98), (90, 0.85)])
def test_two_runs_of_the_same_distribution_show_no_change_95_in_100(q_pct: float, told_apart: float) -> None:
    rng = np.random.default_rng(9)
    changes = [change(rng.lognormal(0, 1, 400), rng.lognormal(0, 1, 400), q_pct) for _ in range(200)]
    holds_zero = sum((lo is None or lo <= 0) and (hi is None or hi >= 0) for lo, hi in changes)
    assert 180 <= holds_zero <= 198
    # +50% at n=400 is told from noise (the interval excludes 0) nearly always at p50, mostly at p90
    shifted = [change(rng.lognormal(0, 1, 400), 1.5 * rng.lognormal(0, 1, 400), q_pct) for _ in range(100)]
    assert sum(lo is not None and lo > 0 for lo, _ in shifted) >= told_apart * 100
    assert all(hi is not None and hi > 0 for _, hi in shifted)


def test_change_from_an_open_interval_stays_open_that_side() -> None:
    base = iv.Interval(9.0, None, 0.95, 200, 200.0)  # a p99 of 200: the top unbounded
    new = iv.Interval(9.5, 12.0, 0.95, 1000, 1000.0)
    low, high = iv.change_interval_pct(10.0, base, 11.0, new)
    assert low is None and high is not None and high > 10
    assert iv.change_interval_pct(0.0, base, 11.0, new) == (None, None)


def test_paired_samples_cancel_what_the_pairs_share() -> None:
    # each prompt has its own length-driven latency (a wide spread); both targets add a small noise
    rng = np.random.default_rng(10)
    prompt_s = rng.lognormal(0, 1, 500)
    base, new = prompt_s * rng.lognormal(0, 0.05, 500), 1.05 * prompt_s * rng.lognormal(0, 0.05, 500)
    low, high = iv.paired_change_interval_pct(base, new, "p50", 0.95, resamples=500)
    assert low is not None and high is not None and 0 < low < 5 < high < 10  # +5% told apart by the pairing
    unpaired = change(base, new, 50)
    assert unpaired[0] is not None and unpaired[0] < 0  # the same data unpaired cannot tell it
    assert iv.paired_change_interval_pct(base, base * 1.0, "mean", 0.95, resamples=100) == pytest.approx((0.0, 0.0))
    with pytest.raises(ValueError, match="unknown statistic"):
        iv.paired_change_interval_pct(base, new, "median", 0.95)


def test_paired_interval_of_many_pairs_uses_a_seeded_random_subsample_in_bounded_time() -> None:
    rng = np.random.default_rng(11)
    base = np.sort(rng.lognormal(0, 1, 300_000))  # in order (as a percentile leaves it): the subsample is random
    new = rng.lognormal(0, 1, 300_000)  # the same distribution
    start = time.monotonic()
    first = iv.paired_change_interval_pct(base, new, "p50", 0.95, resamples=50, seed=3)
    assert time.monotonic() - start < 10
    assert first == iv.paired_change_interval_pct(base, new, "p50", 0.95, resamples=50, seed=3)
    low, high = first
    assert low is not None and high is not None and -3 < low < 0 < high < 3


def itl_rows(rng: np.random.Generator, requests: int, per_request_sd: float) -> list[dict[str, object]]:
    """Requests of 50 gaps each, around 10 ms; each request's own level varies by ``per_request_sd`` (log)."""
    level = rng.normal(0, per_request_sd, requests)
    return [
        {"workload": "chat", "start_epoch_s": 1000.0 + i, "ok": True,
         "itl_gaps_s": np.round(0.01 * np.exp(level[i] + rng.normal(0, 0.2, 50)), 6).tolist()}
        for i in range(requests)
    ]  # fmt: skip


def test_itl_gaps_of_one_request_count_as_one_cluster() -> None:
    rng = np.random.default_rng(12)
    _, alike = frame_from_rows(itl_rows(rng, 200, per_request_sd=0.5))  # a slow request's gaps are all slow
    _, independent = frame_from_rows(itl_rows(rng, 200, per_request_sd=0.0))
    everything = np.ones(200, dtype=bool)
    deff_alike = iv.itl_design_effect(alike, everything, 90)
    assert deff_alike > 5
    assert iv.itl_design_effect(independent, everything, 90) < 1.5
    hist = alike.histogram(everything)
    wide = iv.histogram_quantile_interval(hist, 90, 0.95, deff_alike)
    narrow = iv.histogram_quantile_interval(hist, 90, 0.95)
    assert wide.n == 10_000 and wide.n_eff == pytest.approx(10_000 / deff_alike)
    assert wide.low is not None and wide.high is not None and narrow.low is not None and narrow.high is not None
    assert wide.low < narrow.low < narrow.high < wide.high
    # the histogram's interval is the one of the gaps themselves (to the microsecond)
    gaps = np.concatenate([np.asarray(r["itl_gaps_s"]) for r in itl_rows(np.random.default_rng(12), 200, 0.5)])
    direct = iv.quantile_interval(gaps, 90, 0.95)
    assert direct.low == pytest.approx(narrow.low, abs=2e-6) and direct.high == pytest.approx(narrow.high, abs=2e-6)


def test_gap_counts_per_selected_request() -> None:
    rows = [{"workload": "chat", "start_epoch_s": 1000.0 + i, "ok": True, "itl_gaps_s": gaps}
            for i, gaps in enumerate([[0.01, 0.02, 0.03], [], [0.05], [0.001, 0.002]])]  # fmt: skip
    _, itl = frame_from_rows(rows)
    counts, below = itl.gap_counts(np.array([True, True, False, True]), 0.02)
    assert counts.tolist() == [3, 0, 2] and below.tolist() == [2, 0, 2]


def test_bad_confidence_or_percentile_is_a_plain_error() -> None:
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        iv.quantile_interval(np.ones(10), 50, 95)
    with pytest.raises(ValueError, match="0 < q < 100"):
        iv.quantile_interval(np.ones(10), 100, 0.95)
    assert iv.quantile_interval(np.array([np.nan]), 50, 0.95) == iv.Interval(None, None, 0.95, 0, 0.0)


def test_millions_of_sessions_get_the_same_design_effect_in_bounded_memory() -> None:
    # above a million values the clusters' totals are kept in a fixed number of hashed slots: the design
    # effect stays what every session counted apart gives (computed here directly, Woodruff's formula)
    values, clusters, _ = sessions_of_five(np.random.default_rng(13), 1, 240_000)
    values, keys = values[0], np.random.default_rng(14).integers(-(2**62), 2**62, 240_000)[clusters]
    estimate = np.quantile(values, 0.9)
    _, codes = np.unique(keys, return_inverse=True)
    below = np.bincount(codes, weights=values <= estimate)
    resid = below - 0.9 * np.bincount(codes)
    exact_deff = resid @ resid / (values.size * 0.9 * 0.1)
    ci = iv.quantile_interval(values.copy(), 90, 0.95, keys)
    assert exact_deff > 3
    assert values.size / ci.n_eff == pytest.approx(exact_deff, rel=0.02)
    mean = iv.mean_interval(values, 0.95, keys)
    assert values.size / mean.n_eff > 3
