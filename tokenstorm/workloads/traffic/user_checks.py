"""Users' own checks: a workload file names Python callables (``module:function``) run on each answer.

::

    workloads:
      chat: {weight: 2, checks: ["mychecks:no_apology", "team.quality:cites_a_clause"]}

Each is called ``function(request, reply)`` (the :class:`~tokenstorm.workloads.client.CompletionRequest` sent and the
:class:`~tokenstorm.workloads.traffic.checks.Reply` that came back) and answers as the built-in checks do: ``True``
(pass), ``False`` or a reason string (fail), ``None`` (does not apply); one that raises is that check's
failure. Its results are recorded under the function's ``__name__``.

The module is imported as a user would expect: from the installed packages, the current directory, the
locustfile's directory and the workload file's own directory (a
``mychecks.py`` beside ``mix.yaml`` works). Every process loads them itself — a worker is sent the
workload file's path, never a function.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .checks import CHECK_NAMES, Check, CheckCall, Reply

__all__ = ["load_user_check", "user_check_search_path"]

_FORM = "module:function, e.g. mychecks:no_apology"


def user_check_search_path(workload_file: Path, locustfiles: Iterable[Path] = ()) -> None:
    """Make the current directory, the locustfiles' directories (Locust takes its own off ``sys.path`` once
    the locustfile is imported) and ``workload_file``'s directory importable, where they are not already —
    first, as Python puts a script's own directory, the workload file's the very first."""
    folders = [Path(os.getcwd()), *(p if p.is_dir() else p.parent for p in locustfiles), workload_file.parent]
    for folder in (str(f.resolve()) for f in folders):
        if folder in sys.path:
            continue
        sys.path.insert(0, folder)


def load_user_check(entry: Any, taken: Iterable[str] = ()) -> Check:
    """The check ``entry`` (``"package.module:function"``) names, loaded; :class:`ValueError` with the reason
    (the caller adds the file and line). ``taken``: names of this workload's checks loaded before it."""
    if not isinstance(entry, str) or entry.count(":") != 1:
        raise ValueError(f"{entry!r} is not {_FORM}")
    module_name, _, attr = (part.strip() for part in entry.partition(":"))
    if not module_name or not attr or not all(p.isidentifier() for p in (*module_name.split("."), *attr.split("."))):
        raise ValueError(f"{entry!r} is not {_FORM}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any error in it is theirs to see, in one line
        raise ValueError(f"cannot import {module_name} ({type(exc).__name__}: {_first_line(exc)})") from None
    fn: Any = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise ValueError(f"module {module_name} ({_origin(module)}) has no {attr!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ValueError(f"{entry} is not a function of (request, reply) but of type {type(fn).__name__}")
    name = getattr(fn, "__name__", "")
    name = name if isinstance(name, str) and name.isidentifier() else attr.rsplit(".", 1)[-1]
    if name in CHECK_NAMES:
        raise ValueError(f"{entry}: {name!r} is a built-in check's name; give the function another name")
    if name in taken:
        raise ValueError(f"{entry}: another check of this workload is already called {name!r}")

    return CheckCall(name, run_user_check, (f"{module_name}:{attr}",))


def run_user_check(reply: Reply, entry: str) -> bool | str | None:
    """The user's check ``entry`` (``module:function``, loaded once per process) on ``reply``: what it returned,
    a truthy or falsy other value taken as a pass or a failure."""
    fn = _loaded(entry)
    verdict: Any = fn(reply.request, reply)
    return verdict if verdict is None or isinstance(verdict, (bool, str)) else bool(verdict)


@functools.cache
def _loaded(entry: str) -> Any:
    module_name, _, attr = entry.partition(":")
    fn: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        fn = getattr(fn, part)
    return fn


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no detail"


def _origin(module: Any) -> str:
    return str(getattr(module, "__file__", None) or "built in")
