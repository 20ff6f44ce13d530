"""The emulator's truth in vLLM's words: the per-request ``metrics`` it sends (``--enable-per-request-metrics``)
are its truth in milliseconds, and the trace id it keeps is the one the request's ``traceparent`` carried."""

from __future__ import annotations

import pytest

from tokenstorm.emulator._truth import Truth, per_request_metrics, trace_id_of


def test_the_metrics_are_the_truths_parts_in_milliseconds_as_vllm_names_them() -> None:
    truth = Truth("r1", None, 10, 11, 0.03, 0.004, queue_s=0.12)
    truth.server_ttft_s = 0.031
    truth.decoded(0.05, 11)
    metrics = per_request_metrics(truth)
    assert metrics["queue_time_ms"] == pytest.approx(120)
    assert metrics["time_to_first_token_ms"] == pytest.approx(31)
    assert metrics["generation_time_ms"] == pytest.approx(50)
    assert metrics["mean_itl_ms"] == pytest.approx(5)  # 50 ms over 10 gaps
    assert metrics["tokens_per_second"] == pytest.approx(11 / 0.081)
    assert metrics["speculative_decoding"] is None


def test_one_token_has_no_mean_gap_and_no_token_no_server_ttft() -> None:
    truth = Truth("r1", None, 10, 1, 0.03, 0.004)
    truth.server_ttft_s = 0.03
    truth.decoded(0.0, 1)
    assert per_request_metrics(truth)["mean_itl_ms"] is None
    empty = per_request_metrics(Truth("r2", None, 10, 0, 0.03, 0.004))
    assert empty["time_to_first_token_ms"] is None and empty["generation_time_ms"] is None
    assert empty["tokens_per_second"] is None and empty["queue_time_ms"] == 0


@pytest.mark.parametrize(
    ("header", "trace"),
    [
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "0af7651916cd43dd8448eb211c80319c"),
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-00", "0af7651916cd43dd8448eb211c80319c"),
        ("00-00000000000000000000000000000000-b7ad6b7169203331-01", ""),  # all zeros: invalid
        ("00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01", ""),  # 31 digits
        ("00-0af7651916cd43dd8448eb211c80319x-b7ad6b7169203331-01", ""),
        ("garbage", ""),
        (None, ""),
    ],
)
def test_the_trace_id_is_read_from_a_valid_traceparent_only(header: str | None, trace: str) -> None:
    assert trace_id_of(header) == trace
