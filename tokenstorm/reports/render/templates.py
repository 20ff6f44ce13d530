"""The jinja2 environment of every page tokenstorm writes (the report, ``reports compare --html``): autoescaped
(model output, prompts, server messages and run names are untrusted text), strict about undefined names, and with
its compiled templates kept on disk between runs.

Compiling the report's templates costs about 0.2 s of CPU; a run's master pays it at every run's end. jinja2's
:class:`~jinja2.FileSystemBytecodeCache` keeps the compiled code in a folder of the temporary directory that only
this user can write (jinja2 refuses one that another user owns or can write), keyed by each template's source and
jinja2's version: a changed template is compiled again. Where no such folder can be made, read or written (a full
disk), templates are compiled each time."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import jinja2
import jinja2.bccache

__all__ = ["page_environment"]


class _KeptTemplates(jinja2.FileSystemBytecodeCache):
    """jinja2's cache of compiled templates, named by jinja2's version (code compiled by another is never loaded),
    that compiles as before when its folder cannot be read or written (a full or read-only disk)."""

    def __init__(self) -> None:
        super().__init__(pattern=f"__tokenstorm_jinja2_{jinja2.__version__}_%s.cache")

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _KeptTemplates()
    except (OSError, RuntimeError):  # no temporary directory, or an unsafe one: compile each time
        return None


def page_environment(folders: Sequence[Path]) -> jinja2.Environment:
    """The environment of a page whose templates live in ``folders``."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(f) for f in folders]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=_bytecode_cache(),
    )
