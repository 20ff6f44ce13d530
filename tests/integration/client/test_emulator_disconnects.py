"""Clients vanishing mid-stream (a run stopped with Ctrl-C, workers killed) must not wedge the emulator.

Seen in a benchmark: after 200 streams were cut at once, the emulator answered nothing for over
a minute. It kept streaming to the closed connections, asyncio logged a warning per write, and
its stderr was a pipe nobody read: once 64 KB were written, the next log line blocked its loop.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request

from tokenstorm.emulator import EmulatorProcess

STREAMS = 40
MAX_TOKENS = 1000


def _generated(url: str) -> float:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    lines = [line for line in text.splitlines() if line.startswith("vllm:generation_tokens_total")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


def test_emulator_stays_responsive_and_stops_generating_when_clients_vanish() -> None:
    args = ("--ttft-ms", "5", "--itl-ms", "5", "--prefill-us-per-token", "0", "--max-num-seqs", "100")
    with EmulatorProcess(*args) as emu:
        host, port = emu.url.removeprefix("http://").split(":")
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                           "max_tokens": MAX_TOKENS, "ignore_eos": True}).encode()  # fmt: skip
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip
        socks = []
        for _ in range(STREAMS):
            s = socket.create_connection((host, int(port)), timeout=5)
            s.sendall(request)
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            socks.append(s)
        time.sleep(0.05)
        for s in socks:  # vanish: reset, as a killed process's sockets are
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        time.sleep(2.5)  # the streams would run on for ~5 s, writing to closed sockets
        t0 = time.monotonic()
        generated = _generated(emu.url)
        assert time.monotonic() - t0 < 2.0, "the emulator stalled after its clients vanished"
        # It stopped generating for them (as vLLM aborts a request whose client disconnected).
        assert generated < STREAMS * MAX_TOKENS / 4, generated
