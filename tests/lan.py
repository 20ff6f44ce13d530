"""A small LAN of Linux network namespaces for the multi-host tests: each "host" is a namespace with its own
address on 198.18.0.0/24 (the benchmarking range, RFC 2544), plugged by a veth pair into a bridge that lives
in a namespace of its own, so nothing is added to the machine's own network. Making namespaces needs root
(CI runs as root) and iproute2's ``ip``; elsewhere the tests skip.

Every name carries this process's id and a random tag, so a rerun never meets a crashed run's leftovers,
and those leftovers (namespaces of a process that is gone) are removed when the next LAN is made.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

__all__ = ["Host", "Lan", "lan", "lan_unavailable"]

#: every namespace this module makes is named ``tslan-<pid>-<tag>-<role>``
_PREFIX = "tslan"
_OURS = re.compile(rf"^{_PREFIX}-(\d+)-")
SUBNET_BITS = 24


def lan_unavailable() -> str | None:
    """Why no LAN can be made here (a reason for ``pytest.skip``), or None when it can."""
    if os.geteuid() != 0:
        return "needs root to make network namespaces (CI runs as root)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip for network namespaces (scripts/test.sh installs it)"
    probe = f"{_PREFIX}-{os.getpid()}-probe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns is unavailable here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _pids_in(namespace: str) -> list[int]:
    done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def _remove(namespace: str) -> None:
    """Kill what still runs in ``namespace`` (the processes this module's user started there) and delete it."""
    for pid in _pids_in(namespace):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def _remove_leftovers() -> None:
    """Namespaces of an earlier run whose process is gone (a crash, a SIGKILL'd pytest)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listed.splitlines():
        name = line.split()[0] if line.split() else ""
        owner = _OURS.match(name)
        if owner and not os.path.exists(f"/proc/{owner.group(1)}"):
            _remove(name)


@dataclass(frozen=True)
class Host:
    """One machine of the LAN: a network namespace with one address."""

    namespace: str
    address: str
    #: its cable: the veth end on the bridge's side (down: the host is cut off)
    port: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def get(self, url: str, timeout_s: float = 10) -> str:
        """The body of an HTTP GET of ``url`` made from this host."""
        code = (
            "import sys, urllib.request\n"
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])).read().decode())"
        )
        done = subprocess.run(
            self.command([sys.executable, "-c", code, url, str(timeout_s)]),
            capture_output=True,
            text=True,
            timeout=timeout_s + 20,
        )
        if done.returncode != 0:
            raise OSError(f"GET {url} from {self.address}: {done.stderr.strip()[-300:]}")
        return done.stdout


@dataclass
class Lan:
    """Hosts on one bridge; :meth:`close` removes every namespace (and what still runs in them)."""

    tag: str = field(default_factory=lambda: f"{_PREFIX}-{os.getpid()}-{secrets.token_hex(3)}")
    hosts: list[Host] = field(default_factory=list)

    @property
    def bridge_namespace(self) -> str:
        """The namespace that holds the bridge and the hosts' cables' other ends."""
        return f"{self.tag}-switch"

    def open(self) -> None:
        """Make the switch: a namespace with a bridge ``br0``, up."""
        _remove_leftovers()
        _ip("netns", "add", self.bridge_namespace)
        _ip("-n", self.bridge_namespace, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_namespace, "link", "set", "br0", "up")

    def add_host(self, role: str, last_octet: int) -> Host:
        """A new host ``role`` at 198.18.0.``last_octet``, its ``eth0`` cabled to the bridge."""
        host = Host(f"{self.tag}-{role}", f"198.18.0.{last_octet}", f"to-{role}"[:15])
        _ip("netns", "add", host.namespace)
        self.hosts.append(host)
        # Made inside the switch's namespace, the host's end moved straight into its own: no name ever exists
        # in the machine's namespace, where it could meet another run's.
        _ip(
            "-n",
            self.bridge_namespace,
            "link",
            "add",
            host.port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            host.namespace,
        )
        _ip("-n", self.bridge_namespace, "link", "set", host.port, "master", "br0", "up")
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/{SUBNET_BITS}", "dev", "eth0")
        _ip("-n", host.namespace, "link", "set", "eth0", "up")
        _ip("-n", host.namespace, "link", "set", "lo", "up")
        return host

    def cut(self, host: Host) -> None:
        """Pull ``host``'s cable: its link on the switch goes down, every packet to or from it is lost."""
        _ip("-n", self.bridge_namespace, "link", "set", host.port, "down")

    def close(self) -> None:
        """Remove every host (killing what still runs on it) and the switch."""
        for host in self.hosts:
            _remove(host.namespace)
        _remove(self.bridge_namespace)


@contextmanager
def lan() -> Iterator[Lan]:
    """A fresh :class:`Lan`, removed at the end even when the body fails."""
    net = Lan()
    try:
        net.open()
        yield net
    finally:
        net.close()
