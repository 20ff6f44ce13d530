"""The back-off after connection errors: none for a lone error, then capped exponential with jitter, and an
answer of any kind ends it (a user that is getting answers is never delayed)."""

from __future__ import annotations

import random
import time

from tokenstorm.workloads.client.backoff import CAP_S, FIRST_S, Backoff
from tokenstorm.workloads.rundir import ErrorCategory, RequestRecord


def _record(category: str | None) -> RequestRecord:
    rec = RequestRecord(workload="chat", endpoint="/v1/chat/completions", model="m", stream=True, start_epoch_s=0.0)
    rec.ok, rec.error_category = category is None, category
    return rec


def test_waits_double_from_the_second_error_in_a_row_to_the_cap_each_jittered() -> None:
    backoff = Backoff(rng=random.Random(1))
    waits = [backoff.failed() for _ in range(12)]
    assert waits[0] == 0.0  # a lone refused connection among answers costs nothing
    for n, wait in enumerate(waits[1:]):
        full = min(CAP_S, FIRST_S * 2**n)
        assert full / 2 <= wait <= full, (n, wait)
    assert max(waits) <= CAP_S and waits[-1] >= CAP_S / 2
    # users that failed together do not retry together
    other = Backoff(rng=random.Random(2))
    assert [other.failed() for _ in range(12)] != waits


def test_any_answer_ends_the_back_off_and_a_cancelled_request_says_nothing() -> None:
    backoff = Backoff(first_s=10.0)
    for category in (ErrorCategory.CONNECT, ErrorCategory.CONNECT):
        backoff.note(_record(category))
    assert backoff.errors == 2 and backoff.delay_s() > 1
    backoff.note(_record(ErrorCategory.CANCELLED))
    assert backoff.errors == 2 and backoff.delay_s() > 1
    backoff.note(_record(ErrorCategory.SERVER_ERROR))  # the server answered, if with an error
    assert (backoff.errors, backoff.delay_s()) == (0, 0.0)
    backoff.note(_record(ErrorCategory.CONNECT))
    assert backoff.delay_s() == 0.0  # the count started over: again no wait for the first
    backoff.note(_record(None))
    t = time.perf_counter()
    backoff.wait()
    assert time.perf_counter() - t < 0.01


def test_wait_sleeps_until_the_next_attempt_may_go() -> None:
    backoff = Backoff(first_s=0.2, rng=random.Random(3))
    backoff.failed()
    wait = backoff.failed()
    t = time.perf_counter()
    backoff.wait()
    assert wait - 0.005 <= time.perf_counter() - t < wait + 0.1
