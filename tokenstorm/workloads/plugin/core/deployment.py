"""What served the run, read from the server at the run's start for ``run.json``'s ``deployment``.

Per target (label ``""`` in a one-target run): the server's version (``GET /version``), its engine
configuration (vLLM's ``vllm:<name>_info`` gauges on ``/metrics``: ``cache_config`` has the block size,
prefix caching, KV-cache dtype, GPU memory utilisation, number of blocks...) and the run's model with
its ``max_model_len`` (``GET /v1/models``) — captured, so a comparison of two runs can say that the
block size differed without anyone having typed it.

Read once, on the master or local runner, after the preflight and before any traffic, every fetch at
the same time with a short timeout: a source that does not answer is one line in ``problems`` (its HTTP
status or the error's class), never a failed run. Each request carries the target's own
``Authorization`` and nothing stores it; what the server says is kept as capped text with the run's
secrets masked (:func:`~tokenstorm.workloads.rundir.secrets.redact`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import gevent
from prometheus_client.parser import text_string_to_metric_families

from ...client.http import HttpConnection
from ...rundir.secrets import display_url, redact

if TYPE_CHECKING:  # importing Locust patches the process: this module stays importable without it
    from locust.env import Environment

    from .context import RunContext

__all__ = [
    "DEPLOYMENT_TIMEOUT_S",
    "capture_deployment",
    "capture_run_deployment",
    "capture_target",
    "parse_engine_info",
    "parse_model",
    "parse_version",
]

log = logging.getLogger("tokenstorm")

#: seconds each source may take (traffic waits for them: the three are read at once, per target too)
DEPLOYMENT_TIMEOUT_S = 2.0
#: a server's strings (version, label values, model id) are stored up to this many characters
TEXT_MAX = 200
#: at most this many info gauges, and labels per gauge, are kept (a server's /metrics is not ours to copy)
MAX_INFOS = 64
MAX_LABELS = 128
#: bodies are read up to this many bytes (vLLM's /metrics is ~50 KB)
_BODY_MAX = 8 * 2**20

_INFO_SAMPLE = re.compile(r"^vllm:([A-Za-z0-9_]+)_info$")

#: a GET: ``(url, authorization, timeout_s)`` -> the body; raises what went wrong (tests pass their own)
Fetch = Callable[[str, str | None, float], bytes]


class HttpStatusError(Exception):
    """A source answered with a status other than 200 (redirects are not followed: the Authorization
    header never goes where the user did not send it)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _get(url: str, authorization: str | None, timeout_s: float) -> bytes:
    """``GET url`` with the target's Authorization, on a connection of the load's own kind (same TLS,
    no proxy); the body, or the exception that says why not."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    conn = HttpConnection(
        parts.hostname or "",
        parts.port or (443 if https else 80),
        use_ssl=https,
        connect_timeout_s=timeout_s,
        read_timeout_s=timeout_s,
        kernel_timestamps=False,
    )
    headers = {"Accept": "application/json, text/plain"}
    if authorization:
        headers["Authorization"] = authorization
    try:
        with gevent.Timeout(timeout_s, TimeoutError):  # the whole exchange: a server that trickles is cut too
            resp = conn.request("GET", parts.path or "/", headers)
            if resp.status != 200:
                raise HttpStatusError(resp.status)
            return resp.read(_BODY_MAX)
    finally:
        conn.close()


def _problem(path: str, exc: BaseException, timeout_s: float, secrets: Iterable[str]) -> str:
    """One line for a source that could not be read: its HTTP status, else the error's class."""
    if isinstance(exc, HttpStatusError):
        return f"{path}: HTTP {exc.status}"
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError too
        return f"{path}: no answer in {timeout_s:g} s (TimeoutError)"
    detail = str(getattr(exc, "strerror", None) or "").strip()
    line = f"{path}: {type(exc).__name__}" + (f" ({detail})" if detail else "")
    return redact(line, secrets)[:TEXT_MAX]


