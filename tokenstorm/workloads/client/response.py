"""A response on an :class:`~.http.HttpConnection`: its parser's state as the reads fill it (headers, the body
pieces each with the stamp of the read that delivered it, how late the reads were), and :class:`HttpResponse`, how
the caller reads its body."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class Connection(Protocol):
    """What a response asks of the connection it arrives on (:class:`~.http.HttpConnection`)."""

    def read_into(self, state: ResponseState) -> None:
        """One read from the socket, fed to the response's parser."""

    def response_done(self, response: HttpResponse) -> None:
        """The response was read whole: the connection may carry the next request."""

    def close(self) -> None:
        """Close the connection (an unread rest of the response with it)."""


__all__ = ["HttpResponse", "ResponseState", "framed"]


class ResponseState:
    """httptools callbacks; only the ones defined here are called (it checks at init)."""

    __slots__ = (
        "complete",
        "headers",
        "headers_done",
        "keep_alive",
        "lag_max_s",
        "parser",
        "pieces",
        "read_pieces",
        "send_s",
        "send_wait_s",
        "t_read",
        "t_returned",
        "t_sent",
    )

    def __init__(self) -> None:
        self.parser: Any = None
        self.headers: dict[str, str] = {}
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        #: decoded body not yet handed out: one (bytes, stamp, window) per network read
        self.pieces: list[tuple[bytes, float, float]] = []
        #: the body pieces of the read being parsed (a chunked stream gives one per chunk)
        self.read_pieces: list[bytes] = []
        self.t_read = 0.0
        #: perf_counter time right before the request's bytes were handed to the kernel, and how long it took
        self.t_sent = 0.0
        self.send_s = 0.0
        self.send_wait_s = 0.0
        #: when the previous read returned (the request's send time before the first)
        self.t_returned = 0.0
        #: the worst return time − kernel stamp of the response's reads; None: none kernel-stamped
        self.lag_max_s: float | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.read_pieces.append(body)

    def on_message_complete(self) -> None:
        # llhttp answers this only inside the callback; afterwards it says "no".
        self.keep_alive = bool(self.parser.should_keep_alive())
        self.complete = True


def framed(headers: dict[str, str]) -> bool:
    """Whether the body's end is marked in the message (length or chunks), not by closing."""
    return "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()


class HttpResponse:
    """A response whose headers have been read; its body is read with :meth:`body`."""

    def __init__(self, conn: Connection, state: ResponseState) -> None:
        self._conn = conn
        self._state = state
        self.status: int = state.parser.get_status_code()
        self.headers = state.headers

    @property
    def complete(self) -> bool:
        """Whether the whole message has been read (the connection may then be reused)."""
        return self._state.complete

    @property
    def keep_alive(self) -> bool:
        """The server lets the connection carry another request after this response."""
        return self._state.keep_alive

    @property
    def t_sent(self) -> float:
        """``perf_counter`` time right before the request's bytes were handed to the kernel."""
        return self._state.t_sent

    @property
    def send_s(self) -> float:
        """How long ``sendall`` took: the request left somewhere in it after :attr:`t_sent`."""
        return self._state.send_s

    @property
    def send_wait_s(self) -> float:
        """How much later than :attr:`t_sent` the request's last bytes may have left: 0 when one ``send``
        took them all (then they left at once, however long the call took to return: on loopback the
        kernel delivers them to the server inside it, and waking the server may preempt this thread there,
        ~1 ms on a small VM); else the time the rest waited for room in the send buffer."""
        return self._state.send_wait_s

    @property
    def read_lag_max_s(self) -> float | None:
        """The worst lag of this response's reads so far (return − kernel stamp of the newest
        packet); ``None`` when none was stamped by the kernel (TLS, non-Linux)."""
        return self._state.lag_max_s

    def body(self) -> Iterator[tuple[bytes, float, float]]:
        """Yield ``(piece, t, window)``: decoded body bytes, the ``perf_counter`` time of the read
        that delivered them, and how long before ``t`` its earliest byte may have arrived (``t`` −
        the previous read's return), as they arrive, until the message is complete. A piece whose
        window is short was read on time even if it holds several events."""
        state = self._state
        while True:
            if state.pieces:
                pieces, state.pieces = state.pieces, []
                yield from pieces
            if state.complete:
                self._conn.response_done(self)
                return
            self._conn.read_into(state)

    def read(self, limit: int | None = None) -> bytes:
        """The whole body (or its first ``limit`` bytes; the connection is then closed if more was left)."""
        out = bytearray()
        for piece, _t, _window in self.body():
            out += piece
            if limit is not None and len(out) >= limit:
                if self.complete:
                    self._conn.response_done(self)  # keep the connection for the next request
                else:
                    self._conn.close()
                return bytes(out[:limit])
        return bytes(out)
