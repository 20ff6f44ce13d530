"""What an agent's tools answer (:mod:`.agent`): endless lines of one result kind — source files, search
matches, listings, test logs, acknowledgements, contract articles, case law — cut to a token count."""

from __future__ import annotations

import random
from collections.abc import Iterator

from ..tokens import TokenCounter
from .code import _code_sources
from .contract import _CITIES, _PARTIES, _clauses

__all__ = ["fill_lines", "result_lines"]

_COURTS = ("EWCA Civ", "EWHC (Comm)", "UKSC", "NY App Div", "SGCA", "BGH")


def fill_lines(counter: TokenCounter, lines: Iterator[str], tokens: int) -> str:
    """Lines cut to ``tokens`` tokens. Counted together (line by line overcounts a little), and cut by a search
    over the text the last lines added only: a large tool result holds the event loop as briefly as it can."""
    out: list[str] = []
    have = under = 0  # tokens so far; characters of a prefix known to hold fewer than ``tokens``
    while have < tokens:
        under = sum(map(len, out)) + len(out) - 1 if out else 0
        added = 0
        while added < tokens - have:
            line = next(lines)
            out.append(line)
            added += counter.count(line) + 1
        have = counter.count("\n".join(out))
    text = "\n".join(out)
    lo, hi = under, len(text)
    while lo < hi:  # the longest prefix within ``tokens``
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def result_lines(kind: str, rng: random.Random) -> Iterator[str]:
    """An endless supply of lines of one result kind."""
    sources = _code_sources()
    if kind == "code":  # a file's lines, numbered as an agent's read tool shows them
        while True:
            _name, lines = rng.choice(sources)
            start = rng.randrange(len(lines))
            for n in range(start, len(lines)):
                yield f"{n + 1:>6}\t{lines[n]}"
    elif kind in ("matches", "listing"):
        while True:
            name, lines = rng.choice(sources)
            n = rng.randrange(len(lines))
            folder = rng.choice(("src/app", "src/app/core", "lib", "tests", "tools"))
            yield f"{folder}/{name}:{n + 1}:{lines[n].strip()}" if kind == "matches" else f"{folder}/{name}"
    elif kind == "log":  # a test run
        while True:
            name, lines = rng.choice(sources)
            verdict = rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            yield f"tests/test_{name.removesuffix('.py')}.py::test_line_{rng.randrange(len(lines))} {verdict}"
            if verdict == "FAILED":  # the traceback's source lines
                n = rng.randrange(len(lines))
                yield from (f"    {line}" for line in lines[n : n + 4])
    elif kind == "ack":
        while True:
            yield rng.choice(("Done.", "OK: the change was applied.", "Saved.", "1 occurrence replaced."))
    elif kind == "document":  # a contract's articles, from a random one on
        clauses = _clauses("en")
        a, b = rng.sample(_PARTIES["en"], 2)
        fill = {
            "party_a": a,
            "party_b": b,
            "amount": f"{rng.randrange(1, 50) * 100_000:,}",
            "days": str(rng.choice((15, 30, 45, 60))),
            "city": rng.choice(_CITIES["en"]),
        }
        n = rng.randrange(len(clauses))
        while True:
            yield f"Article {n + 1}. {clauses[n % len(clauses)].format(**fill)}\n"
            n += 1
    else:  # cases
        clauses = _clauses("en")
        while True:
            a, b = rng.sample(_PARTIES["en"], 2)
            year = rng.randrange(1995, 2026)
            summary = (
                rng.choice(clauses)
                .split(".")[0]
                .format(party_a=a, party_b=b, amount="1,000,000", days="30", city="London")
            )
            yield f"[{year}] {rng.choice(_COURTS)} {rng.randrange(1, 3000)}: {a} v {b}, held that {summary}."
