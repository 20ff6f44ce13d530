"""tokenstorm as a user installs it: the built wheel, in a fresh venv, run from a folder outside the checkout.

The wheel must hold every file the code reads (templates, scripts, corpora), the locustfiles and the
example SLO files and trace sample; its ``tokenstorm`` command copies the examples out (``tokenstorm
examples ex``), runs a bundled locustfile with the example SLO file against the built-in emulator (no GPU:
its GPU SLO not judged, and said so), writes the run directory where it was started, and rebuilds the
newest run's report (``tokenstorm report``, no argument).

The fresh venv gets the wheel's dependencies from the package index (``pip install WHEEL``, about a minute
here), which also checks that the wheel declares every one it needs. Offline,
``TOKENSTORM_WHEEL_DEPS=borrow`` lends it this interpreter's installed packages instead (a ``.pth`` file:
none of this checkout's code, whose editable install's finder is never run there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import ROOT, made_once

#: the wheel's one import package, held whole (the load generator, reports, monitors and emulator inside it)
PACKAGES = ("tokenstorm",)
DEPS = os.environ.get("TOKENSTORM_WHEEL_DEPS", "install")


def _source_files() -> list[Path]:
    """What a commit of this checkout would hold: tracked files and new ones git does not ignore."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True, timeout=60).stdout.decode()  # fmt: skip
        return [ROOT / p for p in out.split("\0") if p and (ROOT / p).is_file()]
    skip = {".git", ".venv", ".venv-vllm", "runs", "build", "__pycache__"}
    return [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]


def _can_build_without_isolation() -> bool:
    """This interpreter's setuptools can build a wheel itself (70.1 has bdist_wheel; before, the wheel package)."""
    try:
        major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    except Exception:
        return False
    if (major, minor) >= (70, 1):
        return True
    try:
        version("wheel")
    except Exception:
        return False
    return major >= 68  # pyproject.toml's build-system requires


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
         timeout_s: float = 300) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> Path:
    """The wheel built from a copy of the checkout's files (the build leaves nothing in the checkout); built once
    per test run, however many workers run this module's tests."""

    def build(out: Path) -> None:
        src = out / "src"
        for path in _source_files():
            target = src / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        # An older setuptools here: pip builds in an isolated env with setuptools from the index.
        isolation = ["--no-build-isolation"] if _can_build_without_isolation() else []
        proc = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, ".", "-w", out / "dist"], cwd=src)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert len(list((out / "dist").glob("tokenstorm-*.whl"))) == 1, proc.stdout[-2000:]

    (built,) = (made_once(tmp_path_factory, testrun_uid, "wheel", build) / "dist").glob("tokenstorm-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory, testrun_uid: str) -> Path:
    """A fresh venv with the wheel installed; its folder (made once per test run, as the wheel)."""

    def install(root: Path) -> None:
        python = root / "bin" / "python"
        if DEPS == "borrow":
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True, timeout=120)
            site = Path(_sysconfig(python, "purelib"))
            lent = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
            (site / "_tokenstorm_test_lent_packages.pth").write_text("".join(f"{p}\n" for p in lent))
            cmd: list[str | Path] = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                                     "--no-index", wheel]  # fmt: skip
        else:
            subprocess.run([sys.executable, "-m", "venv", root], check=True, timeout=120)
            cmd = [python, "-m", "pip", "install", "--disable-pip-version-check", wheel]
        proc = _run(cmd, cwd=root, env=_clean_env(root), timeout_s=600)
        offline = "\n(offline? TOKENSTORM_WHEEL_DEPS=borrow lends this venv's packages)"
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:] + offline

    return made_once(tmp_path_factory, testrun_uid, "venv", install)


