"""The live token rate keeps a window, not the run: memory flat however long a soak runs."""

from __future__ import annotations

from tokenstorm.workloads.plugin.core.rates import TokenRate


def test_a_rate_nobody_reads_keeps_only_its_window() -> None:
    rate = TokenRate(window_s=10.0)
    for i in range(100_000):  # 100 requests a second for 1,000 s, and no one asks for the rate
        rate.add(250, now=i / 100)
    assert len(rate._events) <= 10 * 100 + 1
    assert rate.total_tokens == 250 * 100_000
    assert rate.rate(now=1000.0) == 250 * 100 * 10 / 10  # the last 10 s: 1,000 requests of 250
