"""The web UI start form's options take effect as the command line's do (issue #28, item 2): real HTTP to a
real Locust web UI on the built-in emulator. The SLO file the form names judges the run; a path outside the
folder tokenstorm was started in is refused, as is a malformed file, in one line that quotes none of it; and
every option the form shows — read from the page itself, so a new one is covered — takes effect or is refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT, free_port
from tests.integration.reports.test_reports import CHROMIUM
from tests.unit.traffic.test_bad_files import tiny_tokenizer_json
from tokenstorm.workloads.plugin.core.options import DURATION_OPTIONS
from tokenstorm.workloads.rundir import read_records
from tokenstorm.workloads.traffic.durations import parse_duration

SECRET = "hunter2-s3cr3t"
EMULATOR_ARGS = "--ttft-ms 20 --itl-ms 1 --natural-output-tokens 5"  # ignore_eos: max_tokens, else ~5


@dataclass
class WebUi:
    """A locust web UI on mixed.py (every workload: the widest form) started in ``cwd``."""

    base: str
    cwd: Path
    proc: subprocess.Popen[str]

    def post(self, form: dict[str, str]) -> dict[str, Any]:
        """POST /swarm as the start form does, with Locust's own fields filled in."""
        fields = {"user_count": "4", "spawn_rate": "4", "run_time": "6s", "host": self.template_args()["host"]}
        data = urllib.parse.urlencode({**fields, **form}).encode()
        with urllib.request.urlopen(urllib.request.Request(self.base + "/swarm", data=data), timeout=60) as resp:
            return dict(json.loads(resp.read()))

    def template_args(self) -> dict[str, Any]:
        page = urllib.request.urlopen(self.base + "/", timeout=30).read().decode()
        found = re.search(r"window\.templateArgs = (\{.*?\})\s*</script>", page, re.S)
        assert found, page[:2000]
        return dict(json.loads(found.group(1)))

    def state(self) -> str:
        return str(json.load(urllib.request.urlopen(self.base + "/stats/requests", timeout=30))["state"])

    def run_dirs(self) -> set[Path]:
        return {p.parent for p in self.cwd.rglob("run.json")}

    def start(self, form: dict[str, str]) -> Path:
        """Start a run from the form (every field the page shows, at its shown value, then ``form``) and wait
        for its end: its run directory."""
        before = self.run_dirs()
        shown = {k: _as_form_text(v["default_value"]) for k, v in self.template_args()["extra_options"].items()}
        answer = self.post({**shown, **form})
        assert answer["success"], answer
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            new = self.run_dirs() - before
            if new and (next(iter(new)) / "summary.json").exists() and self.state() in ("stopped", "ready"):
                return next(iter(new))
            time.sleep(0.5)
        raise AssertionError(f"no finished run: {self.run_dirs() - before}")


def _recorded_as_given(dest: str, text: str, recorded: Any) -> bool:
    """Whether run.json records the form's value (a duration in seconds, a number or switch typed)."""
    if dest in DURATION_OPTIONS:
        return bool(parse_duration(text) == recorded)
    if isinstance(recorded, bool):
        return recorded == (text == "true")
    if isinstance(recorded, (int, float)):
        return float(text) == recorded
    return text == recorded


