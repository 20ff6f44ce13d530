"""Locust run for real with files that are not what they should be (issue #20, items 5 and 11; issue #28,
item 3): a binary or malformed SLO file, workload file, tokenizer, dataset or trace stops the run before any
traffic with one ``tokenstorm:`` line naming the file (FILE:LINE where it is malformed) and exit code 3 (CI
reads 1 as "an SLO failed"), never repeating the file's text; a dataset saved with a UTF-8 BOM drives the run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import LocustRun
from tests.fakes.files import BOM, PNG, RANDOM, first_bad_byte
from tokenstorm.workloads.traffic.models.chat import SYSTEM_PROMPT
from tokenstorm.workloads.traffic.tokens import TokenCounter

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


#: planted beside each malformed line: a file given by mistake may hold a secret, which no error line repeats
SECRET = "hunter2-s3cret"


@pytest.mark.parametrize(
    ("locustfile", "option", "name", "text", "says"),
    [
        (
            "mixed.py",
            "--workload-file",
            "mix.yaml",
            f"workloads:\n  chat: {{weight: 1, x: {SECRET}\n  code: [\n",
            "{path}:3: not valid YAML",
        ),
        (
            "mixed.py",
            "--workload-file",
            "mix.yaml",
            "workloads:\n  chat:\n    weight: !!python/name:os.system\n",
            "{path}:3: chat.weight: not a plain value",
        ),
        (
            "chat.py",
            "--slo",
            "slo.yaml",
            f"slos:\n  run:\n    ttft_ms: {{p95: 800\n  {SECRET}: [\n",
            "invalid SLO file: {path}:4: not valid YAML",
        ),
        (
            "chat.py",
            "--dataset",
            "d.json",
            f'[\n  {{"conversations": [\n    {{"from": "human", "value": "{SECRET}"}}\n    {{"from": "gpt"}}]}}\n]\n',
            "{path}:4: not valid JSON",
        ),
        (
            "chat.py",
            "--dataset",
            "d.jsonl",
            f'{{"prompt": "fine"}}\n{{"prompt": "{SECRET}",}}\n',
            "{path}:2: not valid JSON",
        ),
        (
            "chat.py",
            "--tokenizer",
            "tokenizer.json",
            f'{{\n  "version": "1.0",\n  "model": {{"{SECRET}" 1}}\n}}\n',
            "--tokenizer {path}:3: not valid JSON",
        ),
        (
            "trace_replay.py",
            "--trace",
            "t.jsonl",
            f'{{"timestamp": 0, "input_length": 8, "output_length": 2}}\n{{"timestamp": 5, {SECRET}}}\n',
            "--trace {path}:2: not JSON",
        ),
    ],
    ids=["workload-yaml", "workload-yaml-tag", "slo-yaml", "dataset-json", "dataset-jsonl", "tokenizer", "trace"],
)
def test_a_malformed_file_is_one_line_with_file_and_line_before_any_traffic(
    locust_runner: Callable[..., LocustRun],
    tmp_path: Path,
    locustfile: str,
    option: str,
    name: str,
    text: str,
    says: str,
) -> None:
    path = tmp_path / name
    path.write_text(text)
    run = locust_runner(locustfile, "-u", "1", "-t", "1s", option, str(path), timeout_s=120)
    lines = [line for line in run.output.splitlines() if "tokenstorm:" in line]
    assert run.returncode == 3, run.output[-3000:]
    assert len(lines) == 1 and lines[0].startswith("tokenstorm: " + says.format(path=path)), run.output[-3000:]
    assert "Traceback" not in run.output and SECRET not in run.output
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
