"""Each Locust internal tokenstorm relies on (all in ``locust_compat``), against the Locust installed: a Locust
upgrade that moves one fails here, by name, before a run misbehaves. Each check runs in a process of its own
(importing Locust patches the standard library)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

_PRELUDE = """
import inspect, socket
import gevent
import locust.main, locust.stats
from locust import User, constant, task
from locust.env import Environment
from locust.runners import STATE_MISSING, WorkerNode
from locust.web import WebUI
from tokenstorm.workloads.plugin.core import locust_compat

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

class Idle(User):
    wait_time = constant(1)

    @task
    def nothing(self):
        return None

env = Environment(user_classes=[Idle])
"""

CHECKS = {
    # webui_live trims the start form's fields each time Locust builds the page's arguments
    "template args": """
env.create_local_runner()
web_ui = env.create_web_ui("127.0.0.1", free_port())
seen = []
locust_compat.after_template_args(web_ui, seen.append)  # a runner exists: built at once
assert seen == [web_ui.template_args] and "extra_options" in web_ui.template_args, seen
web_ui.update_template_args()  # as Locust does at each start form and run
assert len(seen) == 2 and seen[-1] is web_ui.template_args, seen
assert "_run_time_greenlet" in inspect.getsource(WebUI)  # planned_end_pending: the form's run timer
assert not locust_compat.planned_end_pending(env)
env.runner.quit()
""",
    # a master's workers and their states (the lost-worker watch, the live view's worker list)
    "master's workers": """
master = env.create_master_runner("127.0.0.1", free_port())
assert locust_compat.is_master(master) and locust_compat.process_role(env) == "master"
master.clients["w1"] = WorkerNode("w1")
master.clients["w2"] = WorkerNode("w2")
master.clients["w2"].state = STATE_MISSING
assert locust_compat.live_workers(master) == {"w1"}, locust_compat.live_workers(master)
assert locust_compat.missing_workers(master) == {"w2"}
assert not locust_compat.is_running(master)
master.quit()
""",
    # a worker's id in its records, its index (the arrival schedule's share), its master's address
    "worker": """
port = free_port()
master = Environment(user_classes=[Idle]).create_master_runner("127.0.0.1", port)
worker = env.create_worker_runner("127.0.0.1", port)  # Locust waits for its master's ack
assert locust_compat.is_worker(worker) and locust_compat.process_role(env) == "worker"
assert locust_compat.master_address(worker) == ("127.0.0.1", port)
assert locust_compat.worker_client_id(worker) == worker.client_id != "local"
assert locust_compat.worker_index(worker) == 0
assert locust_compat.live_workers(master) == {worker.client_id}
worker.quit()
master.quit()
""",
    # _quiet_closing_tables replaces these two printers: Locust's shutdown must still print through them
    "closing tables": """
source = inspect.getsource(locust.main)
assert callable(locust.stats.print_stats) and callable(locust.stats.print_percentile_stats)
assert "print_stats(" in source and "print_percentile_stats(" in source
""",
    # TTFT and TPOT rows beside the requests, outside Locust's total
    "rows outside the total": """
env.create_local_runner()
locust_compat.log_row_outside_total(env, "TTFT", "chat", 120.0)
assert env.stats.get("chat", "TTFT").num_requests == 1 and env.stats.total.num_requests == 0
env.runner.quit()
""",
}


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_locust_internal_tokenstorm_uses_is_where_it_was(name: str) -> None:
    script = _PRELUDE + textwrap.dedent(CHECKS[name]) + "\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
