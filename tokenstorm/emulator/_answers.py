"""Right answers: what the emulator says to a request, read from the request itself.

Each answer is a list of pieces, one per output token (what an event of one token carries), so the usage
it reports is what it streams. It is right for the checks tokenstorm runs (``tokenstorm/workloads/traffic/checks``,
whose rules are repeated here: the emulator stands alone):

* script: the last user message's (Chinese when at least a third of its units — runs of letters, single
  CJK characters — are CJK): English words only for English, Chinese words only for Chinese;
* needle: when the last user message asks the contract question (its wording, English or Chinese, as
  ``tokenstorm/workloads/traffic/checks/needle.py`` writes it), the answer starts with the fact's value as the
  prompt states it;
* code (a completion prompt, or a chat message holding a code fence): English, no CJK at all; a chat
  message asking to "Write pytest unit tests" is answered with a closed ```python block of test
  functions that parses, sized to fit ``max_tokens``;
* no looping: words drawn from lists of 64, in sentences.

At temperature 0 the text and its length are drawn from a generator seeded with the prompt, so the same
prompt gets the same answer; otherwise from the server's. ``_wrong`` spoils answers on purpose.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._config import EmulatorConfig
from ._payloads import EN_WORDS, ZH_WORDS, Plan
from ._tools import ToolCall, plan_tool_call
from ._wrong import break_json, draw_wrong, looping, wrong_value

__all__ = [
    "Answered",
    "Asked",
    "answer_for",
    "asked_of",
    "plan_answer",
    "prompt_seed",
    "script_of",
    "token_text",
    "whole_text",
    "wrong_kinds",
]

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNIT = re.compile(rf"[{CJK}]|[^\W\d_{CJK}]+")
_CJK_CHAR = re.compile(rf"[{CJK}]")
#: a token of text: a CJK character, a word, a run of punctuation (with the whitespace before it)
_PIECE = re.compile(rf"\s*(?:[{CJK}]|[^\W{CJK}]+|[^\w\s{CJK}]+)|\s+")
_QUESTION = {
    "en": re.compile(r"Also answer, on the first line of your reply: what is the (.+?) stated in the contract\?"),
    "zh": re.compile(r"另外，请在回复的第一行回答：合同中约定的(.+?)是什么？"),
}
_FACT = {
    "en": r"(?m)^[^\n]{{0,24}}?The {subject} is ([^\n]+?)\.[ \t]*$",
    "zh": r"(?m)^[^\n]{{0,24}}?{subject}为([^\n]+?)。[ \t]*$",
}
_PYTEST = "Write pytest unit tests"
#: pieces planned when the request is read; a longer answer draws the rest as it streams
EAGER_PIECES = 4096
#: a looping answer is made at least this long (when max_tokens allows): long enough to be seen looping
LOOP_TOKENS = 48


def script_of(text: str) -> str:
    """``"zh"`` when at least a third of ``text``'s units are CJK characters, else ``"en"``."""
    found = _UNIT.findall(text)
    cjk = sum(1 for u in found if _CJK_CHAR.fullmatch(u))
    return "zh" if found and cjk / len(found) >= 1 / 3 else "en"


def pieces_of(text: str) -> list[str]:
    """``text`` cut into tokens (their concatenation is ``text``)."""
    return _PIECE.findall(text)


@dataclass(frozen=True, slots=True)
class Asked:
    """What a request asks for, as far as the answer's rightness goes."""

    lang: str
    code: bool = False
    pytest: bool = False
    #: the needle question was asked; ``needle``: the value the prompt states (None: asked, not found)
    needle_asked: bool = False
    needle: str | None = None
    #: temperature 0: the prompt alone decides the answer
    greedy: bool = False


