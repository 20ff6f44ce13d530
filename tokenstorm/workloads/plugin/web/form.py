"""The web UI start form's tokenstorm fields: grouped by topic, with their full help, and only the
ones the locustfile can use (a load shape's options only with that shape, a workload's only with
its users).

Locust renders custom arguments as one alphabetical list (its page sorts the template's keys),
each labelled "Name (help)" in a one-line field label that cuts long help with "…". So the fields
Locust renders are filtered here, their labels keep only the name, and ``webui_form.js`` orders
them under one heading per topic with each field's help in full below it (from :func:`form_layout`,
served as JSON). Without that script the form still works: the fields, in Locust's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...traffic.models import MODELS
from ..core.flags import TOPICS, topic_of
from ..core.options import OPTION_DESTS

if TYPE_CHECKING:  # importing Locust patches the process: this module stays importable without it
    from locust.env import Environment

__all__ = ["GROUPS", "form_layout", "group_of", "relevant", "shown_options", "trim_extra_options", "user_classes"]

#: the form's topics, in order: (title, option dests) — the topics ``tokenstorm --help`` lists (flags.TOPICS)
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (topic.title, tuple(f.dest for f in topic.flags if not f.locust)) for topic in TOPICS
)
_OTHER = "Other options"
#: tokenstorm's options Locust renders in the start form (``web_ui``), before :func:`relevant` trims them
_OFFERED = frozenset(f.dest for topic in TOPICS for f in topic.flags if f.web_ui and not f.locust)

#: each workload's own options (``--chat-turns``, ``--dataset``...): dest -> workload
_WORKLOAD_OF = {
    (f"{name}_{o.flag}" if o.prefixed else o.flag).replace("-", "_"): name
    for name, m in MODELS.items()
    for o in m.options
}
#: the options of one load shape (by its class name), shown only when the locustfile has it
_SHAPE_OF = {
    "steps": "StepShape",
    **{d: "CapacitySearchShape" for d in ("capacity_start", "capacity_step", "capacity_step_time", "capacity_max")},
    **{d: "SweepShape" for d in ("sweep_levels", "sweep_level_time", "sweep_count", "sweep_max_users")},
}
_OPEN_LOOP_ONLY = frozenset({"arrival_rate", "arrival"})
_TRACE_ONLY = frozenset({"trace", "trace_speed", "trace_block_size"})


def group_of(dest: str) -> str:
    """The form topic of option ``dest`` (not one of tokenstorm's: Other options)."""
    return topic_of(dest) or _OTHER


def _classes(environment: Environment) -> tuple[list[Any], set[str]]:
    """The user classes and the load shapes' class names the run can use (with Locust's class picker:
    every one offered)."""
    users = list(environment.user_classes or []) + list((environment.available_user_classes or {}).values())
    shapes = {type(environment.shape_class).__name__} if environment.shape_class is not None else set()
    for name, shape in (environment.available_shape_classes or {}).items():
        shapes |= {name, type(shape).__name__}
    return users, shapes


def shown_options(environment: Environment) -> set[str]:
    """tokenstorm's options the start form shows for this locustfile: each takes effect when a run starts
    from the form; the others are set when tokenstorm starts."""
    users, shapes = _classes(environment)
    return {dest for dest in _OFFERED if relevant(dest, users, shapes)}


def user_classes(environment: Environment) -> list[Any]:
    """The user classes a run from the form can use (with Locust's class picker: every one offered)."""
    return _classes(environment)[0]


def relevant(dest: str, users: Iterable[Any], shapes: set[str]) -> bool:
    """Whether the form offers option ``dest`` for a locustfile with these user classes and shapes."""
    users = list(users)
    open_loop = any(getattr(u, "open_loop", False) for u in users)
    if dest in _SHAPE_OF:
        return _SHAPE_OF[dest] in shapes
    if dest in _OPEN_LOOP_ONLY:
        return open_loop
    if dest in _TRACE_ONLY:
        return any(getattr(u, "trace_replay", False) for u in users)
    if dest == "wait_time":  # the pause between a closed-loop user's sessions
        return any(
            getattr(u, "workload", None)
            and not getattr(u, "open_loop", False)
            and not getattr(u, "trace_replay", False)
            for u in users
        )
    if dest in _WORKLOAD_OF:  # an open-loop user draws every weighted workload
        return open_loop or any(getattr(u, "workload", None) == _WORKLOAD_OF[dest] for u in users)
    return True


def trim_extra_options(environment: Environment, extra: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Locust's ``extra_options`` for the start form: tokenstorm's fields this locustfile can use, each
    labelled by its name alone (``webui_form.js`` puts the help in full below it)."""
    users, shapes = _classes(environment)
    out = {}
    for dest, spec in extra.items():
        if dest not in OPTION_DESTS:
            out[dest] = spec  # another plugin's field: as Locust renders it
        elif relevant(dest, users, shapes):
            out[dest] = {**spec, "help_text": None}
    return out


def form_layout(environment: Environment, helps: dict[str, str | None]) -> dict[str, Any]:
    """What ``webui_form.js`` needs: the topics in order, each with its fields (dest, flag, help)."""
    users, shapes = _classes(environment)
    groups: dict[str, list[dict[str, str]]] = {title: [] for title, _ in GROUPS}
    order = {d: i for _, dests in GROUPS for i, d in enumerate(dests)}
    for dest in sorted(helps, key=lambda d: (order.get(d, len(order)), d)):
        if dest in OPTION_DESTS and not relevant(dest, users, shapes):
            continue
        help_text = (helps[dest] or "") if dest in OPTION_DESTS else ""  # another plugin's label has its help
        groups.setdefault(group_of(dest), []).append(
            {"dest": dest, "flag": "--" + dest.replace("_", "-"), "help": help_text}
        )
    return {"groups": [{"title": t, "fields": f} for t, f in groups.items() if f]}
