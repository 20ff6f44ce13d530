"""Locust run for real with files that are not what they should be (issue #20, items 5 and 11):
a binary SLO file, workload file, tokenizer or dataset stops the run before any traffic with one
``tokenstorm:`` line naming the file and exit code 3 (CI reads 1 as "an SLO failed"); a dataset
saved with a UTF-8 BOM drives the run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import LocustRun
from tests.fakes.files import BOM, PNG, RANDOM, first_bad_byte
from workloads.traffic.models.chat import SYSTEM_PROMPT
from workloads.traffic.tokens import TokenCounter

RUN = ("-u", "2", "-r", "2", "-t", "3s")


@pytest.mark.parametrize(
    ("option", "name", "data", "says"),
    [
        ("--slo", "slo.yaml", RANDOM, "invalid SLO file: {path}: not UTF-8 text ({byte}) — an SLO file is YAML"),
        ("--workload-file", "mix.yaml", PNG, "{path}: not UTF-8 text ({byte}) — a workload file is YAML"),
        (
            "--tokenizer",
            "tokenizer.json",
            PNG,
            "--tokenizer {path}: not UTF-8 text ({byte}) — give the model's tokenizer.json (Hugging Face format) "
            "or its directory",
        ),
        ("--dataset", "d.jsonl", RANDOM, "{path}: not UTF-8 text ({byte}) — a dataset is ShareGPT JSON or JSONL"),
    ],
    ids=["slo", "workload-file", "tokenizer", "dataset"],
)
def test_a_binary_file_stops_the_run_before_any_traffic_with_one_line(
    locust_runner: Callable[..., LocustRun], tmp_path: Path, option: str, name: str, data: bytes, says: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    run = locust_runner("mixed.py", *RUN, option, str(path), timeout_s=120)
    offset = first_bad_byte(data)
    expected = "tokenstorm: " + says.format(path=path, byte=f"byte 0x{data[offset]:02x} at offset {offset}")
    assert run.returncode == 3, run.output[-3000:]
    assert [line for line in run.output.splitlines() if "tokenstorm:" in line] == [expected], run.output[-3000:]
    assert "Traceback" not in run.output
    assert run.run_dir is None and not (tmp_path / "runs").exists()  # no run directory: nothing was sent


def test_a_dataset_saved_with_a_bom_drives_the_run(locust_runner: Callable[..., LocustRun], tmp_path: Path) -> None:
    prompt = "Explain byte order marks. " + "Why do editors write them? " * 40
    data = tmp_path / "d.jsonl"
    data.write_bytes(BOM + json.dumps({"prompt": prompt}).encode() + b"\n")
    run = locust_runner(
        "chat.py", *RUN, "--dataset", str(data), "--chat-turns", "1", "--chat-output-tokens", "16",
        "--wait-time", "0.2", timeout_s=120,
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    assert "Traceback" not in run.output
    records = [r for r in run.records() if r["error_category"] != "cancelled"]  # in flight at the end
    assert records and all(r["ok"] for r in records), [r["error_detail"] for r in records]
    # Every request is the dataset's one prompt after the system prompt (the bundled chats differ).
    counter = TokenCounter()
    asked = counter.count(SYSTEM_PROMPT) + counter.count(prompt)
    assert {r["requested_prompt_tokens"] for r in records} == {asked}
