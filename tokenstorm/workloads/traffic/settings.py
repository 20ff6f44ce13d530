"""Workload settings from the command line / web UI, overridden by a workload file.

A workload file (``--workload-file mix.yaml``) defines a mix without code::

    workloads:
      contract: {weight: 1, prompt_tokens: "uniform:4000-16000", output_tokens: 512,
                 shared_prefix: 0.8, languages: [zh]}
      code:     {weight: 3, endpoint: completions, output_tokens: "uniform:16-64"}
      chat:     {weight: 2, dataset: my_sharegpt.json, thinking: "on", turns: 4}
      agent:    {weight: 1, profiles: [coding], tool_choice: required, steps: "uniform:4-12",
                 tool_result_tokens: {read_file: "lognormal:3000,0.5"}, api: messages}

Every workload takes ``api: chat|completions|messages|responses`` (the run's ``--api`` otherwise).

Any workload may add users' own checks of its answers, ``checks: ["mychecks:no_apology"]``
(:mod:`.user_checks`), loaded with the file.

It is validated before any traffic; an error names the file, the line and the reason (a binary
file: its first byte that is not UTF-8 text; a leading BOM is allowed). Each
traffic model accepts only the settings it uses (``TrafficModel.settings``) and its own
(``TrafficModel.own_settings``, parsed by the model).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from .base import WorkloadSettings
from .datasets import read_text_file
from .durations import parse_duration_range
from .lengths import LengthDist
from .models import MODELS
from .user_checks import load_user_check, user_check_search_path

__all__ = ["WorkloadFileError", "apply_workload_file", "default_settings", "named_workloads", "settings_from_options"]


_YAML = "a workload file is YAML"
#: what a workload's ``api:`` (and ``--api``) may name
APIS = ("chat", "completions", "messages", "responses")


class WorkloadFileError(ValueError):
    """An invalid workload file or option; ``str()`` is ``FILE:LINE: reason`` or ``--option: reason``."""


def default_settings() -> dict[str, WorkloadSettings]:
    """Every registered traffic model's defaults."""
    return {name: model.defaults for name, model in MODELS.items()}


def _convert(name: str, value: Any) -> Any:
    if name in ("prompt_tokens", "output_tokens"):
        return LengthDist.parse(value)
    if name == "weight":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError("weight must be a whole number >= 0")
        return value
    if name == "shared_prefix":
        v = float(value)
        if not 0 <= v <= 1:
            raise ValueError("shared_prefix is a share between 0 and 1")
        return v
    if name in ("languages", "skills"):
        raw_items = value if isinstance(value, list) else str(value).split(",")
        items = tuple(str(x).strip() for x in raw_items if str(x).strip())
        allowed = ("en", "zh") if name == "languages" else ("complete", "unit_test", "bug_find")
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise ValueError(f"{name} must be a list of {', '.join(allowed)}")
        return items
    if name == "api":
        if value not in APIS:
            raise ValueError(f"api must be one of {', '.join(APIS)}")
        return value
    if name == "endpoint":
        if value not in ("chat", "completions", "both"):
            raise ValueError("endpoint must be chat, completions or both")
        return value
    if name == "turns":
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError("turns must be a whole number >= 1")
        return value
    if name in ("think_time_s", "wait_s"):
        return parse_duration_range(value)  # 1-5, 30s-2m: durations as every option takes them
    if name == "thinking":
        word = "on" if value is True else "off" if value is False else str(value or "")
        if word not in ("", "on", "off"):
            raise ValueError("thinking must be on, off or empty")
        return word
    if name == "dataset":
        return str(value) if value else None
    raise ValueError(f"unknown setting {name!r}")


def _set(workload: str, settings: WorkloadSettings, name: str, value: Any) -> WorkloadSettings:
    """``settings`` with ``name`` set from ``value``: one of the model's own settings, else a shared field."""
    own = MODELS[workload].with_setting(settings, name, value)
    return own if own is not None else replace(settings, **{name: _convert(name, value)})


