"""Trace replay's requests: a Mooncake-format JSONL trace, read and checked, and the prompts built from it.

One JSON object a line (the format of Mooncake's published traces, which GuideLLM, AIPerf and vLLM's
benchmarks read)::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54]}

``timestamp``: milliseconds (the first request's is the replay's zero; rows need not be in order);
``input_length`` / ``output_length``: prompt and output tokens; ``hash_ids`` (optional): one id per
``block_tokens``-token block of the prompt, equal ids marking equal blocks (a shared prefix). Other keys
are ignored. Errors name the file and line.

Prompts: each hash id's block is ``block_tokens`` words drawn from a seed and the id alone, so requests
with equal hash ids get equal text there (a server's prefix cache can hit on it); the last block is cut
to the prompt's length, and tokens past the hash ids are drawn from the row's line number (unique). Every
word is one token (a short English word with its leading space, checked with ``--tokenizer`` when one is
given; else four bytes each, which the estimate and the emulator count as one token), so a prompt has
``input_length`` tokens as the raw ``/v1/completions`` prompt it is sent as (no chat template added).
The output length is asked for with ``ignore_eos``: every request generates what the trace recorded.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..client.client import CompletionRequest
from .datasets import read_text_file
from .tokens import TokenCounter

__all__ = ["TRACE_WORKLOAD", "TraceError", "TracePrompts", "TraceRow", "parse_trace", "read_trace"]

#: the workload name of trace requests (their stats rows, SLO scope, records)
TRACE_WORKLOAD = "trace"
_EXPECTED = (
    'a Mooncake trace: one JSON object a line, e.g. {"timestamp": 0, "input_length": 512, '
    '"output_length": 64, "hash_ids": [0]}'
)
#: three-letter words: one token each with their leading space in BPE and SentencePiece vocabularies,
#: and four bytes (one token to the estimate and to the emulator)
_WORDS = (
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "day",
    "get",
    "has",
    "him",
    "his",
    "how",
    "man",
    "new",
    "now",
    "old",
    "see",
    "two",
    "way",
    "who",
    "did",
    "its",
    "let",
    "put",
    "say",
    "she",
    "too",
    "use",
    "set",
    "run",
    "end",
    "big",
    "may",
    "own",
    "top",
    "off",
    "few",
    "far",
    "act",
    "add",
    "age",
    "ago",
    "air",
    "arm",
    "art",
    "ask",
    "bad",
    "bed",
    "box",
    "boy",
    "car",
    "cut",
    "dog",
    "eye",
)
#: more words for a ``--tokenizer`` whose vocabulary lacks many of the above (any length: it counts them)
_MORE_WORDS = (
    "a",
    "i",
    "of",
    "to",
    "in",
    "is",
    "it",
    "on",
    "be",
    "as",
    "at",
    "by",
    "or",
    "an",
    "we",
    "if",
    "no",
    "so",
    "do",
    "up",
    "that",
    "with",
    "this",
    "from",
    "have",
    "they",
    "will",
    "time",
    "shall",
    "party",
    "order",
    "date",
    "days",
    "goods",
    "within",
    "notice",
    "return",
    "self",
    "cache",
    "token",
)


class TraceError(ValueError):
    """A trace that cannot be replayed; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One recorded request: when (seconds after the trace's first), its lengths and prefix blocks."""

    line: int
    offset_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


def _shown(value: Any) -> str:
    """A value for an error line: a number as written, anything else by its JSON kind (a text is not repeated)."""
    if isinstance(value, int | float):
        return repr(value)
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "an object"}
    return f"({kinds.get(type(value), 'null')})"


