"""A small, real file system for the disk-full tests: a tmpfs of a given size, mounted for one
test and unmounted after it (mounting needs root: CI runs as root; elsewhere the tests skip)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

__all__ = ["needs_root", "small_disk"]

#: skips a test that mounts a file system when it does not run as root
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a tmpfs")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``mount(size_kib)``: a fresh tmpfs of that size under ``tmp_path``; each is unmounted at the end."""
    mounted: list[Path] = []

    def mount(size_kib: int) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where)], check=True)
        mounted.append(where)
        return where

    try:
        yield mount
    finally:
        for where in mounted:
            subprocess.run(["umount", "-l", str(where)], check=False)
