"""The socket under an :class:`~.http.HttpConnection`: opened with the options timing needs (no Nagle, a send
buffer that takes a whole request, kernel receive stamps), and the check that a kept-alive one is still open."""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

import gevent.socket
import gevent.ssl

__all__ = ["SO_TIMESTAMPNS", "idle_and_open", "kernel_timestamps_supported", "open_socket", "sent_stamp_ns"]

# Linux SO_TIMESTAMPNS (= SCM_TIMESTAMPNS): the kernel stamps each received packet with
# CLOCK_REALTIME. Python's socket module does not export the constant.
SO_TIMESTAMPNS = 35 if sys.platform.startswith("linux") else None
# Linux SO_TIMESTAMPING (= SCM_TIMESTAMPING) with software transmit stamps: the kernel stamps the packet
# carrying the last byte of each send as the driver takes it (loopback and NICs alike; tcpdump sees it
# then), and queues the stamp on the socket's error queue. TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY.
SO_TIMESTAMPING = 37 if sys.platform.startswith("linux") else None
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
_MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)
#: the send buffer asked for (the kernel caps it at net.core.wmem_max and doubles it)
_SEND_BUFFER = 4 << 20


def kernel_timestamps_supported() -> bool:
    """Whether this platform can stamp reads with the kernel's receive time."""
    return SO_TIMESTAMPNS is not None


def open_socket(
    host: str,
    port: int,
    connect_timeout_s: float | None,
    read_timeout_s: float | None,
    want_kernel_stamps: bool,
    use_ssl: bool,
) -> tuple[Any, bool, bool]:
    """A connected gevent socket to ``host:port``, whether the kernel stamps its reads, and whether it
    stamps the packets its sends leave in (:func:`sent_stamp_ns`)."""
    sock = gevent.socket.create_connection((host, port), timeout=connect_timeout_s)
    kernel_stamps = tx_stamps = False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A request goes to the kernel whole (agent histories and long documents are 20-500 KB): with the
        # default 16 KB send buffer, sendall waits for the server to read, and the client cannot tell that
        # wait from being descheduled mid-send (what send_s flags as a late TTFT). Capped by wmem_max.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)
        if want_kernel_stamps and SO_TIMESTAMPNS is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                kernel_stamps = True
            except OSError:
                kernel_stamps = False
            if kernel_stamps and SO_TIMESTAMPING is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TX_FLAGS)
                    tx_stamps = True
                except OSError:
                    tx_stamps = False
        if use_ssl:
            ctx = gevent.ssl.create_default_context()
            sock = ctx.wrap_socket(sock, server_hostname=host)
        sock.settimeout(read_timeout_s)
    except BaseException:
        sock.close()
        raise
    return sock, kernel_stamps, tx_stamps


def sent_stamp_ns(sock: Any) -> int | None:
    """The kernel's transmit stamp (CLOCK_REALTIME ns) of the newest send on ``sock`` whose packet has left,
    draining the error queue; ``None`` when none is queued. A queued stamp also makes the socket poll as
    readable, so the caller drains after every send (and the next send's stamp is never an old one)."""
    newest, timeout = None, sock.gettimeout()
    sock.settimeout(0.0)  # gevent raises at once instead of waiting for the socket to become readable
    try:
        while True:
            try:
                _data, ancdata, _flags, _addr = sock.recvmsg(1, 256, _MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                break
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(cdata) >= 16:
                    sec, nsec = struct.unpack_from("qq", cdata)  # [0] is the software stamp
                    if sec or nsec:
                        newest = sec * 1_000_000_000 + nsec
    finally:
        sock.settimeout(timeout)
    return newest


def idle_and_open(sock: Any, read_timeout_s: float | None) -> bool:
    """Whether a kept-alive plain-TCP socket is idle and still open (the server may have timed it out)."""
    # Timeout 0: gevent raises at once instead of waiting for the socket to become readable.
    sock.settimeout(0.0)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return True  # nothing to read: idle and open
    except OSError:
        return False
    finally:
        sock.settimeout(read_timeout_s)
    return False  # EOF, or bytes nobody asked for: not reusable either way
