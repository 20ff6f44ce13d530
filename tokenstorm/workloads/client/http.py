"""One keep-alive HTTP/1.1 connection whose every read carries the time its bytes arrived.

Why not an HTTP library: libraries hide the socket behind pools and buffers, so a response's
first bytes (read with its headers) and its later bytes get stamped by different means, and a
connection not handed back in time makes the next request wait on the pool (measured against
vLLM: TTFT ~10x high, whole streams read "at once"). Here the connection is a plain gevent
socket owned by one simulated user, framing is parsed by ``httptools`` (llhttp, uvicorn's
parser), and each ``recv`` is stamped once, as it returns — on Linux plain TCP with the kernel's
packet receive time (``SO_TIMESTAMPNS``), so a busy client's own scheduling is not added to it.
A read that drains several packets carries the newest one's stamp: a late reader finds the
queued segments coalesced (``tcp_try_coalesce`` keeps the newest stamp), the earlier events'
arrival times gone. So each read also says how far it can be trusted: its *lag* (return time −
kernel stamp) and its *window* (kernel stamp − the previous read's return: its bytes arrived
within it). The client counts the events such a read may have stamped late (``late_events``).

Every body piece, including bytes read with the headers, carries the stamp of the read that
delivered it, on one clock (``time.perf_counter``); stamps never go backwards within a response.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from typing import Any

import httptools
from gevent import get_hub

from ..rundir.records import LATE_EVENT_S as _LATE_S
from .response import HttpResponse, ResponseState, framed
from .sockets import SO_TIMESTAMPING as _SO_TIMESTAMPING
from .sockets import SO_TIMESTAMPNS as _SO_TIMESTAMPNS
from .sockets import idle_and_open, kernel_timestamps_supported, open_socket, sent_stamp_ns
from .stamps import WALL_TO_PERF

__all__ = ["HttpConnection", "HttpResponse", "ProtocolError", "kernel_timestamps_supported"]

_BLOCK = 65536
_TIMESPEC = struct.Struct("qq")
_unpack_timespec = _TIMESPEC.unpack_from
_SOL_SOCKET = socket.SOL_SOCKET
_CMSG_SPACE = 128  # SCM_TIMESTAMPNS, and SCM_TIMESTAMPING once transmit stamps are on


class _NothingBack(Exception):
    """A reused connection was closed before any byte of the response came back."""


class ProtocolError(Exception):
    """The peer did not speak HTTP/1.1 as expected (the message says how)."""


class HttpConnection:
    """One HTTP/1.1 connection, opened on first use, kept alive between requests.

    Not thread- or greenlet-safe: one per simulated user. Any request that does not end with
    a complete response (error, timeout, cancel) must be followed by :meth:`close`; the next
    request then opens a fresh connection, so no request ever reads another's leftovers.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        use_ssl: bool = False,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float | None = None,
        kernel_timestamps: bool = True,
        idle_race_s: float = 1.0,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = use_ssl
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._want_kernel_stamps = kernel_timestamps and not use_ssl and _SO_TIMESTAMPNS is not None
        self._sock: Any = None
        #: kernel-stamped reads: the watcher a read waits on before its one ``recvmsg`` (see :meth:`read_into`)
        self._watcher: Any = None
        #: the last read was on time and left nothing queued: the next one waits for its bytes before reading
        self._wait_first = True
        self._kernel_stamps = False
        #: the kernel stamps the packet each send leaves in (the request's clock starts then)
        self._tx_stamps = False
        #: a transmit stamp may still be queued for a send that found none (drained at the next reads)
        self._tx_stale = False
        self._busy = False
        #: prepare() made the connection ready for the next request (request() need not check again)
        self._prepared = False
        #: the connection was opened for the next request (a reset on it is never the idle race)
        self._fresh = False
        #: a reused connection reset with no answer is retried only after this long idle (see request())
        self._idle_race_s = idle_race_s
        self._idle_since = 0.0
        #: how many TCP connections this object opened (keep-alive reuse keeps it at 1)
        self.connects = 0
        self._state: ResponseState | None = None  # the response of the latest request

    # -- connection -----------------------------------------------------------------------
    def _connect(self) -> None:
        opened = open_socket(
            self.host, self.port, self._connect_timeout_s, self._read_timeout_s, self._want_kernel_stamps, self._ssl
        )
        self._sock, self._kernel_stamps, self._tx_stamps = opened
        # Only kernel-stamped reads wait first (TLS keeps decrypted bytes the socket does not poll for, and a read
        # stamped as it returns must not return later): the wait is never in their stamps.
        self._watcher = get_hub().loop.io(self._sock.fileno(), 1) if self._kernel_stamps else None
        self._wait_first = True
        self._tx_stale = False
        self.connects += 1

    def _alive(self) -> bool:
        """Whether a kept-alive socket is still open (the server may have timed it out)."""
        return self._ssl or idle_and_open(self._sock, self._read_timeout_s)

    def close(self) -> None:
        """Close the socket (any unread response on it is discarded with it)."""
        sock, self._sock = self._sock, None
        watcher, self._watcher = self._watcher, None
        self._busy = False
        if watcher is not None and watcher.callback is not None:
            # A read waits on it (closed from another greenlet): it fails as a reset, then the socket is closed.
            hub = get_hub()
            hub.cancel_wait(watcher, ConnectionResetError("connection closed"), True)
            if sock is not None:
                hub.loop.run_callback(sock.close)
            return
        if watcher is not None:
            watcher.close()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> HttpConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_byte_t(self) -> float | None:
        """The stamp of the latest request's newest byte so far (its send time before any came back;
        ``None`` before any request): what a stall watch checks, kept by the reads at no extra cost."""
        return self._state.t_read if self._state is not None else None

    @property
    def kernel_timestamps(self) -> bool:
        """Whether reads on the current connection are stamped by the kernel."""
        return self._kernel_stamps and self._sock is not None

    # -- requests -------------------------------------------------------------------------
    def prepare(self) -> None:
        """Make the connection ready to carry the next request — drop a half-read one, notice one the
        server closed while idle, connect — so that none of it falls inside the request's timing
        (measured on the wire: a new connection's name lookup and handshake put 2-20 ms into TTFT)."""
        if self._busy:
            self.close()  # the previous response was not read to the end: its bytes are garbage
        if self._sock is not None and not self._fresh and not self._alive():
            self.close()
        if self._sock is None:
            self._connect()
            self._fresh = True
        self._prepared = True

    def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b"", *, t_sent: float | None = None
    ) -> HttpResponse:
        """Send one request and return once its status line and headers have been read.

        ``t_sent`` is the ``perf_counter`` time the caller counts the request from; no read of
        this response is stamped earlier. A kept-alive connection that the server closed while
        idle is detected before sending. A request that got no byte back on a reused connection
        that had been idle at least ``idle_race_s`` is sent once more on a new one: the server's
        keep-alive timeout closed it just as the request left (uvicorn's is 5 s). On a connection
        idle for less, the server dropped the request — a failure the caller records, not hides.
        """
        t_floor = time.perf_counter() if t_sent is None else t_sent
        if not self._prepared:
            self.prepare()
        reused = not self._fresh
        self._prepared = self._fresh = False
        may_retry = reused and time.perf_counter() - self._idle_since >= self._idle_race_s
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        head = [f"{method} {path} HTTP/1.1\r\nHost: {host}:{self.port}\r\n"]
        head.extend(f"{k}: {v}\r\n" for k, v in headers.items())
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body)}\r\n")
        head.append("\r\n")
        raw = "".join(head).encode("latin-1") + body
        try:
            return self._exchange(raw, may_retry, t_floor)
        except _NothingBack:
            self.close()
            return self._exchange(raw, False, t_floor)

    def _exchange(self, raw: bytes, may_retry: bool, t_floor: float) -> HttpResponse:
        if self._sock is None:
            self._connect()
        self._busy = True
        self._state = state = ResponseState()
        state.parser = httptools.HttpResponseParser(state)
        try:
            if self._tx_stamps:
                sent_stamp_ns(self._sock)  # nothing older than this request's send is read as its stamp
            # The request counts from right before its bytes go to the kernel, or from its transmit stamp.
            t_before = time.perf_counter()
            sent = self._sock.send(raw)
            t_first = time.perf_counter()
            if sent < len(raw):  # the send buffer is full: the rest goes as the server reads
                self._sock.sendall(memoryview(raw)[sent:])
            state.send_s = time.perf_counter() - t_before
            # One send took every byte: it left right after t_before, whatever the send's wall time (waking a
            # server may preempt this thread after the bytes left). Else its last bytes left up to this late.
            state.send_wait_s = 0.0 if sent == len(raw) else time.perf_counter() - t_first
            state.t_sent = state.t_read = state.t_returned = max(t_floor, t_before, self._left_at(t_before))
            self.read_into(state)
        except ConnectionError as exc:
            if may_retry:
                raise _NothingBack() from exc
            raise
        while not state.headers_done:
            self.read_into(state)
        return HttpResponse(self, state)

    def _left_at(self, t_before: float) -> float:
        """When the request's last byte left, by the kernel's transmit stamp as the packet went to the driver
        (where a capture sees it); 0.0 when there is none. A client preempted between ``t_before`` and its
        send (seen: 1.2 ms on a quiet core) would otherwise count that wait into TTFT, unseen."""
        if not self._tx_stamps:
            return 0.0
        stamp_ns = sent_stamp_ns(self._sock)
        if stamp_ns is None:
            # Not stamped by the time the send returned (a pacing qdisc, a driver that does not stamp): the
            # connection goes on without transmit stamps, and a stamp still to come is drained by the reads
            # (a queued one makes the socket poll as readable, and gevent's wait would spin on it).
            self._tx_stamps, self._tx_stale = False, True
            with contextlib.suppress(OSError, TypeError):
                self._sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING or 0, 0)
            return 0.0
        t_left = (stamp_ns - WALL_TO_PERF.offset_ns()) / 1e9
        if not t_before <= t_left <= time.perf_counter():  # a wall-clock step: keep t_before
            return 0.0
        assert self._state is not None
        self._state.send_wait_s = 0.0
        return t_left

    def read_into(self, state: ResponseState) -> None:
        """One read from the socket, stamped, fed to the parser (also used by :class:`HttpResponse`)."""
        sock = self._sock
        if sock is None:
            raise ConnectionResetError("connection closed")
        if self._tx_stale and sent_stamp_ns(sock) is not None:
            self._tx_stale = False
        if self._wait_first and self._watcher is not None:
            # Wait for the bytes, then read once: reading first finds nothing on most reads of a stream (its next
            # event is yet to come), and gevent's recvmsg then pays a failed call and its exception before it waits.
            # After a late read, bytes may be queued already: then it reads first, as soon as it can.
            get_hub().wait(self._watcher)
        if self._kernel_stamps:
            data, ancdata, _flags, _addr = sock.recvmsg(_BLOCK, _CMSG_SPACE)
            now = time.perf_counter()
            t = now
            lag = _LATE_S
            for level, kind, cdata in ancdata:
                if kind == _SO_TIMESTAMPNS and level == _SOL_SOCKET and len(cdata) >= 16:
                    sec, nsec = _unpack_timespec(cdata)
                    t_kernel = (sec * 1_000_000_000 + nsec - WALL_TO_PERF.offset_ns()) / 1e9
                    # A wall-clock step mid-request would put the stamp off the axis: keep `now`.
                    if t_kernel <= now:
                        t = t_kernel
                        lag = now - t_kernel
                        if state.lag_max_s is None or lag > state.lag_max_s:
                            state.lag_max_s = lag
        else:
            data = sock.recv(_BLOCK)
            now = t = time.perf_counter()
            lag = _LATE_S
        if not data:
            self.close()
            if state.headers_done and not state.complete and not framed(state.headers):
                # No Content-Length and not chunked (HTTP/1.0, some proxies): the body ends
                # when the server closes the connection — a complete response, not a drop.
                state.complete = True
                return
            raise ConnectionResetError("connection closed by the server")
        # One clock per response: stamps never go backwards, even across the kernel/now fallback.
        state.t_read = t if t > state.t_read else state.t_read
        window = state.t_read - state.t_returned
        if len(data) < _BLOCK:  # a full buffer left bytes queued: the next read's window starts here too
            state.t_returned = now
            self._wait_first = lag < _LATE_S
        else:
            self._wait_first = False
        try:
            state.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.close()
            raise ProtocolError(f"invalid HTTP from the server ({exc})") from exc
        read = state.read_pieces
        if read:
            # Everything one read delivered shares its stamp: hand it out as one piece.
            state.pieces.append((read[0] if len(read) == 1 else b"".join(read), state.t_read, window))
            read.clear()

    def response_done(self, resp: HttpResponse) -> None:
        """``resp`` was read to its end: keep the connection for the next request, or close it."""
        self._busy = False
        self._idle_since = time.perf_counter()
        if not resp.keep_alive:
            self.close()
