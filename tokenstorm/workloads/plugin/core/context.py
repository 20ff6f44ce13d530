"""Per-process run state: the run directory, where records go, live token throughput, run.json.

On a local or master runner records are appended to ``RUN_DIR/requests/`` (segments;
``RUN_DIR/requests.jsonl`` with ``--records jsonl``); on a worker
they are buffered and shipped to the master with each stats report (``report_to_master``),
so the master's run directory holds every request of a distributed run.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
from locust.env import Environment

from ...rundir import REQUESTS_FILE, SEGMENTS_DIR, RecordWriter, RequestRecord, RunMeta, write_run_meta
from ...rundir.meta import versions
from ...rundir.secrets import authorization_header, secret_forms, split_credentials
from ...rundir.wire import OutboxBatches, batch_rows
from ...traffic import MODELS, TrafficModel
from ...traffic.checks import FailedAnswers
from ...traffic.checks.worker import CheckProcess
from ..export import prometheus as exporter
from ..web.live import LiveWindow, series_key
from . import locust_compat
from .flags import option_defaults
from .gc import GcWatch
from .options import OptionError, RunOptions, recorded_options
from .progress import Outcomes
from .rates import TokenRate
from .server_timing import ServerTimingHint
from .targets import resolve_targets, scrub_targets

if TYPE_CHECKING:
    from ...rundir.writer import SegmentWriter

__all__ = ["LEFT_OUT_OPTION", "RunContext", "TokenRate", "context", "current_options", "new_run_dir", "versions"]

#: Option names whose values are never written anywhere.
SECRET_OPTIONS = frozenset({"api_key"})
#: the workloads the master left out of the run (comma-separated; "": none), in the options every spawn message
#: carries to the workers; run.json says them, with why, as ``left_out``, not among the options
LEFT_OUT_OPTION = "tokenstorm_left_out"

log = logging.getLogger("tokenstorm")


def new_run_dir(root: Path, label: str, now: datetime | None = None) -> Path:
    """Create and return ``root/<UTC timestamp>_<label>/`` (suffixing ``-2``... if it exists)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H-%M-%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-") or "run"
    base = root / f"{stamp}_{safe}"
    path, n = base, 1
    while True:
        try:
            path.mkdir(parents=True, exist_ok=False)
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")


