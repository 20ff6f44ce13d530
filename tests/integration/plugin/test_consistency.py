"""Answer quality a run measures beyond the built-in checks, against the built-in emulator: the consistency
probes (the same temperature-0 prompts before the load and under it, in ``probes.jsonl``, never records or
Locust statistics) and a user's own check named in the workload file (run in every worker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import LocustRun, run_locust
from tokenstorm.workloads.traffic.checks import NOT_JUDGED_STOPPED

USER_CHECKS = """\
def says_something(request, reply):
    return bool(reply.text.strip()) or f"an empty answer to {request.workload}"
"""

#: closed loop at full speed: a probe under load always has requests beside it
BUSY = ("--wait-time", "0", "--chat-think-time", "0", "--max-tokens", "20")
EMULATOR = "--ttft-ms 50 --itl-ms 5"


def probe_lines(run: LocustRun) -> list[dict]:  # type: ignore[type-arg]
    assert run.run_dir is not None, run.output[-3000:]
    return [json.loads(line) for line in (run.run_dir / "probes.jsonl").read_text().splitlines()]


def by_phase(lines: list[dict]) -> dict[str, dict[int, dict]]:  # type: ignore[type-arg]
    out: dict[str, dict[int, dict]] = {}  # type: ignore[type-arg]
    for line in lines:
        out.setdefault(line["phase"], {})[line["probe"]] = line
    return out


@pytest.fixture(scope="module")
def distributed_run(tmp_path_factory: pytest.TempPathFactory) -> LocustRun:
    """Two worker processes, 4 probes, a user check in a module beside the workload file."""
    tmp = tmp_path_factory.mktemp("consistency")
    (tmp / "files").mkdir()
    (tmp / "files" / "team_checks.py").write_text(USER_CHECKS)
    (tmp / "files" / "mix.yaml").write_text('workloads:\n  chat:\n    checks: ["team_checks:says_something"]\n')
    return run_locust(tmp, "chat.py", *BUSY, "--processes", "2", "-u", "4", "-r", "4", "-t", "9s", "--warmup", "1",
                      "--consistency-probes", "4", "--workload-file", str(tmp / "files" / "mix.yaml"),
                      "--emulator-args", EMULATOR)  # fmt: skip


def test_probes_are_answered_before_the_load_and_under_it(distributed_run: LocustRun) -> None:
    run = distributed_run
    assert run.returncode == 0, run.output[-3000:]
    phases = by_phase(probe_lines(run))
    assert sorted(phases) == ["before", "under_load"]
    assert all(sorted(p) == [0, 1, 2, 3] for p in phases.values())
    lines = [*phases["before"].values(), *phases["under_load"].values()]
    assert all(line["ok"] and line["error"] is None and line["text"].strip() and line["target"] == ""
               for line in lines), lines  # fmt: skip
    # Before: no user yet, and before the run's clock; under load: every user spawned, the warm-up over.
    started = run.run_json()["started_epoch_s"]
    assert all(line["users"] == 0 and line["epoch_s"] < started for line in phases["before"].values())
    assert all(line["users"] == 4 and line["epoch_s"] >= started + 1 for line in phases["under_load"].values())


def test_probes_are_not_requests_of_the_run(distributed_run: LocustRun) -> None:
    run = distributed_run
    records = run.records()
    assert {r["workload"] for r in records} == {"chat"}
    stats = run.locust_stats()
    assert {name for _, name in stats} <= {"chat", "Aggregated"}, stats
    assert len([r for r in records if r["error_category"] != "cancelled"]) == stats[("E2E", "chat")]["requests"]


def test_a_user_check_from_the_workload_file_runs_in_every_worker(distributed_run: LocustRun) -> None:
    judged = [r for r in distributed_run.records() if r["ok"] and r["check_detail"] != NOT_JUDGED_STOPPED]
    assert judged and all("says_something:pass" in (r["check_results"] or "") for r in judged), judged[:3]
    assert len({r["worker_id"] for r in judged}) == 2


def test_temperature_0_answers_of_the_emulator_do_not_change_under_load(distributed_run: LocustRun) -> None:
    phases = by_phase(probe_lines(distributed_run))
    assert [phases["under_load"][i]["text"] for i in range(4)] == [phases["before"][i]["text"] for i in range(4)]
    assert "consistency: 0 of 4 probe answers changed under load" in distributed_run.output


def test_answers_changed_under_load_are_counted(tmp_path: Path) -> None:
    # The warm-up lets the users' first requests reach the server: then every probe has some beside it.
    run = run_locust(tmp_path, "chat.py", *BUSY, "-u", "4", "-r", "4", "-t", "6s", "--warmup", "1",
                     "--consistency-probes", "4", "--emulator-args", f"{EMULATOR} --wrong-consistency 1")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    phases = by_phase(probe_lines(run))
    assert all(phases["under_load"][i]["text"] != phases["before"][i]["text"] for i in range(4))
    assert "consistency: 4 of 4 probe answers changed under load" in run.output


def test_a_run_that_ends_while_spawning_says_consistency_was_not_measured(tmp_path: Path) -> None:
    run = run_locust(tmp_path, "chat.py", *BUSY, "-u", "40", "-r", "2", "-t", "4s", "--consistency-probes", "2",
                     "--emulator-args", EMULATOR)  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    assert {line["phase"] for line in probe_lines(run)} == {"before"}
    assert "consistency: not measured under load — the run ended before its users were spawned" in run.output


def test_each_ab_target_is_probed_and_said_apart(tmp_path: Path) -> None:
    from tokenstorm.emulator import EmulatorProcess

    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "4") as a, EmulatorProcess("--ttft-ms", "20", "--itl-ms",
                                                                                     "8") as b:  # fmt: skip
        run = run_locust(tmp_path, "chat.py", *BUSY, "-u", "2", "-r", "2", "-t", "6s", "--consistency-probes", "2",
                         "--targets", f"fast={a.url},slow={b.url}", "--no-server-metrics")  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    seen = sorted((line["target"], line["phase"], line["probe"]) for line in probe_lines(run))
    assert seen == sorted((t, p, i) for t in ("fast", "slow") for p in ("before", "under_load") for i in (0, 1))
    assert "consistency (fast): " in run.output and "consistency (slow): " in run.output
    assert {r["workload"] for r in run.records()} == {"chat"}


def test_a_check_that_cannot_be_loaded_stops_the_run_before_any_traffic(tmp_path: Path) -> None:
    (tmp_path / "team_checks.py").write_text(USER_CHECKS)
    mix = tmp_path / "mix.yaml"
    mix.write_text('workloads:\n  chat:\n    weight: 1\n    checks:\n      - "team_checks:says_nothing"\n')
    run = run_locust(tmp_path, "chat.py", "-u", "1", "-t", "5s", "--workload-file", str(mix))
    assert run.returncode == 3 and run.run_dir is None, run.output[-3000:]
    assert f"tokenstorm: {mix}:5: chat.checks: module team_checks ({tmp_path / 'team_checks.py'}) has no " \
           "'says_nothing'\n" in run.output  # fmt: skip
    assert "Traceback" not in run.output
