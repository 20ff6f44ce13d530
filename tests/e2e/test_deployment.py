"""Against a real vLLM server, run.json carries what served the run: the version vLLM reports, the
block size its engine runs with and the model's max_model_len — each equal to what the server says
when asked directly (GET /version, the vllm:cache_config_info gauge, GET /v1/models)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return bytes(resp.read())


def test_a_run_against_vllm_records_its_version_and_block_size(vllm_server: str, locust_runner: Any) -> None:
    version = json.loads(_get(f"{vllm_server}/version"))["version"]
    cache = next(s.labels for f in text_string_to_metric_families(_get(f"{vllm_server}/metrics").decode())
                 for s in f.samples if s.name == "vllm:cache_config_info")  # fmt: skip
    (tiny,) = [m for m in json.loads(_get(f"{vllm_server}/v1/models"))["data"] if m["id"] == "tiny"]
    run = locust_runner("chat.py", "--host", vllm_server, "--model", "tiny", "--chat-turns", "1",
                        "--chat-think-time", "0-0", "--max-tokens", "8", "-u", "1", "-r", "1", "-t", "3s")  # fmt: skip
    assert run.returncode in (0, 1, 5), run.output[-3000:]  # a run it is; its verdict is not what this checks
    meta = run.run_json()
    assert meta["simulated"] is False
    deployment = meta["deployment"][""]
    assert deployment["problems"] == [], deployment
    assert deployment["server_version"] == version
    assert deployment["engine"]["cache_config"]["block_size"] == cache["block_size"]
    assert deployment["engine"]["cache_config"]["enable_prefix_caching"] == cache["enable_prefix_caching"]
    assert deployment["model"] == {"id": "tiny", "max_model_len": tiny["max_model_len"]}
