"""The few distribution functions the intervals need, from ``scipy.special`` alone.

``scipy.stats`` costs about 0.6 s of CPU to import, ``scipy.optimize`` 0.3 s: every run's report (and a master's
SLO check at start-up) paid that for five quantile functions and one root. ``scipy.special`` costs 0.16 s and holds
the same functions ``scipy.stats`` calls underneath (``norm.ppf`` is ``ndtri``, ``t.ppf`` is ``stdtrit``,
``chi2.ppf`` is ``2·gammaincinv``, ``binom.cdf`` the regularised incomplete beta function).
"""

from __future__ import annotations

from collections.abc import Callable

from scipy import special

__all__ = ["binom_cdf", "binom_ppf", "chi2_ppf", "gammainc", "gammaincc", "norm_ppf", "root", "t_ppf"]

gammainc = special.gammainc
gammaincc = special.gammaincc


def norm_ppf(p: float) -> float:
    """The standard normal's p-quantile (``scipy.stats.norm.ppf``)."""
    return float(special.ndtri(p))


def t_ppf(p: float, df: float) -> float:
    """Student's t p-quantile with ``df`` degrees of freedom (``scipy.stats.t.ppf``)."""
    return float(special.stdtrit(df, p))


def chi2_ppf(p: float, df: float) -> float:
    """The chi-squared p-quantile with ``df`` degrees of freedom (``scipy.stats.chi2.ppf``)."""
    return 2.0 * float(special.gammaincinv(df / 2.0, p))


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p) (``scipy.stats.binom.cdf``): 0 below 0, 1 from n up."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(special.betaincc(k + 1, n - k, p))  # what scipy.stats computes (Boost's), to 1e-12


def binom_ppf(q: float, n: int, p: float) -> int:
    """The smallest k with P(X ≤ k) ≥ q (``scipy.stats.binom.ppf``), by bisection over 0..n."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if binom_cdf(mid, n, p) >= q:
            hi = mid
        else:
            lo = mid + 1
    return lo


def root(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12) -> float:
    """A root of ``f`` in ``[a, b]``, where ``f(a)`` and ``f(b)`` differ in sign (``scipy.optimize.brentq``'s
    tolerances: within ``xtol + 4·eps·|x|``), by bisection: ~60 calls of ``f``, enough for a report's few."""
    fa = f(a)
    if fa == 0:
        return a
    if (fa < 0) == (f(b) < 0):
        raise ValueError(f"root: f({a}) and f({b}) have the same sign")
    while b - a > xtol + 4 * 2.220446049250313e-16 * max(abs(a), abs(b)):
        mid = a + (b - a) / 2
        fm = f(mid)
        if fm == 0:
            return mid
        if (fm < 0) == (fa < 0):
            a, fa = mid, fm
        else:
            b = mid
    return a + (b - a) / 2
