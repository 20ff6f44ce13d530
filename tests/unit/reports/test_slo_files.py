"""SLO files that are not text or cannot be read are refused with one :class:`SloSpecError` line
naming the file — what the plugin prints as ``tokenstorm: invalid SLO file: ...`` with exit 3 —
and one saved with a UTF-8 BOM is read (issue #20, items 5 and 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.files import BOM, PNG, RANDOM, first_bad_byte
from tokenstorm.reports import SloSpecError, load_slo_spec

SLO = b"slos:\n  chat:\n    ttft_ms: {p95: 800}\n"


@pytest.mark.parametrize(
    ("data", "offset"),
    [(PNG, 0), (RANDOM, first_bad_byte(RANDOM)), (BOM + SLO + b"# caf\xe9\n", len(BOM + SLO) + 5)],
    ids=["png", "random", "latin-1-comment"],
)
def test_a_binary_slo_file_names_the_file_and_its_first_bad_byte(tmp_path: Path, data: bytes, offset: int) -> None:
    path = tmp_path / "slo.bin"
    path.write_bytes(data)
    with pytest.raises(SloSpecError) as exc:
        load_slo_spec(path)
    assert (
        str(exc.value) == f"{path}: not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}) — an SLO file is YAML"
    )


@pytest.mark.parametrize(
    ("data", "line", "char"),
    [
        (b"\x00" * 64, 1, 0),
        (SLO + b"  run:\n    error_rate: {max: \x07}\n", 5, 7),
        ("slos: {}\n".encode("utf-16-le"), 1, 0),
    ],
    ids=["zeros", "bell", "utf-16"],
)
def test_valid_utf8_that_is_not_text_gives_the_line(tmp_path: Path, data: bytes, line: int, char: int) -> None:
    path = tmp_path / "slo.yaml"
    path.write_bytes(data)
    with pytest.raises(SloSpecError) as exc:
        load_slo_spec(path)
    assert str(exc.value) == f"{path}:{line}: not text (control character 0x{char:02x}) — an SLO file is YAML"


def test_a_directory_given_as_slo_file(tmp_path: Path) -> None:
    with pytest.raises(SloSpecError) as exc:
        load_slo_spec(tmp_path)
    assert str(exc.value) == f"{tmp_path}: is a directory, not an SLO file"


def test_a_missing_slo_file(tmp_path: Path) -> None:
    with pytest.raises(SloSpecError) as exc:
        load_slo_spec(tmp_path / "slo.yaml")
    assert str(exc.value) == f"{tmp_path / 'slo.yaml'}: no such SLO file"


def test_an_unreadable_slo_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "slo.yaml"
    path.write_bytes(SLO)
    real_open = Path.open

    def open_denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:  # as for another user's file, mode 0600 (the tests may run as root)
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_denied)
    with pytest.raises(SloSpecError) as exc:
        load_slo_spec(path)
    assert str(exc.value) == f"{path}: cannot read (Permission denied)"


def test_an_slo_file_saved_with_a_bom_is_read_and_its_lines_count_as_written(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_bytes(BOM + SLO)
    (target,) = load_slo_spec(path).targets
    assert (target.scope, target.metric, target.stat, target.threshold, target.line) == (
        "chat",
        "ttft_ms",
        "p95",
        800,
        3,
    )
    path.write_bytes(BOM + SLO + b"    tpot_ms: {p95: x}\n")
    with pytest.raises(SloSpecError, match=r"slo\.yaml:4: tpot_ms p95 must be a number"):
        load_slo_spec(path)
