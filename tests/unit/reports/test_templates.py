"""Pages' templates are compiled once per machine and kept (jinja2's bytecode cache): the same page as a fresh
compile, still escaped, a changed template compiled again, and a machine with no safe cache folder still works."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import jinja2
import jinja2.bccache
import pytest

from tokenstorm.reports.render import templates
from tokenstorm.reports.render.templates import page_environment


def _page(folder: Path, text: str) -> str:
    (folder / "page.html.j2").write_text(text)
    return page_environment([folder]).get_template("page.html.j2").render(name="<b>model</b>")


def test_a_kept_template_renders_as_a_fresh_one_and_a_changed_one_is_compiled_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / f"_jinja2-cache-{os.getuid()}"
    monkeypatch.setattr(jinja2.bccache.tempfile, "gettempdir", lambda: str(tmp_path))  # jinja2's folder for the cache
    pages = tmp_path / "pages"
    pages.mkdir()
    first = _page(pages, "<p>{{ name }}</p>")
    assert first == "<p>&lt;b&gt;model&lt;/b&gt;</p>"  # autoescaped
    [bucket] = cache.iterdir()  # compiled code kept, named by jinja2's version
    assert jinja2.__version__ in bucket.name
    code = bucket.read_bytes()
    assert _page(pages, "<p>{{ name }}</p>") == first  # read back from the cache
    assert _page(pages, "<i>{{ name }}</i>") == "<i>&lt;b&gt;model&lt;/b&gt;</i>"  # the new source, not the kept code
    assert bucket.read_bytes() != code  # kept again, compiled from the new source


def test_no_safe_cache_folder_compiles_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unsafe(self: jinja2.FileSystemBytecodeCache, *args: object, **kw: object) -> None:
        raise RuntimeError("Cache directory is not owned by the user")  # jinja2's own refusal

    monkeypatch.setattr(jinja2.FileSystemBytecodeCache, "__init__", unsafe)
    assert templates.page_environment([tmp_path]).bytecode_cache is None
    assert _page(tmp_path, "{{ name }}") == "&lt;b&gt;model&lt;/b&gt;"


def test_a_cache_folder_that_cannot_be_written_or_read_compiles_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jinja2.bccache.tempfile, "gettempdir", lambda: str(tmp_path))

    def disk_full(*args: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jinja2.bccache.tempfile, "NamedTemporaryFile", disk_full)  # jinja2 writes through it
    assert _page(tmp_path, "<p>{{ name }}</p>") == "<p>&lt;b&gt;model&lt;/b&gt;</p>"
    monkeypatch.setattr(jinja2.bccache, "open", disk_full, raising=False)  # and reads with open()
    assert _page(tmp_path, "<i>{{ name }}</i>") == "<i>&lt;b&gt;model&lt;/b&gt;</i>"
