"""The documentation's worked examples as code: the fenced ``bash`` block after each
``<!-- example: NAME -->`` marker in README.md and in every page under docs/, and a way to run one
exactly as written.

A marker may name the exit code the block's last command gives (``<!-- example: ab exit=1 -->``; 0 when
it does not say). ``scripts/docs_examples.py`` runs some of them to make the pictures the docs show, and
``tests/integration/test_readme_examples.py`` runs every one of them, so the commands a user copies are
the ones that were run. A command block without a marker is not run: it needs a GPU server, a browser,
or runs for minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: what a block may use relative to the checkout's root (linked into the folder it runs in)
SHARED = ("locustfiles", "slo", "traces")

_BLOCK = re.compile(r"<!-- example: (?P<name>[\w-]+)(?: exit=(?P<exit>\d+))? -->\s*\n```bash\n(?P<code>.*?)\n```", re.S)


@dataclass(frozen=True)
class Example:
    """One worked example: its bash block, the page it is on, and the exit code its text promises."""

    name: str
    code: str
    page: str
    exit_code: int


def pages() -> list[Path]:
    """README.md, then every Markdown page of the docs site, in name order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def parse(text: str, page: str = "README.md") -> list[Example]:
    """The examples marked in ``text`` (the Markdown of ``page``), in order."""
    return [
        Example(m["name"], m["code"], page, int(m["exit"] or 0))
        for m in _BLOCK.finditer(text)  # one per marker
    ]


def all_examples() -> dict[str, Example]:
    """Example name -> example, over README and the docs pages; a name used twice is an error."""
    found: dict[str, Example] = {}
    for path in pages():
        for ex in parse(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))):
            if ex.name in found:
                raise ValueError(f"{ex.page}: example {ex.name!r} appears twice (also in {found[ex.name].page})")
            found[ex.name] = ex
    return found


def examples(text: str | None = None) -> dict[str, str]:
    """Example name -> its bash block: of ``text`` when given, else of README and every docs page."""
    if text is not None:
        return {ex.name: ex.code for ex in parse(text)}
    return {name: ex.code for name, ex in all_examples().items()}


def run(
    name: str, work: Path, env: dict[str, str] | None = None, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run example ``name`` with bash in ``work`` (a fresh folder: its ``runs/`` is the run's), with the
    checkout's ``locustfiles/``, ``slo/`` and ``traces/`` linked in and this Python's ``bin`` first on
    ``PATH`` (``tokenstorm``, ``locust`` and ``python`` are the ones tokenstorm is installed in, as after
    ``. .venv/bin/activate``). Returns bash's result: the exit code of the block's last command."""
    code = examples()[name]
    work.mkdir(parents=True, exist_ok=True)
    for entry in SHARED:
        link = work / entry
        if not link.exists():
            link.symlink_to(ROOT / entry)
    bin_dir = str(Path(sys.executable).parent)
    full_env = {**os.environ, **(env or {})}
    full_env["PATH"] = bin_dir + os.pathsep + full_env.get("PATH", "")
    bash = shutil.which("bash") or "/bin/bash"
    return subprocess.run(
        [bash, "-c", code], cwd=work, env=full_env, text=True, capture_output=True, timeout=timeout_s, check=False
    )


def latest_run(work: Path) -> Path:
    """The newest run directory a block left under ``work/runs``."""
    runs = sorted(p for p in (work / "runs").glob("*") if p.is_dir())
    if not runs:
        raise FileNotFoundError(f"no run directory under {work / 'runs'}")
    return runs[-1]
