"""Every fault knob (``FAULT_KINDS``) on ``/v1/messages`` and ``/v1/responses``: an error in the API's own shape, a
reset, a stream cut, broken, stalled, left without its end, or never ending — what chat's faults do, in each
API's events — and the truth records the fault."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tokenstorm.emulator import FAULT_KINDS

from ._wire import Reply, post, truth

#: the request of each API (a stream of 20 tokens), the event that ends its stream and its token events
API = {
    "messages": (
        "/v1/messages",
        {"max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]},
        "message_stop",
        "content_block_delta",
    ),
    "responses": (
        "/v1/responses",
        {"max_output_tokens": 20, "input": "Hi"},
        "response.completed",
        "response.output_text.delta",
    ),
}


def _send(url: str, api: str, fault: str, stream: bool = True, **read: Any) -> tuple[Reply, dict[str, Any]]:
    path, body, _, _ = API[api]
    rid = uuid.uuid4().hex
    headers = {"x-request-id": rid, "x-emulator-fault": fault, "authorization": "Bearer sk-secret-1"}
    request = {"model": "m", "stream": stream, "ignore_eos": True, **body}
    reply = post(url, path, request, headers, **read)
    answered = fault in ("drop", "malformed", "stall", "no_done")  # the others leave no truth, as on chat
    return reply, truth(url, rid) if answered else {}


def test_every_fault_kind_is_covered_here() -> None:
    assert set(FAULT_KINDS) == {
        "429",
        "500",
        "503",
        "echo_auth",
        "refuse",
        "drop",
        "malformed",
        "stall",
        "no_done",
        "endless",
    }


@pytest.mark.parametrize("api", sorted(API))
@pytest.mark.parametrize("fault", ["429", "500", "503", "echo_auth"])
def test_error_faults_answer_in_the_apis_error_shape(emulator: Callable[..., str], api: str, fault: str) -> None:
    reply, _ = _send(emulator(), api, fault)
    assert reply.status == (500 if fault == "echo_auth" else int(fault))
    error = reply.json()
    if api == "messages":  # vLLM's Messages route answers its errors in Anthropic's shape
        assert error["type"] == "error" and set(error["error"]) == {"type", "message"}
        message = error["error"]["message"]
    else:
        assert set(error["error"]) >= {"message", "type", "code"}
        message = error["error"]["message"]
    assert ("sk-secret-1" in message) == (fault == "echo_auth")


@pytest.mark.parametrize("api", sorted(API))
def test_refuse_resets_the_connection(emulator: Callable[..., str], api: str) -> None:
    with pytest.raises(ConnectionError):
        _send(emulator(), api, "refuse")


@pytest.mark.parametrize("api", sorted(API))
def test_drop_cuts_the_stream_midway_and_the_truth_keeps_what_was_sent(emulator: Callable[..., str], api: str) -> None:
    reply, t = _send(emulator(), api, "drop")
    _, _, end, token = API[api]
    assert reply.status == 200 and not reply.complete
    tokens = [e for e in reply.events() if e.name == token]
    assert 0 < len(tokens) < 20 and end not in reply.names()
    assert t["fault"] == "drop" and len(t["itl_s"]) + 1 == len(tokens)


@pytest.mark.parametrize("api", sorted(API))
def test_malformed_sends_one_event_that_is_not_json_and_goes_on(emulator: Callable[..., str], api: str) -> None:
    reply, _ = _send(emulator(), api, "malformed")
    _, _, end, token = API[api]
    broken = [e for e in reply.events() if isinstance(e.data, str)]
    assert len(broken) == 1 and broken[0].name == token
    assert reply.complete and reply.names()[-1] == end


@pytest.mark.parametrize("api", sorted(API))
def test_stall_holds_the_stream_midway(emulator: Callable[..., str], api: str) -> None:
    reply, t = _send(emulator(), api, "stall")  # --stall-s 0.5
    _, _, end, _ = API[api]
    gaps = [b[0] - a[0] for a, b in zip(reply.chunks, reply.chunks[1:], strict=False)]
    assert max(gaps) >= 0.5 and reply.names()[-1] == end
    assert max(t["itl_s"]) >= 0.5


@pytest.mark.parametrize("api", sorted(API))
def test_no_done_leaves_out_only_the_event_that_ends_the_stream(emulator: Callable[..., str], api: str) -> None:
    reply, _ = _send(emulator(), api, "no_done")
    _, _, end, _ = API[api]
    assert reply.complete and end not in reply.names()
    assert reply.names()[-1] == ("message_delta" if api == "messages" else "response.output_item.done")


@pytest.mark.parametrize("api", sorted(API))
def test_endless_streams_text_past_the_limit_and_never_ends(emulator: Callable[..., str], api: str) -> None:
    url = emulator("--itl-ms", "0")
    reply, _ = _send(url, api, "endless", max_chunks=200)
    _, _, end, token = API[api]
    assert len([e for e in reply.events() if e.name == token]) > 20 and end not in reply.names()
    whole, _ = _send(url, api, "endless", stream=False, max_bytes=1 << 16)
    assert int(whole.headers["content-length"]) == 1 << 40 and len(whole.body) == 1 << 16