def _whole(row: dict[str, Any], key: str, where: str, minimum: int) -> int:
    if key not in row:
        raise TraceError(f"{where}: no {key!r} — {_EXPECTED}")
    value = row[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TraceError(f"{where}: {key} {_shown(value)}: expected a whole number >= {minimum}")
    return value


def _row(data: Any, where: str, line: int) -> tuple[float, TraceRow]:
    if not isinstance(data, dict):
        raise TraceError(f"{where}: not a JSON object — {_EXPECTED}")
    if "timestamp" not in data:
        raise TraceError(f"{where}: no 'timestamp' — {_EXPECTED}")
    stamp = data["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp) or stamp < 0:
        raise TraceError(f"{where}: timestamp {_shown(stamp)}: expected milliseconds >= 0")
    input_length = _whole(data, "input_length", where, 1)
    output_length = _whole(data, "output_length", where, 1)
    ids = data.get("hash_ids", [])
    if ids is None:
        ids = []
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise TraceError(f"{where}: hash_ids: expected a list of whole numbers, e.g. [0, 1, 2]")
    return float(stamp), TraceRow(line, 0.0, input_length, output_length, tuple(ids))


def parse_trace(text: str, source: str = "trace") -> list[TraceRow]:
    """The rows of a Mooncake JSONL trace, by time (ties in file order), offsets from the first;
    :class:`TraceError` with ``SOURCE:LINE: reason`` for the first bad row."""
    stamped: list[tuple[float, TraceRow]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{source}:{n}"
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({str(exc).split(':')[0]}) — {_EXPECTED}") from None
        stamped.append(_row(data, where, n))
    if not stamped:
        raise TraceError(f"{source}: no requests — {_EXPECTED}")
    stamped.sort(key=lambda s: s[0])  # stable: equal timestamps keep the file's order
    zero = stamped[0][0]
    return [TraceRow(r.line, (ms - zero) / 1000, r.input_length, r.output_length, r.hash_ids) for ms, r in stamped]


def read_trace(path: str | Path) -> list[TraceRow]:
    """:func:`parse_trace` of the file ``--trace`` names (its errors start ``--trace FILE``)."""
    where = f"--trace {path}"
    return parse_trace(read_text_file(Path(path), TraceError, "trace file", _EXPECTED, where=where), where)


class TracePrompts:
    """Builds each row's request: prompts whose blocks follow the row's hash ids, ``input_length`` tokens."""

    #: blocks kept built (a block of 512 words is 2 KB): the ids a trace reuses are mostly recent ones
    cache_blocks = 4096

    def __init__(self, counter: TokenCounter, block_tokens: int = 512, seed: int = 0) -> None:
        if block_tokens < 1:
            raise ValueError(f"--trace-block-size {block_tokens}: must be >= 1")
        self.block_tokens, self.seed = block_tokens, seed
        words = tuple(" " + w for w in _WORDS)
        if counter.exact:
            words = tuple(w for w in (*words, *(" " + w for w in _MORE_WORDS)) if counter.count(w) == 1)
            if len(words) < 2 or counter.count("".join(words * 2)) != 2 * len(words):
                raise ValueError(
                    "--tokenizer: no common English words are one token each in this tokenizer, so "
                    "trace prompts cannot be sized exactly; replay without --tokenizer"
                )
        self._words = words
        self._blocks: OrderedDict[int, tuple[str, ...]] = OrderedDict()

    def _draw(self, key: str, n: int) -> tuple[str, ...]:
        return tuple(random.Random(f"{self.seed}/trace/{key}").choices(self._words, k=n))

    def block(self, hash_id: int) -> tuple[str, ...]:
        """The words of hash id ``hash_id``'s block (the same for every row that names it)."""
        words = self._blocks.get(hash_id)
        if words is None:
            words = self._blocks[hash_id] = self._draw(f"block/{hash_id}", self.block_tokens)
            if len(self._blocks) > self.cache_blocks:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(hash_id)
        return words

    def prompt(self, row: TraceRow) -> str:
        """``row``'s prompt: its hash ids' blocks, then unique words, ``input_length`` tokens in all."""
        parts: list[str] = []
        left = row.input_length
        for hash_id in row.hash_ids:
            if left <= 0:
                break  # ids past the prompt's length (a longer block size in the trace) are not sent
            words = self.block(hash_id)
            parts.extend(words[:left])
            left -= len(words[:left])
        if left > 0:
            parts.extend(self._draw(f"row/{row.line}", left))
        return "".join(parts)

    def request(self, row: TraceRow) -> CompletionRequest:
        """The request replaying ``row``: a raw completion of its prompt, its output length with ``ignore_eos``."""
        return CompletionRequest(
            workload=TRACE_WORKLOAD,
            endpoint="completions",
            prompt=self.prompt(row),
            max_tokens=row.output_length,
            ignore_eos=True,
            requested_prompt_tokens=row.input_length,
        )
