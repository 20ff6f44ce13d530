"""Step load shape; combine with a traffic locustfile:

locust -f locustfiles/mixed.py,locustfiles/shape_steps.py --headless --steps 8x60,16x60,32x120
"""

import _path  # noqa: F401  (tokenstorm from this checkout)

from workloads.shapes import StepShape

__all__ = ["StepShape"]
