"""tokenstorm: load tests of LLM serving endpoints with Locust, and the reports of their runs.

One import name holds it all:

* :mod:`tokenstorm.workloads` — the load generator: the Locust plugin, traffic models, the measuring client
  and the run directory's files.
* :mod:`tokenstorm.reports` — the report, the SLO verdict and the comparison of runs
  (``python -m tokenstorm.reports``).
* :mod:`tokenstorm.monitors` — the GPU and server-metrics sidecar (``python -m tokenstorm.monitors``).
* :mod:`tokenstorm.emulator` — the built-in OpenAI-compatible server (``python -m tokenstorm.emulator``).
* :mod:`tokenstorm.cli` — the ``tokenstorm`` command (``python -m tokenstorm``).

Importing this package loads nothing else: Locust (which monkey-patches the process), pandas and the
report code load only for the part that needs them.
"""