def _as_form_text(value: Any) -> str:
    """A value as Locust's start form sends it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebUi]:
    cwd = tmp_path_factory.mktemp("started-here")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--web-host", "127.0.0.1",
         "--web-port", str(port), "--run-dir", "runs", "--timing-verdict", "warn", "--chat-think-time", "0-0.1",
         "--emulator-args", EMULATOR_ARGS],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    ui = WebUi(f"http://127.0.0.1:{port}", cwd, proc)
    deadline = time.monotonic() + 60
    while True:
        try:
            ui.template_args()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the web UI did not start"
            time.sleep(0.5)
    try:
        yield ui
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        assert "Traceback" not in out, out[-3000:]
        assert SECRET not in out  # nor in the console (logs): no file's text is repeated


def test_the_forms_slo_file_judges_the_run(web: WebUi) -> None:
    text = "slos:\n  run:\n    ttft_ms: {p95: 0.001}\n"  # no request's TTFT is under a microsecond
    (web.cwd / "strict.yaml").write_text(text)
    run_dir = web.start({"slo": "strict.yaml"})
    summary = json.loads((run_dir / "summary.json").read_text())
    meta = json.loads((run_dir / "run.json").read_text())
    assert summary["verdict"] == "failed", summary
    assert [(s["metric"], s["stat"], s["threshold"], s["passed"]) for s in summary["slos"]] == [
        ("ttft_ms", "p95", 0.001, False)
    ]
    assert meta["slo_spec_source"] == "strict.yaml" and meta["slo_spec_text"] == text


@pytest.mark.parametrize("where", ["/etc/passwd", "link into /etc", "../beside.yaml"])
def test_a_path_outside_the_folder_tokenstorm_started_in_is_refused(web: WebUi, where: str) -> None:
    (web.cwd.parent / "beside.yaml").write_text(f"{SECRET}: 1\n")
    path = where
    if where == "link into /etc":
        path = "passwd.yaml"
        (web.cwd / path).unlink(missing_ok=True)
        (web.cwd / path).symlink_to("/etc/passwd")
    before = web.run_dirs()
    answer = web.post({"slo": path})
    assert answer["success"] is False
    assert answer["message"] == (
        f"tokenstorm: --slo {path}: the web form takes only paths under the folder tokenstorm was started in "
        f"({web.cwd.resolve()}); for another, give --slo on the command line"
    )
    time.sleep(1)
    assert web.run_dirs() == before and web.state() in ("ready", "stopped")  # no run started


def test_a_workload_file_from_the_form_names_no_dataset_outside_the_folder(web: WebUi) -> None:
    (web.cwd / "mix-out.yaml").write_text("workloads:\n  chat:\n    dataset: /etc/passwd\n")
    before = web.run_dirs()
    answer = web.post({"workload_file": "mix-out.yaml"})
    assert answer["success"] is False and answer["message"] == (
        "tokenstorm: --workload-file mix-out.yaml: chat.dataset names a file outside the folder tokenstorm was "
        f"started in ({web.cwd.resolve()}); give --workload-file on the command line for it"
    )
    time.sleep(1)
    assert web.run_dirs() == before and web.state() in ("ready", "stopped")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"slos:\n  run:\n    {SECRET}: {{p95: 1}}\n", 3),
        (f"slos:\n  run:\n    ttft_ms: {{p95: {SECRET}}}\n", 3),
        (f"# a key file, named by mistake\npassword: {SECRET}\n", 2),
        (f"slos: !{SECRET}!x 1\n", 1),  # PyYAML's own problem quotes the tag's handle
    ],
    ids=["unknown-metric", "not-a-number", "unknown-key", "not-yaml"],
)
def test_a_malformed_slo_file_is_one_line_with_file_and_line_and_none_of_its_text(
    web: WebUi, text: str, line: int
) -> None:
    (web.cwd / "bad.yaml").write_text(text)
    before = web.run_dirs()
    answer = web.post({"slo": "bad.yaml"})
    assert answer["success"] is False
    message = answer["message"]
    assert message.startswith(f"tokenstorm: invalid SLO file: bad.yaml:{line}: "), message
    assert "\n" not in message and SECRET not in message and "hunter" not in message, message
    time.sleep(1)
    assert web.run_dirs() == before and web.state() in ("ready", "stopped")


def test_chromium_shows_the_refusal_in_the_form(web: WebUi) -> None:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    before = web.run_dirs()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(web.base + "/")
        page.wait_for_selector("form button[type=submit], button:has-text('New')", timeout=15000)
        if page.query_selector("button:has-text('New')") is not None:  # after a run: its dashboard first
            page.click("button:has-text('New')")
        page.click("text=Custom parameters")
        page.fill("input[name=slo]", "/etc/passwd")
        page.fill("input[name=userCount]", "2")
        page.fill("input[name=spawnRate]", "2")
        page.click("form button[type=submit]")
        shown = page.wait_for_selector("text=the web form takes only paths under", timeout=15000)
        assert shown is not None
        text = shown.text_content() or ""
        browser.close()
    assert "--slo /etc/passwd" in text and "root:" not in text, text
    assert web.run_dirs() == before and web.state() in ("ready", "stopped")


def test_a_running_runs_options_are_not_changed_from_the_form(web: WebUi) -> None:
    # Locust's form may be posted again mid-run (more users): tokenstorm's options take effect only when a
    # run starts, so a change then would be recorded in run.json but not used — it is refused instead.
    before = web.run_dirs()
    assert web.post({"run_time": "60s"})["success"]
    deadline = time.monotonic() + 30
    while web.state() != "running" and time.monotonic() < deadline:
        time.sleep(0.3)
    answer = web.post({"max_tokens": "5", "user_count": "6"})
    assert answer["success"] is False and answer["message"] == (
        "tokenstorm: --max-tokens: a run is under way, and tokenstorm's options take effect when a run starts: "
        "stop it, then start one with the new values"
    )
    assert web.post({"user_count": "6"})["success"]  # more users, the same options: Locust's own
    urllib.request.urlopen(urllib.request.Request(web.base + "/stop", data=b""), timeout=30).read()
    while not any((d / "summary.json").exists() for d in web.run_dirs() - before):
        assert time.monotonic() < deadline + 60, "the stopped run wrote no summary"
        time.sleep(0.5)
    (run_dir,) = web.run_dirs() - before
    assert json.loads((run_dir / "run.json").read_text())["options"]["max_tokens"] == 0


# -- every option the form shows ------------------------------------------------------------------
Check = Callable[[pd.DataFrame, Path], bool]


@dataclass(frozen=True)
class Effect:
    """A form value, the run (of several) it is given in, and what the run shows for it. ``check=None``: the
    value leaves no trace in the records or outputs of a run on the emulator (said in ``why``); the run
    must then record it as the value it ran with (run.json's options, which the report reads)."""

    value: str
    run: str = "main"
    check: Check | None = None
    why: str = ""


def _summary(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "summary.json").read_text()))


