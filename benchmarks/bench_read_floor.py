"""The floor under a worker's events per CPU-second: the CPU one bare read of one token event costs, in the
read loops a load generator can have, with nothing else done (no HTTP, SSE, JSON, timer or record).

    .venv/bin/python benchmarks/bench_read_floor.py [--streams 200] [--rate 100] [--seconds 6] [--repeat 3]

A writer process (core 1) sends one 104-byte SSE chunk at a time over ``--streams`` loopback TCP connections,
``--rate`` a second each, spread evenly in time (``--burst``: all streams at once, as a batch scheduler's step
would): ``streams x rate`` events a second. The reader (core 0) reads them with

* ``gevent-recv``: a greenlet per stream, gevent's socket ``recv_into`` (it reads first and waits on EAGAIN);
* ``gevent-wait-first``: a greenlet per stream waiting on its connection's own watcher, then one ``recvmsg``
  with the kernel's receive stamp (``SO_TIMESTAMPNS``) — the worker's read (``tokenstorm/workloads/client/http.py``);
* ``epoll-one-reader``: one greenlet reading every ready stream per wake-up (``select.epoll``);
* ``asyncio-protocol``: asyncio's ``data_received`` callbacks — what aiohttp, and so ``vllm bench serve``'s
  client, sits on.

Each figure is the reader process's user+system CPU over the run divided by the events sent: µs of CPU an
event; the median of ``--repeat`` runs, readers in turn. Issue #32 asks a worker for 1.5x ``vllm bench
serve``'s events per CPU-second; the last line sets the worker's bare read against that budget.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import select
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable

CHUNK = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"}}]}\n\n'
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_CMSG_SPACE = socket.CMSG_SPACE(16)
_TIMESPEC = struct.Struct("@qq")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def _write(socks: list[socket.socket], rate: float, seconds: float, burst: bool) -> None:
    """Send CHUNK to the streams, ``rate`` a second each, spread evenly (or all at once), then close them."""
    n = len(socks)
    period = 1.0 / rate if burst else 1.0 / rate / n
    t = time.perf_counter()
    end, i = t + seconds, 0
    while t < end:
        t += period
        while time.perf_counter() < t:  # a spin, not a sleep: the spread stays even at 50 µs apart
            pass
        if burst:
            for sock in socks:
                sock.send(CHUNK)
        else:
            socks[i % n].send(CHUNK)
            i += 1
    for sock in socks:
        sock.close()


def _gevent_recv(socks: list[socket.socket]) -> int:
    import gevent
    import gevent.socket

    reads = [0]

    def read(sock: gevent.socket.socket) -> None:
        buf = bytearray(65536)
        while sock.recv_into(buf):
            reads[0] += 1

    gevent.joinall([gevent.spawn(read, gevent.socket.socket(fileno=s.detach())) for s in socks])
    return reads[0]


def _gevent_wait_first(socks: list[socket.socket]) -> int:
    import gevent
    from gevent import get_hub

    hub = get_hub()
    reads = [0]

    def read(sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        watcher = hub.loop.io(sock.fileno(), 1)
        while True:
            hub.wait(watcher)
            data, ancdata, _flags, _addr = sock.recvmsg(65536, _CMSG_SPACE)
            if not data:
                return
            for _level, kind, cdata in ancdata:
                if kind == _SO_TIMESTAMPNS:
                    _TIMESPEC.unpack_from(cdata)
            reads[0] += 1

    gevent.joinall([gevent.spawn(read, s) for s in socks])
    return reads[0]


def _epoll_one_reader(socks: list[socket.socket]) -> int:
    import gevent
    from gevent.socket import wait_read

    poll = select.epoll()
    open_socks = {}
    for sock in socks:
        sock.setblocking(False)
        poll.register(sock.fileno(), select.EPOLLIN)
        open_socks[sock.fileno()] = sock
    buf = bytearray(65536)
    reads = [0]

    def loop() -> None:
        while open_socks:
            wait_read(poll.fileno())
            for fd, _mask in poll.poll(0):
                try:
                    n = open_socks[fd].recv_into(buf)
                except BlockingIOError:
                    continue
                if n:
                    reads[0] += 1
                else:
                    poll.unregister(fd)
                    open_socks.pop(fd).close()

    gevent.spawn(loop).join()
    return reads[0]


def _asyncio_protocol(socks: list[socket.socket]) -> int:
    reads = [0]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        left = [len(socks)]
        done = loop.create_future()

        class Reader(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                reads[0] += 1

            def connection_lost(self, exc: Exception | None) -> None:
                left[0] -= 1
                if not left[0]:
                    done.set_result(None)

        for sock in socks:
            await loop.connect_accepted_socket(Reader, sock)
        await done

    asyncio.run(main())
    return reads[0]


READERS: dict[str, Callable[[list[socket.socket]], int]] = {
    "gevent-recv": _gevent_recv,
    "gevent-wait-first": _gevent_wait_first,
    "epoll-one-reader": _epoll_one_reader,
    "asyncio-protocol": _asyncio_protocol,
}


def run_once(reader: str, streams: int, rate: float, seconds: float, burst: bool) -> tuple[float, int, int]:
    """One reader in a child process: (µs of CPU an event, events sent, reads made)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the reader's own process: a fresh gevent hub or asyncio loop, its own CPU count
        os.close(rfd)
        listener = socket.create_server(("127.0.0.1", 0))
        clients, servers = [], []
        for _ in range(streams):
            client = socket.create_connection(listener.getsockname())
            server, _ = listener.accept()
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            clients.append(client)
            servers.append(server)
        writer = os.fork()
        if writer == 0:
            _pin(1)
            for sock in clients:
                sock.close()
            _write(servers, rate, seconds, burst)
            os._exit(0)
        for sock in servers:
            sock.close()
        _pin(0)
        before = _cpu()
        reads = READERS[reader](clients)
        used = _cpu() - before
        os.waitpid(writer, 0)
        os.write(wfd, f"{used} {reads}".encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as pipe:
        used_s, reads_s = pipe.read().split()
    os.waitpid(pid, 0)
    events = int(streams * rate * seconds)
    return float(used_s) / events * 1e6, events, int(reads_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--rate", type=float, default=100.0, help="events a second on each stream")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--burst", action="store_true", help="all streams' events at once, not spread")
    parser.add_argument("--readers", default=",".join(READERS), help="comma-separated, of: " + ", ".join(READERS))
    args = parser.parse_args(argv)
    names = [n for n in args.readers.split(",") if n]
    unknown = [n for n in names if n not in READERS]
    if unknown:
        parser.error(f"unknown reader {unknown[0]!r}: choose from {', '.join(READERS)}")
    figures: dict[str, list[float]] = {n: [] for n in names}
    shape = "at once" if args.burst else "spread evenly"
    load = os.getloadavg()[0]
    print(f"{args.streams} streams x {args.rate:g} events/s, {shape}, {args.seconds:g} s, load {load:.1f}")
    for turn in range(args.repeat):
        for name in names:
            us, events, reads = run_once(name, args.streams, args.rate, args.seconds, args.burst)
            figures[name].append(us)
            print(f"  run {turn + 1} {name:18} {us:5.1f} µs/event  ({events:,} events, {reads:,} reads)", flush=True)
    print("median µs of CPU per event:")
    for name in names:
        print(f"  {name:18} {statistics.median(figures[name]):5.1f}")
    if {"gevent-wait-first", "asyncio-protocol"} <= set(names):
        ours, theirs = (statistics.median(figures[n]) for n in ("gevent-wait-first", "asyncio-protocol"))
        print(
            f"the worker's bare read takes {ours / theirs:.2f}x the CPU of asyncio's (vLLM's client's floor): at "
            "1.5x vLLM's client's events per CPU-second a worker has 1/1.5 of that client's whole CPU an event "
            f"(bench_events.py), of which its bare read takes {ours:.1f} µs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
