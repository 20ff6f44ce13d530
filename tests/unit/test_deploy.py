"""The deployment files say what the docs promise (no Docker engine or cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.conftest import ROOT


def test_compose_file_has_the_services_users_rely_on() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    vllm = services["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai")
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"]
               for d in vllm["deploy"]["resources"]["reservations"]["devices"])  # fmt: skip
    assert "${MODEL" in " ".join(vllm["command"]) and "${VLLM_ARGS" in " ".join(vllm["command"])
    assert "/health" in " ".join(vllm["healthcheck"]["test"])
    master = services["master"]
    assert master["ports"] == ["127.0.0.1:8089:8089"] and "--master" in master["command"]
    assert master["command"][master["command"].index("--web-host") + 1] == "0.0.0.0"  # reachable in the container
    assert master["depends_on"]["vllm"]["condition"] == "service_healthy"
    assert "./runs:/runs" in master["volumes"]  # the run directory outlives the container
    assert "--worker" in services["worker"]["command"] and "master" in services["worker"]["command"]
    assert "ports" not in services["worker"]  # so `--scale worker=N` works
    assert services["gpu-monitor"]["entrypoint"][:4] == ["python", "-m", "tokenstorm.monitors", "gpu"]
    for name in ("emulator", "master-emulator", "worker-emulator"):
        assert services[name]["profiles"] == ["emulator"]
    assert "http://emulator:8000" in services["master-emulator"]["command"]


def test_dockerfile_installs_the_package_and_runs_mixed_py() -> None:
    text = (ROOT / "Dockerfile").read_text()
    # every folder the wheel is built from (setup.py: the package, and the locustfiles, SLO files and trace
    # sample bundled into it): without one, `pip install .` in the image fails
    for part in ("tokenstorm", "locustfiles", "slo", "traces"):
        assert f"COPY {part} ./{part}" in text
    assert "pip install --no-cache-dir ." in text and "locustfiles/mixed.py" in text and "USER tokenstorm" in text


def test_kubernetes_manifests_and_ci_recipe_parse() -> None:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "k8s" / "tokenstorm.yaml").read_text()))
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Deployment", "tokenstorm-master") in kinds and ("Deployment", "tokenstorm-worker") in kinds
    assert ("Service", "tokenstorm-master") in kinds and ("DaemonSet", "tokenstorm-gpu-monitor") in kinds
    worker = next(d for d in docs if d["metadata"]["name"] == "tokenstorm-worker")
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--worker", "--master-host", "tokenstorm-master"]
    ci = yaml.safe_load((ROOT / "deploy" / "ci" / "github-actions-slo-gate.yml").read_text())
    steps = ci["jobs"]["load-test"]["steps"]
    run = next(s["run"] for s in steps if s.get("name", "").startswith("Load test"))
    assert "--headless" in run and "--slo" in run
    assert any(s.get("uses", "").startswith("actions/upload-artifact") and s.get("if") == "always()" for s in steps)


def test_reference_slo_file_is_valid() -> None:
    from tokenstorm.reports import load_slo_spec

    spec = load_slo_spec(Path(ROOT / "slo" / "slo.yaml"))
    assert {t.metric for t in spec.targets} >= {"ttft_ms", "e2e_ms", "error_rate", "gpu_memory_gb"}


def test_monitoring_profile_dashboard_and_rules_fit_the_series_that_exist() -> None:
    """Every series the Grafana dashboard and the Prometheus rules ask for is one tokenstorm
    exports, the GPU sidecar serves, or real vLLM 0.32 exposes (tests/fixtures/vllm)."""
    import re

    from tokenstorm.monitors._sidecar import GPU_GAUGES
    from tokenstorm.workloads.rundir import series

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["prometheus"]["profiles"] == ["monitoring"] == services["grafana"]["profiles"]
    assert "--metrics-port" in services["master"]["command"]
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    targets = {t for job in prom["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    port = services["master"]["command"][services["master"]["command"].index("--metrics-port") + 1]
    assert targets == {f"master:{port}", f"master-emulator:{port}", "vllm:8000", "gpu-monitor:9400"}
    for master in ("master", "master-emulator"):  # reachable from the prometheus container
        cmd = services[master]["command"]
        assert cmd[cmd.index("--metrics-port") + 1] == port and cmd[cmd.index("--metrics-host") + 1] == "0.0.0.0"
    vllm_text = (ROOT / "tests" / "fixtures" / "vllm" / "metrics_0.32_cpu.txt").read_text()
    known = {
        *series.HISTOGRAMS,
        *series.SERVER_HISTOGRAMS,
        *(f"{counter}_total" for counter in series.COUNTERS),
        series.USERS,
        series.CLIENT_CPU,
        *(name for name, _, _ in GPU_GAUGES.values()),
    }
    known |= {m.group(1) for m in re.finditer(r"^(vllm:[a-z0-9_:]+?)(?:_bucket|_sum|_count)?[{ ]", vllm_text, re.M)}
    dash = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "tokenstorm.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "slo.yml").read_text())
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = {
        re.sub(r"_(bucket|sum|count)$", "", n)
        for e in exprs
        for n in re.findall(r"\b((?:tokenstorm|vllm:)[a-z0-9_:]*)", e)
    }
    assert used and used <= known, used - known
    assert len(dash["panels"]) >= 8
    # Where the time went: the parts stacked in one panel, and each part (the client's view beside it) in its own.
    panels = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in dash["panels"]}
    own = [
        [t for t, e in panels.items() if sum(n in e for n in series.SERVER_HISTOGRAMS) == 1 and part in e]
        for part in series.SERVER_HISTOGRAMS
    ]
    assert all(own), dict(zip(series.SERVER_HISTOGRAMS, own, strict=True))
    stacked = [t for t, e in panels.items() if sum(n in e for n in series.SERVER_HISTOGRAMS) >= 3]
    assert stacked, panels


def test_committed_alert_rules_are_those_of_the_reference_slo_file() -> None:
    from tokenstorm.reports import load_slo_spec
    from tokenstorm.reports.judging.alerts import alert_rules

    committed = (ROOT / "deploy" / "prometheus" / "rules" / "slo.yml").read_text()
    spec = load_slo_spec(ROOT / "slo" / "slo.yaml")
    spec.source = "slo/slo.yaml"  # as generated from the repository root
    assert committed == alert_rules(spec).to_yaml(), "regenerate: python -m tokenstorm.reports alert-rules slo/slo.yaml"
