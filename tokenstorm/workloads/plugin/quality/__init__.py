"""Answer quality that needs the run itself, not one answer: the consistency probes — the same
temperature-0 prompts before the load and under it, and whether their answers changed.

* :mod:`.consistency` — a probe's answer (``probes.jsonl``'s lines), how many a pass sends, the comparison
  (no Locust: importable anywhere).
* :mod:`.probes` — sending the passes from the master / local process (the run's lifecycle calls it).
* :mod:`.prompts` — the bundled prompts, English and Chinese.
"""

from .consistency import PROBES_FILE, Consistency, ProbeLine, consistency_counts, probe_count

__all__ = ["PROBES_FILE", "Consistency", "ProbeLine", "consistency_counts", "probe_count"]
