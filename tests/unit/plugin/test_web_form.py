"""The web UI start form's tokenstorm fields: every option has a topic, a load shape's options are
offered only with that shape (and a workload's only with its users), and the labels Locust renders
keep only the name (the full help is laid out below each field)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tokenstorm.workloads.plugin.core.flags import MONITORS, OUTPUT, SHAPES, TARGET, TOPICS, VERDICT, WORKLOADS
from tokenstorm.workloads.plugin.core.options import OPTION_DESTS
from tokenstorm.workloads.plugin.web.form import GROUPS, form_layout, group_of, trim_extra_options

SHAPE_FIELDS = {"steps", "capacity_start", "capacity_step", "capacity_step_time", "capacity_max", "sweep_levels",
                "sweep_level_time", "sweep_count", "sweep_max_users"}  # fmt: skip


class SweepShape:  # the class names the form goes by (tokenstorm's shapes import Locust)
    pass


class CapacitySearchShape:
    pass


def user(workload: str | None = None, open_loop: bool = False, trace_replay: bool = False) -> type:
    return type("U", (), {"workload": workload, "open_loop": open_loop, "trace_replay": trace_replay})


def env(users: list[type], shape: Any = None) -> Any:
    return SimpleNamespace(user_classes=users, available_user_classes={}, shape_class=shape,
                           available_shape_classes={})  # fmt: skip


def extra() -> dict[str, dict[str, Any]]:
    """Locust's extra_options: every tokenstorm option, and one of another plugin."""
    out = {d: {"default_value": "", "help_text": f"help of {d}", "choices": None} for d in sorted(OPTION_DESTS)}
    out["other_plugin_flag"] = {"default_value": "", "help_text": "theirs", "choices": None}
    return out


MIXED = [user("chat"), user("code"), user("contract")]


def test_every_tokenstorm_option_has_a_topic_shared_with_the_commands_help() -> None:
    assert {d: group_of(d) for d in OPTION_DESTS if group_of(d) == "Other options"} == {}
    assert {d: group_of(d) for d in ("chat_turns", "sweep_levels", "gpu_monitor")} == {
        "chat_turns": WORKLOADS.title, "sweep_levels": SHAPES.title, "gpu_monitor": MONITORS.title}  # fmt: skip
    assert [t for t, _ in GROUPS] == [t.title for t in TOPICS]


def test_mixed_shows_no_shape_field_and_labels_keep_only_the_name() -> None:
    trimmed = trim_extra_options(env(MIXED), extra())
    assert not SHAPE_FIELDS & set(trimmed) and "arrival_rate" not in trimmed  # no shape, no open-loop users
    assert {"warmup", "wait_time", "chat_turns", "code_endpoint", "contract_languages", "slo"} <= set(trimmed)
    assert all(spec["help_text"] is None for d, spec in trimmed.items() if d in OPTION_DESTS)
    assert trimmed["other_plugin_flag"]["help_text"] == "theirs"  # another plugin's field: as Locust has it


@pytest.mark.parametrize(
    ("shape", "shown"),
    [(SweepShape(), {"sweep_levels", "sweep_level_time", "sweep_count", "sweep_max_users"}),
     (CapacitySearchShape(), {"capacity_start", "capacity_step", "capacity_step_time", "capacity_max"})],
)  # fmt: skip
def test_a_shape_brings_its_own_fields_only(shape: Any, shown: set[str]) -> None:
    assert SHAPE_FIELDS & set(trim_extra_options(env(MIXED, shape), extra())) == shown


def test_open_loop_gets_arrivals_and_every_workload_but_no_wait_time_and_a_single_workload_only_its_own() -> None:
    trimmed = set(trim_extra_options(env([user(open_loop=True)]), extra()))
    assert {"arrival_rate", "arrival", "chat_turns", "contract_shared_prefix"} <= trimmed
    assert "wait_time" not in trimmed
    chat = set(trim_extra_options(env([user("chat")]), extra()))
    assert "chat_turns" in chat and "dataset" in chat and not {"code_endpoint", "contract_languages"} & chat


def test_a_trace_replay_gets_its_trace_fields_and_no_arrivals_or_wait_and_nobody_else_gets_them() -> None:
    fields = {"trace", "trace_speed", "trace_block_size"}
    trimmed = set(trim_extra_options(env([user("trace", trace_replay=True)]), extra()))
    assert fields <= trimmed and not {"arrival_rate", "wait_time", "chat_turns"} & trimmed
    for users in (MIXED, [user(open_loop=True)]):
        assert not fields & set(trim_extra_options(env(users), extra()))


def test_the_layout_holds_every_offered_field_once_with_its_full_help_under_its_topic() -> None:
    environment = env(MIXED)
    helps = {d: s["help_text"] for d, s in extra().items()}
    layout = form_layout(environment, helps)
    fields = [(g["title"], f) for g in layout["groups"] for f in g["fields"]]
    assert sorted(f["dest"] for _, f in fields) == sorted(trim_extra_options(environment, extra()))
    by_dest = {f["dest"]: (title, f) for title, f in fields}
    assert by_dest["max_tokens"][1] == {"dest": "max_tokens", "flag": "--max-tokens", "help": "help of max_tokens"}
    assert by_dest["gpu_monitor"][0] == MONITORS.title and by_dest["run_dir"][0] == OUTPUT.title
    assert by_dest["other_plugin_flag"] == ("Other options", {"dest": "other_plugin_flag",
                                                              "flag": "--other-plugin-flag", "help": ""})  # fmt: skip
    titles = [g["title"] for g in layout["groups"]]
    # In the topics' order (a topic with no field here, such as Locust's own web options, is left out).
    assert titles == [t.title for t in (TARGET, WORKLOADS, SHAPES, VERDICT, MONITORS, OUTPUT)] + ["Other options"]
