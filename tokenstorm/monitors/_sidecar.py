"""The GPU sidecar: samples on a timer, appends to a JSONL file, serves samples over HTTP.

Endpoints (JSON): ``/health``; ``/info`` (backend, interval, and ``gpus``: each GPU's index, name,
total memory and driver, read once at start); ``/samples?since=EPOCH``
(every kept sample newer than EPOCH, oldest first; the Locust master polls this); ``/latest``
(each GPU's newest sample). ``/metrics``: the newest samples as Prometheus gauges
(``tokenstorm_gpu_*``, for Grafana beside vLLM's and the client's series). It keeps the last
``keep`` samples in memory and everything on disk.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from tokenstorm.workloads.rundir.samples import GpuSample, to_line
from tokenstorm.workloads.rundir.series import GPU_UTIL

from ._identity import gpus_of

__all__ = ["GpuSampler", "Sidecar"]


class GpuSampler(Protocol):
    """What the sidecar needs from a sampler (NVML, nvidia-smi or a fake)."""

    source: str

    def sample(self) -> list[GpuSample]: ...

    def close(self) -> None: ...


#: GPU sample field -> (Prometheus gauge, help, scale to the gauge's unit)
GPU_GAUGES = {
    "util_gpu_pct": (GPU_UTIL, "GPU utilisation %", 1.0),
    "mem_used_mib": ("tokenstorm_gpu_memory_used_bytes", "GPU memory used", 2.0**20),
    "mem_total_mib": ("tokenstorm_gpu_memory_total_bytes", "GPU memory total", 2.0**20),
    "power_w": ("tokenstorm_gpu_power_watts", "GPU power draw", 1.0),
    "temp_c": ("tokenstorm_gpu_temperature_celsius", "GPU temperature", 1.0),
    "sm_clock_mhz": ("tokenstorm_gpu_sm_clock_hertz", "SM clock", 1e6),
}


def gpu_metrics_text(samples: list[dict[str, Any]]) -> bytes:
    """Prometheus text exposition of the newest sample of each GPU (``/metrics``)."""
    lines: list[str] = []
    for field, (name, help_text, scale) in GPU_GAUGES.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        for s in samples:
            value = s.get(field)
            if value is None:
                continue
            labels = ",".join(f'{k}="{_escape(str(s.get(k, "")))}"' for k in ("host", "gpu", "uuid", "name"))
            lines.append(f"{name}{{{labels}}} {float(value) * scale!r}")
    return ("\n".join(lines) + "\n").encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Sidecar:
    """Runs the sampling loop in a thread and an HTTP server in another."""

    def __init__(
        self,
        sampler: GpuSampler,
        *,
        interval_s: float = 1.0,
        out_path: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 9400,
        keep: int = 86_400,
    ) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self.out_path = out_path
        self._samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.cpu_s = 0.0
        self.errors = 0
        #: the GPUs sampled (``/info``'s ``gpus``): the load test copies them into its run.json
        self.gpus = gpus_of(sampler)
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._threads = [
            threading.Thread(target=self._loop, name="gpu-sampler", daemon=True),
            threading.Thread(target=self._httpd.serve_forever, name="gpu-http", daemon=True),
        ]

    def start(self) -> Sidecar:
        """Start sampling and serving."""
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Stop both threads and release the sampler."""
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._threads[0].join(5)
        self.sampler.close()

    def latest(self) -> list[dict[str, Any]]:
        """The newest sample of each GPU."""
        with self._lock:
            newest: dict[tuple[str, int], dict[str, Any]] = {}
            for s in self._samples:
                newest[(str(s.get("host", "")), int(s.get("gpu", 0)))] = s
        return [newest[k] for k in sorted(newest)]

    def samples_since(self, since: float) -> list[dict[str, Any]]:
        """Kept samples with ``epoch_s`` > ``since``."""
        with self._lock:
            return [s for s in self._samples if s["epoch_s"] > since]

    def _loop(self) -> None:
        fh = self.out_path.open("a", encoding="utf-8") if self.out_path else None
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                c0 = time.thread_time()
                try:
                    batch = self.sampler.sample()
                except Exception:  # a transient driver error: count it, keep sampling
                    self.errors += 1
                    batch = []
                rows = [asdict(s) for s in batch]
                with self._lock:
                    self._samples.extend(rows)
                if fh is not None and batch:
                    fh.write("".join(to_line(s) + "\n" for s in batch))
                    fh.flush()
                self.cpu_s += time.thread_time() - c0
                next_t += self.interval_s
                self._stop.wait(max(0.0, next_t - time.monotonic()))
        finally:
            if fh is not None:
                fh.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sidecar = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/health":
                    self._send(200, {"ok": True})
                elif url.path == "/info":
                    info = {
                        "backend": sidecar.sampler.source,
                        "interval_s": sidecar.interval_s,
                        "errors": sidecar.errors,
                        "gpus": sidecar.gpus,
                    }
                    self._send(200, info)
                elif url.path == "/samples":
                    try:
                        since = float(parse_qs(url.query).get("since", ["0"])[0])
                    except ValueError:
                        self._send(400, {"error": "since must be an epoch time in seconds"})
                        return
                    self._send(200, sidecar.samples_since(since))
                elif url.path == "/latest":
                    self._send(200, sidecar.latest())
                elif url.path == "/metrics":
                    data = gpu_metrics_text(sidecar.latest())
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self._send(404, {"error": f"no route {url.path}"})

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # polled every second: keep the console quiet

        return Handler
