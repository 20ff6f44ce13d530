"""The answer checks' own process: the load generator hands each answer over and waits (cooperatively, on a
pipe), while its event loop goes on reading every other stream — a check's CPU time (milliseconds for a long
answer: a regular expression or ``ast.parse`` over it holds the interpreter the whole time) never delays a
read. One per load-generator process, started on first use (by the first answer longer than ``INLINE_CHARS``,
or checked by a user's own check), ``python -m tokenstorm.workloads.traffic.checks.worker``;
the checks travel as data (:class:`~tokenstorm.workloads.traffic.checks.CheckCall`), length-prefixed pickles both ways.

Should the process be unusable (it died, a check cannot be pickled), the answer is judged in the caller, the
run goes on, and the log says it once.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import struct
import subprocess
import sys
from typing import IO, Any

from . import Check, CheckOutcome, Reply, judge

__all__ = ["INLINE_CHARS", "CheckProcess", "serve"]

log = logging.getLogger("tokenstorm")
_LEN = struct.Struct("<I")
#: answers up to this many characters (text and tool-call arguments) are judged in the load generator itself:
#: there the built-in checks take at most ~0.3 ms (``ast.parse`` of 1 KB of code; chat's 0.05 ms at 2 KB), under
#: ``LATE_EVENT_S`` (1 ms), while handing an answer over costs the load generator ~80 us and the child ~135 us
INLINE_CHARS = 1024


def _size(reply: Reply) -> int:
    return len(reply.text) + sum(len(str((c.get("function") or {}).get("arguments") or "")) for c in reply.tool_calls)


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("the checks' process closed its pipe")
        data += chunk
    return data


def _send(stream: IO[bytes], obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LEN.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    (n,) = _LEN.unpack(_read_exact(stream, _LEN.size))
    return pickle.loads(_read_exact(stream, n))


class CheckProcess:
    """Judges answers in a child process (see the module's docstring); one answer at a time."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._broken = False
        self._lock: Any = None

    def _start(self) -> subprocess.Popen[bytes]:
        # Its own session, as the emulator's: a terminal's Ctrl-C (SIGINT to the foreground group) stops the load
        # generator, which ends this process by closing its pipe, never this process mid-answer.
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdin is not None
        _send(proc.stdin, list(sys.path))  # where users' own checks import from, as here
        self._proc = proc
        return proc

    def judge(self, checks: tuple[Check, ...], reply: Reply) -> CheckOutcome:
        """``judge(checks, reply)``, run in the checks' process — or here, when the answer is short enough that the
        built-in checks take less than handing it over would (``INLINE_CHARS``; users' own checks, of unknown cost,
        always go)."""
        if self._broken or (reply.request is None and _size(reply) <= INLINE_CHARS):
            return judge(checks, reply)
        if self._lock is None:
            import gevent.lock  # cooperative under gevent; a plain lock elsewhere

            self._lock = gevent.lock.Semaphore()
        with self._lock:
            try:
                if self._proc is not None and self._proc.poll() is not None:
                    self.close()  # it died (killed, out of memory): a fresh one takes over
                proc = self._proc if self._proc is not None else self._start()
                assert proc.stdin is not None and proc.stdout is not None
                _send(proc.stdin, (checks, reply))
                outcome = _receive(proc.stdout)
                if isinstance(outcome, CheckOutcome):
                    return outcome
                raise TypeError(f"the checks' process answered {type(outcome).__name__}")
            except (OSError, EOFError, pickle.PickleError, AttributeError, TypeError, struct.error) as exc:
                self._broken = True
                self.close()
                log.warning(
                    "tokenstorm: answer checks run in the load generator from now on (%s: %s); "
                    "long answers may delay its reads",
                    type(exc).__name__,
                    exc,
                )
                return judge(checks, reply)
            except BaseException:
                # Interrupted mid-exchange (the load test stopping this user): the answer it was waiting for
                # would be read by the next caller as its own. That process is given up; the next starts afresh.
                self._abandon()
                raise

    def _abandon(self) -> None:
        """Drop the process without waiting for it (it ends when its end of the pipe closes; killed to be sure)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def close(self) -> None:
        """End the checks' process (it ends by itself, too, when this one's end of the pipe closes)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The child's loop: the parent's ``sys.path`` first, then (checks, reply) in, the outcome out, until EOF."""
    try:
        sys.path[:] = _receive(stdin)
        while True:
            checks, reply = _receive(stdin)
            _send(stdout, judge(checks, reply))
    except EOFError:
        return


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
