"""Pages' templates are compiled once per machine and kept (jinja2's bytecode cache): the same page as a fresh
compile, still escaped, a changed template compiled again, and a machine with no safe cache folder still works."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from reports.render import templates
from reports.render.templates import page_environment


def _page(folder: Path, text: str) -> str:
    (folder / "page.html.j2").write_text(text)
    return page_environment([folder]).get_template("page.html.j2").render(name="<b>model</b>")


def test_a_kept_template_renders_as_a_fresh_one_and_a_changed_one_is_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    kept = jinja2.FileSystemBytecodeCache(str(cache))
    monkeypatch.setattr(jinja2, "FileSystemBytecodeCache", lambda: kept)
    pages = tmp_path / "pages"
    pages.mkdir()
    first = _page(pages, "<p>{{ name }}</p>")
    assert first == "<p>&lt;b&gt;model&lt;/b&gt;</p>"  # autoescaped
    [bucket] = cache.iterdir()  # compiled code kept
    code = bucket.read_bytes()
    assert _page(pages, "<p>{{ name }}</p>") == first  # read back from the cache
    assert _page(pages, "<i>{{ name }}</i>") == "<i>&lt;b&gt;model&lt;/b&gt;</i>"  # the new source, not the kept code
    assert bucket.read_bytes() != code  # kept again, compiled from the new source


def test_no_safe_cache_folder_compiles_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unsafe() -> jinja2.BytecodeCache:
        raise RuntimeError("Cache directory is not owned by the user")  # jinja2's own refusal

    monkeypatch.setattr(jinja2, "FileSystemBytecodeCache", unsafe)
    assert templates.page_environment([tmp_path]).bytecode_cache is None
    assert _page(tmp_path, "{{ name }}") == "&lt;b&gt;model&lt;/b&gt;"
