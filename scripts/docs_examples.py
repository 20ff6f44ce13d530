"""Run the docs' worked examples as written (the ``<!-- example: NAME -->`` bash blocks of README and docs/,
see scripts/readme_examples.py) and screenshot the report section each produces into docs/ (run on
demand: ``.venv/bin/python scripts/docs_examples.py [ab|sweep|cost ...]``).

    ab     two emulated endpoints in one run (--targets), one decoding slower -> docs/ab-targets.png
    sweep  a sweep over an emulator that saturates at 8 sequences            -> docs/sweep.png
    cost   --gpu-cost-per-hour                                                -> docs/cost.png

Every figure in the pictures is SIMULATED (the emulator), as the reports say.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import readme_examples  # noqa: E402  (scripts/: the docs' blocks, run as written)

DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def shoot(report: Path, selector: str, out: Path) -> None:
    """Screenshot the element ``selector`` of ``report`` (a report.html) into ``out``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
        page.goto(report.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        page.locator(selector).first.screenshot(path=str(out))
        browser.close()
    print(f"  -> {out.relative_to(ROOT)}", flush=True)


#: example -> the report section its picture shows, and the picture
PICTURES = {"ab": ("#targets", "ab-targets.png"), "sweep": ("#sweep", "sweep.png"), "cost": ("#throughput", "cost.png")}


def example(name: str, work: Path) -> None:
    """Run the docs' block ``name`` as written (readme_examples.run) and screenshot its section."""
    print(f"$ (example {name})\n{readme_examples.examples()[name]}", flush=True)
    done = readme_examples.run(name, work / name)
    print(f"  exit code {done.returncode}", flush=True)
    selector, picture = PICTURES[name]
    shoot(readme_examples.latest_run(work / name) / "report.html", selector, DOCS / picture)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("examples", nargs="*", help=f"some of {', '.join(PICTURES)} (default: all)")
    args = p.parse_args()
    unknown = [e for e in args.examples if e not in PICTURES]
    if unknown:
        p.error(f"unknown example(s) {', '.join(unknown)}: choose from {', '.join(PICTURES)}")
    DOCS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples or PICTURES:
            example(name, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
