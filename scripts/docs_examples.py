"""Run README's worked examples against the built-in emulator and screenshot the report section
each produces into docs/ (run on demand: ``.venv/bin/python scripts/docs_examples.py``).

    ab     two endpoints in one run (--targets), one decoding slower  -> docs/ab-targets.png
    sweep  a sweep over an emulator that saturates at 8 sequences     -> docs/sweep.png
    cost   --gpu-cost-per-hour                                         -> docs/cost.png

Every figure in the pictures is SIMULATED (the emulator), as the reports say.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def locust(work: Path, locustfile: str, *args: str) -> Path:
    """Run ``locust -f locustfiles/LOCUSTFILE --headless ARGS`` in ``work``; the run directory it made."""
    files = ",".join(str(ROOT / "locustfiles" / f) for f in locustfile.split(","))
    cmd = [sys.executable, "-m", "locust", "-f", files, "--headless",
           "--only-summary", "--run-dir", str(work / "runs"), *args]  # fmt: skip
    print("$ locust -f locustfiles/" + locustfile, " ".join(args), flush=True)
    subprocess.run(cmd, cwd=work, check=False, stdout=subprocess.DEVNULL)
    return sorted((work / "runs").glob("*"))[-1]


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


def example_ab(work: Path) -> None:
    from emulator import EmulatorProcess

    slo = work / "slo-ab.yaml"
    slo.write_text("slos:\n  '*':\n    ttft_ms: {p95: 1500}\n    itl_ms: {p50: 20}\n    error_rate: {max: 1%}\n")
    with (
        EmulatorProcess("--ttft-ms", "40", "--itl-ms", "10", "--max-num-seqs", "16") as fp8,
        EmulatorProcess("--ttft-ms", "90", "--itl-ms", "28", "--max-num-seqs", "16") as awq,
    ):
        run = locust(work, "mixed.py", "-u", "8", "-r", "8", "-t", "30s", "--max-tokens", "64", "--slo", str(slo),
                     "--gpu-cost-per-hour", "3.50", "--targets", f"fp8={fp8.url},awq={awq.url}")  # fmt: skip
    shoot(run / "report.html", "#targets", DOCS / "ab-targets.png")


def example_cost(work: Path) -> None:
    run = locust(work, "mixed.py", "-u", "8", "-r", "8", "-t", "20s", "--max-tokens", "64",
                 "--gpu-cost-per-hour", "3.50", "--gpus", "2")  # fmt: skip
    shoot(run / "report.html", "#throughput", DOCS / "cost.png")


def example_sweep(work: Path) -> None:
    slo = work / "slo-sweep.yaml"
    slo.write_text("slos:\n  '*':\n    ttft_ms: {p95: 250}\n    error_rate: {max: 1%}\n")
    run = locust(work, "code_completion.py,shape_sweep.py", "--sweep-levels", "1,2,4,6,8,12,16",
                 "--sweep-level-time", "8", "--max-tokens", "24", "--wait-time", "0", "--slo", str(slo),
                 "--emulator-args", "--max-num-seqs 8 --ttft-ms 60 --itl-ms 8")  # fmt: skip
    shoot(run / "report.html", "#sweep", DOCS / "sweep.png")


EXAMPLES = {"ab": example_ab, "sweep": example_sweep, "cost": example_cost}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("examples", nargs="*", help=f"some of {', '.join(EXAMPLES)} (default: all)")
    args = p.parse_args()
    unknown = [e for e in args.examples if e not in EXAMPLES]
    if unknown:
        p.error(f"unknown example(s) {', '.join(unknown)}: choose from {', '.join(EXAMPLES)}")
    DOCS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples or EXAMPLES:
            EXAMPLES[name](Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