def _stopped_itself(_df: pd.DataFrame, run_dir: Path) -> bool:
    """The run ended failed well before its 60 s: stopped once its SLO was answered."""
    meta = json.loads((run_dir / "run.json").read_text())
    ran_s = float(meta["stopped_epoch_s"]) - float(meta["started_epoch_s"])
    return _summary(run_dir)["verdict"] == "failed" and ran_s < 40


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _ok(df: pd.DataFrame, workload: str) -> pd.DataFrame:
    return df[(df["workload"] == workload) & df["ok"]]


def _max_tokens(workload: str, n: int) -> Check:
    return lambda df, _: len(_ok(df, workload)) > 0 and set(_ok(df, workload)["requested_max_tokens"]) == {n}


def _prompt_tokens(workload: str, n: int, least: float = 0.0, most: float = 1.0) -> Check:
    """Every request of ``workload`` asked for between ``least`` and ``most`` times ``n`` prompt tokens."""

    def check(df: pd.DataFrame, _: Path) -> bool:
        asked = _ok(df, workload)["requested_prompt_tokens"]
        return len(asked) > 0 and bool(asked.between(least * n, most * n).all())

    return check


def _failed_as(category: str) -> Check:
    return lambda df, _: bool((df["error_category"] == category).any())


#: every option the form may show: a new one fails the walk until it is given its effect here
EFFECTS: dict[str, Effect] = {
    "model": Effect("form-model", check=lambda df, _: set(df["model"]) == {"form-model"}),
    "targets": Effect("{targets}", check=lambda df, _: set(df["target"]) == {"a", "b"}),
    "request_timeout": Effect("0.5s", "long", _failed_as("timeout")),
    "stall_timeout": Effect("0.005s", "stall", _failed_as("stall")),  # the emulator's TTFT is 20 ms
    "no_continuous_usage": Effect("true", why="asks the server for no per-chunk usage: the same records"),
    "extra_body": Effect('{"top_k": 5}', why="merged into each request's body, which no record keeps"),
    "think_tags": Effect("off", why="the emulator streams no <think> text"),
    "workload_file": Effect("mix.yaml", "contract", _max_tokens("contract", 23)),
    "weights": Effect("contract=0,code=2,chat=2,agent=1", check=lambda df, _: "contract" not in set(df["workload"])),
    "seed": Effect("7", why="the same requests for the same seed: one run shows no difference"),
    "tokenizer": Effect("tokenizer.json", why="sizes prompts with a word-level tokenizer: the emulator counts"),
    "max_tokens": Effect("2000", "long", lambda df, _: set(df["requested_max_tokens"]) == {2000}),
    "api": Effect("messages", "long", lambda df, _: set(df["endpoint"]) == {"/v1/messages"}),
    "ignore_eos": Effect("true", "dataset", lambda df, _: set(_ok(df, "chat")["output_tokens"]) == {29}),
    "temperature": Effect("0.3", why="sent in each request, which no record keeps"),
    "wait_time": Effect("0.1-0.2", why="a pause between sessions: timing, not a record's field"),
    "contract_prompt_tokens": Effect("1200", "contract", _prompt_tokens("contract", 1200, least=0.97, most=1.03)),
    "contract_output_tokens": Effect("11", "contract", why="the workload file's output_tokens overrides it"),
    "contract_shared_prefix": Effect("0.5", "contract", why="the prompt's text, which no record keeps"),
    "contract_languages": Effect("en", "contract", why="the prompt's text, which no record keeps"),
    "contract_needle": Effect("off", "contract", why="the prompt's text, which no record keeps"),
    "contract_needle_depth": Effect("0.5", "contract", why="the prompt's text, which no record keeps"),
    "code_prompt_tokens": Effect("200", check=_prompt_tokens("code", 200, most=1.2)),  # a prefix cut at a line
    "code_output_tokens": Effect("13", check=_max_tokens("code", 13)),
    "code_endpoint": Effect("chat", check=lambda df, _: set(_ok(df, "code")["endpoint"]) == {"/v1/chat/completions"}),
    "chat_output_tokens": Effect("17", check=_max_tokens("chat", 17)),
    "chat_turns": Effect("1", check=lambda df, _: set(_ok(df, "chat")["step"].fillna(0)) <= {0, 1}),
    "chat_think_time": Effect("0-0.1", why="a pause between turns: timing, not a record's field"),
    "chat_thinking": Effect("off", why="chat_template_kwargs in each request, which no record keeps"),
    "dataset": Effect("prompts.jsonl", "dataset", _max_tokens("chat", 29)),  # the dataset's own max_tokens
    "agent_prompt_tokens": Effect("900", why="the agent's context, which no record keeps apart"),
    "agent_shared_prefix": Effect("0.5", why="the prompt's text, which no record keeps"),
    "agent_steps": Effect("2", check=lambda df, _: _ok(df, "agent")["step"].max() <= 2),
    "agent_tool_choice": Effect("required", why="sent in each request, which no record keeps"),
    "agent_profiles": Effect("coding", why="the agents' prompts and tools, which no record keeps"),
    "agent_tool_result_tokens": Effect("read_file=200", why="tool results' text, which no record keeps"),
    "agent_output_tokens": Effect("19", check=_max_tokens("agent", 19)),
    "agent_tool_time": Effect("0-0.1", why="a pause between steps: timing, not a record's field"),
    "warmup": Effect("2s", check=lambda df, _: bool(df["warmup"].any()) and not bool(df["warmup"].all())),
    "slo": Effect("slo.yaml", check=lambda _, d: {s["metric"] for s in _summary(d)["slos"]} == {"e2e_ms"}),
    "run_fail_error_rate": Effect("0.001", "long", lambda _, d: _summary(d)["verdict"] == "run_failed"),
    "timing_verdict": Effect("fail", why="decides only when the timing is untrustworthy, not made so here"),
    # the built-in emulator returns each request's own timing: judged on it, as asked
    "timing_source": Effect("server", check=lambda _, d: _summary(d)["timing_source_used"] == "server"),
    "confidence": Effect("0.9", check=lambda _, d: {s["confidence"] for s in _summary(d)["slos"]} == {0.9}),
    # every SLO answered (fails.yaml's fails at once): the run stops by itself, long before the form's 60 s
    "until_conclusive": Effect("true", "conclusive", _stopped_itself),
    "allow_lost_workers": Effect("true", why="decides only when a worker is lost: a local run has none"),
    "consistency_probes": Effect("2", check=lambda _, d: len(_lines(d / "probes.jsonl")) > 0),  # default: none
    "gpu_monitor": Effect("http://127.0.0.1:9/", why="no GPU sidecar answers there: no samples either way"),
    "monitor_interval": Effect("0.3s", "long", lambda _, d: len(_lines(d / "server.jsonl")) > 10),
    "no_server_metrics": Effect("true", check=lambda _, d: not _lines(d / "server.jsonl")),
    "gpus": Effect("2", check=lambda _, d: _summary(d).get("gpus", {}) is not None),
    "run_dir": Effect("form-runs", check=lambda _, d: d.parent.name == "form-runs"),
    "records": Effect("jsonl", check=lambda _, d: (d / "requests.jsonl").exists()),
    "report_every": Effect("2s", why="snapshots of the report during the run: the final one replaces them"),
    "gpu_cost_per_hour": Effect("3", check=lambda _, d: '"gpu_cost_per_hour": 3' in (d / "summary.json").read_text()),
}


