"""The locustfiles tokenstorm ships, found by name: ``tokenstorm run mixed`` runs ``mixed.py``.

A wheel holds them in ``tokenstorm/locustfiles/``; a checkout keeps the same files in ``locustfiles/``
beside this package (README's ``locust -f locustfiles/mixed.py``), which the wheel is built from.
"""

from __future__ import annotations

import ast
import difflib
import os
from pathlib import Path

__all__ = ["ALIASES", "UnknownLocustfile", "bundled", "bundled_dir", "describe", "resolve", "shadowed"]

_HERE = Path(__file__).resolve().parent
#: names that run a bundled locustfile of another name: Locust imports a locustfile as a module named by
#: its file, so ``trace.py`` would replace the standard library's ``trace`` for the whole run
ALIASES = {"trace": "trace_replay"}


class UnknownLocustfile(ValueError):
    """A name that is neither a bundled locustfile nor a file; ``str()`` is the one line to print."""


def bundled_dir() -> Path:
    """The folder of the bundled locustfiles: the installed package's, else the checkout's."""
    for candidate in (_HERE / "locustfiles", _HERE.parent / "locustfiles"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no locustfiles/ folder in {_HERE} or beside it: a broken install")


def bundled() -> dict[str, Path]:
    """Name (the file's stem) -> path of every bundled locustfile, sorted by name."""
    return {p.stem: p for p in sorted(bundled_dir().glob("*.py")) if not p.name.startswith("_")}


def describe(path: Path) -> str:
    """The first line of a locustfile's docstring (read, not imported: importing one starts Locust)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0].rstrip(":") if doc.strip() else ""


def _is_path(name: str) -> bool:
    return os.sep in name or "/" in name or (os.altsep is not None and os.altsep in name)


def _one(name: str, files: dict[str, Path]) -> str:
    if "://" in name:
        return name  # Locust downloads a locustfile given by URL
    stem = name.removesuffix(".py")
    if not _is_path(name) and ALIASES.get(stem) in files and stem not in files:
        stem = ALIASES[stem]
    if not _is_path(name) and stem in files:
        return str(files[stem])
    if Path(name).exists():
        return name  # the user's own locustfile (or a folder of them), as Locust takes it
    names = ", ".join(files)
    if _is_path(name):
        raise UnknownLocustfile(f"no such locustfile: {name} (bundled: {names})")
    close = difflib.get_close_matches(stem, files, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise UnknownLocustfile(f"no locustfile {name!r}: not a file, nor a bundled one ({names}){hint}")


def resolve(name_or_path: str) -> str:
    """What Locust's ``-f`` gets for ``tokenstorm run NAME_OR_PATH``: each comma-separated part a bundled
    name (``mixed``, ``shape_steps.py``) -> its file, or a path or URL as given. A bare bundled name means
    the bundled file even where the current folder has one of that name (``./mixed.py`` for that one).
    Raises :class:`UnknownLocustfile` for a part that is neither."""
    files = bundled()
    return ",".join(_one(part.strip(), files) for part in name_or_path.split(","))


def shadowed(name_or_path: str) -> list[str]:
    """Bare bundled names that are also files in the current folder (run the bundled one; say so)."""
    files = bundled()
    return [
        p
        for p in (s.strip() for s in name_or_path.split(","))
        if not _is_path(p) and p.removesuffix(".py") in files and Path(p).is_file()
    ]
