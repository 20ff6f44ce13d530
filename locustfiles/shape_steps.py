"""Step load shape; combine with a traffic locustfile:

locust -f locustfiles/mixed.py,locustfiles/shape_steps.py --headless --steps 8x60,16x60,32x120
"""

from tokenstorm.workloads.plugin import StepShape

__all__ = ["StepShape"]
