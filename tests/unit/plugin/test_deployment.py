"""Capturing what served a run (run.json's ``deployment``): parsed from a real vLLM's recorded answers,
read from a stub server with the target's own credentials (never stored), and every way a source can
fail is one line in ``problems`` — never an exception.

References: the recorded vLLM 0.32 answers themselves, parsed here another way (prometheus_client over
the whole /metrics text, json over the bodies, a regex over the raw label text).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from gevent.pywsgi import WSGIServer
from prometheus_client.parser import text_string_to_metric_families

from tokenstorm.workloads.plugin.core.deployment import (
    TEXT_MAX,
    capture_deployment,
    capture_target,
    parse_engine_info,
    parse_model,
    parse_version,
)

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "vllm"
# Recorded together from the real vLLM 0.32.0 CPU build serving "tiny" (tests/e2e), 2026-12-02.
METRICS = (VLLM / "metrics_0.32_cpu_deployment.txt").read_text()
VERSION = (VLLM / "version_0.32_cpu.json").read_bytes()
MODELS = (VLLM / "models_0.32_cpu.json").read_bytes()
KEY = "sk-deploy-7Hq2"


def full_parse_info(text: str) -> dict[str, dict[str, str]]:
    """Every ``vllm:*_info`` sample of the whole exposition (no line filter), first one per name."""
    out: dict[str, dict[str, str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("vllm:") and s.name.endswith("_info"):
                out.setdefault(s.name[len("vllm:") : -len("_info")], dict(s.labels))
    return out


def test_engine_info_of_a_real_vllm_is_every_info_gauge_with_its_labels() -> None:
    engine = parse_engine_info(METRICS)
    assert engine == full_parse_info(METRICS)  # the line filter drops no info gauge and no label
    cache = engine["cache_config"]
    # the raw exposition, read without prometheus_client
    raw = re.search(r"^vllm:cache_config_info\{(.*)\} ", METRICS, re.M)
    assert raw is not None
    assert cache["block_size"] == re.search(r'\bblock_size="([^"]*)"', raw[1])[1]  # type: ignore[index]
    for name in ("enable_prefix_caching", "cache_dtype", "gpu_memory_utilization", "num_gpu_blocks"):
        assert cache[name] == re.search(rf'\b{name}="([^"]*)"', raw[1])[1], name  # type: ignore[index]
    assert "python" not in engine  # python_info is not vLLM's engine


def test_version_and_model_of_a_real_vllm() -> None:
    assert parse_version(VERSION) == json.loads(VERSION)["version"]
    listed = json.loads(MODELS)["data"][0]
    assert parse_model(MODELS, listed["id"]) == {"id": listed["id"], "max_model_len": listed["max_model_len"]}
    assert parse_model(MODELS, None)["id"] == listed["id"]  # no --model: the first one, as the run uses
    with pytest.raises(ValueError, match="not listed"):
        parse_model(MODELS, "other-model")


def test_server_text_is_stored_masked_and_capped() -> None:
    echo = '# TYPE vllm:x_info gauge\nvllm:x_info{token="Bearer ' + KEY + '",long="' + "y" * 5000 + '"} 1.0\n'
    info = parse_engine_info(echo, secrets=(KEY,))["x"]
    assert KEY not in json.dumps(info) and len(info["long"]) == TEXT_MAX
    assert KEY not in parse_version(json.dumps({"version": f"0.1 {KEY}"}).encode(), secrets=(KEY,))
    assert len(parse_version(json.dumps({"version": "9" * 10_000}).encode())) == TEXT_MAX


# -- against a stub server ------------------------------------------------------------------------
class Stub:
    """A gevent WSGI server answering the recorded vLLM bodies; ``status`` overrides a path's answer."""

    def __init__(self) -> None:
        self.status: dict[str, int] = {}
        self.bodies = {"/version": VERSION, "/v1/models": MODELS, "/metrics": METRICS.encode()}
        self.seen: list[tuple[str, str | None]] = []
        self.server = WSGIServer(("127.0.0.1", 0), self.app, log=None, error_log=None)
        self.server.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"]
        self.seen.append((path, environ.get("HTTP_AUTHORIZATION")))
        status = self.status.get(path, 200 if path in self.bodies else 404)
        start_response(f"{status} X", [("Content-Type", "text/plain")])
        return [self.bodies.get(path, b"") if status == 200 else f"denied {KEY}".encode()]


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.server.stop()


