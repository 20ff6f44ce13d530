"""A pcap file read in pure Python, and each TCP connection's byte streams put back together.

Only what a loopback capture of plain HTTP needs: the classic pcap format (microsecond or
nanosecond magic, either byte order), Ethernet (Linux ``lo``) or Linux cooked framing (``-i any``),
IPv4 and IPv6, TCP. Each byte of a reassembled stream carries the capture time of the packet that
made it readable: its own packet, or — after a gap (a lost, reordered or retransmitted segment) —
the packet that filled the gap, since a reader cannot see a byte before every byte ahead of it.
A segment whose bytes were all seen before (a retransmit, a duplicate) changes nothing: the
first copy counts. On loopback that copy was delivered too, unless the receive queue was full
(rare; then the stamp here is early by one retransmit timeout).
"""

from __future__ import annotations

import bisect
import ipaddress
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ByteStream", "Packet", "TcpConnection", "read_packets", "tcp_connections"]

_MAGIC_US = 0xA1B2C3D4
_MAGIC_NS = 0xA1B23C4D
_LINK_ETHERNET = 1
_LINK_LINUX_SLL = 113
_LINK_LINUX_SLL2 = 276
_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
_TCP_FIN, _TCP_SYN, _TCP_RST, _TCP_ACK = 0x01, 0x02, 0x04, 0x10
_SEQ_MOD = 1 << 32

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Packet:
    """One captured TCP segment: capture time (ns since the epoch), ends, sequence number, flags, payload."""

    t_ns: int
    src: Address
    dst: Address
    seq: int
    flags: int
    payload: bytes

    @property
    def syn(self) -> bool:
        """The segment opens a direction of a connection (SYN or SYN-ACK)."""
        return bool(self.flags & _TCP_SYN)


def read_packets(path: Path) -> Iterator[Packet]:
    """Yield the TCP segments of a pcap file in capture order (other packets are skipped)."""
    data = path.read_bytes()
    if len(data) < 24:
        return
    for order in ("<", ">"):
        (magic,) = struct.unpack_from(order + "I", data, 0)
        if magic in (_MAGIC_US, _MAGIC_NS):
            break
    else:
        raise ValueError(f"{path}: not a pcap file (magic {data[:4].hex()})")
    frac_ns = 1 if magic == _MAGIC_NS else 1000
    (link,) = struct.unpack_from(order + "I", data, 20)
    record = struct.Struct(order + "IIII")
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _orig = record.unpack_from(data, pos)
        pos += 16
        frame = data[pos : pos + incl]
        pos += incl
        if len(frame) < incl:
            return  # a capture cut mid-packet (tcpdump killed): the rest is gone
        pkt = _parse_frame(frame, link, sec * 1_000_000_000 + frac * frac_ns)
        if pkt is not None:
            yield pkt


def _parse_frame(frame: bytes, link: int, t_ns: int) -> Packet | None:
    if link == _LINK_ETHERNET:
        if len(frame) < 14:
            return None
        (ethertype,) = struct.unpack_from("!H", frame, 12)
        net = 14
        if ethertype == 0x8100:  # a VLAN tag
            (ethertype,) = struct.unpack_from("!H", frame, 16)
            net = 18
    elif link == _LINK_LINUX_SLL:
        (ethertype,) = struct.unpack_from("!H", frame, 14)
        net = 16
    elif link == _LINK_LINUX_SLL2:
        (ethertype,) = struct.unpack_from("!H", frame, 0)
        net = 20
    else:
        raise ValueError(f"pcap link type {link} is not read here (capture on lo or any)")
    if ethertype == _ETH_IPV4 and len(frame) >= net + 20:
        ihl = (frame[net] & 0x0F) * 4
        (total,) = struct.unpack_from("!H", frame, net + 2)
        if frame[net + 9] != 6:
            return None
        src_ip, dst_ip = (
            str(ipaddress.IPv4Address(frame[net + 12 : net + 16])),
            str(ipaddress.IPv4Address(frame[net + 16 : net + 20])),
        )
        tcp, end = net + ihl, net + total  # Ethernet may pad short frames: the IP length says where data ends
    elif ethertype == _ETH_IPV6 and len(frame) >= net + 40:
        if frame[net + 6] != 6:
            return None  # extension headers: not sent on loopback by these tests
        (plen,) = struct.unpack_from("!H", frame, net + 4)
        src_ip, dst_ip = (
            str(ipaddress.IPv6Address(frame[net + 8 : net + 24])),
            str(ipaddress.IPv6Address(frame[net + 24 : net + 40])),
        )
        tcp, end = net + 40, net + 40 + plen
    else:
        return None
    if len(frame) < tcp + 20:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", frame, tcp)
    offset = (frame[tcp + 12] >> 4) * 4
    flags = frame[tcp + 13]
    return Packet(t_ns, (src_ip, sport), (dst_ip, dport), seq, flags, frame[tcp + offset : end])


