"""The emulator's prefix cache follows vLLM's rules: full blocks only, each found only after all the blocks
before it, the last prompt token never a hit, least recently used blocks evicted first.

A token is 4 bytes of the prompt's text (how the emulator sizes prompts), so a block of 16 tokens is 64 bytes.
"""

from __future__ import annotations

import random

from tokenstorm.emulator._payloads import estimate_prompt_tokens, prompt_text
from tokenstorm.emulator._prefix_cache import PrefixCache

BLOCK = 16
STEP = 4 * BLOCK  # bytes per block


def _text(seed: int, blocks: float) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(97, 123) for _ in range(int(blocks * STEP)))


def _admit(cache: PrefixCache, text: bytes) -> int:
    return cache.admit(text, len(text) // 4)


def test_a_repeat_hits_its_full_blocks_but_never_the_last_token() -> None:
    cache = PrefixCache(1000, BLOCK)
    text = _text(0, 10.5)  # 168 tokens: 10 full blocks
    assert _admit(cache, text) == 0
    assert _admit(cache, text) == 10 * BLOCK
    exact = _text(1, 10)  # 160 tokens, all in full blocks: the 10th holds the last token, so 9 blocks are hits
    _admit(cache, exact)
    assert _admit(cache, exact) == 9 * BLOCK
    # vLLM 0.32 (block 128) said the same of a repeated 489-token prompt: 384 cached = (489 - 1) // 128 * 128
    real = PrefixCache(100, 128)
    prompt = _text(2, 489 * 4 / STEP)
    assert real.admit(prompt, 489) == 0 and real.admit(prompt, 489) == 384


def test_a_shared_prefix_hits_up_to_the_first_block_that_differs() -> None:
    cache = PrefixCache(1000, BLOCK)
    shared = _text(0, 6.5)  # 6 full blocks, then half a block shared too
    _admit(cache, shared + _text(1, 4))
    assert _admit(cache, shared + _text(2, 4)) == 6 * BLOCK  # the 7th block differs in its second half
    # a block equal to a cached one but after a block that differs is not found (hashes chain)
    first, second = _text(3, 1), _text(4, 1)
    _admit(cache, first + second + _text(5, 1))
    assert _admit(cache, _text(6, 1) + second + _text(7, 1)) == 0


def test_least_recently_used_blocks_are_evicted_first() -> None:
    cache = PrefixCache(8, BLOCK)
    a, b, c = _text(0, 4.5), _text(1, 4.5), _text(2, 4.5)  # 4 full blocks each
    _admit(cache, a)
    _admit(cache, b)
    assert len(cache) == 8
    assert _admit(cache, a) == 4 * BLOCK  # a is now the most recently used
    _admit(cache, c)  # evicts b's blocks, not a's
    assert len(cache) == 8
    assert _admit(cache, a) == 4 * BLOCK
    assert _admit(cache, b) == 0


def test_under_pressure_a_prompts_tail_is_evicted_before_its_prefix_as_vllm_frees_blocks() -> None:
    cache = PrefixCache(8, BLOCK)
    a, b = _text(0, 6.5), _text(1, 4.5)  # 6 and 4 full blocks: 10 > 8, two of them must go
    _admit(cache, a)
    _admit(cache, b)
    # vLLM frees a request's blocks last first: a's last two went, its first four stayed (not a cliff to 0).
    assert _admit(cache, a) == 4 * BLOCK


def test_off_caches_nothing() -> None:
    cache = PrefixCache(0, BLOCK)
    text = _text(0, 5.5)
    assert not cache.enabled
    assert _admit(cache, text) == 0 and _admit(cache, text) == 0 and len(cache) == 0


def test_a_tool_call_history_is_part_of_the_prompt_and_tools_follow_the_system_prompt() -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    system = {"role": "system", "content": "s" * 400}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "chatcmpl-tool-1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"query": "' + "q" * 396 + '"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "r" * 4000}
    task = {"role": "user", "content": "fix it"}
    base = estimate_prompt_tokens({"messages": [system, task]}, chat=True)
    assert estimate_prompt_tokens({"messages": [system, task, call]}, chat=True) >= base + 100  # 400+ bytes of call
    assert estimate_prompt_tokens({"messages": [system, task, result]}, chat=True) == base + 1000  # 4000 + "\n"
    # the tools' schemas come after the system prompt: two agents with the same system prompt and tools share both
    one = prompt_text({"messages": [system, {"role": "user", "content": "task one"}], "tools": tools}, chat=True)
    two = prompt_text({"messages": [system, {"role": "user", "content": "task two"}], "tools": tools}, chat=True)
    assert one.startswith(system["content"] + "\n[{") and one[: len(one) - 3] == two[: len(two) - 3]
