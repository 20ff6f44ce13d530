"""Reading a run directory into the frames every other part shares: records, columns, prefix-cache counters."""
