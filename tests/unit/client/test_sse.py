"""The SSE parser hands back whole events however the bytes were split into reads."""

import json

import pytest

from tokenstorm.workloads.client import SseParser, StreamTimer
from tokenstorm.workloads.client.client import CompletionRequest, may_think
from tokenstorm.workloads.client.timing import THINK_TAGS


def feed_all(parser: SseParser, reads: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for chunk in reads:
        out.extend(parser.feed(chunk))
    return out


def test_event_split_across_reads_is_returned_once_complete() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"a"') == []
    assert parser.feed(b": 1}\n") == []
    assert parser.feed(b"\n") == [b'{"a": 1}']


def test_several_events_in_one_read() -> None:
    assert SseParser().feed(b"data: 1\n\ndata: 2\n\ndata: [DONE]\n\n") == [b"1", b"2", b"[DONE]"]


def test_crlf_and_cr_line_endings_even_when_split_between_cr_and_lf() -> None:
    parser = SseParser()
    events = feed_all(parser, [b"data: one\r", b"\n\r", b"\ndata: two\r\n\r\n", b"data: three\r\r"])
    assert events == [b"one", b"two"]
    assert parser.feed(b"data: four\n\n") == [b"three", b"four"]


def test_comment_and_keep_alive_lines_are_ignored() -> None:
    parser = SseParser()
    assert parser.feed(b": keep-alive\n\n: ping\ndata: x\n\n") == [b"x"]


def test_multi_line_data_is_joined_and_other_fields_dropped() -> None:
    assert SseParser().feed(b"event: message\nid: 7\ndata: a\ndata: b\n\n") == [b"a\nb"]


def test_every_byte_boundary_gives_the_same_events() -> None:
    stream = b'data: {"x": 1}\r\n\r\n: c\n\ndata: {"y": "\xe5\x90\x88"}\n\ndata: [DONE]\n\n'
    whole = SseParser().feed(stream)
    for cut in range(1, len(stream)):
        assert feed_all(SseParser(), [stream[:cut], stream[cut:]]) == whole
    assert feed_all(SseParser(), [bytes([b]) for b in stream]) == whole


@pytest.mark.parametrize(
    "stream",
    [
        b"data: 1\n\n",
        b"data:1\n\ndata:  two spaces\n\n",
        b"event: message_start\ndata: {}\n\nevent: ping\n\ndata: 2\n\n",
        b": keep-alive\n\ndata: a\ndata: b\nid: 7\n\n\n\ndata: c\n\n",
        b"\n\ndata: after blank lines\n\nretry: 5\n\n",
        b"data\n\ndata: x\n\n",
    ],
)
def test_a_read_of_whole_events_gives_what_the_same_bytes_give_one_at_a_time(stream: bytes) -> None:
    """Whole events in one read take a shorter path than bytes cut mid-event: both say the same."""
    assert SseParser().feed(stream) == feed_all(SseParser(), [bytes([b]) for b in stream])


def _chat(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    obj: dict = {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    return json.dumps(obj).encode()


def test_role_only_chunk_is_not_a_token_but_empty_content_is() -> None:
    timer = StreamTimer()
    timer.on_event(_chat({"role": "assistant", "content": ""}), 0.05)
    timer.on_event(_chat({"content": ""}), 0.30)  # held-back partial UTF-8: still a token
    timer.on_event(_chat({"content": "合"}), 0.32)
    timer.on_event(_chat({"content": "同"}, finish="length"), 0.35)
    timer.on_event(
        json.dumps({"id": "c1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}).encode(), 0.36
    )
    timer.on_event(b"[DONE]", 0.37)
    timer.finish()
    assert timer.first_chunk_t == 0.05
    assert timer.first_token_t == 0.30
    assert timer.first_visible_t == 0.32
    assert timer.token_events == 3
    assert timer.last_token_t == 0.35 and timer.done_t == 0.37
    assert timer.output_tokens == 3 and timer.prompt_tokens == 9
    assert [round(g, 6) for g in timer.itl_gaps] == [0.02, 0.03]


def test_chunk_with_several_tokens_spreads_its_gap_over_them() -> None:
    timer = StreamTimer()
    timer.on_event(_chat({"content": "a"}, usage={"prompt_tokens": 5, "completion_tokens": 1}), 0.1)
    timer.on_event(_chat({"content": "bcd"}, usage={"prompt_tokens": 5, "completion_tokens": 4}), 0.4)
    assert [round(g, 6) for g in timer.itl_gaps] == [0.1, 0.1, 0.1]
    assert timer.output_tokens == 4


def test_first_chunk_with_several_tokens_gives_zero_gaps_for_the_extra_ones() -> None:
    timer = StreamTimer()
    timer.on_event(_chat({"content": "ab"}, usage={"prompt_tokens": 5, "completion_tokens": 2}), 0.3)
    timer.on_event(_chat({"content": "c"}, usage={"prompt_tokens": 5, "completion_tokens": 3}), 0.35)
    assert [round(g, 6) for g in timer.itl_gaps] == [0.0, 0.05]  # one ITL per token after the first


def test_usage_only_final_chunk_sets_tokens_without_a_token_event() -> None:
    timer = StreamTimer()
    timer.on_event(
        json.dumps({"id": "x", "choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}]}).encode(), 0.2
    )
    timer.on_event(
        json.dumps({"id": "x", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}}).encode(), 0.25
    )
    timer.on_event(b"[DONE]", 0.26)
    timer.finish()
    assert timer.token_events == 1 and timer.output_tokens == 1 and timer.last_token_t == 0.2


def test_reasoning_is_timed_apart_from_the_answer() -> None:
    timer = StreamTimer()
    timer.on_event(_chat({"role": "assistant", "content": ""}), 0.01)
    timer.on_event(_chat({"reasoning_content": "think"}), 0.2)
    timer.on_event(_chat({"reasoning_content": " more"}), 0.25)
    timer.on_event(_chat({"content": "Answer"}, finish="stop"), 0.4)
    assert timer.first_token_t == 0.2
    assert timer.first_answer_t == 0.4
    assert timer.reasoning_events == 2


def _stream(
    pieces: list[tuple[dict, int]], think_tags: tuple[str, str] | None = ("<think>", "</think>")
) -> StreamTimer:
    """Feed chat deltas, one every 10 ms from t=0.1, each carrying ``n`` tokens (continuous usage)."""
    timer = StreamTimer(collect_text=True, think_tags=think_tags)
    timer.on_event(_chat({"role": "assistant", "content": ""}), 0.01)
    total = 0
    for i, (delta, n) in enumerate(pieces):
        total += n
        chunk = json.loads(_chat(delta))
        chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": total}
        timer.on_event(json.dumps(chunk).encode(), round(0.1 + 0.01 * i, 3))
    return timer


# The three ways a reasoning model's stream arrives; each: answer at t=0.13, 3 reasoning tokens.
SHAPES = {
    "reasoning field (vLLM's parser)": [({"reasoning_content": "Let"}, 1), ({"reasoning_content": " me"}, 1),
                                         ({"reasoning_content": " see"}, 1), ({"content": "Yes"}, 1),
                                         ({"content": "."}, 1)],
    "tags in content": [({"content": "<think>"}, 1), ({"content": "Let me"}, 1), ({"content": "</think>"}, 1),
                        ({"content": "\n\nYes"}, 1), ({"content": "."}, 1)],
    "pre-filled <think> (only the closing tag)": [({"content": "Let"}, 1), ({"content": " me"}, 1),
                                                  ({"content": "</think>"}, 1), ({"content": "\n\nYes"}, 1),
                                                  ({"content": "."}, 1)],
}  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_ttft_to_the_answer_is_right_in_every_reasoning_shape(shape: str) -> None:
    timer = _stream(SHAPES[shape])
    assert timer.first_token_t == 0.1  # TTFT: the first token, reasoning or not
    assert timer.first_answer_t == 0.13
    assert timer.reasoning_events == 3 and timer.reasoning_tokens == 3
    assert timer.output_tokens - timer.reasoning_tokens == 2  # answer tokens
    assert "".join(timer.texts or []).strip() == "Yes."  # the chat history keeps the answer only


def test_a_marker_split_across_chunks_and_answer_text_after_it_in_the_same_chunk() -> None:
    timer = _stream([({"content": "Hmm"}, 1), ({"content": "</thi"}, 1), ({"content": "nk>Sure"}, 2),
                     ({"content": "!"}, 1)])  # fmt: skip
    assert timer.first_answer_t == 0.12  # the chunk that closed the reasoning also began the answer
    assert timer.reasoning_events == 3
    assert "".join(timer.texts or []) == "Sure!"


def test_no_markers_means_no_reasoning_and_markers_can_be_turned_off() -> None:
    plain = _stream([({"content": "Hello"}, 1), ({"content": " there"}, 1)])
    assert plain.first_answer_t is None and plain.reasoning_events == 0 and plain.texts == ["Hello", " there"]
    off = _stream(SHAPES["pre-filled <think> (only the closing tag)"], think_tags=None)
    assert off.reasoning_events == 0 and off.first_answer_t is None


def test_thinking_cut_off_by_max_tokens_is_all_reasoning() -> None:
    timer = _stream([({"content": "<think>"}, 1), ({"content": "Let me"}, 1), ({"content": " think"}, 1)])
    assert timer.first_answer_t is None and timer.reasoning_events == 3 and timer.texts == []


def test_an_answer_that_talks_about_the_tags_is_not_reasoning() -> None:
    mid = _stream([({"content": "Use "}, 1), ({"content": "<think>"}, 1), ({"content": " x "}, 1),
                   ({"content": "</think>"}, 1), ({"content": " tags"}, 1)])  # fmt: skip
    assert mid.reasoning_events == 0 and mid.first_answer_t is None
    assert "".join(mid.texts or []) == "Use <think> x </think> tags"
    # Only "</think>" in an answer is ambiguous (a pre-filled <think> looks the same): a request that
    # turned thinking off is never read that way.
    off = CompletionRequest("chat", messages=[], extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    on = CompletionRequest("chat", messages=[], extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert not may_think(off) and may_think(on) and may_think(CompletionRequest("chat", messages=[]))


def test_completions_text_is_never_read_for_think_tags() -> None:
    timer = StreamTimer(think_tags=THINK_TAGS)
    for i, text in enumerate(["a", "</think>", "b"]):
        timer.on_event(json.dumps({"id": "x", "choices": [{"index": 0, "text": text}]}).encode(), 0.1 + i / 100)
    assert timer.reasoning_events == 0 and timer.first_answer_t is None
