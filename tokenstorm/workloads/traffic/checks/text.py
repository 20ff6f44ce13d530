"""Checks of natural-language answers: the script they are written in, degenerate repetition, and whether
the answer ended on its own (or at ``max_tokens``) rather than being cut short.

Text is counted in *units*: a run of Latin letters (a word) is one unit, each CJK character one unit —
so an English answer and a Chinese one of the same length weigh alike.
"""

from __future__ import annotations

import re
from functools import lru_cache

from . import Check, CheckCall, Reply

__all__ = ["CJK", "complete", "repetition", "script", "script_of", "units"]

#: CJK ideographs (unified, extension A, compatibility), kana and hangul: what "Chinese" script means here
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_UNIT = re.compile(rf"[{CJK}]|[^\W\d_{CJK}]+")
_CJK_CHAR = re.compile(rf"[{CJK}]")
#: ``_UNIT`` on ASCII text (most answers): letters only, no CJK — the same units, found in a third of the time
_ASCII_UNIT = re.compile(r"[a-z]+")
#: an English answer may quote a few CJK words (a name, a term); a Chinese one, English words
EN_MAX_CJK = 0.10
ZH_MIN_CJK = 0.50
#: a repeated-n-gram ratio above this, over at least ``REPEAT_MIN_UNITS`` units, is degenerate repetition
REPEAT_N = 3
REPEAT_MAX_RATIO = 0.5
REPEAT_MIN_UNITS = 20


@lru_cache(maxsize=8)
def _units(text: str) -> tuple[str, ...]:
    """The units of ``text`` case-folded: one pass for every check of one answer (kept for the next few)."""
    if text.isascii():
        return tuple(_ASCII_UNIT.findall(text.lower()))
    return tuple(_UNIT.findall(text.casefold()))


def units(text: str) -> list[str]:
    """``text``'s words (runs of letters, case-folded) and CJK characters, in order."""
    return list(_units(text))


def cjk_share(text: str) -> float | None:
    """The share of ``text``'s units that are CJK characters (``None``: it has none of either)."""
    found = _units(text)
    if not found:
        return None
    if text.isascii():
        return 0.0
    return len(_CJK_CHAR.findall(text)) / len(found)  # each CJK character is a unit of its own


_ASKS_ZH = re.compile(r"用中文|中文回答|in chinese|into chinese", re.IGNORECASE)
_ASKS_EN = re.compile(r"用英文|用英语|英文回答|in english|into english", re.IGNORECASE)
_TRANSLATE = re.compile(r"translat|翻译|譯", re.IGNORECASE)


def script_of(text: str) -> str | None:
    """The script an answer to ``text`` should be in: the language it asks for by name ("用中文", "in
    English"); else ``"zh"`` when at least half of its units are CJK, ``"en"`` when at most a tenth are;
    ``None`` (not judged) between those, or for a translation that names no language."""
    if _ASKS_ZH.search(text):
        return "zh"
    if _ASKS_EN.search(text):
        return "en"
    share = cjk_share(text)
    if share is None or _TRANSLATE.search(text):
        return None
    if share >= ZH_MIN_CJK:
        return "zh"
    return "en" if share <= EN_MAX_CJK else None


def script(expected: str | None) -> Check:
    """The answer is written in ``expected`` (``"en"`` or ``"zh"``, the prompt's script; ``None``: not judged)."""
    return CheckCall("script", _script, (expected,))


def _script(reply: Reply, expected: str | None) -> bool | str | None:
    share = cjk_share(reply.text)
    if share is None or expected is None:
        return None  # no words at all (tool calls only): nothing to judge
    if expected == "zh" and share < ZH_MIN_CJK:
        return f"asked in Chinese, answered {share:.0%} CJK (needs {ZH_MIN_CJK:.0%})"
    if expected != "zh" and share > EN_MAX_CJK:
        return f"asked in English, answered {share:.0%} CJK (at most {EN_MAX_CJK:.0%})"
    return True


def repeated_ratio(text: str, n: int = REPEAT_N) -> float | None:
    """1 − distinct n-grams / n-grams of ``text``'s units (``None``: under ``REPEAT_MIN_UNITS`` units)."""
    found = _units(text)
    if len(found) < max(REPEAT_MIN_UNITS, n):
        return None
    grams = list(zip(*(found[i:] for i in range(n)), strict=False))
    return 1 - len(set(grams)) / len(grams)


def repetition() -> Check:
    """The answer does not loop: at most ``REPEAT_MAX_RATIO`` of its word trigrams are repeats."""
    return CheckCall("repetition", _repetition)


def _repetition(reply: Reply) -> bool | str | None:
    ratio = repeated_ratio(reply.text)
    if ratio is None:
        return None
    if ratio > REPEAT_MAX_RATIO:
        return f"{ratio:.0%} of its {REPEAT_N}-grams are repeats (at most {REPEAT_MAX_RATIO:.0%})"
    return True


def complete() -> Check:
    """The answer ended on its own (``stop``, ``tool_calls``), or at ``max_tokens`` — not cut short: no
    ``length`` finish before ``max_tokens`` (the context window ran out), no ``abort``, no empty answer."""
    return CheckCall("complete", _complete)


def _complete(reply: Reply) -> bool | str | None:
    finish = reply.finish_reason
    if not reply.text.strip() and not reply.tool_calls:
        return f"empty answer (finish_reason {finish})"
    if finish in ("stop", "tool_calls"):
        return True
    if finish == "length":
        if reply.max_tokens is None or reply.output_tokens is None or reply.output_tokens >= reply.max_tokens:
            return True
        return f"cut at {reply.output_tokens} of {reply.max_tokens} max_tokens (finish_reason length)"
    return f"finish_reason {finish}"
