"""Wrong answers on purpose: the ``--wrong-*`` knobs, drawn per request, and how each one spoils an answer.

Every knob is a probability (0–1) that a request it applies to is answered wrong in its one way, drawn
independently of the others from the server's own generator (a fresh seed each start unless ``--seed``,
as ``--fault`` draws: never the prompt's, so the same prompt is not always wrong). ``--wrong-rise N``
scales every rate with load: rate × min(1, running / N), ``running`` counting the request itself.

* ``needle``: a needle question answered with another value (its digits shifted, or its first letter);
* ``cjk``: a code answer with a CJK identifier;
* ``syntax``: a pytest answer whose block does not parse (a ``def`` line without its colon);
* ``script``: a text answer in the other script (Chinese for an English prompt, English for a Chinese one);
* ``repeat``: a text answer that loops (one short phrase over and over);
* ``cut``: a text answer ended with ``finish_reason`` "length" before ``max_tokens``;
* ``tool_json``: a tool call whose arguments are not JSON (a trailing comma before the last brace);
* ``consistency``: a temperature-0 answer other than its deterministic one — only while another request
  is being served beside it (the prompt alone no longer decides the text).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping

from ._config import WRONG_KINDS
from ._payloads import EN_WORDS, ZH_WORDS

__all__ = ["WRONG_KINDS", "break_json", "draw_wrong", "looping", "wrong_value"]

_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")


def draw_wrong(
    rng: random.Random, rates: Mapping[str, float], kinds: Iterable[str], running: int, rise: int
) -> set[str]:
    """Which of ``kinds`` (those that apply to the request) spoil its answer, each drawn on its own."""
    scale = 1.0 if rise <= 0 else min(1.0, running / rise)
    return {kind for kind in kinds if rates.get(kind, 0.0) > 0 and rng.random() < rates[kind] * scale}


def wrong_value(value: str) -> str:
    """A value that is not ``value`` nor contains it: every digit shifted by one, or (none) its first letter."""
    if any(c.isdigit() for c in value):
        return "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in value)
    for i, c in enumerate(value):
        if c.isalpha():
            other = ("B" if c.upper() == "A" else "A") if c.isascii() else ("某" if c != "某" else "另")
            return value[:i] + other + value[i + 1 :]
    return value + "?" if value else "?"


def looping(rng: random.Random, lang: str) -> list[str]:
    """The phrase a looping answer repeats: a few words, as tokens."""
    words = rng.sample(EN_WORDS if lang == "en" else ZH_WORDS, 4)
    return [" " + w for w in words] if lang == "en" else list(words)


def break_json(tokens: list[str]) -> list[str]:
    """JSON argument tokens made invalid with the same number of tokens: a comma before the last brace."""
    text = "".join(tokens)
    cut = text.rstrip()
    broken = cut[:-1] + ",}" + text[len(cut) :] if cut.endswith("}") else text + ","
    return _TOKEN.findall(broken)