def settings_from_options(opts: Any) -> dict[str, WorkloadSettings]:
    """Settings for every workload: defaults < options < weights option/env < workload file."""
    settings = default_settings()
    for workload, model in MODELS.items():
        for option in model.options:
            attr = option.dest(workload)
            value = getattr(opts, attr, None)
            if value in (None, "", 0):
                continue
            try:
                settings[workload] = _set(workload, settings[workload], option.setting, value)
            except ValueError as exc:
                raise WorkloadFileError(f"--{attr.replace('_', '-')}: {exc}") from None
    weights = getattr(opts, "weights", "") or os.environ.get("TOKENSTORM_WEIGHTS", "")
    if weights:
        for item in str(weights).split(","):
            name, _, w = item.partition("=")
            name = name.strip()
            if name not in settings or not w.strip().isdigit():
                raise WorkloadFileError(
                    f"--weights: {item!r} is not WORKLOAD=N with WORKLOAD one of {', '.join(MODELS)}"
                )
            settings[name] = replace(settings[name], weight=int(w))
    path = getattr(opts, "workload_file", "") or ""
    if path:
        locustfiles = [Path(f) for f in str(getattr(opts, "locustfile", "") or "").split(",") if f.strip()]
        settings = apply_workload_file(Path(path), settings, locustfiles)
    return settings


def named_workloads(opts: Any) -> dict[str, str]:
    """The workloads the run's options ask for by name, each with where: ``--weights`` /
    ``$TOKENSTORM_WEIGHTS`` with a weight above 0, the workload file's ``workloads:``, or one of the workload's
    own options (``--agent-steps``). A workload asked for by name is never left out quietly."""
    named: dict[str, str] = {}
    for workload, model in MODELS.items():
        for option in model.options:
            if getattr(opts, option.dest(workload), None) not in (None, "", 0):
                named.setdefault(workload, f"--{option.dest(workload).replace('_', '-')}")
    weights, where = getattr(opts, "weights", "") or "", "--weights"
    if not weights:
        weights, where = os.environ.get("TOKENSTORM_WEIGHTS", ""), "$TOKENSTORM_WEIGHTS"
    for item in str(weights or "").split(","):
        name, _, w = (part.strip() for part in item.partition("="))
        if name in MODELS and w.isdigit() and int(w) > 0:
            named[name] = f"{where} {name}={w}"
    path = getattr(opts, "workload_file", "") or ""
    if path:
        try:
            doc = yaml.safe_load(read_text_file(Path(path), WorkloadFileError, "workload file", _YAML))
        except (yaml.YAMLError, WorkloadFileError):
            doc = None  # settings_from_options says what is wrong with it
        workloads = doc.get("workloads") if isinstance(doc, dict) else None
        for name, conf in workloads.items() if isinstance(workloads, dict) else ():
            if name in MODELS and not (isinstance(conf, dict) and conf.get("weight") == 0):
                named[str(name)] = f"the workload file {path}"
    return named


