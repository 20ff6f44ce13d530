"""Chat traffic: multi-turn sessions whose history grows, think time between turns.

locust -f locustfiles/chat.py                  # web UI; no --host: built-in emulator (SIMULATED)
locust -f locustfiles/chat.py --headless -u 10 -r 2 -t 5m --host http://gpu:8000 --slo slo.yaml
"""

from tokenstorm.workloads.plugin import ChatUser, install

install()

__all__ = ["ChatUser"]
