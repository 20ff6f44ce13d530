"""``--timing-source client|server|auto``: what a run's latency SLOs are judged on.

* ``client`` (the default): the client's own records — what users saw.
* ``server``: the server's per-request timing (vLLM's ``--enable-per-request-metrics``, or its spans), per
  record:

  - TTFT := ``server_queue_s + server_ttft_s + overhead``,
  - E2E := ``server_queue_s + server_ttft_s + server_decode_s + overhead``,
  - TPOT := ``server_itl_s`` (vLLM's mean ITL: first → last token over output tokens − 1, TPOT's definition),
  - ITL := ``server_itl_s`` standing for each of the record's ``output_tokens − 1`` gaps (the server gives one
    mean per request, not every gap: percentiles are over the records' means, weighted by their gaps),

  where *overhead* is added back as the median ``overhead_s`` of the judged records of the same workload (and
  A/B target) whose first token was read on time (not ``ttft_late``) — the front end and network a user's
  request also goes through, measured where the client's clock was trustworthy — else of the target's (else
  all workloads') such records, else 0 (negative medians count as 0). ``tool_call_ms`` and ``session_ms`` stay
  on the client's records (the server does not time tool calls or sessions); rates, error rate and answer
  quality are not timing. A record without the server's timing is left out of the latency SLOs (how many is
  said); with none at all the run is ``unreliable`` (exit 5), naming ``--enable-per-request-metrics``.
* ``auto``: the client's records when the run's timing is trustworthy (:mod:`.fidelity`, each A/B target's
  too), else the server's as above: a run that would be ``unreliable`` ends ``passed`` or ``failed`` instead.

Wherever latency was judged on the server's timing, the verdict says so and why; it is never shown as what
users saw (summary.json ``timing_source_used`` / ``timing_source_why``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.fidelity import UNTRUSTED, evaluate_fidelity
from tokenstorm.reports.judging.formats import ms
from tokenstorm.reports.judging.slo import SloResult
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.targets import evaluate_each_target, target_labels, target_mask
from tokenstorm.workloads.rundir import ItlHistogram

__all__ = ["SERVER_COLUMNS", "ServerTimedRun", "TimingSource", "choose_timing_source", "server_timed"]

#: what each latency SLO reads on the server's timing (the columns :func:`server_timed` adds)
SERVER_COLUMNS = {
    "ttft_ms": "server_timed_ttft_s",
    "e2e_ms": "server_timed_e2e_s",
    "tpot_ms": "server_timed_tpot_s",
    "itl_ms": "itl",
}
#: how to start vLLM so that it returns each request's timing
_FLAG = "start vLLM with --enable-per-request-metrics (or trace it to --otlp-port)"
_GAPS_PER_CHUNK = 1 << 20


@dataclass
class ServerTimedRun(RunData):
    """A run seen on the server's timing: ``requests`` has the :data:`SERVER_COLUMNS`, the latency SLOs
    read them (:func:`tokenstorm.reports.judging.slo.latency_column`) and its ITL gaps are the server's mean ITLs."""

    server_columns: dict[str, str] = field(default_factory=dict)
    #: per workload, the overhead added back to the server's TTFT and E2E (ms)
    overhead_added_ms: dict[str, float] = field(default_factory=dict)

    def itl_values(self, mask: np.ndarray) -> ItlHistogram:
        """Each selected record's ``server_itl_s``, counted once per gap (``output_tokens − 1``)."""
        hist = ItlHistogram()
        df = self.requests
        itl = df["server_timed_tpot_s"].to_numpy(dtype=float, na_value=np.nan)
        gaps = np.nan_to_num(df["output_tokens"].to_numpy(dtype=float, na_value=np.nan)) - 1
        sel = np.asarray(mask, dtype=bool) & ~np.isnan(itl) & (gaps >= 1)
        means_us, counts = np.rint(itl[sel] * 1e6).astype(np.int64), gaps[sel].astype(np.int64)
        cum = np.cumsum(counts)  # once: a sum per chunk would make this quadratic in the records
        start, done = 0, 0
        while start < means_us.size:  # bounded memory: about a million gaps at a time
            stop = max(start + 1, int(np.searchsorted(cum, done + _GAPS_PER_CHUNK)))
            hist.add_us(np.repeat(means_us[start:stop], counts[start:stop]))
            start, done = stop, int(cum[stop - 1])
        return hist


@dataclass
class TimingSource:
    """What the latency SLOs were judged on, and why (``summary.json``'s ``timing_source*`` fields)."""

    asked: str  # --timing-source: client, server or auto
    used: str  # client or server
    why: str  # one line
    timed: int = 0  # judged successful records with the server's timing
    untimed: int = 0  # judged successful records without it (left out of the latency SLOs on the server's)
    #: per workload, the overhead added back to the server's TTFT and E2E (ms)
    overhead_added_ms: dict[str, float] = field(default_factory=dict)
    #: the SLO results on the server's timing (None: judged on the client's)
    results: list[SloResult] | None = None

    def as_json(self) -> dict[str, Any]:
        """summary.json's fields."""
        return {
            "timing_source": self.asked,
            "timing_source_used": self.used,
            "timing_source_why": self.why,
            "server_timed_records": self.timed,
            "server_untimed_records": self.untimed,
            "server_overhead_added_ms": self.overhead_added_ms,
        }

    def said(self, verdict: str, reason: str) -> tuple[str, str]:
        """The run's verdict and reason as they read once the timing source is said."""
        if self.used == "server" and verdict in (
            "passed",
            "failed",
            "inconclusive",
            "incomplete",
        ):  # incomplete: judged all the same
            return verdict, f"{reason} — latency judged on the server's timing, not what users saw: {self.why}"
        if self.asked == "server" and not self.timed and verdict in ("passed", "failed", "inconclusive", "unreliable"):
            return "unreliable", f"{self.why} (on the client's timing: {reason})"
        if self.asked == "auto" and verdict == "unreliable" and not self.timed:
            return verdict, f"{reason}; --timing-source auto found no server timing to judge on instead: {_FLAG}"
        return verdict, reason


