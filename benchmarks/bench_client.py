"""Client benchmark: SSE events/s per core, and TTFT accuracy under many concurrent streams.

    .venv/bin/python benchmarks/bench_client.py [--events-only | --ttft-only]

1. *Throughput.* A blast server (its own process, pinned to another core when there is one)
   sends pre-rendered vLLM-style chat chunks as fast as the socket takes them. One client
   process with N gevent users reads them through ``LlmClient`` — the same code path as a
   Locust user. Figure: token events per second of client CPU time (= per core).
2. *Accuracy.* The emulator (own process) imposes TTFT/ITL; C concurrent streams are read by
   one client process; each record's TTFT is compared with the time the emulator really
   wrote its first token (``/emulator/truth``, joined by request id). Figure: p50/p99 error.
   The error includes the request's trip through the kernel and both event loops.
Targets (issue #2): >= 30,000 events/s per core; p99 TTFT error <= 1 ms at 200 and 500 streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gevent

from tests.wire import capture_unavailable
from tests.wire.capture import Capture
from tests.wire.compare import event_errors
from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.rundir import RequestRecord


def _blast_server(port_q: multiprocessing.Queue, tokens: int, pace_s: float | None = None) -> None:  # type: ignore[type-arg]
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > 1:  # type: ignore[operator]
        os.sched_setaffinity(0, {1})

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(data), data)

    events = [
        chunk(
            b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
            b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        )
    ]
    for i in range(tokens):
        fin = b'"length"' if i == tokens - 1 else b"null"
        events.append(
            chunk(
                b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
                b'"choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":'
                + fin
                + b'}],"usage":{"prompt_tokens":5,"total_tokens":%d,"completion_tokens":%d}}\n\n' % (6 + i, i + 1)
            )
        )
    events.append(
        chunk(b'data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}\n\n' % tokens)
    )
    events.append(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    body = b"".join(events)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                hdr = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in hdr.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                if pace_s is not None:  # one event per write, pace_s apart: ~one event per client read
                    writer.write(head)
                    for ev in events:
                        writer.write(ev)
                        await writer.drain()
                        await asyncio.sleep(pace_s)
                else:
                    writer.write(head + body)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def bench_events(users: int, tokens: int, seconds: float, pace_s: float | None = None) -> None:
    q: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    proc = multiprocessing.Process(target=_blast_server, args=(q, tokens, pace_s), daemon=True)
    proc.start()
    port = q.get(timeout=10)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})
    req = CompletionRequest("bench", messages=[{"role": "user", "content": "x"}], max_tokens=tokens)
    counts = {"events": 0, "requests": 0, "failed": 0}
    stop_at = time.perf_counter() + seconds

    def user() -> None:
        client = LlmClient(f"http://127.0.0.1:{port}")
        while time.perf_counter() < stop_at:
            rec = client.complete(req, "m")
            counts["events"] += rec.token_events
            counts["requests"] += 1
            counts["failed"] += not rec.ok
        client.close()

    reads = {"n": 0}
    from tokenstorm.workloads.client.http import HttpConnection

    real_read = HttpConnection.read_into

    def counting_read(self: HttpConnection, state: object) -> None:
        reads["n"] += 1
        real_read(self, state)  # type: ignore[arg-type]

    HttpConnection.read_into = counting_read  # type: ignore[method-assign]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    gevent.joinall([gevent.spawn(user) for _ in range(users)])
    HttpConnection.read_into = real_read  # type: ignore[method-assign]
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    proc.terminate()
    mode = f"one event per write every {pace_s * 1000:g} ms" if pace_s is not None else "whole stream in one write"
    print(
        f"events [{mode}]: {users} users x {tokens}-token streams for {wall:.1f} s: {counts['requests']} "
        f"requests ({counts['failed']} failed), {counts['events']} token events, "
        f"{counts['events'] / max(reads['n'], 1):.1f} events per network read"
    )
    print(
        f"events: {counts['events'] / cpu:,.0f} events per client CPU-second (per core); "
        f"{counts['events'] / wall:,.0f} events/s wall; client CPU {cpu / wall:.0%} of one core"
    )


def bench_ttft(concurrency: int, rounds: int, ttft_ms: float, itl_ms: float, tokens: int, wire: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with ExitStack() as stack:
            emu = stack.enter_context(_emulator(ttft_ms, itl_ms, concurrency))
            # The loopback capture: tcpdump's kernel stamps of the POST and first-token packets, a reference that
            # neither the client's loop nor the emulator's (late to stamp 1,000 requests arriving together) moves.
            port = int(emu.url.rsplit(":", 1)[1])
            core = 1 if (os.cpu_count() or 1) > 1 else None  # beside the emulator, off the client's core
            cap = stack.enter_context(Capture(port, Path(tmp) / "lo.pcap", cpu=core)) if wire else None
            records, client_cpu, emu_cpu = _streams(emu, concurrency, rounds, ttft_ms, tokens)
            truth = {t["request_id"]: t for t in json.load(urllib.request.urlopen(f"{emu.url}/emulator/truth"))}
        _print_ttft(records, truth, concurrency, ttft_ms, itl_ms, client_cpu, emu_cpu)
        if cap is not None:  # stopped: its file is whole
            _print_wire(records, cap, concurrency)


def _emulator(ttft_ms: float, itl_ms: float, concurrency: int) -> EmulatorProcess:
    return EmulatorProcess(
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
        "--prefill-us-per-token",
        "0",
        "--max-num-seqs",
        str(concurrency * 2),
    )


def _streams(
    emu: EmulatorProcess, concurrency: int, rounds: int, ttft_ms: float, tokens: int
) -> tuple[list[RequestRecord], float, float]:
    """``concurrency`` users stream ``rounds`` answers each; their records and the client's and emulator's CPU."""
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(emu._proc.pid, {1})  # emulator and client on different cores
        os.sched_setaffinity(0, {0})
    req = CompletionRequest("bench", messages=[{"role": "user", "content": "x"}], max_tokens=tokens, ignore_eos=True)
    records = []

    def user(i: int) -> None:
        client = LlmClient(emu.url)
        client.complete(CompletionRequest("warm", messages=[], max_tokens=1), "m")  # connect first
        gevent.sleep((i % 50) * ttft_ms / 50_000)  # spread starts over one TTFT
        for _ in range(rounds):
            records.append(client.complete(req, "m"))
        client.close()

    import psutil

    emu_proc = psutil.Process(emu._proc.pid)
    e0 = emu_proc.cpu_times()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    gevent.joinall([gevent.spawn(user, i) for i in range(concurrency)])
    wall = time.perf_counter() - w0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    e1 = emu_proc.cpu_times()
    client_cpu = (ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime) / wall
    emu_cpu = (e1.user - e0.user + e1.system - e0.system) / wall
    return records, client_cpu, emu_cpu


def _pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def _print_ttft(
    records: list[RequestRecord],
    truth: dict[str, dict[str, Any]],
    concurrency: int,
    ttft_ms: float,
    itl_ms: float,
    client_cpu: float,
    emu_cpu: float,
) -> None:
    errors = sorted(abs(r.ttft_s - truth[r.request_id]["ttft_s"]) * 1000 for r in records if r.ok and r.ttft_s)
    # The same without the request's way in (the emulator stamps a request when its loop reads it, late when 1,000
    # arrive together): from the stream's first event (the role chunk, written as the request takes its slot).
    read_errors = sorted(
        abs((r.ttft_s - r.ttfc_s) - (truth[r.request_id]["ttft_s"] - truth[r.request_id]["ttfc_s"])) * 1000
        for r in records
        if r.ok and r.ttft_s is not None and r.ttfc_s is not None and truth[r.request_id]["ttfc_s"] is not None
    )
    late = sum(r.ttft_late for r in records if r.ok)
    itl_err = sorted(
        abs(a - b) * 1000
        for r in records
        if r.ok
        for a, b in zip(r.itl_gaps_s, truth[r.request_id]["itl_s"], strict=False)
    )
    failed = sum(not r.ok for r in records)
    pct = _pct
    print(
        f"ttft: {concurrency} concurrent streams, {len(records)} requests ({failed} failed), imposed TTFT "
        f"{ttft_ms:g} ms ITL {itl_ms:g} ms: |client - emulator| TTFT p50 {statistics.median(errors):.3f} ms, "
        f"p99 {pct(errors, 99):.3f} ms, max {errors[-1]:.3f} ms; ITL p50 {statistics.median(itl_err):.3f} ms, "
        f"p99 {pct(itl_err, 99):.3f} ms; CPU: client {client_cpu:.0%}, emulator {emu_cpu:.0%} of one core"
    )
    print(
        f"ttft: {concurrency} streams, first event → first token against the truth's: p50 "
        f"{statistics.median(read_errors):.3f} ms, p99 {pct(read_errors, 99):.3f} ms, max {read_errors[-1]:.3f} ms; "
        f"{late} of {len(read_errors)} TTFTs flagged late by the client"
    )


def _print_wire(records: list[RequestRecord], cap: Capture, concurrency: int) -> None:
    """Each record's TTFT against the wire's (POST packet → first token packet), the independent reference."""
    wire = {ex.request_id: ex for ex in cap.exchanges() if ex.request_id}
    done = [r for r in records if r.ok and r.ttft_s is not None]
    errors = sorted(abs(event_errors(r, wire[r.request_id]).ttft_error_s) * 1000 for r in done if r.request_id in wire)
    if not errors:
        print(f"ttft: {concurrency} streams, no record found on the wire ({len(done)} records, {len(wire)} exchanges)")
        return
    print(
        f"ttft: {concurrency} streams, |client - wire| TTFT (tcpdump's stamps of the POST and first-token packets): "
        f"p50 {statistics.median(errors):.3f} ms, p99 {_pct(errors, 99):.3f} ms, max {errors[-1]:.3f} ms over "
        f"{len(errors)} of {len(done)} records; tcpdump dropped {cap.dropped or 0} packets"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events-only", action="store_true")
    p.add_argument("--ttft-only", action="store_true")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument(
        "--streams",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[200, 500],
        help="concurrent streams of the TTFT runs, comma-separated (default 200,500; issue #32's bound: 1000)",
    )
    args = p.parse_args()
    why_not = capture_unavailable()
    wire = why_not is None
    if not args.events_only and why_not:
        print(f"ttft: no wire reference ({why_not}); the emulator's truth only")
    if not args.ttft_only:
        bench_events(users=32, tokens=256, seconds=args.seconds)
        bench_events(users=400, tokens=256, seconds=args.seconds, pace_s=0.01)
    if not args.events_only:
        for concurrency in args.streams:
            bench_ttft(concurrency, rounds=3, ttft_ms=300, itl_ms=50, tokens=32, wire=wire)


if __name__ == "__main__":
    main()
