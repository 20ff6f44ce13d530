"""The intervals' distribution functions, taken from ``scipy.special`` alone, against ``scipy.stats`` and
``scipy.optimize`` (which a report no longer imports: ~0.9 s of CPU a run), and what a report's import loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scipy import optimize, special, stats

from tokenstorm.reports.judging.distributions import binom_cdf, binom_ppf, chi2_ppf, norm_ppf, root, t_ppf

ROOT = Path(__file__).resolve().parents[3]
PROBS = (1e-9, 0.0005, 0.005, 0.025, 0.05, 0.1, 0.5, 0.9, 0.95, 0.975, 0.995, 0.9995)


@pytest.mark.parametrize("p", PROBS)
def test_the_quantiles_are_scipy_stats(p: float) -> None:
    assert norm_ppf(p) == pytest.approx(stats.norm.ppf(p), rel=1e-12)
    for df in (1, 2.5, 9, 30, 999, 1e6):
        assert t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-9), df
    for df in (0.2, 1, 2, 7.4, 40, 1e4, 2e6):
        assert chi2_ppf(p, df) == pytest.approx(stats.chi2.ppf(p, df), rel=1e-9), df


@pytest.mark.parametrize(
    ("n", "q"), [(1, 0.5), (7, 0.5), (100, 0.99), (1000, 0.5), (20_000, 0.999), (20_000, 1e-6), (20_000_000, 0.99)]
)
def test_the_binomial_is_scipy_stats(n: int, q: float) -> None:
    for k in sorted({-1, 0, 1, n // 3, int(n * q) - 2, int(n * q), int(n * q) + 3, n - 1, n, n + 1}):
        assert binom_cdf(k, n, q) == pytest.approx(stats.binom.cdf(k, n, q), rel=1e-9, abs=1e-300), k
    for a in (1e-6, 0.005, 0.025, 0.5, 0.975):
        assert binom_ppf(a, n, q) == stats.binom.ppf(a, n, q), a


def test_the_root_is_brentqs() -> None:
    for x in (0.3, 1.0, 17.0, 2500.5):  # the mid-p Poisson bound's equation, as intervals.py solves it

        def above(lam: float, x: float = x) -> float:
            return float(special.gammainc(x, lam)) - 0.025

        lo, hi = 1e-12, x + 10 * x**0.5 + 10
        assert root(above, lo, hi) == pytest.approx(optimize.brentq(above, lo, hi), rel=1e-11, abs=4e-12)
    with pytest.raises(ValueError, match="same sign"):
        root(lambda v: v + 1, 0.0, 1.0)


def test_a_report_loads_neither_scipy_stats_nor_matplotlib_until_it_draws_a_figure() -> None:
    code = (
        "import sys\n"
        "from tokenstorm.reports import build_report, load_slo_spec\n"
        "load_slo_spec(None)\n"
        "heavy = ('scipy.stats', 'scipy.optimize', 'matplotlib')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from tokenstorm.reports.render.plots import new_figure\n"
        "new_figure(1, 1, 2.0)\n"
        "print('matplotlib.pyplot' in sys.modules, sys.modules['matplotlib'].get_backend())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[]", "True Agg"], out.stdout
