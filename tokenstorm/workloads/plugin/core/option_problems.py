"""Options that parse but cannot make a run: a warm-up as long as the run, no users. Each is refused before any
traffic in one line (the run would otherwise end on "run failed" after its whole ``-t``)."""

from __future__ import annotations

__all__ = ["users_problem", "warmup_problem"]


def warmup_problem(warmup_s: float, slo_warmup_s: float, slo_source: str, run_time_s: float | None) -> str | None:
    """What is wrong with a warm-up (``--warmup``, or the SLO file's ``warmup_s``: the longer counts) as long as
    the run (``-t``) or longer, in one line naming both durations; ``None`` when it is shorter, or the run
    has no set length (the web UI, a load shape). Such a run would judge no request: it is refused before
    any traffic, not ended on "run failed" after it."""
    if not run_time_s or max(warmup_s, slo_warmup_s) < run_time_s:
        return None
    if slo_warmup_s > warmup_s:
        which = f"warmup_s {slo_warmup_s:g} s in the SLO file {slo_source}"
    else:
        which = f"--warmup {warmup_s:g} s"
    as_long = "as long as" if max(warmup_s, slo_warmup_s) == run_time_s else "longer than"
    return (
        f"the warm-up ({which}) is {as_long} the run (-t {run_time_s:g} s): no request would be judged; "
        "run longer or shorten the warm-up"
    )


def users_problem(num_users: int | None, *, starts_itself: bool, has_shape: bool) -> str | None:
    """What is wrong with ``-u`` for a run that starts itself (headless, ``--autostart``) with no load shape
    to set its users: fewer than 1 would send nothing and end on "run failed" after its whole ``-t``;
    ``None`` when it is fine (not given: Locust's 1)."""
    if not starts_itself or has_shape or num_users is None or num_users >= 1:
        return None
    return f"-u {num_users}: a run needs at least 1 user (-u 1 or more)"
