"""The one line a run says when its server sends no timing of its own: after the first 20 successful streamed
answers without any, or at the end of a shorter run; never when one answer carried it, nor with --otlp-port."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tokenstorm.workloads.plugin.core.server_timing import SAMPLE, ServerTimingHint


def _row(ok: bool = True, stream: bool = True, **timing: float) -> dict[str, Any]:
    row: dict[str, Any] = {"ok": ok, "stream": stream, "server_queue_s": None, "server_ttft_s": None,
                           "server_decode_s": None, "server_itl_s": None}  # fmt: skip
    row.update(timing)
    return row


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no timing of its own" in r.getMessage()]


def test_twenty_streamed_answers_without_server_timing_say_the_flag_once(caplog: pytest.LogCaptureFixture) -> None:
    hint = ServerTimingHint()
    hint.reset(True)
    with caplog.at_level(logging.INFO, logger="tokenstorm"):
        for _ in range(SAMPLE - 1):
            hint.observe(_row())
        hint.observe(_row(ok=False))  # a failure and a whole answer say nothing of the server's timing
        hint.observe(_row(stream=False))
        assert _said(caplog) == [] and hint.said is None
        hint.observe(_row())
        for _ in range(50):
            hint.observe(_row())
        hint.at_end()
    (line,) = _said(caplog)
    assert "--enable-per-request-metrics" in line and "--otlp-port" in line and "vLLM" in line
    assert line == hint.said and f"with {SAMPLE} streamed answers" in line


@pytest.mark.parametrize("field", ["server_queue_s", "server_ttft_s", "server_decode_s", "server_itl_s"])
def test_one_answer_with_any_server_part_keeps_the_run_quiet(field: str, caplog: pytest.LogCaptureFixture) -> None:
    hint = ServerTimingHint()
    hint.reset(True)
    with caplog.at_level(logging.INFO, logger="tokenstorm"):
        hint.observe(_row())
        hint.observe(_row(**{field: 0.002}))
        for _ in range(3 * SAMPLE):
            hint.observe(_row())  # later answers without it (a server restarted without the flag) are not asked about
        hint.at_end()
    assert _said(caplog) == [] and hint.said is None


def test_a_short_run_says_it_at_its_end_and_a_run_of_no_streamed_answer_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hint = ServerTimingHint()
    with caplog.at_level(logging.INFO, logger="tokenstorm"):
        hint.reset(True)
        for _ in range(3):
            hint.observe(_row())
        hint.at_end()
        hint.at_end()  # once
        assert len(_said(caplog)) == 1 and "with 3 streamed answers" in _said(caplog)[0]
        hint.reset(True)  # the next run (web UI) is judged afresh
        hint.observe(_row(stream=False))
        hint.at_end()
        assert len(_said(caplog)) == 1 and hint.said is None


def test_not_said_with_otlp_port_and_on_the_emulator_it_names_the_emulators_flag(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hint = ServerTimingHint()
    with caplog.at_level(logging.INFO, logger="tokenstorm"):
        hint.reset(False)  # --otlp-port: the spans may fill the parts when the run ends
        for _ in range(2 * SAMPLE):
            hint.observe(_row())
        hint.at_end()
        assert _said(caplog) == []
        hint.reset(True, simulated=True, built_in=True)
        for _ in range(SAMPLE):
            hint.observe(_row())
        hint.reset(True, simulated=True)  # an emulator started on its own
        hint.at_end()
        hint.observe(_row())
        hint.at_end()
    built_in, standalone = _said(caplog)
    assert "leave --no-enable-per-request-metrics out of --emulator-args" in built_in
    assert "start the emulator with --enable-per-request-metrics" in standalone
