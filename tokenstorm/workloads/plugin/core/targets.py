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

from ...rundir.secrets import redact, split_credentials
from .errors import OptionError

__all__ = [
    "Target",
    "check_url",
    "parse_targets",
    "resolve_targets",
    "scrub_targets",
    "targets_from_workload_file",
    "workload_file_credentials",
]

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


def check_url(url: str, where: str) -> str:
    """``url`` if it is an http(s) URL with a host and a usable port, else :class:`OptionError` naming
    ``where`` (the option or file) and the URL (never its credentials)."""
    shown = redact(url)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(f"{where} {shown}: expected http(s)://HOST:PORT, e.g. http://gpu-host:8000")
    try:
        port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition("@")[2].rpartition(":")[2]
        raise OptionError(f"{where} {shown}: port {port_text!r} is not a number from 1 to 65535") from None
    if port == 0:
        raise OptionError(f"{where} {shown}: port 0 is not a port a server listens on (1 to 65535)")
    return url


def scrub_targets(raw: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """``--targets`` without ``user:password@`` in its URLs, and URL -> those credentials."""
    items, creds = [], {}
    for item in raw.split(","):
        label, sep, url = item.partition("=")
        if not sep or "://" in label:
            label, url = "", item
        clean, pair = split_credentials(url.strip())
        if pair is not None:
            creds[clean.rstrip("/")] = pair
        items.append(f"{label}={clean}" if label else clean)
    return (",".join(items) if raw else raw), creds


def workload_file_credentials(path: str) -> dict[str, tuple[str, str]]:
    """URL -> ``user:password`` of the workload file's ``targets:`` given with them."""
    try:
        return {
            clean.rstrip("/"): pair
            for _, raw in _raw_file_targets(path)
            for clean, pair in [split_credentials(raw)]
            if pair is not None
        }
    except OptionError:
        return {}


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
        url = split_credentials(url.strip())[0].rstrip("/")  # credentials: taken at start-up (RunContext)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OptionError(f"{where} {redact(item)!r}: expected [LABEL=]http(s)://HOST:PORT")
        check_url(url, where)
        label = label.strip() or _default_label(url, labels)
        if not _LABEL.match(label):
            raise OptionError(f"{where} {redact(item)!r}: a label is letters, digits, '_', '.', '-' (at most 40)")
        if label in labels:
            raise OptionError(f"{where}: label {label!r} is given twice")
        if url in urls:
            raise OptionError(f"{where}: {url} is given twice (one twin per endpoint)")
        labels.add(label)
        urls.add(url)
        out.append((label, url))
    return tuple(out)


def _raw_file_targets(path: str) -> list[tuple[str, str]]:
    """``(label, url)`` of a workload file's ``targets:`` as written."""
    if not path:
        return []
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, yaml.YAMLError):  # UnicodeDecodeError is a ValueError; YAMLError is neither
        return []  # the workload file's own check says what is wrong with it, with its line
    raw: Any = doc.get("targets") if isinstance(doc, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise OptionError(f"{path}: targets: expected a list of LABEL=URL or {{label, url}}")
    items = []
    for entry in raw:
        if isinstance(entry, dict) and set(entry) <= {"label", "url"} and entry.get("url"):
            items.append((str(entry.get("label") or ""), str(entry["url"])))
        elif isinstance(entry, str):
            label, sep, url = entry.partition("=")
            items.append((label, url) if sep and "://" not in label else ("", entry))
        else:
            raise OptionError(f"{path}: targets: {redact(str(entry))!r} is not LABEL=URL or {{label: ..., url: ...}}")
    return items


def targets_from_workload_file(path: str) -> tuple[Target, ...]:
    """The ``targets:`` list of a workload file (``- fp8=http://a:8000`` or ``- {label: fp8, url: ...}``)."""
    items = [f"{label}={url}" if label else url for label, url in _raw_file_targets(path)]
    return parse_targets(items, where=f"{path}: targets:") if items else ()


def resolve_targets(raw: str, workload_file: str) -> tuple[Target, ...]:
    """``--targets``, else the workload file's ``targets:`` (``()``: one target, the --host). ``--targets``
    given with no URL in it (``,,,``) is an :class:`OptionError`: the run would go to the one --host (or the
    emulator) instead of the targets meant."""
    if not raw.strip():
        return targets_from_workload_file(workload_file)
    targets = parse_targets(raw.split(","))
    if not targets:
        raise OptionError(
            f"--targets {raw!r}: no URL in it; expected [LABEL=]http(s)://HOST:PORT,... "
            "(leave it out to run against --host)"
        )
    return targets