def _text(value: Any, secrets: Iterable[str]) -> str:
    """A server's string as stored: masked, on one line, capped."""
    return redact(str(value), secrets).replace("\n", " ")[:TEXT_MAX]


def parse_version(body: bytes, secrets: Iterable[str] = ()) -> str:
    """``GET /version``'s ``{"version": "0.11.0"}`` -> ``"0.11.0"``; ``ValueError`` for anything else."""
    doc = json.loads(body)
    version = doc.get("version") if isinstance(doc, dict) else None
    if version in (None, ""):
        raise ValueError("no 'version' in the answer")
    return _text(version, secrets)


def parse_model(body: bytes, model: str | None, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The run's model entry of ``GET /v1/models`` (the first one when ``model`` is None): ``{"id",
    "max_model_len"}`` (None where the server does not say); ``ValueError`` when it is not listed."""
    doc = json.loads(body)
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ValueError("not an OpenAI model list")
    entries = [m for m in data if isinstance(m, dict) and "id" in m]
    entry = next((m for m in entries if model is None or str(m["id"]) == model), None)
    if entry is None:
        raise ValueError(f"model {model!r} is not listed" if model else "no model listed")
    length = entry.get("max_model_len")
    try:
        max_model_len = int(length) if length is not None and not isinstance(length, bool) else None
    except (TypeError, ValueError):
        max_model_len = None
    return {"id": _text(entry["id"], secrets), "max_model_len": max_model_len}


def _info_lines(text: str) -> str:
    """Only the ``vllm:*_info`` families of a /metrics text (the rest, ~50 KB, is not parsed)."""
    keep = []
    for line in text.split("\n"):  # not splitlines(): label values may hold U+2028 and the like
        name = line[7:] if line.startswith(("# TYPE ", "# HELP ")) else line
        if not name.startswith("vllm:"):
            continue
        ends = [i for i in (name.find("{"), name.find(" ")) if i >= 0]
        if name[: min(ends) if ends else len(name)].endswith("_info"):
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse_engine_info(text: str, secrets: Iterable[str] = ()) -> dict[str, dict[str, str]]:
    """Every ``vllm:<name>_info`` gauge of a /metrics text as ``{name: {label: value}}`` (the first
    engine's, where several engines each expose one); ``ValueError`` when it is not Prometheus text."""
    engine: dict[str, dict[str, str]] = {}
    for family in text_string_to_metric_families(_info_lines(text)):
        for sample in family.samples:
            match = _INFO_SAMPLE.match(sample.name)
            if match is None or match[1] in engine or len(engine) >= MAX_INFOS:
                continue
            labels = sorted(sample.labels.items())[:MAX_LABELS]
            engine[match[1]] = {_text(k, secrets): _text(v, secrets) for k, v in labels}
    return engine


def capture_target(
    base_url: str,
    *,
    model: str | None,
    authorization: str | None = None,
    secrets: Iterable[str] = (),
    timeout_s: float = DEPLOYMENT_TIMEOUT_S,
    get: Fetch = _get,
) -> dict[str, Any]:
    """One target's ``deployment`` entry: ``{"url", "server_version", "engine", "model", "problems"}``.
    Its three sources are read at once; none of them failing raises."""
    secrets = tuple(secrets)
    parts = urlsplit(display_url(base_url).rstrip("/"))  # user:password@ travels in `authorization`
    prefix = parts.path.rstrip("/")
    prefix = prefix[: -len("/v1")] if prefix.endswith("/v1") else prefix  # as the client reaches /v1/...
    root = f"{parts.scheme}://{parts.netloc}{prefix}"
    paths = ("/version", "/v1/models", "/metrics")
    jobs = {path: gevent.spawn(_attempt, get, root + path, authorization, timeout_s) for path in paths}
    gevent.joinall(list(jobs.values()))
    entry: dict[str, Any] = {
        "url": display_url(base_url),
        "server_version": None,
        "engine": {},
        "model": {"id": _text(model, secrets) if model else None, "max_model_len": None},
        "problems": [],
    }
    parsers: dict[str, Callable[[bytes], None]] = {
        "/version": lambda body: entry.update(server_version=parse_version(body, secrets)),
        "/v1/models": lambda body: entry.update(model=parse_model(body, model, secrets)),
        "/metrics": lambda body: entry.update(engine=parse_engine_info(body.decode("utf-8", "replace"), secrets)),
    }
    for path in paths:
        body, error = jobs[path].value
        if error is not None or body is None:
            entry["problems"].append(_problem(path, error or TimeoutError(), timeout_s, secrets))
            continue
        try:
            parsers[path](body)
        except (ValueError, UnicodeDecodeError, AttributeError, TypeError, KeyError) as exc:
            entry["problems"].append(_text(f"{path}: {exc}", secrets))
            continue
        if path == "/metrics" and not entry["engine"]:
            entry["problems"].append("/metrics: no vllm:*_info gauges")
    return entry


def _attempt(
    get: Fetch, url: str, authorization: str | None, timeout_s: float
) -> tuple[bytes | None, BaseException | None]:
    """``get``'s body, or what it raised: a greenlet that dies of an exception has gevent print its
    traceback, and a missing /version is no reason for one."""
    try:
        return get(url, authorization, timeout_s), None
    except Exception as exc:  # HttpStatusError, TimeoutError, OSError (refused, DNS, TLS), ProtocolError
        return None, exc


def capture_deployment(
    targets: Iterable[tuple[str, str]],
    *,
    model_for: Callable[[str], str | None],
    authorization_for: Callable[[str], str | None],
    secrets: Iterable[str] = (),
    timeout_s: float = DEPLOYMENT_TIMEOUT_S,
    get: Fetch = _get,
) -> dict[str, dict[str, Any]]:
    """``run.json``'s ``deployment``: label -> :func:`capture_target` of each ``(label, url)``, all at once."""
    secrets = tuple(secrets)
    targets = list(targets)
    jobs = {
        label: gevent.spawn(
            _capture_or_say,
            url,
            model=model_for(url),
            authorization=authorization_for(url),
            secrets=secrets,
            timeout_s=timeout_s,
            get=get,
        )
        for label, url in targets
    }
    gevent.joinall(list(jobs.values()))
    return {label: job.value for label, job in jobs.items()}


def _capture_or_say(url: str, **kw: Any) -> dict[str, Any]:
    """:func:`capture_target`, and a bug in it a problem line: metadata never costs the run."""
    try:
        return capture_target(url, **kw)
    except Exception as exc:
        log.exception("tokenstorm: BUG — capturing the deployment of %s failed; the run goes on", display_url(url))
        return {
            "url": display_url(url),
            "server_version": None,
            "engine": {},
            "model": {},
            "problems": [f"capture failed ({type(exc).__name__})"],
        }


def capture_run_deployment(environment: Environment, ctx: RunContext) -> dict[str, dict[str, Any]]:
    """What served this run, per target, for ``run.json`` (master / local runner, before traffic)."""
    from ..users.workload import run_targets  # Locust's side: imported only where Locust runs

    targets = [(label, url) for label, url in run_targets(environment, environment.host) if url]
    ab = bool(ctx.options.targets)

    def model_for(url: str) -> str | None:
        return ctx.options.model or ctx.models.get(url.rstrip("/") if ab else "") or None

    deployment = capture_deployment(
        targets, model_for=model_for, authorization_for=ctx.authorization_for, secrets=ctx.secrets()
    )
    for label, entry in deployment.items():
        if entry["problems"]:
            log.info(
                "tokenstorm: deployment metadata%s incomplete: %s",
                f" of target {label}" if label else "",
                "; ".join(entry["problems"]),
            )
    return deployment
