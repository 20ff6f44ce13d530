"""The web UI start form's tokenstorm values, checked as the command line checks them before a run starts
from the form: a bad value is answered in the form with the command line's one line, and no run starts.

Every option the form shows takes effect at the run's start (:func:`..core.lifecycle._on_test_start` reads
them all again, the SLO file included). What the form does not show (``--api-key``, ``--metrics-port``, an
option of a load shape this locustfile lacks...) is set when tokenstorm starts: a form that changes it is
refused. The form has no login by default, so a file or folder it names must lie under the folder
tokenstorm was started in (a value the command line gave is kept as given); no answer quotes a file's text.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ...traffic import settings_from_options
from ...traffic.models import MODELS
from ...traffic.tokens import TokenCounter
from ...traffic.trace import read_trace
from ..core import locust_compat
from ..core.checks import check_run_root, slo_spec_for
from ..core.flags import TOPICS
from ..core.options import OPTION_DESTS, OptionError, RunOptions, warmup_problem
from .form import shown_options, user_classes

if TYPE_CHECKING:
    from locust.env import Environment

__all__ = ["PATH_OPTIONS", "FormCheck"]

#: the options that name a file or folder this process reads (or, ``run_dir``, writes under)
PATH_OPTIONS = frozenset({"slo", "workload_file", "dataset", "tokenizer", "trace", "run_dir"})
_CHOICES = {f.dest: f.choices for topic in TOPICS for f in topic.flags if f.choices}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _typed(current: Any, raw: str, dest: str) -> Any:
    """The form's text as the option's value, typed as Locust's /swarm types it (by the current value)."""
    if isinstance(current, bool):
        return raw == "true"
    if isinstance(current, (int, float)):
        try:
            return type(current)(raw)
        except ValueError:
            raise OptionError(f"{_flag(dest)} {raw!r}: not a number") from None
    return raw


@dataclass(frozen=True)
class FormCheck:
    """What the start form is checked against: the options as tokenstorm started, and its folder."""

    #: tokenstorm's options as the command line gave them
    startup: dict[str, Any]
    #: the folder tokenstorm was started in: the form's files and folders lie under it
    root: Path

    @classmethod
    def at_start_up(cls, environment: Environment) -> FormCheck:
        """Take the options now (at ``init``, before any form) and the working folder."""
        opts = vars(environment.parsed_options) if environment.parsed_options is not None else {}
        return cls({k: v for k, v in opts.items() if k in OPTION_DESTS}, Path.cwd().resolve())

    def problem(self, environment: Environment, form: dict[str, str]) -> str | None:
        """What is wrong with the form's tokenstorm values, as the command line says it (``None``: nothing)."""
        try:
            self._check(environment, form)
        except ValueError as exc:  # OptionError, WorkloadFileError, DatasetError, TraceError...
            return str(exc)
        return None

    def _check(self, environment: Environment, form: dict[str, str]) -> None:
        values = dict(vars(environment.parsed_options)) if environment.parsed_options is not None else {}
        shown = shown_options(environment)
        running = locust_compat.is_running(environment.runner)
        changed: set[str] = set()
        for key, raw in form.items():
            if key not in values or key not in OPTION_DESTS:
                continue  # Locust's own fields (run time, users, host...) are Locust's to check
            value = _typed(values[key], raw, key)
            if key not in shown and value != self.startup.get(key):
                raise OptionError(
                    f"{_flag(key)}: not taken from the web form (it is set when tokenstorm starts); "
                    f"give {_flag(key)} on the command line"
                )
            if running and value != values[key]:
                raise OptionError(
                    f"{_flag(key)}: a run is under way, and tokenstorm's options take effect when a "
                    "run starts: stop it, then start one with the new values"
                )
            if key in _CHOICES and raw not in (_CHOICES[key] or ()):
                raise OptionError(f"{_flag(key)} {raw}: expected one of {', '.join(_CHOICES[key] or ())}")
            if key in PATH_OPTIONS and raw and value != self.startup.get(key):
                self._under_root(key, raw)
                changed.add(key)
            values[key] = value
        namespace = SimpleNamespace(**values)
        options = RunOptions.parse(namespace)
        settings = settings_from_options(namespace)  # the workload file, --weights and each workload's options
        if "workload_file" in changed:  # the datasets it names: under the folder too
            for name, one in sorted(settings.items()):
                if one.dataset and not self._inside(one.dataset):
                    raise OptionError(
                        f"--workload-file {_text(namespace, 'workload_file')}: {name}.dataset names a file "
                        f"outside the folder tokenstorm was started in ({self.root}); give --workload-file on the "
                        "command line for it"
                    )
        if "run_dir" in changed:
            check_run_root(options.run_dir)
        if changed & {"tokenizer", "dataset", "workload_file"}:  # read now, as the command line does at start-up
            _build_workloads(environment, namespace, options.seed)
        if "trace" in changed:
            read_trace(options.trace)
        spec, _ = slo_spec_for(environment, options.slo)
        run_time_s = None
        with contextlib.suppress(ValueError):  # a bad -t is Locust's to say
            from locust.util.timespan import parse_timespan

            run_time_s = parse_timespan(form["run_time"]) if form.get("run_time") else None
        if why := warmup_problem(options.warmup_s, spec.warmup_s, str(spec.source), run_time_s):
            raise OptionError(why)

    def _inside(self, raw: str) -> bool:
        """Whether path ``raw`` (relative: to the folder) lies under the folder, links followed."""
        path = Path(raw).expanduser()
        try:
            (path if path.is_absolute() else self.root / path).resolve().relative_to(self.root)
        except (ValueError, OSError, RuntimeError):
            return False
        return True

    def _under_root(self, key: str, raw: str) -> None:
        """Refuse a form's path outside the folder tokenstorm was started in (links followed)."""
        if not self._inside(raw):
            raise OptionError(
                f"{_flag(key)} {raw}: the web form takes only paths under the folder tokenstorm was started in "
                f"({self.root}); for another, give {_flag(key)} on the command line"
            )


def _text(namespace: Any, dest: str) -> str:
    """Option ``dest`` of ``namespace`` as text."""
    return str(getattr(namespace, dest, "") or "")


def _build_workloads(environment: Environment, namespace: Any, seed: int) -> None:
    """Build the run's workloads as a run's start does (datasets, corpora, the tokenizer): their errors now."""
    settings = settings_from_options(namespace)
    tokens = TokenCounter(str(getattr(namespace, "tokenizer", "") or "") or None)
    users = user_classes(environment)
    used = {str(getattr(u, "workload", "")) for u in users} & set(settings)
    if any(getattr(u, "open_loop", False) for u in users):
        used = set(settings)
    for name in sorted(used):
        if settings[name].weight > 0:
            MODELS[name](settings[name], tokens, seed)
