"""Loading prompt datasets: ShareGPT JSON and tokenstorm's JSONL.

JSONL, one object per line, either ``{"prompt": "..."}`` (a single-turn request) or
``{"messages": [{"role": "user", "content": "..."}, ...]}`` (the user turns are replayed in
order), with an optional ``"max_tokens"``. ShareGPT: a JSON list of
``{"conversations": [{"from": "human"|"gpt", "value": "..."}]}``; the human turns are replayed.
The assistant turn that answered each user turn is kept too: its length is that turn's output
length (as vLLM's own ShareGPT benchmark uses it), unless ``max_tokens`` says otherwise.
Errors name the file and line (JSONL) or entry (ShareGPT). A leading UTF-8 BOM (as some
editors and Windows tools save) is dropped; a binary file is refused with the first bad byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Conversation", "DatasetError", "load_dataset", "read_text_file"]


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the place."""


@dataclass(frozen=True)
class Conversation:
    """The user turns of one conversation, the recorded answers to them, and an optional output length."""

    turns: tuple[str, ...]
    max_tokens: int | None = None
    #: the assistant's recorded answer to each user turn ("" where the dataset has none)
    answers: tuple[str, ...] = ()


def read_text_file(path: Path, error: type[ValueError], kind: str, expected: str, where: str = "") -> str:
    """The text of a file the user named: UTF-8, a leading BOM dropped. Otherwise ``error`` with one
    line that starts with ``where`` (default: the path) and says what is wrong — no such ``kind``, a
    directory, unreadable, or not text (the first byte that is not UTF-8, else a NUL: binary or
    UTF-16), followed by ``expected``, what such a file is."""
    where = where or str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{where}: no such {kind}") from None
    except IsADirectoryError:
        raise error(f"{where}: is a directory, not a {kind}") from None
    except OSError as exc:
        raise error(f"{where}: cannot read ({exc.strerror or exc})") from None
    try:
        text, bad = data.decode("utf-8-sig"), data.find(b"\0")  # a NUL is UTF-8, but in no text file
    except UnicodeDecodeError as exc:
        text, bad = "", exc.start + len(data) - len(exc.object)  # past the BOM, if any
    if bad >= 0:
        raise error(f"{where}: not UTF-8 text (byte 0x{data[bad]:02x} at offset {bad}) — {expected}")
    return text


def load_dataset(path: Path) -> list[Conversation]:
    """Load ``path``: ShareGPT JSON (one document) or JSONL (one object a line)."""
    text = read_text_file(path, DatasetError, "dataset file", "a dataset is ShareGPT JSON or JSONL")
    whole = _whole_json(path, text)
    convs = _sharegpt(path, whole) if whole is not None else _jsonl(path, text)
    if not convs:
        raise DatasetError(f"{path}: no usable conversations")
    return convs


def _whole_json(path: Path, text: str) -> list[object] | None:
    """ShareGPT entries when the file is one JSON document — a list, one conversation object or
    ``{id: conversation}`` (pretty-printed or not) — else ``None``: JSONL, one object per line."""
    head = text.lstrip()[:1]
    if head not in ("[", "{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if head == "{" and _one_json_line(text):
            return None  # JSONL: each line its own object (read, and said, line by line)
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "conversations" in data:
        return [data]
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "conversations" in v for v in data.values()):
        return list(data.values())
    return None


def _one_json_line(text: str) -> bool:
    """The first non-blank line of ``text`` is a JSON document of its own (the file is JSONL, not one
    document written over many lines)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _sharegpt(path: Path, data: list[object]) -> list[Conversation]:
    out = []
    for i, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{path}: entry {i} has no 'conversations' list (ShareGPT format)")
        pairs = _pairs([(t.get("from"), _text(t.get("value"))) for t in turns if isinstance(t, dict)], "human", "gpt")
        if pairs:
            out.append(Conversation(tuple(q for q, _ in pairs), answers=tuple(a for _, a in pairs)))
    return out


def _text(value: object) -> str:
    """A message's text; anything else (``null`` content of a tool call, a list of parts) is none."""
    return value if isinstance(value, str) else ""


def _pairs(messages: list[tuple[object, str]], asker: str, answerer: str) -> list[tuple[str, str]]:
    """(user turn, the answer that followed it or "") for every non-empty user turn."""
    out: list[tuple[str, str]] = []
    for i, (who, text) in enumerate(messages):
        if who == asker and text:
            following = messages[i + 1] if i + 1 < len(messages) else None
            out.append((text, following[1] if following is not None and following[0] == answerer else ""))
    return out


def _jsonl(path: Path, text: str) -> list[Conversation]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{n}: expected an object with 'prompt' or 'messages'")
        max_tokens = obj.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise DatasetError(f"{path}:{n}: max_tokens must be a positive integer")
        if isinstance(obj.get("prompt"), str):
            out.append(Conversation((obj["prompt"],), max_tokens))
        elif isinstance(obj.get("messages"), list):
            pairs = _pairs(
                [(m.get("role"), _text(m.get("content"))) for m in obj["messages"] if isinstance(m, dict)],
                "user",
                "assistant",
            )
            if not pairs:
                raise DatasetError(f"{path}:{n}: 'messages' has no user turn")
            out.append(Conversation(tuple(q for q, _ in pairs), max_tokens, tuple(a for _, a in pairs)))
        elif isinstance(obj.get("turns"), list):
            out.append(Conversation(tuple(str(t) for t in obj["turns"]), max_tokens))
        else:
            raise DatasetError(f"{path}:{n}: expected 'prompt' (string) or 'messages' (list)")
    return out
