"""A vLLM-compatible simulated server: the default target, fault injector and timing truth."""

from ._args import check_args
from ._config import FAULT_KINDS, WRONG_KINDS, EmulatorConfig
from ._launcher import EmulatorProcess
from ._server import EmulatorServer

__all__ = ["FAULT_KINDS", "WRONG_KINDS", "EmulatorConfig", "EmulatorProcess", "EmulatorServer", "check_args"]
