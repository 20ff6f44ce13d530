"""GPU sampler (NVML, nvidia-smi fallback) and the GPUs' identity, vLLM /metrics scraper and the sidecar CLI."""

from tokenstorm.workloads.rundir.samples import MONITOR_SCHEMA_VERSION, GpuSample, MonitorGap, ServerSample, to_line

from ._collector import RunMonitor
from ._gpu import open_gpu_sampler
from ._identity import gpus_of
from ._nvml import NoGpuError, NvmlSampler
from ._process import MonitorProcess
from ._sidecar import GpuSampler, Sidecar
from ._smi import SMI_FIELDS, SmiSampler, parse_smi_csv, parse_smi_identity
from ._vllm_metrics import MetricsUnavailable, ServerMetricsScraper, parse_vllm_metrics

__all__ = [
    "MONITOR_SCHEMA_VERSION",
    "SMI_FIELDS",
    "GpuSample",
    "GpuSampler",
    "MetricsUnavailable",
    "MonitorGap",
    "MonitorProcess",
    "NoGpuError",
    "NvmlSampler",
    "RunMonitor",
    "ServerMetricsScraper",
    "ServerSample",
    "Sidecar",
    "SmiSampler",
    "gpus_of",
    "open_gpu_sampler",
    "parse_smi_csv",
    "parse_smi_identity",
    "parse_vllm_metrics",
    "to_line",
]
