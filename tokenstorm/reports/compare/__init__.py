"""Comparing runs: tokenstorm runs and other tools' saved results (foreign.py), their deltas and the page."""
