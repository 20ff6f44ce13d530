"""``tokenstorm examples DIR``: the example SLO files and trace sample the wheel ships, copied where a user
can edit them, each said in one line with a command that uses it.

A wheel holds them in ``tokenstorm/slo/`` and ``tokenstorm/traces/`` (setup.py builds those from the
checkout's ``slo/`` and ``traces/``); a checkout reads the same files there.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Example", "ExistingFiles", "copy_examples", "examples"]

_HERE = Path(__file__).resolve().parent
#: the folders of examples, as a checkout names them (the wheel's are the same names inside this package)
FOLDERS = ("slo", "traces")
#: what each example is, and a command that uses it (``{path}``: where it was copied)
_USES = {
    "slo.yaml": (
        "a deployment's SLOs: latency, errors, throughput per GPU (GPU memory when a GPU is sampled)",
        "tokenstorm run mixed --headless -u 8 -t 1m --slo {path}",
    ),
    "ab.yaml": (
        "A/B: two endpoints judged on identical traffic",
        "tokenstorm run mixed --headless -u 8 -t 30s --slo {path} --targets a=URL_A,b=URL_B",
    ),
    "agent.yaml": (
        "agent sessions: tool-call and session latency",
        "tokenstorm run agent --headless -u 8 -t 30s --slo {path}",
    ),
    "quality.yaml": (
        "answer quality judged like latency (checks, needle recall, consistency under load)",
        "tokenstorm run mixed --headless -u 8 -t 30s --consistency-probes 8 --slo {path}",
    ),
    "sweep.yaml": (
        "a load sweep's SLO (code completion's first token): the knee is where it breaks",
        "tokenstorm run code_completion,shape_sweep --headless --sweep-level-time 10s --slo {path}",
    ),
    "mooncake_sample.jsonl": (
        "a 36-request trace in Mooncake's format (timestamp ms, lengths, prompt blocks)",
        "tokenstorm run trace --headless --trace {path}",
    ),
}
#: what a file of each kind is for, when _USES does not name it
_BY_SUFFIX = {
    ".yaml": ("an SLO file", "tokenstorm run mixed --headless -u 8 -t 1m --slo {path}"),
    ".jsonl": ("a trace", "tokenstorm run trace --headless --trace {path}"),
}


@dataclass(frozen=True)
class Example:
    """One shipped example: its file, what it is, and a command line that uses it."""

    source: Path
    what: str
    use: str

    @property
    def name(self) -> str:
        """The file's name (also its name where it is copied)."""
        return self.source.name


class ExistingFiles(FileExistsError):
    """Files of that name are in the folder already; ``str()`` is the one line to print."""


def _folder(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no {name}/ folder in {_HERE} or beside it: a broken install")


def examples() -> list[Example]:
    """Every shipped example: the SLO files, then the trace samples, each folder's by name."""
    out = []
    for folder in FOLDERS:
        for path in sorted(_folder(folder).iterdir()):
            if path.suffix in _BY_SUFFIX and path.is_file():
                what, use = _USES.get(path.name, _BY_SUFFIX[path.suffix])
                out.append(Example(path, what, use))
    return out


def copy_examples(target: Path, force: bool = False) -> list[tuple[Path, Example]]:
    """Copy every example into ``target`` (made if missing); (where, example) for each one written.
    Raises :class:`ExistingFiles` (nothing written) when one would replace a file and ``force`` is not set."""
    shipped = examples()
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{target} is a file, not a folder")
    clash = [target / e.name for e in shipped if (target / e.name).exists()]
    if clash and not force:
        names = ", ".join(p.name for p in clash)
        raise ExistingFiles(f"{target} already has {names}: nothing written (--force replaces them)")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for e in shipped:
        shutil.copyfile(e.source, target / e.name)
        written.append((target / e.name, e))
    return written
