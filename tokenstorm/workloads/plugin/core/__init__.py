"""The run itself: options, targets, start-up and stop, per-process state, workers' shipping, the monitor."""
