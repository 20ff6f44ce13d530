"""One option as data (:class:`Flag`: its flag, default, help, type, web-form presence) and a topic of them
(:class:`Topic`); the options themselves are declared in :mod:`.flags`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Flag", "Topic"]


@dataclass(frozen=True)
class Flag:
    """One option: ``flag`` (``--model``), ``default``, ``help``, and how the parser takes it."""

    flag: str
    help: str
    default: Any = ""
    #: argparse's ``type`` (None: the text as given)
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: a switch (``store_true``): present means True
    switch: bool = False
    #: offered in Locust's web UI start form
    web_ui: bool = True
    #: the default comes from this environment variable when it is set (help shows ``$NAME``, never its value)
    env: str | None = None
    #: how help states the default, where the value itself would mislead (None: the value)
    shown_default: str | None = None
    #: Locust's own option, which tokenstorm only gives another default (``set_defaults``)
    locust: bool = False
    #: a duration, taken as Locust's ``-t`` takes one (``30``, ``30s``, ``5m``, ``1h30m``): argparse passes the
    #: text, :mod:`.options` parses it (one line naming the option when it is none), the web UI form alike
    duration: bool = False

    @property
    def dest(self) -> str:
        """The attribute name argparse gives the option (``--run-dir`` -> ``run_dir``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    def default_value(self) -> Any:
        """The default now: ``$env`` when set, else ``default``."""
        return os.environ.get(self.env, self.default) if self.env else self.default

    def default_text(self) -> str | None:
        """The default as help states it (None: nothing worth saying: off, empty)."""
        if self.shown_default is not None:
            return self.shown_default
        if self.env:
            return f"${self.env}" + (f", else {self.default}" if self.default not in ("", None) else "")
        if self.default in ("", None, False):
            return None
        if self.default is True:
            return "on"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)

    def argparse_kwargs(self) -> dict[str, Any]:
        """``add_argument`` keywords for a plain argparse parser (no Locust extras)."""
        if self.switch:
            return {"action": "store_true", "default": self.default_value(), "help": self.help}
        kw: dict[str, Any] = {"default": self.default_value(), "help": self.help}
        if self.type is not None and not self.duration:
            kw["type"] = self.type
        if self.choices is not None:
            kw["choices"] = self.choices
        return kw


@dataclass(frozen=True)
class Topic:
    """Options that belong together in ``--help`` and the web UI's form."""

    title: str
    flags: tuple[Flag, ...]
