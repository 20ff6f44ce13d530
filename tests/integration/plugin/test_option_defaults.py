"""run.json records each option's default beside the options (docs/run-directory.md), from the parser that declared
it, and the report's options table shows only what was set away from those — never the API key's default."""

from __future__ import annotations

import pytest

from tests.conftest import run_locust

KEY = "sk-from-the-environment-7c1e"


def test_the_run_records_its_defaults_and_the_report_shows_what_was_set(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # --api-key's default comes from here: a secret, never recorded
    run = run_locust(
        tmp_path, "chat.py", "-u", "2", "-r", "2", "-t", "3s", "--max-tokens", "8", "--request-timeout", "300"
    )
    assert run.returncode == 0, run.output[-2000:]
    meta = run.run_json()
    defaults = meta["option_defaults"]
    assert defaults["request_timeout"] == 600.0 and defaults["capacity_max"] == 1024  # tokenstorm's declared ones
    assert defaults["expect_workers"] == 1  # Locust's own
    assert "api_key" not in defaults and KEY not in (run.run_dir / "run.json").read_text()
    table = (run.run_dir / "report.html").read_text().split('id="options"')[1].split("</table>")[0]
    assert "--request-timeout" in table and "300 s" in table and "--max-tokens" in table
    # (run_locust sets --timing-verdict warn and --confidence 0: those are shown, as set)
    for default in ("--api<", "--timing-source", "--otlp-host", "--capacity-max", "--api-key"):
        assert default not in table, default
    assert meta["options"]["request_timeout"] == pytest.approx(300.0)
