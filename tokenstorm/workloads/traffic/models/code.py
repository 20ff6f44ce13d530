"""Code completion: prefixes cut from real Python source (the standard library's own files), as
raw ``/v1/completions`` prompts with stop sequences or as chat skills (completion, unit-test
generation, bug finding). Short and latency-critical.
"""

from __future__ import annotations

import random
import sysconfig
from functools import cache
from pathlib import Path

from ...client.client import CompletionRequest
from ..base import Option, Session, TrafficModel, WorkloadSettings
from ..checks.code import code_language, python_parses
from ..lengths import LengthDist
from ..tokens import TokenCounter

__all__ = ["Code"]

_STDLIB_MODULES = (
    "textwrap.py",
    "json/encoder.py",
    "json/decoder.py",
    "argparse.py",
    "csv.py",
    "heapq.py",
    "fractions.py",
    "dataclasses.py",
    "functools.py",
    "shutil.py",
    "statistics.py",
    "string.py",
    "ipaddress.py",
    "calendar.py",
    "difflib.py",
    "bisect.py",
    "configparser.py",
    "gzip.py",
    "pprint.py",
    "shlex.py",
    "tempfile.py",
    "uuid.py",
    "email/utils.py",
)


@cache
def _code_sources() -> tuple[tuple[str, tuple[str, ...]], ...]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / m for m in _STDLIB_MODULES if (stdlib / m).exists()]
    if not files:  # stdlib sources stripped (some containers): use tokenstorm's own
        files = sorted(Path(__file__).parents[3].rglob("*.py"))
    out = []
    for f in files:
        lines = tuple(f.read_text(encoding="utf-8", errors="replace").splitlines())
        if len(lines) > 40:
            out.append((f.name, lines))
    return tuple(out)


_SKILL_PROMPTS = {
    "complete": "Complete the following Python code. Reply with the missing code only.\n\n```python\n{code}",
    "unit_test": "Write pytest unit tests for the last function in this Python code:\n\n```python\n{code}\n```",
    "bug_find": "Find bugs in this Python code. For each: the line, the problem and a fix.\n\n```python\n{code}\n```",
}
_STOP = ["\ndef ", "\nclass ", "\n\n\n", "\nif __name__"]


class Code(TrafficModel):
    """Code completion and code skills: short prompts, 16-128 output tokens, latency-critical."""

    name = "code"
    description = "code completion: short prefixes of real Python, raw completions or chat skills"
    defaults = WorkloadSettings(
        "code",
        3,
        LengthDist.parse("uniform:16-128"),
        LengthDist.parse("uniform:100-600"),
        endpoint="both",
        wait_s=(0.2, 1.5),
    )
    settings = frozenset({"prompt_tokens", "output_tokens", "endpoint", "skills", "wait_s"})
    options = (
        Option("prompt-tokens", "prompt_tokens", "Code prefix length (default uniform:100-600)"),
        Option("output-tokens", "output_tokens", "Code output length (default uniform:16-128)"),
        Option("endpoint", "endpoint", "chat, completions or both (default both)"),
    )

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        super().__init__(settings, counter, seed)
        self._sources = _code_sources()

    def _prefix(self, rng: random.Random, tokens: int) -> str:
        _name, lines = rng.choice(self._sources)
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "class "))] or [0]
        i = rng.choice(starts)
        out: list[str] = []
        total = 0
        while i < len(lines) and total < tokens:
            out.append(lines[i])
            total += self.counter.count(lines[i]) + 1
            i += 1
        # Cut inside the body so there is something to complete.
        cut = max(1, len(out) - rng.randint(0, min(3, len(out) - 1)))
        return "\n".join(out[:cut]) + "\n"

    def session(self, rng: random.Random) -> Session:
        """One code request."""
        yield self.request(rng)

    def request(self, rng: random.Random) -> CompletionRequest:
        """A code request: a prefix cut from real source and a skill."""
        s = self.config
        assert s.prompt_tokens is not None  # code always has a prefix length
        code = self._prefix(rng, s.prompt_tokens.sample(rng))
        skill = rng.choice(s.skills)
        max_tokens = s.output_tokens.sample(rng)
        use_completions = skill == "complete" and (
            s.endpoint == "completions" or (s.endpoint == "both" and rng.random() < 0.5)
        )
        if use_completions:
            return CompletionRequest(
                workload=s.name,
                endpoint="completions",
                prompt=code,
                max_tokens=max_tokens,
                stop=list(_STOP),
                requested_prompt_tokens=self.counter.count(code),
                checks=(code_language(),),
            )
        text = _SKILL_PROMPTS[skill].format(code=code)
        # English Python asked for: English identifiers and comments; whole test functions must parse.
        checks = (code_language(), python_parses()) if skill == "unit_test" else (code_language(),)
        return CompletionRequest(
            workload=s.name,
            endpoint="chat",
            messages=[{"role": "user", "content": text}],
            max_tokens=max_tokens,
            stop=["```\n\n"] if skill == "complete" else None,
            requested_prompt_tokens=self.counter.count(text),
            checks=checks,
        )


MODEL = Code