def _last_user(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    for msg in reversed(messages if isinstance(messages, list) else []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else ""
    return ""


def _needle(question: str, prompt: str) -> tuple[bool, str | None]:
    for lang, pattern in _QUESTION.items():
        m = pattern.search(question)
        if m:
            fact = re.search(_FACT[lang].format(subject=re.escape(m.group(1))), prompt)
            return True, fact.group(1).strip() if fact else None
    return False, None


def asked_of(body: dict[str, Any], chat: bool, prompt: str) -> Asked:
    """What ``body`` asks (``prompt``: its text as ``_payloads.prompt_text`` joins it)."""
    temperature = body.get("temperature")
    greedy = isinstance(temperature, int | float) and not isinstance(temperature, bool) and temperature == 0
    if not chat:
        raw = body.get("prompt", "")
        text = raw if isinstance(raw, str) else json.dumps(raw)
        return Asked(script_of(text), code=True, greedy=greedy)
    user = _last_user(body)
    asked, value = _needle(user, prompt)
    pytest = _PYTEST in user
    return Asked(
        script_of(user), code=pytest or "```" in user, pytest=pytest, needle_asked=asked, needle=value, greedy=greedy
    )


def wrong_kinds(asked: Asked, tools: bool) -> tuple[str, ...]:
    """The ``--wrong-*`` knobs that may apply to a request (the ones drawn; the answer keeps those it used)."""
    kinds = ["tool_json"] if tools else []
    if asked.needle is not None:
        kinds.append("needle")
    kinds.extend(("cjk", "syntax") if asked.pytest else ("cjk",) if asked.code else ("script", "repeat", "cut"))
    return tuple(kinds)


def prompt_seed(prompt: bytes) -> int:
    """The seed a temperature-0 answer to ``prompt`` is drawn with."""
    return int.from_bytes(hashlib.sha256(prompt).digest()[:8], "big")


# -- the answer's tokens ------------------------------------------------------------------------------
def _word(rng: random.Random, lang: str) -> str:
    return " " + EN_WORDS[rng.randrange(len(EN_WORDS))] if lang == "en" else ZH_WORDS[rng.randrange(len(ZH_WORDS))]


def _filler(rng: random.Random, lang: str, n: int, lead: str = "") -> list[str]:
    """``n`` word tokens in sentences; ``lead`` replaces the first one's leading space."""
    out: list[str] = []
    stop, comma = (".", ",") if lang == "en" else ("。", "，")
    left = rng.randint(6, 14)
    for _ in range(n):
        piece = _word(rng, lang)
        left -= 1
        if left == 0:
            piece += stop
            left = rng.randint(6, 14)
        elif left == 3 and rng.random() < 0.3:
            piece += comma
        out.append(piece)
    if out and lead:
        out[0] = lead + out[0].lstrip()
    return out


def _test_function(rng: random.Random, i: int, cjk: bool, broken: bool) -> str:
    name = EN_WORDS[rng.randrange(len(EN_WORDS))]
    a, b = rng.randrange(100), rng.randrange(100)
    var = "值" if cjk else rng.choice(("value", "total", "result"))  # one token, as the English ones
    return f"def test_{name}_{i}(){'' if broken else ':'}\n    {var} = {a} + {b}\n    assert {var} == {a + b}\n"


def pytest_block(rng: random.Random, cap: int, cjk: bool = False, broken: bool = False) -> list[str]:
    """A closed ```python block of 1–4 test functions that fits ``cap`` tokens (fewer functions when it must;
    cut at ``cap`` when not even one fits). ``cjk``: its first function names a variable in Chinese;
    ``broken``: its first ``def`` line lacks its colon."""
    want = rng.randint(1, 4)
    funcs = [_test_function(rng, i, cjk and i == 0, broken and i == 0) for i in range(want)]
    while True:
        block = pieces_of("```python\n" + "\n".join(funcs) + "```")
        if len(block) <= cap or len(funcs) == 1:
            return block[:cap]
        funcs.pop()


@dataclass(slots=True)
class Answered:
    """What one request is answered with: sizes, finish, the call or the text's tokens, the knobs it used."""

    output_tokens: int
    finish: str
    reasoning_tokens: int
    call: ToolCall | None = None
    pieces: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    more: Callable[[int], str] | None = None
    wrong: set[str] = field(default_factory=set)


def _text(
    asked: Asked, rng: random.Random, n: int, cap: int, fill: bool, finish: str, wrong: set[str]
) -> tuple[list[str], int, str, Callable[[int], str] | None, set[str]]:
    """The text answer's tokens (the first :data:`EAGER_PIECES`), its length, finish, the rest's source, the
    knobs used. ``n``: the length drawn, ``cap``: the most allowed, ``fill``: exactly ``cap`` (ignore_eos)."""
    used: set[str] = set()
    lang = "en" if asked.code else asked.lang
    if "script" in wrong:
        lang = "zh" if lang == "en" else "en"
        used.add("script")
    core: list[str] = []
    if asked.pytest:
        core = pytest_block(rng, cap, "cjk" in wrong, "syntax" in wrong)
        used |= wrong & {"cjk", "syntax"}
        if not fill:  # the block is the whole answer: it ends after its fence (or is cut at max_tokens)
            n = len(core)
            finish = "stop" if n < cap or core[-1].endswith("```") else "length"
    elif asked.needle is not None:
        value = wrong_value(asked.needle) if "needle" in wrong else asked.needle
        used |= wrong & {"needle"}
        core = pieces_of(value)
        if not fill and n < len(core) + 1:
            n = min(cap, len(core) + 1)
            finish = "stop" if n < cap else "length"
    loop: list[str] | None = None
    if "repeat" in wrong:
        loop = looping(rng, lang)
        used.add("repeat")
        if not fill and n < LOOP_TOKENS:
            n = min(cap, LOOP_TOKENS)
            finish = "stop" if n < cap else "length"
    if "cut" in wrong and min(n, cap - 1) >= 1:
        hi = min(n, cap - 1)
        n, finish = rng.randint(min(hi, max(1, hi // 2, len(core) + 1)), hi), "length"
        used.add("cut")
    rest = max(0, min(n, EAGER_PIECES) - len(core))
    lead = "\n" if core else ""
    if loop is not None:
        tail = [loop[j % len(loop)] for j in range(rest)]
        if tail and lead:
            tail[0] = lead + tail[0].lstrip()
    else:
        tail = _filler(rng, lang, rest, lead)
    pieces = (core + tail)[:n]
    if "cjk" in wrong and asked.code and not asked.pytest and pieces:
        pieces[len(pieces) // 2] = " 结果"
        used.add("cjk")
    more: Callable[[int], str] | None = None
    if n > len(pieces):
        more = (lambda j: loop[j % len(loop)]) if loop is not None else (lambda _j: _word(rng, lang))
    return pieces, n, finish, more, used


def plan_answer(
    cfg: EmulatorConfig,
    body: dict[str, Any],
    chat: bool,
    asked: Asked,
    rng: random.Random,
    prompt_tokens: int,
    tool_choice: str,
    functions: list[dict[str, Any]],
    wrong: set[str],
) -> Answered:
    """The answer to ``body``: its length and finish drawn from ``rng`` (at temperature 0, seeded with the
    prompt), the call (a tool call, when the request's tools ask for one) or the text, spoiled by ``wrong``."""
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        max_tokens = max(1, cfg.max_model_len - prompt_tokens)
    ignore_eos = bool(body.get("ignore_eos"))
    if ignore_eos:
        output_tokens, finish = max_tokens, "length"
    else:
        natural = max(1, int(rng.lognormvariate(math.log(cfg.natural_output_tokens), 0.5)))
        output_tokens, finish = (natural, "stop") if natural < max_tokens else (max_tokens, "length")
    ctk = body.get("chat_template_kwargs") or {}
    thinking = chat and isinstance(ctk, dict) and bool(ctk.get("enable_thinking"))
    reasoning_tokens = int(output_tokens * cfg.reasoning_share) if thinking else 0
    if cfg.reasoning_format == "tags" and reasoning_tokens == 1:
        reasoning_tokens = 2 if output_tokens > 2 else 0  # "<think>" and "</think>" are a token each
    fill = max_tokens - reasoning_tokens if ignore_eos else None
    call = plan_tool_call(rng, tool_choice, functions, cfg.tool_call_share, fill)
    thought = _filler(rng, asked.lang, min(reasoning_tokens, EAGER_PIECES))
    if call is not None:
        used = set()
        if "tool_json" in wrong:
            call.argument_tokens, used = break_json(call.argument_tokens), {"tool_json"}
        # The reasoning (if any), then the call, cut at max_tokens as vLLM cuts it; ignore_eos ends in "length".
        output_tokens = min(max_tokens, reasoning_tokens + call.tokens)
        cut = reasoning_tokens + call.tokens > max_tokens or (ignore_eos and output_tokens == max_tokens)
        began = output_tokens > reasoning_tokens  # not when it reasoned up to max_tokens
        if began:
            return Answered(
                output_tokens, "length" if cut else call.finish, reasoning_tokens, call, [], thought, wrong=used
            )
        return Answered(output_tokens, "length" if cut else call.finish, reasoning_tokens, None, [], thought)
    cap = max_tokens - reasoning_tokens
    if cap < 1:  # it reasoned up to max_tokens
        return Answered(output_tokens, finish, reasoning_tokens, None, [], thought)
    n = output_tokens - reasoning_tokens
    pieces, n, finish, more, used = _text(asked, rng, n, cap, ignore_eos, finish, wrong)
    return Answered(reasoning_tokens + n, finish, reasoning_tokens, None, pieces, thought, more, used)


def token_text(plan: Plan, j: int, tags: str | None) -> str:
    """The text of output token ``j``: the reasoning's, then the answer's. ``tags``: the reasoning is in the
    content between think markers (``"tags"``: both streamed; ``"prefilled"``: only ``</think>``)."""
    r = plan.reasoning_tokens
    if j < r:
        if tags is not None:
            if j == 0 and tags == "tags":
                return "<think>"
            if j == r - 1:
                return "</think>"
        return plan.thinking[j] if j < len(plan.thinking) else " " + EN_WORDS[j % len(EN_WORDS)]
    i = j - r
    text = plan.pieces[i] if i < len(plan.pieces) else plan.more(i) if plan.more is not None else " "
    if tags is not None and r and i == 0:
        return "\n\n" + (text.lstrip() or text)
    return text


def answer_for(
    cfg: EmulatorConfig,
    body: dict[str, Any],
    chat: bool,
    text: str,
    prompt: bytes,
    prompt_tokens: int,
    tool_choice: str,
    functions: list[dict[str, Any]],
    server_rng: random.Random,
    wrong_rng: random.Random,
    running: int,
) -> Answered:
    """The answer to ``body`` (``text``/``prompt``: its prompt as text and bytes), the ``--wrong-*`` knobs that
    apply drawn from ``wrong_rng`` (``running``: requests being served beside it). At temperature 0 it is drawn
    from a generator seeded with the prompt, else from ``server_rng``."""
    asked = asked_of(body, chat, text)
    kinds = wrong_kinds(asked, tool_choice != "none" and bool(functions))
    if asked.greedy and running > 0:  # another request is being served beside it
        kinds = (*kinds, "consistency")
    wrong = draw_wrong(wrong_rng, cfg.wrong, kinds, running + 1, cfg.wrong_rise) if cfg.wrong else set()
    rng = random.Random(prompt_seed(prompt)) if asked.greedy else server_rng
    if "consistency" in wrong:
        rng = random.Random(wrong_rng.getrandbits(64))
    answered = plan_answer(cfg, body, chat, asked, rng, prompt_tokens, tool_choice, functions, wrong)
    if "consistency" in wrong:
        same = plan_answer(
            cfg,
            body,
            chat,
            asked,
            random.Random(prompt_seed(prompt)),
            prompt_tokens,
            tool_choice,
            functions,
            wrong - {"consistency"},
        )
        if same.pieces == answered.pieces and answered.pieces:  # drawn alike all the same: make it differ
            answered.pieces[-1] += "!" if asked.lang == "en" else "！"
        answered.wrong.add("consistency")
    return answered


def whole_text(plan: Plan, reasoning_format: str) -> str:
    """A non-streamed answer's text (its reasoning in think markers where ``reasoning_format`` puts them in it)."""
    tags = reasoning_format if plan.chat and plan.reasoning_tokens and reasoning_format != "field" else None
    first = 0 if tags else plan.reasoning_tokens
    return "".join(token_text(plan, j, tags) for j in range(first, plan.output_tokens))
