"""The wire check: a loopback capture of a run, read back into each request's POST packet and
token event packets, to set the client's own stamps against (``tests/integration/client/test_wire_timing.py``)."""

from .capture import Capture, capture_unavailable, pinned
from .compare import EventErrors, event_errors, record_event_times_s
from .exchanges import WireExchange, exchanges
from .pcap import ByteStream, Packet, TcpConnection, read_packets, tcp_connections
from .procs import BusyNeighbours, PinnedEmulator, stop_process, two_cpus

__all__ = [
    "BusyNeighbours",
    "ByteStream",
    "Capture",
    "EventErrors",
    "Packet",
    "PinnedEmulator",
    "TcpConnection",
    "WireExchange",
    "capture_unavailable",
    "event_errors",
    "exchanges",
    "pinned",
    "read_packets",
    "record_event_times_s",
    "stop_process",
    "tcp_connections",
    "two_cpus",
]
