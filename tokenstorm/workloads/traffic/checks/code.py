"""Checks of code answers: identifiers and comments in the language asked for (no CJK identifiers), and
Python that parses when whole functions were asked for."""

from __future__ import annotations

import ast
import re
import textwrap

from . import Check, CheckCall, Reply
from .text import CJK

__all__ = ["code_language", "fenced_python", "python_parses"]

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
# string literals (triple-quoted first), so that CJK text inside strings is not an identifier
_STRINGS = re.compile(r"('''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\")", re.DOTALL)
_ANY_CJK = re.compile(rf"[{CJK}]")
_CJK_RUN = re.compile(rf"[\w{CJK}]*[{CJK}][\w{CJK}]*")


def fenced_python(text: str) -> str | None:
    """The first closed fenced code block of ``text`` (``None``: none closed)."""
    m = _FENCE.search(text)
    return m.group(1) if m else None


def code_language() -> Check:
    """Identifiers and comments are English: no CJK outside string literals (the code the prompt asked
    for is English Python; string contents may be any language)."""
    return CheckCall("code_language", _code_language)


def _code_language(reply: Reply) -> bool | str | None:
    code = fenced_python(reply.text) or reply.text
    if not code.strip():
        return None
    if not _ANY_CJK.search(code):
        return True  # the common case, at once: nothing to look for in identifiers, comments or strings
    m = _CJK_RUN.search(_STRINGS.sub("''", code))
    if m:
        return f"CJK identifier or comment {m.group(0)[:40]!r}"
    return True


def python_parses() -> Check:
    """The answer's (first closed fenced) Python block parses with :func:`ast.parse` — whole functions
    were asked for. An answer that ended on its own without one fails (a refusal is no code); one cut before
    its block closed is not judged."""
    return CheckCall("python_parses", _python_parses)


def _python_parses(reply: Reply) -> bool | str | None:
    code = fenced_python(reply.text)
    if code is None:
        if reply.finish_reason == "stop" and "```" not in reply.text:
            return "no ```python block in an answer that ended on its own"
        return None
    try:
        ast.parse(textwrap.dedent(code))
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # a NUL byte
        return f"ValueError: {exc}"
    return True
