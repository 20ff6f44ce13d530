"""Each record's token event stamps set against the packets that carried its events.

A record keeps TTFT and one ITL gap per output token after the first, so its token events sit at
``ttft_s`` and then ``ttft_s`` + the running sum of the gaps (an event carrying k tokens accounts
for k gaps, the first event's extra tokens for zero-length ones: ``tokenstorm.workloads.client.timing``).

Two errors per record:

* **TTFT error** — the record's TTFT − (first token packet − POST packet): what a user reads as
  TTFT against what the wire says, send path included. A request that opened its connection is
  counted from its POST too: the client connects before its clock starts (a connect's name lookup and
  handshake are not the server's time to first token).
* **event error**, per token event — how much later the client's stamp is than the event's packet.
  The client's clock and the capture's differ by an unknown offset per request (where ``t0`` sits
  before the send); it is the smallest (record time − packet time) of the record's events, since a
  stamp can be late but never early: the kernel stamps a read with its newest packet's arrival.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenstorm.workloads.rundir import RequestRecord

from .exchanges import WireExchange

__all__ = ["EventErrors", "event_errors", "record_event_times_s"]


def record_event_times_s(ttft_s: float, itl_gaps_s: list[float], ks: list[int]) -> list[float]:
    """A record's token event times (seconds since send), given the tokens each event carried."""
    times = [ttft_s]
    i = ks[0] - 1  # the first event's extra tokens arrived with it: zero gaps
    for k in ks[1:]:
        times.append(times[-1] + sum(itl_gaps_s[i : i + k]))
        i += k
    return times


@dataclass(frozen=True, slots=True)
class EventErrors:
    """One record against its exchange on the wire."""

    request_id: str
    ttft_error_s: float
    #: the record's clock offset from the capture's (see module docs)
    offset_s: float
    #: per token event, in order: its stamp − its packet's time, offset removed (≥ 0 but for jitter)
    errors_s: list[float]
    #: the request opened its connection (before its clock started)
    connected: bool = False


def event_errors(record: RequestRecord, wire: WireExchange) -> EventErrors:
    """Compare one streamed record with the exchange that carried it (same request id).

    Raises ``ValueError`` when they do not describe the same stream (token events or tokens differ)."""
    if record.ttft_s is None or not wire.token_ns:
        raise ValueError(f"{record.request_id}: no token event (record TTFT {record.ttft_s}, wire {wire.token_ns})")
    if record.token_events != len(wire.token_ns) or len(record.itl_gaps_s) != sum(wire.token_k) - 1:
        raise ValueError(
            f"{record.request_id}: record has {record.token_events} token events / {len(record.itl_gaps_s)} gaps, "
            f"the wire {len(wire.token_ns)} / {sum(wire.token_k) - 1}"
        )
    rec = record_event_times_s(record.ttft_s, record.itl_gaps_s, wire.token_k)
    on_wire = [(t - wire.sent_ns) / 1e9 for t in wire.token_ns]
    diffs = [r - w for r, w in zip(rec, on_wire, strict=True)]
    offset = min(diffs)
    wire_ttft = wire.ttft_s
    assert wire_ttft is not None
    errors = [d - offset for d in diffs]
    return EventErrors(record.request_id, record.ttft_s - wire_ttft, offset, errors, wire.connect_ns is not None)
