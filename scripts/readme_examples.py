"""README's worked examples as code: the fenced ``bash`` block after each ``<!-- example: NAME -->``
marker, and a way to run one exactly as written.

``scripts/docs_examples.py`` runs them to make the pictures README shows, and
``tests/integration/test_readme_examples.py`` runs them to check the verdicts README states, so the
commands a user copies are the ones that were run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: what a block may use relative to the checkout's root (linked into the folder it runs in)
SHARED = ("locustfiles", "slo", "traces")

_BLOCK = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\s*\n```bash\n(?P<code>.*?)\n```", re.S)


def examples(text: str | None = None) -> dict[str, str]:
    """Example name -> its bash block, in README order."""
    found: dict[str, str] = {}
    for m in _BLOCK.finditer(README.read_text(encoding="utf-8") if text is None else text):
        if m["name"] in found:
            raise ValueError(f"README.md: example {m['name']!r} appears twice")
        found[m["name"]] = m["code"]
    return found


def run(
    name: str, work: Path, env: dict[str, str] | None = None, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run example ``name`` with bash in ``work`` (a fresh folder: its ``runs/`` is the run's), with the
    checkout's ``locustfiles/`` and ``slo/`` linked in and this Python's ``bin`` first on ``PATH``
    (``locust`` and ``python`` are the ones tokenstorm is installed in). Returns bash's result: the
    exit code of the block's last command."""
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
    return subprocess.run([bash, "-c", code], cwd=work, env=full_env, text=True, capture_output=True,
                          timeout=timeout_s, check=False)  # fmt: skip


def latest_run(work: Path) -> Path:
    """The newest run directory a block left under ``work/runs``."""
    runs = sorted(p for p in (work / "runs").glob("*") if p.is_dir())
    if not runs:
        raise FileNotFoundError(f"no run directory under {work / 'runs'}")
    return runs[-1]
