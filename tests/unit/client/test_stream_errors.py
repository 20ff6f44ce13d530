"""Streams that end badly are failures with a category, never short successes."""

import json

import pytest

from tokenstorm.workloads.client import StreamError, StreamTimer
from tokenstorm.workloads.rundir import ErrorCategory


def _token(text: str, finish: str | None = None) -> bytes:
    return json.dumps(
        {"id": "c", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    ).encode()


def test_missing_done_is_a_failure() -> None:
    timer = StreamTimer()
    timer.on_event(_token("a", "length"), 0.1)
    with pytest.raises(StreamError) as err:
        timer.finish()
    assert err.value.category == ErrorCategory.MISSING_DONE


def test_done_without_finish_reason_is_a_failure() -> None:
    timer = StreamTimer()
    timer.on_event(_token("a"), 0.1)
    timer.on_event(b"[DONE]", 0.2)
    with pytest.raises(StreamError) as err:
        timer.finish()
    assert err.value.category == ErrorCategory.NO_FINISH_REASON


def test_malformed_chunk_and_error_event_are_categorised() -> None:
    with pytest.raises(StreamError) as err:
        StreamTimer().on_event(b'{"id": "x", "choices": [', 0.1)
    assert err.value.category == ErrorCategory.MALFORMED_CHUNK
    with pytest.raises(StreamError) as err:
        StreamTimer().on_event(b'{"error": {"message": "out of KV cache", "code": 500}}', 0.1)
    assert err.value.category == ErrorCategory.ERROR_EVENT
    assert "out of KV cache" in err.value.detail
