"""Fixtures of the emulator's API tests: ``emulator(*flags)`` is a running emulator started with those flags,
shared by the tests that ask for the same ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tokenstorm.emulator import EmulatorProcess

#: a fast emulator whose draws repeat: 20 ms to the first token, 2 ms a token, a stall of half a second
FAST = ("--ttft-ms", "20", "--itl-ms", "2", "--seed", "7", "--stall-s", "0.5", "--enable-per-request-metrics")


@pytest.fixture(scope="session")
def emulator() -> Iterator[Callable[..., str]]:
    running: dict[tuple[str, ...], EmulatorProcess] = {}

    def start(*flags: str) -> str:
        key = FAST + flags
        if key not in running:
            running[key] = EmulatorProcess(*key)
        return running[key].url

    yield start
    for emu in running.values():
        emu.stop()
