"""Fast-paced streams (real vLLM's pace on a CPU: TTFT ~15 ms, 2 ms per token) are read as they arrive.

The bunching once seen against real vLLM (whole streams read at once: TTFT = E2E, gaps of 0)
came from the Locust path — connections waiting on the pool, the monitor parsing /metrics in
the load generator's event loop — not from the client alone, so this drives the whole thing:
Locust, 8 users back to back, records, live stats and the server-metrics monitor.
"""

from __future__ import annotations

import json
import statistics
import urllib.request

import pytest

from tokenstorm.emulator import EmulatorProcess

#: checks measured latencies against a truth: runs alone (scripts/test.sh's second phase)
pytestmark = pytest.mark.serial


def test_streams_at_two_ms_per_token_are_not_bunched(locust_runner) -> None:  # type: ignore[no-untyped-def]
    with EmulatorProcess("--ttft-ms", "15", "--itl-ms", "2", "--prefill-us-per-token", "0") as emu:
        run = locust_runner(
            "chat.py", "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", "64",
            "--ignore-eos", "-u", "8", "-r", "8", "-t", "8s", "--host", emu.url,
        )  # fmt: skip
        truth = {t["request_id"]: t for t in json.load(urllib.request.urlopen(f"{emu.url}/emulator/truth"))}
    assert run.returncode == 0, run.output[-3000:]
    records = run.records()
    done = [r for r in records if r["ok"]]
    assert len(done) >= 100, len(done)
    gaps = [g for r in done for g in r["itl_gaps_s"]]
    # The emulator wrote a token every 2 ms and the first after 15 ms: the records say so.
    assert statistics.fmean(gaps) == pytest.approx(0.002, abs=0.0002)
    # A gap of exactly 0 means two tokens came in one read. On a shared 2-core machine many do
    # because the emulator's loop lagged and wrote them back to back (9-18% of gaps in loaded CI
    # runs; once 38% of streams mostly so): its truth log says so, and those are the server's. Joined
    # reads of tokens it wrote >= 1 ms apart are the client's: ~0% on an idle machine, 12% with both
    # cores saturated by other processes; the bug this guards against joined most of them, and read
    # 30-75% of streams at once.
    joined = written_apart = 0
    bunched = []
    for r in done:
        apart = [seen for seen, wrote in zip(r["itl_gaps_s"], truth[r["request_id"]]["itl_s"], strict=False)
                 if wrote >= 0.001]  # fmt: skip
        written_apart += len(apart)
        joined += sum(seen == 0 for seen in apart)
        if sum(seen == 0 for seen in apart) > len(apart) / 2:
            bunched.append(r["request_id"])
    assert written_apart > 0.5 * len(gaps) and joined < 0.25 * written_apart, (joined, written_apart)
    # Against real vLLM the e2e tier holds the issue's < 1% of streams read at once.
    assert len(bunched) < 0.15 * len(done), f"{len(bunched)} of {len(done)} streams read at once by the client"
    # TTFT as the emulator wrote it (its truth log: arrival → first token), not the 15 ms it was asked for: on a
    # loaded machine its loop writes late (median 18.2 ms seen in a full run), and that is the server's time.
    assert statistics.median(truth[r["request_id"]]["ttft_s"] for r in done) >= 0.015
    assert statistics.median(r["ttft_s"] - truth[r["request_id"]]["ttft_s"] for r in done) < 0.003
    for r in records:
        chain = [r[k] for k in ("ttfc_s", "ttft_s", "e2e_s", "done_s") if r[k] is not None]
        assert chain == sorted(chain) and r["timing_violation"] is None, r