def test_capture_reads_all_three_with_the_targets_authorization_and_stores_none_of_it(stub: Stub) -> None:
    entry = capture_target(stub.url + "/v1", model="tiny", authorization=f"Bearer {KEY}", secrets=(KEY,))
    assert entry["problems"] == []
    assert entry["server_version"] == json.loads(VERSION)["version"]
    assert entry["engine"] == full_parse_info(METRICS)
    assert entry["model"] == {"id": "tiny", "max_model_len": json.loads(MODELS)["data"][0]["max_model_len"]}
    assert entry["url"] == stub.url + "/v1"
    # each source was asked once, at the server's root (a /v1 base URL is the client's, not the server's)
    assert sorted(stub.seen) == sorted((p, f"Bearer {KEY}") for p in ("/version", "/v1/models", "/metrics"))
    assert KEY not in json.dumps(entry)


def test_credentials_in_the_url_are_not_stored(stub: Stub) -> None:
    url = stub.url.replace("http://", "http://ops:hunter22@")
    entry = capture_target(url, model="tiny", authorization="Basic b3BzOmh1bnRlcjIy", secrets=("hunter22",))
    assert "hunter22" not in json.dumps(entry) and entry["url"] == stub.url


def test_each_source_that_fails_is_one_line_and_the_others_still_count(stub: Stub) -> None:
    stub.status.update({"/version": 404, "/metrics": 401})
    entry = capture_target(stub.url, model="tiny", authorization=f"Bearer {KEY}", secrets=(KEY,))
    assert entry["problems"] == ["/version: HTTP 404", "/metrics: HTTP 401"]
    assert entry["server_version"] is None and entry["engine"] == {}
    assert entry["model"]["max_model_len"] == json.loads(MODELS)["data"][0]["max_model_len"]
    assert KEY not in json.dumps(entry)


def test_a_server_that_is_not_vllm_says_so(stub: Stub) -> None:
    stub.bodies.update({"/version": b"<html>hi</html>", "/metrics": b"# TYPE up gauge\nup 1\n",
                        "/v1/models": json.dumps({"data": [{"id": "tiny"}]}).encode()})  # fmt: skip
    entry = capture_target(stub.url, model="tiny")
    assert entry["model"] == {"id": "tiny", "max_model_len": None}  # a server that does not say (SGLang, TGI)
    assert [p.split(":")[0] for p in entry["problems"]] == ["/version", "/metrics"]
    assert entry["problems"][1] == "/metrics: no vllm:*_info gauges"


def test_a_refused_connection_is_a_line_per_source() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    entry = capture_target(f"http://127.0.0.1:{port}", model="tiny")
    assert entry["problems"] == [f"{p}: ConnectionRefusedError (Connection refused)"
                                 for p in ("/version", "/v1/models", "/metrics")]  # fmt: skip
    assert entry["model"] == {"id": "tiny", "max_model_len": None}


def test_a_server_that_never_answers_costs_one_timeout_for_all_sources() -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        t0 = gevent.get_hub().loop.now()
        entry = capture_target(f"http://127.0.0.1:{listener.getsockname()[1]}", model="tiny", timeout_s=0.3)
        gevent.get_hub().loop.update_now()
        took_s = gevent.get_hub().loop.now() - t0
    assert entry["problems"] == [f"{p}: no answer in 0.3 s (TimeoutError)" for p in ("/version", "/v1/models",
                                                                                      "/metrics")]  # fmt: skip
    assert took_s < 0.3 * 3  # read at once, not one after the other


def test_ab_targets_each_get_their_own_authorization_and_label(stub: Stub) -> None:
    other = Stub()
    try:
        other.bodies["/metrics"] = METRICS.replace('block_size="128"', 'block_size="16"', 1).encode()
        auth = {stub.url: "Bearer key-a", other.url: None}
        out = capture_deployment([("a", stub.url), ("b", other.url)], model_for=lambda url: "tiny",
                                 authorization_for=auth.get)  # fmt: skip
    finally:
        other.server.stop()
    assert set(out) == {"a", "b"}
    assert out["a"]["engine"]["cache_config"]["block_size"] == "128"
    assert out["b"]["engine"]["cache_config"]["block_size"] == "16"
    assert {a for _, a in stub.seen} == {"Bearer key-a"} and {a for _, a in other.seen} == {None}


def test_a_bug_in_the_capture_is_a_problem_line_not_a_failed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import tokenstorm.workloads.plugin.core.deployment as dep

    def broken(*_a: Any, **_kw: Any) -> dict[str, Any]:
        raise KeyError("boom")

    monkeypatch.setattr(dep, "capture_target", broken)
    out = capture_deployment([("", "http://127.0.0.1:9")], model_for=lambda url: None,
                             authorization_for=lambda url: None)  # fmt: skip
    assert out[""]["problems"] == ["capture failed (KeyError)"] and out[""]["url"] == "http://127.0.0.1:9"
