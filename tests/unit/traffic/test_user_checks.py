"""Users' own checks: a workload file's ``checks: ["module:function"]`` loaded before any traffic, run on
each answer beside the built-in ones, and a bad entry refused with one line naming the file and its line."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import ROOT
from tokenstorm.workloads.client import CompletionRequest
from tokenstorm.workloads.client.client import Answer
from tokenstorm.workloads.rundir import RequestRecord
from tokenstorm.workloads.traffic import WorkloadFileError, settings_from_options
from tokenstorm.workloads.traffic.checks import check_record

CHECKS_PY = """\
def no_apology(request, reply):
    return "apologised" if "sorry" in reply.text.lower() else True

def names_the_workload(request, reply):
    return request.workload in reply.text or f"no {request.workload} in the answer"

def only_long(request, reply):
    return None if len(reply.text) < 20 else True

def broken(request, reply):
    return 1 / 0

class Team:
    @staticmethod
    def polite(request, reply):
        return "please" in reply.text

NOT_A_FUNCTION = 3
"""


@pytest.fixture(autouse=True)
def _interpreter_as_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading checks puts folders on sys.path: undone after each test (each module has a name of its own)."""
    monkeypatch.setattr(sys, "path", list(sys.path))


def unique_module(folder: Path, source: str = CHECKS_PY) -> str:
    """A module of checks in ``folder`` under a name no other test imported; its name."""
    name = f"mychecks_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(source)
    return name


def workload_file(folder: Path, body: str) -> Path:
    path = folder / "mix.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def judged(checks: tuple, text: str, workload: str = "chat") -> RequestRecord:  # type: ignore[type-arg]
    """A streamed, succeeded answer ``text`` judged by ``checks``: its record."""
    req = CompletionRequest(workload=workload, messages=[{"role": "user", "content": "hi"}])
    record = RequestRecord(workload=workload, endpoint=req.path, model="m", stream=True, start_epoch_s=1.0, ok=True,
                           finish_reason="stop", output_tokens=8, requested_max_tokens=64)  # fmt: skip
    check_record(record, req, Answer(text), checks)
    return record


def test_a_checks_module_beside_the_workload_file_runs_on_each_answer(tmp_path: Path) -> None:
    mod = unique_module(tmp_path)
    path = workload_file(
        tmp_path,
        f"""\
        workloads:
          chat: {{weight: 2, checks: ["{mod}:no_apology", "{mod}:names_the_workload", "{mod}:only_long"]}}
        """,
    )
    settings = settings_from_options(SimpleNamespace(workload_file=str(path)))
    checks = settings["chat"].checks
    assert settings["chat"].weight == 2 and len(checks) == 3
    assert settings["code"].checks == ()  # only the workload that names them
    good = judged(checks, "a chat answer, short")
    assert (good.check, good.check_results) == ("pass", "no_apology:pass,names_the_workload:pass,only_long:pass")
    bad = judged(checks, "Sorry, I cannot")  # short: only_long does not apply
    assert (bad.check, bad.check_results) == ("no_apology", "no_apology:fail,names_the_workload:fail")
    assert bad.check_detail == "apologised"


def test_a_check_that_raises_fails_with_its_exception_and_a_class_attribute_can_be_named(tmp_path: Path) -> None:
    mod = unique_module(tmp_path)
    path = workload_file(
        tmp_path,
        f"""\
        workloads:
          chat:
            checks:
              - {mod}:broken
              - {mod}:Team.polite
        """,
    )
    checks = settings_from_options(SimpleNamespace(workload_file=str(path)))["chat"].checks
    record = judged(checks, "yes please")
    assert record.check_results == "broken:fail,polite:pass"
    assert record.check_detail == "the check raised ZeroDivisionError: division by zero"


def test_a_module_in_the_current_directory_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here, there = tmp_path / "here", tmp_path / "files"
    here.mkdir()
    there.mkdir()
    mod = unique_module(here)
    monkeypatch.chdir(here)
    path = workload_file(there, f"workloads:\n  code: {{checks: [{mod}:no_apology]}}\n")
    checks = settings_from_options(SimpleNamespace(workload_file=str(path)))["code"].checks
    assert judged(checks, "sorry", workload="code").check == "no_apology"


def test_a_module_beside_the_locustfile_is_found(tmp_path: Path) -> None:
    """Locust takes the locustfile's folder off sys.path once it has imported it: checks there still load."""
    files, mine = tmp_path / "files", tmp_path / "locust"
    files.mkdir()
    mine.mkdir()
    mod = unique_module(mine)
    path = workload_file(files, f"workloads:\n  chat: {{checks: [{mod}:no_apology]}}\n")
    opts = SimpleNamespace(workload_file=str(path), locustfile=f"{mine / 'mine.py'},{ROOT / 'locustfiles' / 'chat.py'}")
    checks = settings_from_options(opts)["chat"].checks
    assert judged(checks, "sorry").check_detail == "apologised"


