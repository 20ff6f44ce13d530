"""Checks of what came back: small functions over one answer, run after its record is timed.

A traffic model attaches to each request the checks that apply to it (``CompletionRequest.checks``), each
with what the request expects baked in (the needle it hid, the tools it offered). After the stream is
read and timed, :func:`judge` runs them on the answer (:class:`Reply`) and writes the outcome on the
record: ``check`` (``None``: none applied; ``"pass"``; else the first failed check's name),
``check_results`` (every applied check, ``name:pass`` or ``name:fail``, comma-separated) and
``check_detail`` (why the first one failed). A check returns ``True`` (pass), ``False`` or a reason
(fail), or ``None`` (it does not apply to this answer, e.g. a code block that was cut before it closed).

Checks never run on the timing path: :func:`judge` is called once a request's last byte is read and
its record complete; a check that raises is a failure of that check, its exception the detail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...client.client import Answer, CompletionRequest
from ...rundir import RequestRecord
from ...rundir.records import CHECK_NAMES
from ...rundir.secrets import redact

__all__ = [
    "CHECK_NAMES",
    "NOT_JUDGED_STOPPED",
    "Check",
    "CheckCall",
    "CheckOutcome",
    "FailedAnswers",
    "Reply",
    "check_record",
    "judge",
    "named",
]

#: ``check_detail`` of a completed request whose answer was not judged: the run stopped its user while its
#: answer was being checked (``check`` None, ``check_results`` empty; counted in no answer-quality figure)
NOT_JUDGED_STOPPED = "not judged: the load test stopped its user while the answer was being checked"

#: a check's reason is kept on the record up to this many characters
DETAIL_CHARS = 200
#: a failed answer kept on its record (``answer_sample``) up to this many characters
SAMPLE_CHARS = 2000
#: failed answers kept per workload and check, per load-generator process
SAMPLES_PER_CHECK = 20


@dataclass(frozen=True, slots=True)
class Reply:
    """What a check sees of one answer."""

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    output_tokens: int | None = None
    #: what the request asked for (``max_tokens``); ``None``: not limited
    max_tokens: int | None = None
    #: the request answered (a user's own check gets it as its first argument)
    request: CompletionRequest | None = None


#: ``check(reply)`` → ``True`` pass, ``False`` / reason fail, ``None`` not applicable; ``.check_name`` names it
Check = Callable[[Reply], "bool | str | None"]


def named(name: str, fn: Callable[[Reply], bool | str | None]) -> Check:
    """``fn`` as a check called ``name`` (what records and SLOs call it)."""
    fn.check_name = name  # type: ignore[attr-defined]
    return fn


@dataclass(frozen=True, slots=True)
class CheckCall:
    """A check as data: the module-level function ``fn(reply, *args)`` under ``check_name`` — picklable, so that
    the checks can run in a process of their own (:mod:`.worker`), away from the load generator's event loop."""

    check_name: str
    fn: Callable[..., bool | str | None]
    args: tuple[Any, ...] = ()

    def __call__(self, reply: Reply) -> bool | str | None:
        return self.fn(reply, *self.args)


def check_name(check: Check) -> str:
    """The name a check is recorded under."""
    return str(getattr(check, "check_name", None) or getattr(check, "__name__", "check"))


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The record's three check fields."""

    check: str | None
    results: str
    detail: str | None


def judge(checks: tuple[Check, ...] | list[Check], reply: Reply) -> CheckOutcome:
    """Run every check on ``reply``: the first failure names the outcome, every applied one is listed."""
    results: list[str] = []
    first: str | None = None
    detail: str | None = None
    for check in checks:
        name = check_name(check)
        try:
            verdict = check(reply)
        except Exception as exc:  # a check's own bug: its failure, said on the record
            verdict = f"the check raised {type(exc).__name__}: {exc}"
        if verdict is None:
            continue
        passed = verdict is True
        results.append(f"{name}:{'pass' if passed else 'fail'}")
        if not passed and first is None:
            first = name
            detail = verdict if isinstance(verdict, str) and verdict else f"{name} failed"
    if not results:
        return CheckOutcome(None, "", None)
    return CheckOutcome(first or "pass", ",".join(results), detail)


class FailedAnswers:
    """The bounded sample of failed answers one process keeps: the first ``per_check`` per workload and check."""

    def __init__(self, per_check: int = SAMPLES_PER_CHECK) -> None:
        self.per_check = per_check
        self._kept: Counter[tuple[str, str]] = Counter()

    def clear(self) -> None:
        """Start over (a new run)."""
        self._kept.clear()

    def keep(self, workload: str, check: str) -> bool:
        """Whether this failure's answer is kept (counting it when it is)."""
        key = (workload, check)
        if self._kept[key] >= self.per_check:
            return False
        self._kept[key] += 1
        return True


def check_record(
    record: RequestRecord,
    req: CompletionRequest,
    answer: Answer,
    more: tuple[Check, ...] = (),
    failed: FailedAnswers | None = None,
    secrets: tuple[str, ...] = (),
    judge_with: Callable[[tuple[Check, ...], Reply], CheckOutcome] | None = None,
) -> None:
    """Judge a succeeded, streamed request's ``answer`` by its checks (and ``more``: the workload's own), on
    its ``record``; a failed answer's text kept there when ``failed`` still has room for it (secrets masked).
    ``judge_with``: what runs them (the load generator's :class:`~.worker.CheckProcess`), else :func:`judge`."""
    checks = (*req.checks, *more)
    if not checks or not record.ok or not req.stream:
        return
    # The request goes with the answer only to users' own checks (its history can be large).
    reply = Reply(
        answer.text,
        answer.tool_calls,
        record.finish_reason,
        record.output_tokens,
        record.requested_max_tokens,
        req if more else None,
    )
    outcome = (judge_with or judge)(checks, reply)
    record.check, record.check_results = outcome.check, outcome.results
    if outcome.detail is not None:  # masked whole, then cut: a secret across the cut is never half-kept
        record.check_detail = redact(outcome.detail, secrets)[:DETAIL_CHARS]
    if outcome.check not in (None, "pass") and failed is not None and failed.keep(record.workload, outcome.check):
        shown = answer.text or " ".join(_shown_call(c) for c in answer.tool_calls)
        record.answer_sample = redact(shown, secrets)[:SAMPLE_CHARS]


def _shown_call(call: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    return f"{fn.get('name')}({fn.get('arguments')})"