@dataclass(slots=True)
class ByteStream:
    """One direction of a TCP connection: its bytes, and when each became readable."""

    data: bytearray = field(default_factory=bytearray)
    #: runs of bytes that became readable together: byte i belongs to the first run whose end > i
    _ends: list[int] = field(default_factory=list)
    _times_ns: list[int] = field(default_factory=list)
    _base: int | None = None
    _pending: dict[int, bytes] = field(default_factory=dict)

    def time_ns(self, offset: int) -> int:
        """Capture time of the packet that made byte ``offset`` readable."""
        return self._times_ns[bisect.bisect_right(self._ends, offset)]

    @property
    def gaps(self) -> int:
        """Segments held back because bytes before them were never captured."""
        return len(self._pending)

    def add(self, pkt: Packet) -> None:
        """Account for one segment of this direction."""
        if pkt.syn:
            self._base = (pkt.seq + 1) % _SEQ_MOD  # the SYN takes one sequence number
            return
        if self._base is None:
            self._base = pkt.seq  # the capture began mid-connection: count from here
        if not pkt.payload:
            return
        rel = (pkt.seq - self._base) % _SEQ_MOD
        if rel >= _SEQ_MOD // 2:
            return  # before the stream's start: a retransmit of bytes from before the capture
        self._pending[rel] = max(self._pending.get(rel, b""), pkt.payload, key=len)
        self._drain(pkt.t_ns)

    def _drain(self, t_ns: int) -> None:
        before = len(self.data)
        grew = True
        while grew and self._pending:
            grew = False
            for rel in sorted(self._pending):
                if rel > len(self.data):
                    break  # a gap before this segment: its bytes wait for the one that fills it
                piece = self._pending.pop(rel)
                new = piece[len(self.data) - rel :]
                if new:
                    self.data += new
                    grew = True
        if len(self.data) > before:
            self._ends.append(len(self.data))
            self._times_ns.append(t_ns)


@dataclass(slots=True)
class TcpConnection:
    """One TCP connection: who opened it, to where, and both byte streams."""

    client: Address
    server: Address
    #: the client's SYN (None when the capture began after it)
    syn_ns: int | None
    to_server: ByteStream = field(default_factory=ByteStream)
    to_client: ByteStream = field(default_factory=ByteStream)


def tcp_connections(packets: Iterator[Packet], server_port: int) -> list[TcpConnection]:
    """Group segments to or from ``server_port`` into connections, in the order they were opened.

    A SYN on a 4-tuple seen before starts a new connection (the client port was reused)."""
    live: dict[tuple[Address, Address], TcpConnection] = {}
    out: list[TcpConnection] = []
    for pkt in packets:
        if pkt.dst[1] == server_port:
            key, to_server = (pkt.src, pkt.dst), True
        elif pkt.src[1] == server_port:
            key, to_server = (pkt.dst, pkt.src), False
        else:
            continue
        conn = live.get(key)
        if conn is None or (to_server and pkt.syn and not pkt.flags & _TCP_ACK and conn.to_server.data):
            conn = live[key] = TcpConnection(key[0], key[1], pkt.t_ns if to_server and pkt.syn else None)
            out.append(conn)
        (conn.to_server if to_server else conn.to_client).add(pkt)
    return out
