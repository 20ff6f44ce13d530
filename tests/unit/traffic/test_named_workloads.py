"""Which workloads a run asks for by name: those a server that cannot serve them must fail the run for,
rather than leave them quietly out of the mix."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.traffic import named_workloads


def test_the_default_mix_names_no_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENSTORM_WEIGHTS", raising=False)
    assert named_workloads(SimpleNamespace(weights="", workload_file="", agent_steps=None)) == {}


def test_weights_name_the_workloads_they_send_and_the_option_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOKENSTORM_WEIGHTS", "agent=2,chat=1")
    assert named_workloads(SimpleNamespace()) == {"agent": "$TOKENSTORM_WEIGHTS agent=2",
                                                  "chat": "$TOKENSTORM_WEIGHTS chat=1"}  # fmt: skip
    # agent=0 sends none of them: it does not ask for them
    assert named_workloads(SimpleNamespace(weights=" agent = 0, code=3")) == {"code": "--weights code=3"}


def test_a_workload_file_and_a_workloads_own_option_name_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENSTORM_WEIGHTS", raising=False)
    mix = tmp_path / "mix.yaml"
    mix.write_text("workloads:\n  agent: {steps: 2}\n  code: {weight: 0}\n")
    assert named_workloads(SimpleNamespace(workload_file=str(mix))) == {"agent": f"the workload file {mix}"}
    assert named_workloads(SimpleNamespace(agent_tool_choice="required")) == {"agent": "--agent-tool-choice"}
    # a file that is not YAML names nothing here: loading the workloads says what is wrong with it
    (tmp_path / "bad.yaml").write_text("workloads: [\n")
    assert named_workloads(SimpleNamespace(workload_file=str(tmp_path / "bad.yaml"))) == {}
