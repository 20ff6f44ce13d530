"""Files that are not what a user meant to give: binary bytes, a BOM, and where UTF-8 breaks in them."""

from __future__ import annotations

import random

BOM = b"\xef\xbb\xbf"
#: a PNG's first bytes: not UTF-8 from byte 0 on
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"
RANDOM = random.Random(20).randbytes(200)


def first_bad_byte(data: bytes) -> int:
    """Where ``data`` stops being UTF-8 (found independently of the code under test)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    raise AssertionError("valid UTF-8")
