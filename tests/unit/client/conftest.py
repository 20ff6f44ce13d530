"""Fixtures of the client tests: ``serve(script)`` starts a :class:`ScriptedServer`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.fakes.scripted import Script, ScriptedServer


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for s in servers:
        s.close()