def _sysconfig(python: Path, key: str) -> str:
    code = f"import sysconfig; print(sysconfig.get_paths()[{key!r}])"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _clean_env(venv: Path) -> dict[str, str]:
    """This environment without anything that points into the checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *(p for p in env.get("PATH", "").split(os.pathsep)
                                                          if not p.startswith(str(ROOT)))])  # fmt: skip
    return env


def test_the_wheel_holds_every_package_file_and_the_locustfiles(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    files = [p.relative_to(ROOT) for p in _source_files()]
    expected = {p.as_posix() for p in files if p.parts[0] in PACKAGES and p.suffix != ".pyc"}
    locustfiles = sorted(p for p in files if p.parts[0] == "locustfiles" and p.suffix == ".py")
    assert len(locustfiles) >= 8
    expected |= {f"tokenstorm/locustfiles/{p.name}" for p in locustfiles}
    examples = sorted(p for p in files if p.parts[0] in ("slo", "traces"))  # tokenstorm examples DIR copies them
    assert {"slo/slo.yaml", "traces/mooncake_sample.jsonl"} <= {p.as_posix() for p in examples}
    expected |= {f"tokenstorm/{p.as_posix()}" for p in examples}
    assert sorted(expected - names) == []  # templates (*.j2), scripts, corpora... each is read at run time
    # One import name in site-packages: nothing beside tokenstorm for a user's own `reports` to collide with.
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"tokenstorm"}
    with zipfile.ZipFile(wheel) as zf:
        for p in [*locustfiles, *examples]:  # one copy: the wheel's is the checkout's file
            bundled = f"tokenstorm/locustfiles/{p.name}" if p in locustfiles else f"tokenstorm/{p.as_posix()}"
            assert zf.read(bundled) == (ROOT / p).read_bytes()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "tokenstorm = tokenstorm.cli:main" in zf.read(entry_points).decode()


def test_installed_tokenstorm_runs_a_bundled_locustfile_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = _clean_env(venv)
    site = Path(_sysconfig(venv / "bin" / "python", "purelib")).resolve()
    code = (
        "import json, tokenstorm, tokenstorm.workloads as w, tokenstorm.reports as r, tokenstorm.emulator as e;"
        " print(json.dumps([m.__file__ for m in (w, tokenstorm, r, e)]))"
    )
    where = _run([venv / "bin" / "python", "-c", code], work, env)
    assert where.returncode == 0, where.stderr[-2000:]
    for module_file in json.loads(where.stdout):
        assert Path(module_file).resolve().is_relative_to(site), module_file  # the wheel's, not /work/main's

    examples = _run([venv / "bin" / "tokenstorm", "examples", "ex"], work, env, timeout_s=120)
    assert examples.returncode == 0, examples.stderr[-2000:]
    assert "--slo ex/slo.yaml" in examples.stdout and "--trace ex/mooncake_sample.jsonl" in examples.stdout
    assert (work / "ex" / "slo.yaml").read_bytes() == (ROOT / "slo" / "slo.yaml").read_bytes()

    runs_in_checkout = set((ROOT / "runs").iterdir()) if (ROOT / "runs").is_dir() else set()
    cmd = [venv / "bin" / "tokenstorm", "run", "mixed", "--slo", "ex/slo.yaml", "--headless", "-u", "2", "-r", "2",
           "-t", "5s", "--timing-verdict", "warn"]  # fmt: skip
    proc = _run(cmd, work, env, timeout_s=240)
    output = proc.stdout + proc.stderr
    # The example SLO file's verdict on the emulator (0 held, 1 an SLO failed, 6 too few requests in 5 s to tell):
    # never 3, the run itself failing (its GPU SLO with no GPU sampled, its warm-up against a short run).
    assert proc.returncode in (0, 1, 6), output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    closing = " ".join(output.split())  # the verdict's line, wrapped to fit the terminal
    assert "not judged: no GPU sampled (run gpu_memory_gb max <= 58" in closing, output[-4000:]
    run_dirs = list((work / "runs").iterdir())
    assert len(run_dirs) == 1 and run_dirs[0].name.endswith("_mixed_SIMULATED"), run_dirs
    run_dir = run_dirs[0]
    assert (run_dir / "report.html").is_file() and (run_dir / "summary.json").is_file()
    assert (set((ROOT / "runs").iterdir()) if (ROOT / "runs").is_dir() else set()) == runs_in_checkout
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["simulated"] is True and meta["status"] == "finished" and meta["records"] > 0
    assert Path(meta["options"]["locustfile"]).resolve() == site / "tokenstorm" / "locustfiles" / "mixed.py"

    summary = json.loads((run_dir / "summary.json").read_text())
    verdict = summary["verdict"]
    assert verdict in ("passed", "failed", "inconclusive"), summary
    (gpu,) = [r for r in summary["slos"] if r["metric"] == "gpu_memory_gb"]
    assert gpu["judged"] is False and gpu["note"].startswith("not judged: no GPU sampled")
    (run_dir / "report.html").unlink()
    rebuilt = _run([venv / "bin" / "tokenstorm", "report"], work, env, timeout_s=180)  # no argument: the newest
    assert rebuilt.returncode == proc.returncode, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]
    assert f"rebuilding the newest run, {Path('runs') / run_dir.name}" in rebuilt.stderr
    assert f"tokenstorm report: {verdict}: " in rebuilt.stdout
    assert (run_dir / "report.html").is_file() and "SIMULATED" in (run_dir / "report.html").read_text()


def test_installed_help_lists_the_bundled_locustfiles_and_tokenstorms_options(venv: Path, tmp_path: Path) -> None:
    env = {**_clean_env(venv), "COLUMNS": "200"}
    proc = _run([venv / "bin" / "tokenstorm", "run", "--help"], tmp_path, env, timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for p in (ROOT / "locustfiles").glob("*.py"):
        assert f"  {p.stem} " in proc.stdout
    for flag in ("--slo", "--targets", "--steps", "--gpu-monitor", "--run-dir", "--web-host", "--headless"):
        assert f"  {flag} " in proc.stdout
    unknown = _run([venv / "bin" / "tokenstorm", "run", "mixd"], tmp_path, env, timeout_s=120)
    assert unknown.returncode == 2 and "did you mean mixed?" in unknown.stderr
    for command in ("emulator", "report", "compare"):  # each tool's help names the command typed
        helped = _run([venv / "bin" / "tokenstorm", command, "--help"], tmp_path, env, timeout_s=120)
        assert helped.returncode == 0 and helped.stdout.startswith(f"usage: tokenstorm {command} "), helped.stdout[:500]
