"""README is the front door and docs/ the reference, as issue #27 asks: README fits 250 lines, every link
it gives leads to a page and heading that exist, its table names every bundled locustfile, its commands run
without a venv on PATH only through what its set-up command activates, and neither it, the docs pages nor
the example SLO files point at a file outside the repository. (`mkdocs build --strict` in scripts/test.sh
checks the site's own links; tests/integration/test_readme_examples.py runs the worked examples.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^```[^\n]*\n(?P<code>.*?)^```", re.S | re.M)


def _headings(page: Path) -> set[str]:
    """The anchors mkdocs gives the page's headings (its toc extension's slugify)."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slugify(m[1].strip(), "-") for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_relative_link_in_readme_leads_to_a_file_and_heading_that_exist() -> None:
    links = [m["target"] for m in _LINK.finditer(README.read_text(encoding="utf-8"))]
    relative = [t for t in links if not t.startswith(("http://", "https://"))]
    assert len(relative) >= 16, relative  # the screenshot and a link to every docs page
    for target in relative:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).is_file(), f"README links {target}, which the repository lacks"
        if anchor:
            assert anchor in _headings(ROOT / path), f"README links {target}: no such heading in {path}"
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md")} - {"docs/index.md"}
    assert pages <= {t.partition("#")[0] for t in relative}, "a docs page README does not link"


def test_readme_names_every_bundled_locustfile() -> None:
    names = {p.stem for p in (ROOT / "locustfiles").glob("*.py") if not p.name.startswith("_")}
    assert {"agent", "trace_replay"} <= names
    text = README.read_text(encoding="utf-8")
    assert {n for n in names if f"`{n}`" not in text} == set()


def test_readme_commands_use_what_its_set_up_command_installs() -> None:
    text = README.read_text(encoding="utf-8")
    setup = _FENCE.search(text)
    assert setup is not None and ". .venv/bin/activate" in setup["code"]
    assert "pip install -e ." in setup["code"] and "tokenstorm run mixed" in setup["code"]
    assert "bash scripts/test.sh" in text  # what .ci/run calls
    assert "--enable-auto-tool-choice --tool-call-parser" in text  # the vllm serve line of the full mix
    for block in _FENCE.finditer(text):
        for line in block["code"].splitlines():
            assert not re.match(r"\s*locust\b", line), f"README runs a bare locust: {line}"


#: what users read, and the example files they copy
TEXTS = [README, ROOT / "mkdocs.yml", ROOT / "scripts" / "test.sh", *sorted(DOCS.glob("*.md"))]
TEXTS += sorted((ROOT / "slo").glob("*.yaml"))


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_refers_to_a_file_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "../" not in text and "shared/" not in text, f"{path.name} points outside the repository"