def test_every_option_the_form_shows_takes_effect_or_is_refused(web: WebUi) -> None:
    args = web.template_args()
    shown = set(args["extra_options"])
    assert shown - set(EFFECTS) == set(), "options the form shows with no effect to check here"
    emulator = urllib.parse.urlsplit(args["host"])
    targets = f"a={args['host']},b=http://localhost:{emulator.port}"
    (web.cwd / "slo.yaml").write_text("slos:\n  run:\n    e2e_ms: {p99: 600000}\n")
    (web.cwd / "mix.yaml").write_text("workloads:\n  contract:\n    output_tokens: 23\n")
    (web.cwd / "prompts.jsonl").write_text('{"prompt": "hello world", "max_tokens": 29}\n' * 20)
    (web.cwd / "tokenizer.json").write_text(tiny_tokenizer_json())
    runs: dict[str, dict[str, str]] = {}
    for dest in sorted(shown):
        effect = EFFECTS[dest]
        runs.setdefault(effect.run, {})[dest] = effect.value.replace("{targets}", targets)
    runs["contract"]["weights"] = "contract=1,code=0,chat=0,agent=0"
    chat_only = "chat=1,code=0,contract=0,agent=0"
    runs["long"].update(weights=chat_only, ignore_eos="true", user_count="2")  # 2000 tokens: 2 s at 1 ms each
    runs["stall"]["weights"] = runs["dataset"]["weights"] = chat_only
    (web.cwd / "fails.yaml").write_text("slos:\n  run:\n    ttft_ms: {p50: 0.001}\n")  # no TTFT is a microsecond
    runs["conclusive"].update(slo="fails.yaml", run_time="60s")
    failed: list[str] = []
    for name, form in runs.items():
        run_dir = web.start(form)
        meta = json.loads((run_dir / "run.json").read_text())
        df = pd.DataFrame([r.as_row() for r in read_records(run_dir)])
        assert len(df) > 0, name
        for dest in form:
            effect = EFFECTS.get(dest)
            if effect is None or effect.run != name:
                continue  # a field this run needs (weights...), checked in its own run
            if effect.check is not None and not effect.check(df, run_dir):
                failed.append(f"{dest}={form[dest]} (run {name}: {run_dir})")
            recorded = meta["options"].get(dest)
            if effect.check is None and not _recorded_as_given(dest, form[dest], recorded):
                failed.append(f"{dest}={form[dest]} recorded as {recorded!r}")
    assert failed == [], "\n".join(failed)
    # What the form does not show is set when tokenstorm starts: a form that changes it is refused.
    answer = web.post({"metrics_port": "9464"})
    assert answer["success"] is False and answer["message"] == (
        "tokenstorm: --metrics-port: not taken from the web form (it is set when tokenstorm starts); "
        "give --metrics-port on the command line"
    )
    assert "metrics_port" not in shown and "api_key" not in shown and "emulator_args" not in shown