def choose_timing_source(run: RunData, spec: SloSpec, labels: list[str], mask: np.ndarray) -> TimingSource:
    """What ``run``'s latency SLOs are judged on (its ``--timing-source``; ``mask``: the judged records), with
    the results on the server's timing when it is that."""
    asked = str(run.meta.option("timing_source", "client") or "client")
    if asked not in ("server", "auto"):
        return TimingSource("client", "client", "the client's own records (--timing-source client)")
    untrusted = ""
    if asked == "auto":
        untrusted = _untrusted(run, mask, labels)
        if not untrusted:
            return TimingSource(asked, "client", "the client's timing was trustworthy (--timing-source auto)")
    view = server_timed(run, mask)
    df = view.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    has = ok & ~np.isnan(df["server_timed_ttft_s"].to_numpy(dtype=float))
    timed, untimed = int(has.sum()), int((ok & ~has).sum())
    added = view.overhead_added_ms
    if not timed:
        why = f"none of the {untimed:,} successful judged records carries the server's timing: {_FLAG}"
        return TimingSource(asked, "client", f"--timing-source {asked}: {why}", 0, untimed)
    because = "" if asked == "server" else f"the client's timing was not trustworthy ({untrusted}); "
    parts = ", ".join(f"{w} {ms(v)} ms" for w, v in added.items())
    why = (
        f"--timing-source {asked}: {because}TTFT = server queue + server TTFT + the median overhead of the "
        f"records read on time ({parts}), E2E adds the server's decode, ITL and TPOT = the server's mean ITL; "
        f"tool-call and session latency stay the client's"
    )
    if untimed:
        why += f"; {untimed:,} of {timed + untimed:,} successful records without the server's timing not judged"
    results = evaluate_each_target(view, spec, labels)
    for r in results:
        if r.metric in SERVER_COLUMNS:
            r.note = "; ".join(n for n in (r.note, "judged on the server's timing") if n)
    return TimingSource(asked, "server", why, timed, untimed, added, results)


def server_timed(run: RunData, mask: np.ndarray) -> ServerTimedRun:
    """``run`` with the server's figures as its latencies (see the module docstring); ``mask``: the judged
    records the overhead added back is the median of."""
    df = run.requests
    n = len(df)

    def col(name: str) -> np.ndarray:
        return df[name].to_numpy(dtype=float, na_value=np.nan) if name in df.columns else np.full(n, np.nan)

    queue, prefill, decode, itl, overhead = (
        col(c) for c in ("server_queue_s", "server_ttft_s", "server_decode_s", "server_itl_s", "overhead_s")
    )
    late = df["ttft_late"].fillna(0).astype(bool).to_numpy() if "ttft_late" in df.columns else np.zeros(n, bool)
    on_time = np.asarray(mask, dtype=bool) & ~late & ~np.isnan(overhead)
    names = df["workload"].astype(object).to_numpy() if "workload" in df.columns else np.full(n, "", dtype=object)

    def median_s(rows: np.ndarray, otherwise: float) -> float:
        return max(0.0, float(np.median(overhead[rows]))) if rows.any() else otherwise

    fallback = median_s(on_time, 0.0)
    added_s = np.full(n, fallback)
    added_ms: dict[str, float] = {}
    # An A/B target's overhead is its own (another front end, another network): never the other target's.
    groups = [(f"{label}/", target_mask(run, label)) for label in target_labels(run)] or [("", np.ones(n, bool))]
    for prefix, within in groups:
        target_fallback = median_s(on_time & within, fallback)
        for w in sorted({str(x) for x in names[np.asarray(mask, dtype=bool) & within]}):
            mine = within & (names == w)
            value = median_s(on_time & mine, target_fallback)
            added_s[mine] = value
            added_ms[prefix + w] = value * 1000
    ttft = queue + prefill + added_s
    # A TTFT only where the client measured one (a streamed answer): a whole answer's body has the server's parts
    # too, and would otherwise count towards TTFT SLOs on the server's timing and never on the client's.
    streamed_ttft = np.where(np.isnan(col("ttft_s")), np.nan, ttft)
    frame = df.copy(deep=False)  # the run's columns shared, not copied (20 million rows are ~2.7 GB)
    frame["server_timed_ttft_s"], frame["server_timed_e2e_s"] = streamed_ttft, ttft + decode
    frame["server_timed_tpot_s"] = itl
    base = {f.name: getattr(run, f.name) for f in fields(RunData)}
    return ServerTimedRun(
        **{**base, "requests": frame}, server_columns=dict(SERVER_COLUMNS), overhead_added_ms=added_ms
    )


def _untrusted(run: RunData, mask: np.ndarray, labels: list[str]) -> str:
    """Why the run's timing is not trustworthy, pooled or on any A/B target's records ("": it is)."""
    for label, within in [("", mask), *((label, mask & target_mask(run, label)) for label in labels)]:
        fid = evaluate_fidelity(run.requests, run.load, within)
        if not fid.trustworthy:
            return ("target " + label + ": " if label else "") + fid.reason.removeprefix(UNTRUSTED).split("; ")[0]
    return ""
