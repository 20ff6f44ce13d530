"""The NVML layer against a fake NVML, and the nvidia-smi parser against real H200 output."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tokenstorm.monitors import NoGpuError, NvmlSampler, parse_smi_csv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"  # copied from shared/fixtures/gpu
FAKE = Path(__file__).resolve().parents[2] / "fakes" / "pynvml.py"


def load_fake_nvml():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nvml_sample_has_the_readings_users_look_at() -> None:
    nvml = load_fake_nvml()
    sampler = NvmlSampler(nvml, pcie_every=5)
    (s,) = sampler.sample()
    assert s.name == "NVIDIA H200" and s.uuid.startswith("GPU-") and s.source == "nvml"
    assert s.util_gpu_pct in (97.0, 100.0) and s.util_mem_pct == 23.0
    # v2 memory info: "used" without the driver's ~616 MiB reservation, which is kept apart
    assert s.mem_used_mib == pytest.approx(20084.8, abs=0.1)
    assert s.mem_reserved_mib == pytest.approx(615.1, abs=0.1)
    assert s.mem_total_mib == pytest.approx(143771, abs=1)
    assert s.power_w == pytest.approx(691.068) and s.power_limit_w == 700.0
    assert s.temp_c == 57 and s.sm_clock_mhz == 1500 and s.mem_clock_mhz == 3201
    assert s.throttle_reasons == 4 and s.pstate == 0
    assert s.pcie_tx_kbs == 8013 and s.pcie_rx_kbs == 16415
    assert s.nvlink_tx_kbs is None  # NotSupported on one GPU is normal, not an error
    assert s.processes == [{"pid": 416, "used_mib": pytest.approx(20076.0, abs=1)}]


def test_slow_pcie_reads_happen_only_every_nth_sample() -> None:
    nvml = load_fake_nvml()
    sampler = NvmlSampler(nvml, pcie_every=5)
    samples = [sampler.sample()[0] for _ in range(10)]
    assert nvml.calls["pcie"] == 2 * 2  # two directions, on samples 0 and 5
    assert nvml.calls["util"] == 10
    assert all(s.pcie_tx_kbs == 8013 for s in samples)  # the last reading is carried between reads


def test_every_gpu_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_GPUS", "8")
    samples = NvmlSampler(load_fake_nvml()).sample()
    assert [s.gpu for s in samples] == list(range(8))
    assert len({s.uuid for s in samples}) == 8


def test_nvlink_throughput_is_a_rate_from_the_cumulative_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_NVLINK", "1")
    nvml = load_fake_nvml()
    sampler = NvmlSampler(nvml, pcie_every=1)
    first = sampler.sample()[0]
    assert first.nvlink_tx_kbs is None  # a rate needs two readings
    import time

    time.sleep(0.05)
    second = sampler.sample()[0]
    assert second.nvlink_tx_kbs is not None and second.nvlink_tx_kbs > 0
    assert second.nvlink_rx_kbs == pytest.approx(2 * second.nvlink_tx_kbs)


def test_missing_nvml_library_is_a_one_line_no_gpu_error() -> None:
    nvml = load_fake_nvml()

    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    nvml.nvmlInit = fail
    with pytest.raises(NoGpuError, match="NVML cannot load: NVML Shared Library Not Found"):
        NvmlSampler(nvml)


def _section(text: str, title: str) -> str:
    return text.split(f"== {title}")[1].split("\n==")[0].split("\n", 1)[1]


def test_nvidia_smi_parser_reads_real_idle_and_loaded_output() -> None:
    idle = (FIXTURES / "nvidia_smi_idle.txt").read_text()
    loaded = (FIXTURES / "nvidia_smi_load.txt").read_text()
    (s,) = parse_smi_csv(_section(idle, "query idle (csv,noheader,nounits)"), epoch_s=1.0)
    assert s.name == "NVIDIA H200" and s.gpu == 0 and s.source == "nvidia-smi"
    assert s.util_gpu_pct == 0 and s.mem_used_mib == 0 and s.mem_total_mib == 143771
    assert s.power_w == pytest.approx(127.82) and s.throttle_reasons == 0 and s.pstate == 0
    rows = parse_smi_csv(_section(loaded, "query under load"), epoch_s=2.0)
    assert len(rows) == 5
    assert all(r.util_gpu_pct == 100 and r.mem_used_mib == 20085 for r in rows)
    assert all(r.throttle_reasons == 4 for r in rows)  # SW power cap under load
    assert max(r.power_w or 0 for r in rows) > 690


def test_nvidia_smi_parser_accepts_units_and_skips_headers() -> None:
    idle = (FIXTURES / "nvidia_smi_idle.txt").read_text()
    (s,) = parse_smi_csv(_section(idle, "query idle (csv with header)"), epoch_s=1.0)
    assert s.mem_total_mib == 143771 and s.power_limit_w == 700.0 and s.sm_clock_mhz == 1980


def test_sidecar_cli_without_a_gpu_says_so_in_one_line(tmp_path: Path) -> None:
    import subprocess

    # An empty pynvml on the path stands in for a machine without the NVIDIA driver.
    (tmp_path / "pynvml.py").write_text("def nvmlInit():\n    raise RuntimeError('NVML Shared Library Not Found')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[3]}"}
    proc = subprocess.run(
        [sys.executable, "-m", "tokenstorm.monitors", "gpu", "--out", str(tmp_path / "g.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("monitors: no GPU found")


@pytest.mark.parametrize(
    "argv", [["gpu", "--int", "2"], ["collect", "--int", "2", "--run-dir", "r"]], ids=["gpu", "collect"]
)
def test_the_monitors_take_whole_option_names_only(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # argparse took a prefix of one option as that option (--int as --interval): a mistyped one ran silently.
    from tokenstorm.monitors.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and f"unrecognized arguments: {argv[1]}" in capsys.readouterr().err
