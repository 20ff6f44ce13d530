"""Writes that fail — a full disk, a quota, a file system gone read-only — as one typed error.

A run stops at its first failed write (the plugin's ``write_faults``): :class:`WriteFailed` says
what could not be written and where in one line. The writers here never leave a torn line or
batch behind (:class:`AppendFile` cuts its file back to the last complete write), nor a ``.tmp``
file (:func:`write_bytes_atomic`), so everything written before the failure stays readable.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["AppendFile", "WriteFailed", "write_bytes_atomic"]

#: the errors that mean "no room": said as "disk full"
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class WriteFailed(OSError):
    """``what`` (records, run.json, the report...) could not be written to ``path``: ``cause`` says why."""

    def __init__(self, what: str, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.what = what
        self.path = path
        self.cause = cause

    @property
    def disk_full(self) -> bool:
        """The disk (or a quota) had no room left."""
        return self.cause.errno in _NO_ROOM

    def __str__(self) -> str:
        why = self.cause.strerror or type(self.cause).__name__
        full = "disk full: " if self.disk_full else ""
        return f"{full}could not write {self.what} to {self.path} ({why})"


class AppendFile:
    """A file appended to in whole pieces: :meth:`write` keeps bytes in memory, :meth:`mark` says a
    piece (lines, an Arrow batch) ends there, :meth:`push` hands them to the OS. A push that fails
    cuts the file back to the end of the last whole piece that fitted (no torn line, no torn Arrow
    batch), closes it and raises :class:`WriteFailed` (``kept_records``: the records of the pieces
    kept); the file takes nothing after. Also a sink for ``pyarrow.ipc.new_stream`` (``write``,
    ``flush``, ``close``, ``closed``)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size_bytes = os.fstat(self._fd).st_size  # what is on disk and complete
        self._pending = bytearray()
        self._marks: list[tuple[int, int]] = []  # (end of a whole piece in _pending, records up to it)
        self._marked_records = 0
        self.failure: WriteFailed | None = None
        #: after a failure: the records of the last push that are on disk all the same (their pieces fitted)
        self.kept_records = 0

    @property
    def closed(self) -> bool:
        """The file takes no more bytes (closed, or failed)."""
        return self._fd < 0

    @property
    def pending_bytes(self) -> int:
        """Bytes written but not yet pushed."""
        return len(self._pending)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Keep ``data`` for the next push (dropped once the file failed)."""
        if self._fd >= 0:
            self._pending += data
        return len(data)

    def mark(self, records: int = 0) -> None:
        """A whole piece, holding ``records`` records, ends at what was written so far."""
        if self._fd >= 0:
            self._marked_records += records
            self._marks.append((len(self._pending), self._marked_records))

    def flush(self) -> None:
        """Nothing: pyarrow calls it after each message; :meth:`push` is the caller's to time."""

    def push(self) -> None:
        """Hand what was written to the OS, all or nothing (:class:`WriteFailed` when it fails)."""
        if self._fd < 0 or not self._pending:
            return
        view = memoryview(self._pending)
        done = 0
        try:
            while done < len(view):
                done += os.write(self._fd, view[done:])
        except OSError as exc:
            view.release()
            whole, self.kept_records = max(((end, n) for end, n in self._marks if end <= done), default=(0, 0))
            self.size_bytes += whole
            self._fail(exc)
        view.release()
        self.size_bytes += done
        self._pending.clear()
        self._marks.clear()
        self._marked_records = 0

    def _fail(self, exc: OSError) -> None:
        self._pending.clear()
        self._marks.clear()
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self.size_bytes)  # the torn piece out: the file ends on a whole write
        self.close()
        self.failure = WriteFailed(self.what, self.path, exc)
        raise self.failure from exc

    def close(self) -> None:
        """Push what is left (:class:`WriteFailed` when it fails) and close the file."""
        if self._fd < 0:
            return
        try:
            self.push()
        finally:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                with contextlib.suppress(OSError):
                    os.close(fd)


def write_bytes_atomic(path: Path, data: bytes, what: str | None = None) -> None:
    """Write ``path`` via a temporary file renamed over it, so a reader never sees half of it; when
    the write fails the temporary file is removed and :class:`WriteFailed` raised (``what``: how
    its one line names the file; default its name)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise WriteFailed(what or path.name, path, exc) from exc
