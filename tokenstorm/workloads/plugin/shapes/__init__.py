"""Load shapes: steps and open-loop arrivals, capacity search, sweeps, their per-level judging, soak."""
