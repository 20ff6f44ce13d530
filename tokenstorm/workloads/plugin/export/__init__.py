"""The live Prometheus export of the client's own metrics (``--metrics-port``)."""