def apply_workload_file(
    path: Path, settings: dict[str, WorkloadSettings], locustfiles: list[Path] | None = None
) -> dict[str, WorkloadSettings]:
    """Override ``settings`` from a workload file; validate everything first. ``locustfiles``: the run's, whose
    folders users' own checks (``checks:``) are imported from too."""
    text = read_text_file(path, WorkloadFileError, "workload file", _YAML)
    try:
        root = yaml.compose(text)
    except yaml.reader.ReaderError as exc:  # a control character: not a text file
        line, char = text.count("\n", 0, exc.position) + 1, exc.character
        raise WorkloadFileError(f"{path}:{line}: not text (control character 0x{char:02x}) — {_YAML}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise WorkloadFileError(f"{path}:{mark.line + 1 if mark else 1}: not valid YAML") from None
    keys = [k.value for k, _ in root.value] if isinstance(root, yaml.MappingNode) else []
    if root is None or not keys or not set(keys) <= {"workloads", "targets"} or len(set(keys)) != len(keys):
        raise WorkloadFileError(f"{path}:1: expected the top-level keys 'workloads' (and 'targets' for A/B runs)")
    out = dict(settings)
    if "workloads" not in keys:
        return out  # only targets (read with the run's options)
    body = next(v for k, v in root.value if k.value == "workloads")
    if not isinstance(body, yaml.MappingNode):
        raise WorkloadFileError(f"{path}:{body.start_mark.line + 1}: 'workloads' maps names to settings")
    for name_node, conf in body.value:
        name = name_node.value if isinstance(name_node, yaml.ScalarNode) else None
        if name not in out:
            raise WorkloadFileError(
                f"{path}:{name_node.start_mark.line + 1}: unknown workload{_named(name, MODELS)} "
                f"(known: {', '.join(MODELS)})"
            )
        if not isinstance(conf, yaml.MappingNode):
            raise WorkloadFileError(f"{path}:{conf.start_mark.line + 1}: {name}: expected key: value settings")
        known = MODELS[name].setting_names() | {"checks", "api"}
        for key_node, value_node in conf.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise WorkloadFileError(f"{path}:{line}: {name}: a setting's name is a word, e.g. weight: 1")
            key = {"think_time": "think_time_s", "wait": "wait_s"}.get(key_node.value, key_node.value)
            if key == "checks":
                out[name] = replace(out[name], checks=_user_checks(path, name, line, value_node, locustfiles or []))
                continue
            if key not in known:
                raise WorkloadFileError(
                    f"{path}:{line}: {name}: unknown setting{_named(key_node.value, known)} "
                    f"(settings of {name}: {', '.join(sorted(known))})"
                )
            value = _plain_value(path, value_node, f"{name}.{key_node.value}")
            try:
                own = MODELS[name].with_setting(out[name], key, value)
                converted: Any = _convert(key, value) if own is None else None
            except ValueError as exc:
                raise WorkloadFileError(f"{path}:{line}: {name}.{key_node.value}: {_unquoted(exc)}") from None
            if own is not None:
                out[name] = own
                continue
            if (
                key == "dataset"
                and converted
                and not (path.parent / converted).exists()
                and not Path(converted).exists()
            ):
                raise WorkloadFileError(
                    f"{path}:{line}: {name}.dataset: no such file (from the workload file's folder or the working one)"
                )
            if key == "dataset" and converted and not Path(converted).is_absolute():
                candidate = path.parent / converted
                converted = str(candidate) if candidate.exists() else converted
            out[name] = replace(out[name], **{key: converted})
    return out


def _named(name: str | None, known: Iterable[str]) -> str:
    """`` — did you mean NAME?`` with the known name nearest ``name``, for an error line: the file's own text is
    never repeated (a file given by mistake, or named in the web form, may hold anything)."""
    near = difflib.get_close_matches(str(name), sorted(known), n=1) if name is not None else []
    return f" — did you mean {near[0]}?" if near else ""


def _unquoted(exc: Exception) -> str:
    """A setting's error with the value it quotes (the file's own text) left out."""
    return re.sub(r",? ?\(?(not )?('[^']*'|\"[^\"]*\")\)?", "", str(exc))


def _plain_value(path: Path, node: yaml.Node, where: str) -> Any:
    """The value of ``node`` (a number, a word, a list or mapping of them); a YAML tag that builds anything else
    (``!!python/name:...``, a list as a mapping key) is a :class:`WorkloadFileError` at its line."""
    try:
        return yaml.safe_load(yaml.serialize(node))
    except yaml.YAMLError:
        line = node.start_mark.line + 1
        raise WorkloadFileError(
            f"{path}:{line}: {where}: not a plain value (numbers, words, lists; no YAML tags)"
        ) from None


def _user_checks(path: Path, workload: str, line: int, node: yaml.Node, locustfiles: list[Path]) -> tuple[Any, ...]:
    """A workload's ``checks:`` (a list of ``module:function``, or one), each loaded; the error names its line."""
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if not isinstance(node, (yaml.SequenceNode, yaml.ScalarNode)):
        raise WorkloadFileError(
            f"{path}:{line}: {workload}.checks: expected a list of module:function, e.g. [mychecks:no_apology]"
        )
    user_check_search_path(path, locustfiles)
    checks: list[Any] = []
    for item in items:
        entry = _plain_value(path, item, f"{workload}.checks")
        try:
            checks.append(load_user_check(entry, {c.check_name for c in checks}))
        except ValueError as exc:
            raise WorkloadFileError(f"{path}:{item.start_mark.line + 1}: {workload}.checks: {exc}") from None
    return tuple(checks)
