"""tokenstorm's load generator, in four layers (each imports only the ones below it):

* :mod:`workloads.plugin` — the Locust integration: options, users, run lifecycle, shapes, web UI.
* :mod:`workloads.traffic` — the traffic models (contract, code, chat) and what they are made of.
* :mod:`workloads.client` — the measuring HTTP/SSE client; where TTFT, ITL, TPOT and E2E are defined.
* :mod:`workloads.rundir` — the run directory's typed files, their writers and readers.

Importing this package imports none of them (``reports`` loads only ``rundir``).
"""
