"""Public entry point for locustfiles: the user classes and :func:`install`."""

from ._locust import EXIT_RUN_FAILED, LlmRequestFailed, LlmUser, context, install
from ._users import ChatUser, CodeUser, ContractUser, WorkloadUser

__all__ = [
    "EXIT_RUN_FAILED",
    "ChatUser",
    "CodeUser",
    "ContractUser",
    "LlmRequestFailed",
    "LlmUser",
    "WorkloadUser",
    "context",
    "install",
]
