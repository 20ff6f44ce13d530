"""What answer checks cost the event loop: a 1 ms timer's lateness while a greenlet checks long answers, the
checks run inline (in the loop), in a native thread (the interpreter lock is not handed back inside one long
regular expression or ``ast.parse``), or in the checks' own process as ``send()`` runs them
(:class:`~tokenstorm.workloads.traffic.checks.worker.CheckProcess`), side by side in one gevent-patched process.

    .venv/bin/python benchmarks/bench_checks.py [--words 4096] [--answers 200] [--repeat 3]

The timer stands for another stream's read: its lateness is what a check would add to that read's stamp
(``LATE_EVENT_S`` is 1 ms). Also prints the checks' own CPU time per answer (code: ``code_language`` and
``python_parses``; chat: ``script``, ``repetition``, ``complete``).
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # as Locust runs: the checks' pipe is cooperative

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokenstorm.workloads.traffic.checks import Reply, judge  # noqa: E402
from tokenstorm.workloads.traffic.checks.code import code_language, python_parses  # noqa: E402
from tokenstorm.workloads.traffic.checks.text import complete, repetition, script  # noqa: E402
from tokenstorm.workloads.traffic.checks.worker import CheckProcess  # noqa: E402

_WORDS = [
    "the",
    "model",
    "returns",
    "tokens",
    "at",
    "a",
    "steady",
    "pace",
    "while",
    "the",
    "scheduler",
    "batches",
    "requests",
    "and",
    "holds",
    "keys",
]


def _answers(n: int, words: int) -> list[tuple[tuple, Reply]]:
    rng = random.Random(1)
    out = []
    for i in range(n):
        if i % 2:
            lines = [f"def test_{i}_{k}():\n    value = {rng.randrange(99)}\n    assert value == value\n"
                     for k in range(words // 8)]  # fmt: skip
            out.append(((code_language(), python_parses()), Reply("```python\n" + "".join(lines) + "```", [], "stop")))
        else:
            text = " ".join(rng.choice(_WORDS) for _ in range(words)) + f" {i}"
            out.append(((script("en"), repetition(), complete()), Reply(text, [], "length", words, words)))
    return out


def _lateness(run_checks: object, answers: list[tuple[tuple, Reply]]) -> np.ndarray:
    late: list[float] = []
    done = False

    def ticker() -> None:
        while not done:  # each wake's own lateness against the 1 ms it asked for (no backlog carried over)
            due = time.perf_counter() + 0.001
            gevent.sleep(0.001)
            late.append(time.perf_counter() - due)

    t = gevent.spawn(ticker)
    gevent.sleep(0.05)
    for checks, reply in answers:
        run_checks(checks, reply)  # type: ignore[operator]
        gevent.sleep(0.001)  # the loop polls its timers between answers, as between a user's requests
    done = True
    t.join()
    return np.array(late[10:]) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=4096)
    ap.add_argument("--answers", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    answers = _answers(args.answers, args.words)
    t0 = time.process_time()
    for checks, reply in answers:
        judge(checks, reply)
    per = (time.process_time() - t0) / len(answers) * 1000
    print(f"{args.answers} answers of ~{args.words} words (half code, half chat): {per:.2f} ms CPU per answer")
    pool = gevent.get_hub().threadpool
    checker = CheckProcess()
    ways = {"inline (in the loop)": judge, "native thread": lambda c, r: pool.apply(judge, (c, r)),
            "own process (send())": checker.judge}  # fmt: skip
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in ways}
    for i in range(args.repeat):
        for name, fn in ways.items() if i % 2 == 0 else reversed(list(ways.items())):
            ms = _lateness(fn, answers)
            results[name].append((float(np.percentile(ms, 99)), float(ms.max())))
            print(f"  run {i + 1} {name:24} 1 ms timer late by p50 {np.median(ms):.3f} ms, p99 "
                  f"{np.percentile(ms, 99):.3f} ms, max {ms.max():.2f} ms", flush=True)  # fmt: skip
    checker.close()
    for name, rows in results.items():
        print(f"  median over runs, {name:24} p99 {statistics.median(r[0] for r in rows):.3f} ms, "
              f"max {statistics.median(r[1] for r in rows):.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
