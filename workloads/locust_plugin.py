"""Public entry point for locustfiles: ``from workloads.locust_plugin import LlmUser, install``."""

from ._locust import EXIT_RUN_FAILED, LlmRequestFailed, LlmUser, context, install

__all__ = ["EXIT_RUN_FAILED", "LlmRequestFailed", "LlmUser", "context", "install"]
