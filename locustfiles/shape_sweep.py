"""Load sweep; combine with a traffic locustfile and an SLO file:

    locust -f locustfiles/mixed.py,locustfiles/shape_sweep.py --headless --slo slo.yaml \
        --sweep-level-time 60 --host http://gpu:8000            # levels found by two probes
    ... --sweep-levels 1,2,4,8,16,32                             # or given

Holds each level of users for --sweep-level-time seconds, measures what it achieved (requests/s,
output tokens/s, TTFT/ITL/E2E percentiles per workload) and its SLO verdict, runs every level, and
writes RUN_DIR/sweep.json with the goodput knee: the highest level whose achieved load met every SLO.
"""

from tokenstorm.workloads.plugin import SweepShape

__all__ = ["SweepShape"]