@dataclass
class RunContext:
    """Everything one tokenstorm process knows about the current run."""

    is_worker: bool
    worker_id: str = "local"
    run_dir: Path | None = None
    writer: RecordWriter | SegmentWriter | None = None
    simulated: bool = False
    emulator_url: str | None = None
    model: str | None = None
    #: the model each target (base URL) serves, when --model is not given
    models: dict[str, str] = field(default_factory=dict)
    started_epoch_s: float | None = None
    warmup_s: float = 0.0
    problem: str | None = None
    emulator: Any = None  # the EmulatorProcess this process started, if any
    monitor: Any = None  # tokenstorm.monitors.RunMonitor of the current run (master/local)
    monitor_greenlet: Any = None
    slo_spec: Any = None  # tokenstorm.reports.SloSpec checked at start-up
    slo_spec_text: str | None = None
    report_built: bool = False
    workload_settings: dict[str, Any] = field(default_factory=dict)
    workers_lost: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_heard: dict[str, float] = field(default_factory=dict)
    stopping: bool = False
    #: the closing "N request records in ..." line was printed
    records_said: bool = False
    defer_build: bool = False
    flushed_workers: set[str] = field(default_factory=set)
    token_counter: Any = None
    seed: int = 0
    #: records of this process that broke the timing invariant (a bug; logged once)
    timing_violations: int = 0
    gc_watch: GcWatch = field(default_factory=GcWatch)
    #: the failed answers this process keeps on their records (a bounded sample per workload and check)
    failed_answers: FailedAnswers = field(default_factory=FailedAnswers)
    #: where this process's answer checks run (a child process, started on first use)
    check_process: CheckProcess = field(default_factory=CheckProcess)
    _builders: dict[str, TrafficModel] = field(default_factory=dict)
    options: RunOptions = field(default_factory=lambda: RunOptions.parse(None))
    #: the host the API key was given for, and the key (never written anywhere)
    key_host: str | None = None
    key_targets: frozenset[str] = frozenset()
    api_key: str = field(default="", repr=False)
    #: URL (without them) -> the user and password its ``user:password@`` gave (sent as Basic auth)
    credentials: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    _options_source: dict[str, Any] = field(default_factory=dict)
    #: live Prometheus export (--metrics-port), on the master / a local runner
    metrics: exporter.ClientMetrics | None = None
    metrics_server: Any = None
    snapshots: Any = None  # soak.Snapshots of the current run
    #: each load generator's latest timekeeping figures (worker id or "local" -> ClockSample.as_dict()),
    #: as it measured them (workers ship theirs with each report)
    clock_by_worker: dict[str, dict[str, float | None]] = field(default_factory=dict)
    #: what served the run, read from each target at its start (deployment.py), and the GPUs its
    #: monitor saw (gpus.json, read at the end): run.json's ``deployment`` and ``gpus``
    deployment: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    #: workloads left out of this run's mix, and the one line saying why (run.json's ``left_out``)
    left_out: dict[str, str] = field(default_factory=dict)

    @property
    def cpu_by_worker(self) -> dict[str, float]:
        """Each load generator's latest CPU % (100 = one core), where its interval gave one. Safe from
        the exporter's thread: the items are copied at once (under the GIL) before they are looked at."""
        return {w: pct for w, c in list(self.clock_by_worker.items()) if (pct := c.get("cpu_pct")) is not None}

    def refresh_options(self, namespace: Any) -> RunOptions:
        """Parse Locust's options again if they changed (the web UI form, the master's spawn
        message); :class:`OptionError` when a value is bad (the previous options are kept)."""
        source = dict(vars(namespace)) if namespace is not None else {}
        if source != self._options_source or namespace is None:
            self.options = RunOptions.parse(namespace)
            self._options_source = source
        return self.options

    def take_secrets(self, namespace: Any, host: str | None) -> None:
        """Move the API key and any URL credentials out of Locust's options into this context, at start-up.

        Locust's options are what the web UI renders, what ``run.json`` records and what a master sends
        every worker in its spawn message: none of them may hold a secret. The key stays here and goes
        only to the --host (and --targets) it was given with; ``user:password@`` in a URL becomes that
        URL's Basic auth. A worker keeps its own (a ``--processes`` child inherits the command line; a
        remote worker takes ``--api-key`` or ``$OPENAI_API_KEY`` on its own machine)."""
        if namespace is None:
            return
        self.api_key = str(getattr(namespace, "api_key", "") or "")
        namespace.api_key = ""
        clean_host, creds = split_credentials(host or "")
        if creds is not None:
            self.credentials[clean_host.rstrip("/")] = creds
        raw_targets = str(getattr(namespace, "targets", "") or "")
        clean_targets, target_creds = scrub_targets(raw_targets)
        namespace.targets = clean_targets
        self.credentials.update(target_creds)
        if getattr(namespace, "host", None):
            namespace.host = split_credentials(str(namespace.host))[0]
        if self.api_key and self.credentials:
            raise OptionError(
                "--host/--targets: a URL carries user:password and --api-key is given too; "
                "use one of them (vLLM takes --api-key as 'Authorization: Bearer')"
            )

    def warn_key_not_sent(self, namespace: Any, host: str | None) -> None:
        """Said when a run is started (web UI) against a host the API key was not given for."""
        if self.is_worker or not self.api_key or self.key_host is None:
            return
        if (host and host.rstrip("/") != self.key_host.rstrip("/")) or not self._key_targets_ok(namespace):
            log.warning(
                "tokenstorm: the API key given for %s is not sent to %s; start tokenstorm with --host %s "
                "and that host's key to use one there",
                self.key_host,
                host,
                host,
            )

    def _key_targets_ok(self, namespace: Any) -> bool:
        """Every A/B endpoint of ``namespace`` (--targets or its workload file's) was given with the key."""
        try:
            targets = resolve_targets(
                str(getattr(namespace, "targets", "") or ""), str(getattr(namespace, "workload_file", "") or "")
            )
        except ValueError:
            return False
        return {url for _, url in targets} <= self.key_targets | ({self.key_host} if self.key_host else set())

    def key_for(self, host: str) -> str | None:
        """The API key to send to ``host`` (none to a host it was not given for: the --host, or
        the --targets given with it on the command line)."""
        key = self.api_key
        if not key or self.is_worker or self.key_host is None or host.rstrip("/") == self.key_host.rstrip("/"):
            return key or None
        return key if host.rstrip("/") in self.key_targets else None

    def authorization_for(self, host: str) -> str | None:
        """The ``Authorization`` header value for ``host``: its API key, or its URL's Basic credentials."""
        return authorization_header(self.key_for(host), self.credentials.get(host.rstrip("/")))

    def secrets(self) -> tuple[str, ...]:
        """Every form of this process's secrets, for masking what a server sends back."""
        forms = [f for creds in self.credentials.values() for f in secret_forms(None, creds)]
        return (*secret_forms(self.api_key or None), *forms)

    def reset_builders(self) -> None:
        """Forget the traffic model instances (the settings changed)."""
        self._builders.clear()

    def builder(self, workload: str) -> TrafficModel:
        """The (shared, per-process) traffic model instance of ``workload``."""
        if workload not in self._builders:
            model = MODELS[workload]
            self._builders[workload] = model(self.workload_settings[workload], self.token_counter, self.seed)
        return self._builders[workload]

    token_rate: TokenRate = field(default_factory=TokenRate)
    token_rate_by_workload: dict[str, TokenRate] = field(default_factory=dict)
    workers_seen: set[str] = field(default_factory=set)
    requests_by_workload: dict[str, int] = field(default_factory=dict)
    #: the newest records, for the web UI's live charts and SLO status (master / local runner)
    live: LiveWindow = field(default_factory=LiveWindow)
    #: the run's requests and failures by category so far, for the progress lines (master / local runner)
    outcomes: Outcomes = field(default_factory=Outcomes)
    #: says once per run when the server sends no timing of its own (master / local runner)
    server_timing: ServerTimingHint = field(default_factory=ServerTimingHint)
    #: the headless run's progress display (progress_display.ProgressPrinter) while it runs
    progress: Any = None
    #: the closing block and verdict, kept for Locust's ``quit`` event in a headless run (after its error report)
    closing_lines: list[tuple[int, str]] = field(default_factory=list)
    _outbox: OutboxBatches = field(default_factory=OutboxBatches)

    def start(self, root: Path, label: str) -> Path:
        """Open a fresh run directory and record writer (local or master only)."""
        self.close()
        self.failed_answers.clear()  # a new run keeps its own sample of failed answers
        self.run_dir = new_run_dir(root, label)
        if self.options.records == "jsonl":
            self.writer = RecordWriter(self.run_dir / REQUESTS_FILE)
        else:
            from ...rundir.writer import SegmentWriter  # Arrow: only where records are written

            self.writer = SegmentWriter(self.run_dir / SEGMENTS_DIR)
        self.started_epoch_s = time.time()
        self.server_timing.reset(not self.options.otlp_port, self.simulated, bool(self.emulator_url))
        self.token_rate.reset()
        self.workers_lost.clear()
        self.defer_build = False
        self.clock_by_worker.clear()  # a worker's figures from before this run's start are not this run's
        self.token_rate_by_workload.clear()
        self.requests_by_workload.clear()
        self.live.start(self.started_epoch_s)
        self.outcomes.reset()
        return self.run_dir

    def mark_warmup(self, record: RequestRecord) -> None:
        """Set ``record.warmup``: it started in the run's first ``warmup_s`` seconds."""
        if self.started_epoch_s is not None:
            record.warmup = record.start_epoch_s - self.started_epoch_s < self.warmup_s

    def emit(self, record: RequestRecord) -> None:
        """Keep one finished request: write it here, or queue it for the master."""
        self.mark_warmup(record)
        if record.timing_violation:
            self.timing_violations += 1
            if self.timing_violations == 1:
                log.error(
                    "tokenstorm: BUG — request %s breaks the timing invariant (%s); please report it",
                    record.request_id,
                    record.timing_violation,
                )
        if self.is_worker:
            self._outbox.add(record.as_row())
            return
        row = record.as_row()
        self.account(series_key(row), record.output_tokens or 0, record.worker_id)
        if self.metrics is not None:
            self.metrics.observe(row)
        self.live.observe(row)
        self.outcomes.add(row)
        self.server_timing.observe(row)
        if self.writer is not None:
            self.writer.write_rows([row])

    def take_outbox(self) -> list[str]:
        """Hand over the records queued on a worker since the last report, as ``requests.jsonl`` lines."""
        return [orjson.dumps(row).decode() for batch in self._outbox.take() for row in batch_rows(batch)]

    def take_outbox_batches(self) -> list[pa.RecordBatch]:
        """Hand over the records queued on a worker since the last report, as segment-format batches."""
        return self._outbox.take()

    def account(self, workload: str, tokens: int, worker_id: str) -> None:
        """Count a stored record's output tokens, workload (its series) and load generator."""
        self.token_rate.add(tokens)
        self.account_group(workload, tokens, 1)
        self.workers_seen.add(worker_id)

    def account_group(self, workload: str, tokens: int, requests: int) -> None:
        """Count ``requests`` stored records of one series and their output tokens (the run's own token rate
        and its load generators are counted by the caller)."""
        self.token_rate_by_workload.setdefault(workload, TokenRate()).add(tokens)
        self.requests_by_workload[workload] = self.requests_by_workload.get(workload, 0) + requests

    def flush(self) -> None:
        """Push buffered records to disk."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Flush and close the record file."""
        if self.writer is not None:
            self.writer.close()

    def write_run_json(self, options: dict[str, Any], host: str | None, status: str, **more: Any) -> None:
        """Write ``run.json``: config (secrets removed), versions, target, timing, how it ended."""
        if self.run_dir is None:
            return
        spec = self.slo_spec
        meta = RunMeta(
            status=status,
            target=host,
            simulated=self.simulated,
            model=self.model,
            started_epoch_s=self.started_epoch_s,
            host=socket.gethostname(),
            pid=os.getpid(),
            versions=versions(),
            options=_kept(recorded_options(options)),  # durations in seconds
            # what the report sets each option against (not the API key's: its default is $OPENAI_API_KEY)
            option_defaults={
                k: v for k, v in _kept(recorded_options(option_defaults(options))).items() if v not in (None, "")
            },
            workers_seen=sorted(self.workers_seen),
            requests_by_workload=dict(self.requests_by_workload),
            records=self.writer.count if self.writer else 0,
            problem=self.problem,
            slo_spec_text=self.slo_spec_text,
            slo_spec_source=spec.source if spec is not None else None,
            workers_lost=dict(self.workers_lost),
            gc=self.gc_watch.as_dict(),
            targets=[{"label": label, "url": url} for label, url in self.options.targets],
            deployment=self.deployment,
            gpus=self.gpus,
            left_out=dict(self.left_out),
            **more,
        )
        write_run_meta(self.run_dir, meta)


def _kept(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as ``run.json`` keeps them: JSON values, no secret, no internal option."""
    return {k: _jsonable(v) for k, v in options.items() if k not in SECRET_OPTIONS and k != LEFT_OUT_OPTION}


_CONTEXTS: weakref.WeakKeyDictionary[Environment, RunContext] = weakref.WeakKeyDictionary()


def context(environment: Environment) -> RunContext:
    """The :class:`RunContext` of ``environment`` (made on first use)."""
    ctx = _CONTEXTS.get(environment)
    if ctx is None:
        ctx = RunContext(is_worker=locust_compat.is_worker(environment.runner))
        _CONTEXTS[environment] = ctx
    return ctx


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def current_options(environment: Environment) -> RunOptions:
    """The run's options as Locust holds them now — for load shapes, whose first tick comes
    before ``test_start`` (a web UI start with new values). A bad value keeps the previous
    options here; ``test_start`` reports it and fails the run."""
    ctx = context(environment)
    try:
        return ctx.refresh_options(environment.parsed_options)
    except OptionError:
        return ctx.options
