"""Kept for locustfiles written against tokenstorm 0.1: the same names as :mod:`workloads.plugin`."""

from .plugin import (
    EXIT_RUN_FAILED,
    ChatUser,
    CodeUser,
    ContractUser,
    LlmRequestFailed,
    LlmUser,
    WorkloadUser,
    context,
    install,
)

__all__ = ["EXIT_RUN_FAILED", "ChatUser", "CodeUser", "ContractUser", "LlmRequestFailed", "LlmUser", "WorkloadUser",
           "context", "install"]  # fmt: skip
