"""Every option is parsed once into a frozen RunOptions; a bad value names the option."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.plugin.core import options as options_module
from tokenstorm.workloads.plugin.core.options import OptionError, RunOptions


def test_the_defaults_are_the_flags_tables_and_nowhere_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """One home for a default: the flags table (``--help``, Locust's parser and the web form read it too)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    plain = RunOptions.parse(None)
    assert (plain.request_timeout_s, plain.capacity_max, plain.api, plain.records) == (600.0, 1024, "chat", "parquet")
    assert plain.api_key == "" and plain.think_tags == ("<think>", "</think>") and plain.poisson
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")  # the declared env default, as Locust's parser has it
    assert RunOptions.parse(None).api_key == "sk-from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    declared = options_module.declared_defaults()
    changed = {**declared, "request_timeout": "2m", "capacity_max": 7, "api": "completions", "arrival": "constant"}
    monkeypatch.setattr(options_module, "declared_defaults", lambda: changed)
    moved = RunOptions.parse(None)
    assert (moved.request_timeout_s, moved.capacity_max, moved.api, moved.poisson) == (120.0, 7, "completions", False)
    assert dataclasses.replace(moved, request_timeout_s=600.0, capacity_max=1024, api="chat", poisson=True) == plain


def test_typed_values() -> None:
    opts = RunOptions.parse(SimpleNamespace(
        max_tokens=64, temperature="0.7", extra_body='{"top_k": 5}', wait_time="0.5-2", steps="2x10,4x20",
        arrival="constant", arrival_rate=12.5, no_continuous_usage=True, api_key="sk-secret", gpus=8))  # fmt: skip
    assert (opts.max_tokens, opts.temperature, opts.extra_body) == (64, 0.7, {"top_k": 5})
    assert (opts.wait_time_s, opts.steps, opts.poisson, opts.arrival_rate) == ((0.5, 2.0), ((2, 10.0), (4, 20.0)),
                                                                               False, 12.5)  # fmt: skip
    assert not opts.continuous_usage and opts.gpus == 8
    assert opts.think_tags == ("<think>", "</think>") and opts.records == "parquet"
    assert RunOptions.parse(SimpleNamespace(think_tags="off")).think_tags is None
    assert RunOptions.parse(SimpleNamespace(think_tags="<r>, </r>")).think_tags == ("<r>", "</r>")
    assert "sk-secret" not in repr(opts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.max_tokens = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("max_tokens", -5, r"--max-tokens -5: must be >= 0"),
        ("temperature", "abc", r"--temperature 'abc': not a number"),
        ("request_timeout", -1.0, r"--request-timeout -1.0: must be > 0"),
        ("wait_time", "abc", r"--wait-time 'abc': expected a duration or LO-HI, e.g. 1-5 or 30s-2m"),
        ("wait_time", "3-1", r"--wait-time '3-1': LO-HI: LO must not be above HI"),
        ("steps", "8x", r"--steps '8x': expected USERSxDURATION"),
        ("warmup", "5x", r"--warmup '5x': expected a duration: seconds \(30, 2.5\) or 30s, 5m, 1h30m"),
        ("warmup", "1m30", r"--warmup '1m30': expected a duration"),
        ("sweep_level_time", "0s", r"--sweep-level-time '0s': must be > 0"),
        ("arrival_rate", -1.0, r"--arrival-rate -1.0: must be > 0"),
        ("extra_body", "{nope", r"--extra-body is not valid JSON"),
        ("extra_body", "[1, 2]", r"--extra-body: expected a JSON object"),
        ("monitor_interval", 0.0, r"--monitor-interval 0.0: must be > 0"),
        ("capacity_step", 0, r"--capacity-step 0: must be >= 1"),
        ("think_tags", "<think>", r"--think-tags <think>: expected OPEN,CLOSE"),
        ("records", "csv", r"--records csv: expected one of parquet, jsonl"),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_option(name: str, value: object, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        RunOptions.parse(SimpleNamespace(**{name: value}))
