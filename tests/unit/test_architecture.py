"""The architecture stays as README's layout section describes it: layers, no cycles, small modules,
locustfiles that leave the interpreter as they found it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tokenstorm",)


def test_import_contracts_hold() -> None:
    """import-linter's contracts in pyproject.toml: plugin > traffic > client > rundir, Locust only in the plugin..."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph.modules:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_import_cycles_even_through_imports_inside_functions() -> None:
    graph = grimp.build_graph(*PACKAGES)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyc", cache_dir=None)) == [["cyc.a", "cyc.b"]]


_FMT_OFF = re.compile(r"#\s*fmt:\s*(skip|off)")


def test_the_product_code_is_as_ruff_formats_it_with_no_line_kept_from_it() -> None:
    """The 400-line cap is kept by splitting modules by idea, not by packing lines ``ruff format`` would open."""
    kept = []
    for path in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        kept += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(lines, 1) if _FMT_OFF.search(line)]
    assert kept == [], kept[:10]
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run([str(ruff), "format", "--check", *PACKAGES], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_no_function_is_over_80_lines() -> None:
    """A function a reader cannot hold at once is split where a part wants a name (the cap README's house rules
    set; ``ruff format`` decides how many lines a statement takes)."""
    import ast

    long = {}
    for path in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_no_module_is_over_400_lines() -> None:
    big = {str(p.relative_to(ROOT)): n for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}  # fmt: skip
    assert big == {}


@pytest.mark.parametrize("locustfile", sorted(p.name for p in (ROOT / "locustfiles").glob("*.py")))
def test_loading_a_locustfile_leaves_sys_path_and_the_standard_library_alone(locustfile: str, tmp_path: Path) -> None:
    """Locust imports a locustfile under its file name and then deletes ``sys.path[0]``: a locustfile
    named like a standard-library module replaces it, and one that edits ``sys.path`` loses an entry."""
    probe = (
        "import os, sys, json\n"
        "from locust.util.load_locustfile import load_locustfile\n"
        "before = list(sys.path)\n"
        f"load_locustfile({str(ROOT / 'locustfiles' / locustfile)!r})\n"
        "import code, importlib.util\n"
        "print(json.dumps({'lost': [p for p in before if p not in sys.path],"
        " 'added': [p for p in sys.path if p not in before and p != os.getcwd()],"
        " 'stdlib_code': hasattr(code, 'InteractiveConsole')}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"lost": [], "added": [], "stdlib_code": True}
    assert Path(locustfile).stem not in sys.stdlib_module_names


def test_the_monitor_process_does_not_load_arrow_or_pandas() -> None:
    # The monitor process starts with each run; with pandas and pyarrow it took seconds on a busy
    # 2-core machine and missed the first samples of a short run against real vLLM.
    code = (
        "import sys, tokenstorm.monitors.__main__, tokenstorm.workloads.rundir;"
        " print(sorted({'pandas', 'pyarrow'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


#: what makes a test timing-sensitive beyond doubt: a loopback capture, pinned cores, busy neighbours
_TIMING_SENSITIVE = re.compile(r"captured_run|two_cpus|sched_setaffinity|client_core_of_its_own|BusyNeighbours")
#: a module marked to run alone (a test's own mark would leave the module's others beside -n's workers)
_RUNS_ALONE = re.compile(r"^pytestmark = .*pytest\.mark\.serial", re.M)


def test_every_test_that_pins_cores_or_captures_the_wire_runs_alone() -> None:
    """scripts/test.sh runs unit and integration tests beside each other (pytest -n) but those marked ``serial``
    (and the e2e tier): a test module that captures the wire or pins cores must be marked, or it would judge the
    other workers' load, not tokenstorm."""
    unmarked = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").glob("*/**/test_*.py"))
        if _TIMING_SENSITIVE.search(text := path.read_text())
        and not _RUNS_ALONE.search(text)
        and not path.is_relative_to(ROOT / "tests" / "e2e")  # the e2e tier runs alone, every test of it
        and path != Path(__file__).resolve()  # this check names what it looks for
    ]
    assert not unmarked, f"timing-sensitive tests not marked serial: {unmarked}"