def test_a_package_module_is_named_with_dots(tmp_path: Path) -> None:
    pkg = f"team_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "quality.py").write_text(CHECKS_PY)
    path = workload_file(tmp_path, f"workloads:\n  agent: {{checks: '{pkg}.quality:no_apology'}}\n")
    checks = settings_from_options(SimpleNamespace(workload_file=str(path)))["agent"].checks
    assert judged(checks, "fine", workload="agent").check_results == "no_apology:pass"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("no_colon_here", "'no_colon_here' is not module:function, e.g. mychecks:no_apology"),
        ("a:b:c", "'a:b:c' is not module:function, e.g. mychecks:no_apology"),
        ("{mod}:", "'{mod}:' is not module:function, e.g. mychecks:no_apology"),
        (
            "nowhere_to_be_found_x:f",
            "cannot import nowhere_to_be_found_x (ModuleNotFoundError: No module named 'nowhere_to_be_found_x')",
        ),
        ("{mod}:missing", "module {mod} ({dir}/{mod}.py) has no 'missing'"),
        ("{mod}:NOT_A_FUNCTION", "{mod}:NOT_A_FUNCTION is not a function of (request, reply) but of type int"),
        ("{bad}:f", "cannot import {bad} (SyntaxError: invalid syntax ({bad}.py, line 1))"),
        ("{raises}:f", "cannot import {raises} (RuntimeError: needs a GPU)"),
    ],
    ids=["no-colon", "two-colons", "no-function", "no-module", "no-attribute", "not-callable", "syntax", "raises"],
)
def test_a_bad_entry_names_the_file_its_line_and_the_reason(tmp_path: Path, entry: str, reason: str) -> None:
    raises = unique_module(tmp_path, "raise RuntimeError('needs a GPU')\n")
    names = {"mod": unique_module(tmp_path), "bad": unique_module(tmp_path, "def f(:\n"), "raises": raises,
             "dir": str(tmp_path)}  # fmt: skip
    path = workload_file(
        tmp_path,
        f"""\
        workloads:
          chat:
            weight: 1
            checks:
              - {names["mod"]}:no_apology
              - "{entry.format(**names)}"
        """,
    )
    with pytest.raises(WorkloadFileError) as exc:
        settings_from_options(SimpleNamespace(workload_file=str(path)))
    assert str(exc.value) == f"{path}:6: chat.checks: {reason.format(**names)}"


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            "def script(request, reply):\n    return True\n",
            "{mod}:script: 'script' is a built-in check's name; give the function another name",
        ),
        (
            "def no_apology(request, reply):\n    return True\n",
            "{mod}:no_apology: another check of this workload is already called 'no_apology'",
        ),
    ],
    ids=["built-in-name", "twice"],
)
def test_a_check_name_must_say_one_check(tmp_path: Path, source: str, reason: str) -> None:
    first, mod = unique_module(tmp_path), unique_module(tmp_path, source)
    fn = source.split("(")[0].removeprefix("def ")
    path = workload_file(tmp_path, f"workloads:\n  chat:\n    checks: [{first}:no_apology,\n      {mod}:{fn}]\n")
    with pytest.raises(WorkloadFileError) as exc:
        settings_from_options(SimpleNamespace(workload_file=str(path)))
    assert str(exc.value) == f"{path}:4: chat.checks: {reason.format(mod=mod)}"


def test_checks_that_are_not_a_list_say_the_form(tmp_path: Path) -> None:
    path = workload_file(tmp_path, "workloads:\n  chat:\n    checks: {a: b}\n")
    with pytest.raises(WorkloadFileError) as exc:
        settings_from_options(SimpleNamespace(workload_file=str(path)))
    assert str(exc.value) == f"{path}:3: chat.checks: expected a list of module:function, e.g. [mychecks:no_apology]"


def test_an_unknown_setting_lists_checks_among_the_settings(tmp_path: Path) -> None:
    path = workload_file(tmp_path, "workloads:\n  chat:\n    chekcs: [a:b]\n")
    with pytest.raises(WorkloadFileError, match=r"mix\.yaml:3: chat: unknown setting — did you mean checks\? "
                                                r"\(settings of chat: api, checks, "):  # fmt: skip
        settings_from_options(SimpleNamespace(workload_file=str(path)))
