"""A/B targets: ``--targets [LABEL=]URL,...`` (or a workload file's ``targets:``) — every simulated
user gets a twin per target, seeded alike, so each endpoint receives the same request sequence at
the same offered load in one run (no drift between separate runs).

Records carry the target's label (``target``); ``run.json`` lists the labels and URLs; the report,
summary and JUnit judge each target on its own records, and the run fails if any target breaks an SLO.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from .errors import OptionError

__all__ = ["Target", "parse_targets", "resolve_targets", "targets_from_workload_file"]

#: A target as ``(label, url)``; the label names it in records, reports and the exit verdict.
Target = tuple[str, str]

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def _default_label(url: str, taken: set[str]) -> str:
    parts = urlsplit(url)
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{parts.hostname or 'target'}-{parts.port or ''}").strip("-.")
    base = base if len(base) <= 34 else f"{base[:27].rstrip('-.')}-{parts.port or ''}".rstrip("-")  # room for -N
    label, n = base or "target", 1
    while label in taken:
        n += 1
        label = f"{base}-{n}"
    return label


def parse_targets(items: list[str], where: str = "--targets") -> tuple[Target, ...]:
    """``["fp8=http://a:8000", "http://b:8000"]`` -> ``(("fp8", "http://a:8000"), ("b-8000", "http://b:8000"))``;
    :class:`OptionError` names the bad item (a URL that is not http(s), a repeated label or URL)."""
    out: list[Target] = []
    labels: set[str] = set()
    urls: set[str] = set()
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        label, sep, url = item.partition("=")
        if not sep or "://" in label:  # no label, or the '=' was part of the URL's query
            label, url = "", item
        url = url.strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OptionError(f"{where} {item!r}: expected [LABEL=]http(s)://HOST:PORT")
        label = label.strip() or _default_label(url, labels)
        if not _LABEL.match(label):
            raise OptionError(f"{where} {item!r}: a label is letters, digits, '_', '.', '-' (at most 40)")
        if label in labels:
            raise OptionError(f"{where}: label {label!r} is given twice")
        if url in urls:
            raise OptionError(f"{where}: {url} is given twice (one twin per endpoint)")
        labels.add(label)
        urls.add(url)
        out.append((label, url))
    return tuple(out)


def targets_from_workload_file(path: str) -> tuple[Target, ...]:
    """The ``targets:`` list of a workload file (``- fp8=http://a:8000`` or ``- {label: fp8, url: ...}``)."""
    if not path:
        return ()
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ()  # the workload file's own check says what is wrong with it, with its line
    raw: Any = doc.get("targets") if isinstance(doc, dict) else None
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise OptionError(f"{path}: targets: expected a list of LABEL=URL or {{label, url}}")
    items = []
    for entry in raw:
        if isinstance(entry, dict) and set(entry) <= {"label", "url"} and entry.get("url"):
            items.append(f"{entry.get('label') or ''}={entry['url']}" if entry.get("label") else str(entry["url"]))
        elif isinstance(entry, str):
            items.append(entry)
        else:
            raise OptionError(f"{path}: targets: {entry!r} is not LABEL=URL or {{label: ..., url: ...}}")
    return parse_targets(items, where=f"{path}: targets:")


def resolve_targets(raw: str, workload_file: str) -> tuple[Target, ...]:
    """``--targets``, else the workload file's ``targets:`` (``()``: one target, the --host)."""
    return parse_targets(raw.split(",")) if raw.strip() else targets_from_workload_file(workload_file)
