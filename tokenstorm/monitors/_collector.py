"""Collects monitor samples into a run directory while a load test runs.

Used by the Locust master (or local runner) once per interval: pulls new samples from a GPU
sidecar (``/samples?since=``) or samples local GPUs, scrapes the target's ``/metrics``, and
appends both to ``gpu.jsonl`` / ``server.jsonl`` on the requests' wall-clock axis; the GPUs' names,
memory and driver go to ``gpus.json`` once, when they are first read (run.json's ``gpus``). A source
that stops answering gets one :class:`MonitorGap` line per outage and one log line; the load
test is never interrupted by a monitor.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tokenstorm.workloads.rundir.faults import AppendFile
from tokenstorm.workloads.rundir.gpus import gpu_identity, write_gpus
from tokenstorm.workloads.rundir.samples import MonitorGap, to_line

from ._identity import gpus_from_rows, gpus_of
from ._sidecar import GpuSampler
from ._vllm_metrics import MetricsUnavailable, ServerMetricsScraper

__all__ = ["RunMonitor"]

log = logging.getLogger("tokenstorm.monitors")


class RunMonitor:
    """One run's monitor state. Call :meth:`poll` every interval; :meth:`close` at the end."""

    def __init__(
        self,
        run_dir: Path,
        *,
        target_url: str | None,
        targets: list[tuple[str, str]] | None = None,
        gpu_monitor: str | None = None,
        local_sampler: GpuSampler | None = None,
        authorization: dict[str, str] | None = None,
        timeout_s: float = 3.0,
    ) -> None:
        self._run_dir = run_dir
        self._gpus_written = False
        # Whole lines only: a write that fails (a full disk) raises WriteFailed and leaves no torn line.
        self._gpu_fh = AppendFile(run_dir / "gpu.jsonl", "GPU samples")
        self._server_fh = AppendFile(run_dir / "server.jsonl", "server samples")
        # One scraper per target (A/B runs: each sample carries its target's label).
        pairs = targets or ([("", target_url)] if target_url else [])
        auth = authorization or {}
        self._scrapers = {
            label: ServerMetricsScraper(url, timeout_s, authorization=auth.get(url.rstrip("/"))) for label, url in pairs
        }
        self._sidecar = gpu_monitor.rstrip("/") if gpu_monitor and gpu_monitor != "local" else None
        self._local = local_sampler
        self._timeout_s = timeout_s
        self._since = time.time() - 2.0  # a sample taken just before the run started is still useful
        self._down: dict[str, bool] = {}
        self._server_seen: set[str] = set()
        self.latest_gpu: list[dict[str, Any]] = []
        self.latest_server: dict[str, Any] = {}
        self.gaps = 0

    # -- one round ------------------------------------------------------------------
    def poll(self) -> None:
        """Collect whatever is new from every source."""
        self.poll_gpu()
        self.poll_server()

    def poll_gpu(self, sample_fn: Any = None) -> None:
        """Pull GPU samples (``sample_fn`` runs the local sampler, e.g. in a thread pool)."""
        if self._sidecar is not None:
            try:
                url = f"{self._sidecar}/samples?since={self._since:.6f}"
                with urllib.request.urlopen(url, timeout=self._timeout_s) as resp:
                    rows = json.loads(resp.read())
            except (OSError, ValueError) as exc:
                self._gap("gpu", f"GPU sidecar {self._sidecar} not answering ({_why(exc)})", self._gpu_fh)
                return
            self._up("gpu", f"GPU sidecar {self._sidecar}")
            self._write_gpu(rows)
            if not self._gpus_written and rows:
                self._write_gpus(self._sidecar_gpus() or gpus_from_rows(rows))
        elif self._local is not None:
            try:
                batch = sample_fn(self._local.sample) if sample_fn else self._local.sample()
            except Exception as exc:  # the driver failed this once
                self._gap("gpu", f"local GPU sampling failed ({_why(exc)})", self._gpu_fh)
                return
            self._up("gpu", "local GPU sampling")
            self._write_gpu([asdict(s) for s in batch])
            if not self._gpus_written and batch:
                self._write_gpus(gpus_of(self._local) or gpus_from_rows([asdict(s) for s in batch]))

    def poll_server(self) -> None:
        """Scrape each target's /metrics once."""
        for label, scraper in list(self._scrapers.items()):
            name = f"server {label}" if label else "server"
            try:
                sample = scraper.scrape()
            except MetricsUnavailable as exc:
                if label not in self._server_seen:
                    log.warning(
                        "tokenstorm: notice — %s; server metrics are off for this run%s",
                        exc,
                        f" (target {label})" if label else "",
                    )
                    del self._scrapers[label]
                    continue
                self._gap("server", str(exc), self._server_fh, key=name)
                continue
            self._server_seen.add(label)
            self._up(name, scraper.url)
            sample.target = label
            self.latest_server = asdict(sample)
            _append(self._server_fh, to_line(sample) + "\n")

    # -- helpers --------------------------------------------------------------------
    def _sidecar_gpus(self) -> list[dict[str, Any]]:
        """The sidecar's ``/info`` ``gpus`` (name, memory, driver); ``[]`` from one that does not say."""
        try:
            with urllib.request.urlopen(f"{self._sidecar}/info", timeout=self._timeout_s) as resp:
                gpus = json.loads(resp.read()).get("gpus")
            return [gpu_identity(g["index"], g.get("name"), g.get("memory_total_mib"), g.get("driver")) for g in gpus]
        except (OSError, ValueError, AttributeError, TypeError, KeyError):
            return []  # an older sidecar, or one answering something else

    def _write_gpus(self, gpus: list[dict[str, Any]]) -> None:
        self._gpus_written = True  # once: the GPUs of a run do not change under it
        try:
            write_gpus(self._run_dir, gpus)
        except OSError as exc:  # a full disk: run.json goes without them, the samples go on
            log.warning("tokenstorm: cannot write %s/gpus.json (%s)", self._run_dir, _why(exc))

    def _write_gpu(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        _append(self._gpu_fh, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
        self._since = max(self._since, max(float(r["epoch_s"]) for r in rows))
        latest: dict[int, dict[str, Any]] = {}
        for r in rows:
            latest[int(r["gpu"])] = r
        self.latest_gpu = [latest[k] for k in sorted(latest)]

    def _gap(self, source: str, reason: str, fh: AppendFile, key: str = "") -> None:
        if self._down.get(key or source):
            return
        self._down[key or source] = True
        self.gaps += 1
        log.warning("tokenstorm: %s — recording a gap; the load test goes on", reason)
        _append(fh, to_line(MonitorGap(epoch_s=time.time(), source=source, reason=reason)) + "\n")

    def _up(self, source: str, what: str) -> None:
        if self._down.pop(source, False):
            log.info("tokenstorm: %s is back", what)

    def close(self) -> None:
        """Close both files."""
        self._gpu_fh.close()
        self._server_fh.close()


def _append(fh: AppendFile, lines: str) -> None:
    """Append whole ``lines`` to ``fh`` now (:class:`~tokenstorm.workloads.rundir.faults.WriteFailed` when they do not
    fit)."""
    fh.write(lines.encode())
    fh.mark()
    fh.push()


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason)[:150]
