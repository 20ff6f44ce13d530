"""The report's header: every target named, and the deployment run.json captured from each server
(``RunMeta.deployment``: server version, vLLM engine configuration, the model's max_model_len) and
the GPUs the sidecar saw (``RunMeta.gpus``). Nothing is shown where nothing was captured.

Everything here is the server's own text, shown as received: the template escapes it (autoescape).
run.json is read defensively — a hand-edited or future file must not break the page.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tokenstorm.workloads.rundir import RunMeta

__all__ = ["DeploymentView", "deployment_views", "gpu_lines", "report_title", "target_names"]

#: the engine settings that change a serving benchmark's result, first: (cache_config label, shown as)
_CACHE_HIGHLIGHTS = (
    ("block_size", "block size"),
    ("enable_prefix_caching", "prefix caching"),
    ("cache_dtype", "KV cache dtype"),
    ("gpu_memory_utilization", "GPU memory utilisation"),
    ("kv_cache_size_tokens", "KV cache tokens"),
    ("num_gpu_blocks", "GPU blocks"),
)

_ON_OFF = {"True": "on", "False": "off", "true": "on", "false": "off"}


@dataclass
class DeploymentView:
    """One target's deployment as the header shows it."""

    label: str  # "" in a one-target run
    url: str
    server_version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    #: the cache settings named in _CACHE_HIGHLIGHTS that the server reported, in that order
    highlights: list[tuple[str, str]] = field(default_factory=list)
    #: every info gauge: (name, [(label, value)]) — shown folded
    engine: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def captured(self) -> bool:
        """Whether anything of the server was read."""
        return bool(self.server_version or self.model or self.max_model_len or self.engine)


def target_names(meta: RunMeta) -> list[tuple[str, str]]:
    """(label, url) of every target: an A/B run's in the order given, else ("", the one target)."""
    named = [(str(t.get("label") or ""), str(t.get("url") or "")) for t in meta.targets if isinstance(t, dict)]
    return [n for n in named if n[0]] or [("", str(meta.target or ""))]


def report_title(meta: RunMeta, run_name: str) -> str:
    """``model @ target — run dir``; an A/B run names every target (label and URL)."""
    targets = target_names(meta)
    where = (
        ", ".join(f"{label} ({url})" if url else label for label, url in targets)
        if targets[0][0]
        else targets[0][1] or "?"
    )
    return f"{meta.model or '?'} @ {where} — {run_name}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _readable(value: str) -> str:
    """A gauge label's value as a reader expects it: True/False as on/off, big counts with separators."""
    if value in _ON_OFF:
        return _ON_OFF[value]
    return f"{int(value):,}" if value.isdigit() and len(value) > 4 else value


def _view(label: str, url: str, doc: Any) -> DeploymentView:
    view = DeploymentView(label, url)
    if not isinstance(doc, dict):
        return view
    view.url = _text(doc.get("url") or url)
    version = doc.get("server_version")
    view.server_version = None if version in (None, "") else _text(version)
    model = doc.get("model")
    if isinstance(model, dict):
        view.model = None if model.get("id") in (None, "") else _text(model.get("id"))
        length = model.get("max_model_len")
        view.max_model_len = length if isinstance(length, int) and not isinstance(length, bool) else None
    engine = doc.get("engine")
    if isinstance(engine, dict):
        for name, labels in sorted(engine.items()):
            if isinstance(labels, dict):
                view.engine.append((_text(name), [(_text(k), _text(v)) for k, v in sorted(labels.items())]))
        cache = engine.get("cache_config")
        if isinstance(cache, dict):
            shown = [
                (name, _text(cache[key])) for key, name in _CACHE_HIGHLIGHTS if cache.get(key) not in (None, "", "None")
            ]
            view.highlights = [(name, _readable(value)) for name, value in shown]
    problems = doc.get("problems")
    if isinstance(problems, list):
        view.problems = [_text(p) for p in problems]
    return view


def deployment_views(meta: RunMeta) -> list[DeploymentView]:
    """Each target's captured deployment (empty when run.json has none)."""
    deployment = meta.deployment if isinstance(meta.deployment, dict) else {}
    if not deployment:
        return []
    views = [_view(label, url, deployment.get(label)) for label, url in target_names(meta)]
    known = {label for label, _ in target_names(meta)}
    views += [_view(str(label), "", doc) for label, doc in deployment.items() if label not in known]
    return [v for v in views if v.captured or v.problems]


def gpu_lines(meta: RunMeta) -> list[str]:
    """The sidecar's GPUs, identical ones counted: ``2 × NVIDIA H100 80GB HBM3 — 81,559 MiB, driver 550.54``."""
    gpus = meta.gpus if isinstance(meta.gpus, list) else []
    kinds: Counter[tuple[str, str, str]] = Counter()
    for g in gpus:
        if not isinstance(g, dict):
            continue
        memory = g.get("memory_total_mib")
        mib = f"{float(memory):,.0f} MiB" if isinstance(memory, int | float) and not isinstance(memory, bool) else ""
        driver = g.get("driver")
        kinds[(_text(g.get("name") or "GPU"), mib, "" if driver in (None, "") else f"driver {_text(driver)}")] += 1
    return [
        f"{n} × {name}" + (" — " + ", ".join(x for x in (mib, driver) if x) if mib or driver else "")
        for (name, mib, driver), n in kinds.items()
    ]
