"""Judging a run: SLOs, timing fidelity, the summary's figures, per-target verdicts, agent sessions, answer quality,
alert rules. Nothing here draws or renders."""
