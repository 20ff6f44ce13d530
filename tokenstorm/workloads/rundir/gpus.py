"""``gpus.json``: which GPUs the run's GPU monitor saw — name, total memory, driver — written once.

The monitor (``monitors``, local NVML / nvidia-smi or a GPU sidecar's ``/info``) writes it when it
first reads the GPUs; the plugin copies it into ``run.json``'s ``gpus`` at the end of the run. A run
whose monitor wrote none (an older sidecar) still gets each GPU's name and memory from the first
samples of ``gpu.jsonl``, without the driver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .meta import GPU_FILE, write_json_atomic

__all__ = ["GPUS_FILE", "gpu_identity", "read_gpus", "write_gpus"]

GPUS_FILE = "gpus.json"
#: a GPU name or driver version is the driver's text: stored capped
_TEXT_MAX = 200
#: a sidecar answers for one host; more GPUs than any box holds means the file is not what it seems
_MAX_GPUS = 256


def gpu_identity(index: Any, name: Any, memory_total_mib: Any, driver: Any) -> dict[str, Any]:
    """One ``gpus`` entry, typed as run.json has it: ``{"index", "name", "memory_total_mib", "driver"}``."""
    try:
        memory = float(memory_total_mib) if memory_total_mib is not None else None
    except (TypeError, ValueError):
        memory = None
    return {
        "index": int(index),
        "name": str(name or "")[:_TEXT_MAX],
        "memory_total_mib": memory,
        "driver": str(driver)[:_TEXT_MAX] if driver else None,
    }


def write_gpus(run_dir: Path, gpus: list[dict[str, Any]]) -> None:
    """Write ``gpus.json`` (a list of :func:`gpu_identity` entries) atomically."""
    write_json_atomic(run_dir / GPUS_FILE, {"gpus": gpus[:_MAX_GPUS]})


def read_gpus(run_dir: Path | str) -> list[dict[str, Any]]:
    """The GPUs of ``run_dir``: ``gpus.json``, else each GPU's first sample in ``gpu.jsonl`` (no driver);
    ``[]`` when neither says anything (no GPU monitor, no GPU)."""
    run_dir = Path(run_dir)
    try:
        doc = json.loads((run_dir / GPUS_FILE).read_text(encoding="utf-8"))
        rows = doc.get("gpus") if isinstance(doc, dict) else None
        if isinstance(rows, list):
            return [
                gpu_identity(r["index"], r.get("name"), r.get("memory_total_mib"), r.get("driver"))
                for r in rows[:_MAX_GPUS]
                if isinstance(r, dict) and "index" in r
            ]
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return _from_samples(run_dir / GPU_FILE)


def _from_samples(path: Path) -> list[dict[str, Any]]:
    """Each GPU's name and memory from its first sample; stops at the first GPU seen twice (a poll
    writes every GPU once), so a day-long ``gpu.jsonl`` costs a few lines."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                    key = (str(row.get("host", "")), int(row["gpu"]))
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a gap line, a torn one
                if key in seen or len(seen) >= _MAX_GPUS:
                    break
                seen[key] = gpu_identity(key[1], row.get("name"), row.get("mem_total_mib"), None)
    except OSError:
        return []
    return [seen[k] for k in sorted(seen)]
