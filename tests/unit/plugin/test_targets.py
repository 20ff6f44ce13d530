"""--targets parsing: labels, URLs, workload files, one-line errors."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tokenstorm.workloads.plugin.core.options import OptionError, RunOptions
from tokenstorm.workloads.plugin.core.targets import parse_targets


def test_labels_urls_and_default_labels() -> None:
    assert parse_targets(["fp8=http://a:8000/", " http://b.example:9000", "awq=https://c/v1?x=1"]) == (
        ("fp8", "http://a:8000"),
        ("b.example-9000", "http://b.example:9000"),
        ("awq", "https://c/v1?x=1"),
    )
    # An '=' inside the URL (query) is not a label.
    assert parse_targets(["http://a:8000/?k=v"]) == (("a-8000", "http://a:8000/?k=v"),)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("fp8=ftp://a", "expected [LABEL=]http(s)://HOST:PORT"),
        ("a=http://x:1,a=http://y:1", "label 'a' is given twice"),
        ("a=http://x:1,b=http://x:1/", "http://x:1 is given twice"),
        ("bad label=http://x:1", "a label is letters"),
    ],
)
def test_bad_targets_get_one_line_naming_the_option(raw: str, why: str) -> None:
    with pytest.raises(OptionError) as err:
        RunOptions.parse(SimpleNamespace(targets=raw))
    assert str(err.value).startswith("--targets") and why in str(err.value) and "\n" not in str(err.value)


def test_targets_from_a_workload_file_and_the_option_wins(tmp_path: Path) -> None:
    wf = tmp_path / "ab.yaml"
    wf.write_text("targets:\n  - fp8=http://a:8000\n  - {label: awq, url: 'http://b:8000'}\n"
                  "workloads:\n  code: {weight: 1}\n")  # fmt: skip
    opts = RunOptions.parse(SimpleNamespace(workload_file=str(wf)))
    assert opts.targets == (("fp8", "http://a:8000"), ("awq", "http://b:8000"))
    opts = RunOptions.parse(SimpleNamespace(workload_file=str(wf), targets="x=http://c:1"))
    assert opts.targets == (("x", "http://c:1"),)
    wf.write_text("targets: http://a:8000\n")
    with pytest.raises(OptionError, match="targets: expected a list"):
        RunOptions.parse(SimpleNamespace(workload_file=str(wf)))


def test_the_workload_file_check_accepts_targets(tmp_path: Path) -> None:
    from tokenstorm.workloads.traffic import settings_from_options

    wf = tmp_path / "ab.yaml"
    wf.write_text("targets: [http://a:8000]\nworkloads:\n  chat: {weight: 5}\n")
    assert settings_from_options(SimpleNamespace(workload_file=str(wf)))["chat"].weight == 5


def test_a_long_hostname_gets_a_label_that_fits() -> None:
    url = "http://llama-3-70b-instruct-fp8.inference.svc.cluster.local:8000"
    ((label, _), (label2, _)) = parse_targets([url, url.replace(":8000", ":8001")])
    assert len(label) <= 40 and label.endswith("-8000") and label2.endswith("-8001")
