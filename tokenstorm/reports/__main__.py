"""``python -m tokenstorm.reports``: build a run's report, or compare runs.

    python -m tokenstorm.reports build RUN_DIR [--slo slo.yaml] [--gpu-cost-per-hour 2.5]
    python -m tokenstorm.reports compare RUN_A RUN_B ... [--baseline 0] [--threshold 10] [--confidence 0.95] [--details]
        [--html out.html]
        (a RUN is a tokenstorm run directory, a `vllm bench serve --save-result` JSON file or a GuideLLM
        JSON report; an A/B run alone compares its targets)
    python -m tokenstorm.reports alert-rules slo.yaml [--window 5m] [--for 5m] > tokenstorm-rules.yml
    python -m tokenstorm.reports export RUN_DIR --jsonl [-o FILE]   (default RUN_DIR/requests.jsonl)

build exits 0 when the SLOs held, 1 when one failed, 3 when the run itself failed, 4 when the run
is incomplete (interrupted before its planned end, a worker lost, or it never finished; not with
--live, which writes report.html only), 5 when the SLOs were judged on timing that is not trustworthy
(the load generator read late: more than 5% of token events or TTFTs, at least 5; see the report's
timing-fidelity line), 6 when no SLO failed and an interval straddles its target (inconclusive, at
--confidence); compare exits 1 when a run regressed against the baseline by more than the
threshold (the whole interval of the change beyond it, at --confidence; it says so when the runs' load
differed), 2 when a run cannot be read.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from tokenstorm.reports.build import build_report, spec_for_run
from tokenstorm.reports.compare.runs import CompareInputError, compare_runs
from tokenstorm.reports.judging.alerts import AlertRuleError, alert_rules
from tokenstorm.reports.judging.slo_spec import SloSpecError, load_slo_spec
from tokenstorm.workloads.rundir import NewerSchema, parse_confidence
from tokenstorm.workloads.rundir.faults import WriteFailed

_PROG = "python -m tokenstorm.reports"


class _Parser(argparse.ArgumentParser):
    """Whole option names only (``--sl`` is not ``--slo``), and an unknown one said in one line with the nearest
    known name; every other argument error as argparse says it (usage, then the error; exit 2)."""

    def __init__(self, **kwargs: Any) -> None:
        self.flags: list[str] = []  # before super().__init__, which adds --help through add_argument
        #: the subcommands' parsers, by name (the top-level parser's)
        self.sub: dict[str, argparse.ArgumentParser] = {}
        super().__init__(**{"allow_abbrev": False, **kwargs})

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """``ArgumentParser.add_argument``, remembering the option's names for the unknown-option line."""
        action = super().add_argument(*args, **kwargs)
        self.flags.extend(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        """One line for an unknown option (its name, never its value), else argparse's usage and error."""
        _, sep, rest = message.partition("unrecognized arguments:")
        if sep and rest.split() and rest.split()[0].startswith("-"):
            name = rest.split()[0].split("=", 1)[0]
            near = difflib.get_close_matches(name, self.flags, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f" (see {self.prog} --help)"
            self.exit(2, f"{self.prog}: {name[:60]}: unknown option{hint}\n")
        super().error(message)


def main(argv: list[str] | None = None, prog: str = _PROG, names: Mapping[str, str] | None = None) -> int:
    """Entry point; returns the exit code. ``prog``: the command that ran it, ``names``: what it calls the
    subcommands (``tokenstorm`` calls ``build`` ``report``): its help and error lines then say those."""
    names = dict(names or {})
    p = _parser(prog, names)
    args = p.parse_args(argv)
    # what its lines begin with
    who = "tokenstorm.reports" if prog == _PROG else f"{prog} {names.get(args.cmd, args.cmd)}"
    try:
        if args.cmd == "export":
            return _export(args.run_dir, args.output)
        if args.cmd == "alert-rules":
            rules = alert_rules(load_slo_spec(args.slo), args.window, args.for_)
            sys.stdout.write(rules.to_yaml())
            for target, why in rules.skipped:
                print(f"{who}: no rule for {target.label}: {why}", file=sys.stderr)
            return 0
        if args.cmd == "build":
            return _build(args, who, p.sub[args.cmd])
        return _compare(args, who, p.sub[args.cmd])
    except (FileNotFoundError, WriteFailed, SloSpecError, AlertRuleError, NewerSchema) as exc:
        print(f"{who}: {exc}", file=sys.stderr)
        return 2


def _parser(prog: str, names: dict[str, str]) -> _Parser:
    """The command line: ``build``, ``compare``, ``alert-rules`` and ``export`` (their parsers in ``.sub``)."""
    description = __doc__ or ""
    for cmd, name in names.items():
        description = description.replace(f"{_PROG} {cmd} ", f"{prog} {name} ")

    def prog_of(cmd: str) -> str:
        return f"{prog} {names.get(cmd, cmd)}"

    p = _Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser(
        "build", prog=prog_of("build"), help="write report.html, junit.xml and summary.json into RUN_DIR"
    )
    newest = f"; none: the newest under ./runs/ ({prog_of('build')} picks it)" if names else ""
    b.add_argument("run_dir", type=Path, metavar="RUN_DIR", help=f"the run directory{newest}")
    b.add_argument("--slo", type=Path, default=None, help="judge by this SLO file instead of the run's own")
    b.add_argument("--live", action="store_true", help="a snapshot of a run still going (not 'incomplete')")
    b.add_argument(
        "--gpu-cost-per-hour",
        type=float,
        default=None,
        help="price of one GPU-hour: adds the cost per 1M tokens (overrides the run's)",
    )
    b.add_argument(
        "--confidence",
        default=None,
        help="judge each SLO by its interval at this confidence (default: the run's --confidence, 0.95; 0: the "
        "point estimates)",
    )
    c = sub.add_parser(
        "compare",
        prog=prog_of("compare"),
        help="compare runs side by side (tokenstorm runs, vllm bench serve and GuideLLM "
        "result files), with their context and what differs in their deployment",
    )
    c.add_argument(
        "run_dirs",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="a tokenstorm run directory, a `vllm bench serve --save-result` JSON or a GuideLLM JSON report",
    )
    c.add_argument("--baseline", type=int, default=0, help="index of the baseline run (default 0: the first)")
    c.add_argument("--threshold", type=float, default=10.0, help="regression threshold in percent (default 10)")
    c.add_argument("--html", type=Path, default=None, help="also write the comparison as HTML")
    c.add_argument(
        "--confidence",
        default=None,
        help="a regression only when the change's interval at this confidence is wholly beyond the threshold "
        "(default: the baseline run's --confidence, 0.95; 0: the point estimates)",
    )
    c.add_argument(
        "--details",
        "--all",
        action="store_true",
        help="print every figure, per workload, and each run's context (default: the summary and headline figures)",
    )
    a = sub.add_parser("alert-rules", help="Prometheus alerting rules for an SLO file (over --metrics-port series)")
    a.add_argument("slo", type=Path)
    a.add_argument("--window", default="5m", help="rate window each rule judges (default 5m)")
    a.add_argument("--for", dest="for_", default="5m", help="how long a breach lasts before it fires (default 5m)")
    e = sub.add_parser("export", help="write a run's request records as JSON lines (format 1, as 0.1 wrote)")
    e.add_argument("run_dir", type=Path)
    e.add_argument("--jsonl", action="store_true", required=True, help="one JSON object per request (the format)")
    e.add_argument(
        "-o", "--output", type=Path, default=None, help="where to (default RUN_DIR/requests.jsonl; - for stdout)"
    )
    p.flags.extend(flag for sub_parser in (b, c, a, e) for flag in sub_parser.flags)  # argparse says them on p
    p.sub = {"build": b, "compare": c, "alert-rules": a, "export": e}
    return p


def _build(args: argparse.Namespace, who: str, parser: argparse.ArgumentParser) -> int:
    """``build``: the report of one run; its exit code is the run's verdict's."""
    spec = spec_for_run(args.run_dir, args.slo)
    try:
        level = None if args.confidence is None else parse_confidence(args.confidence)
    except ValueError as exc:
        parser.error(str(exc))
    result = build_report(
        args.run_dir, spec, live=args.live, gpu_cost_per_hour=args.gpu_cost_per_hour, confidence=level
    )
    print(f"{who}: {result.summary.verdict}: {result.summary.reason}")
    written = [result.report.name] if args.live else [result.report.name, result.junit.name, result.summary_json.name]
    print(f"{who}: wrote {', '.join(written)} in {args.run_dir}")
    return result.exit_code


def _compare(args: argparse.Namespace, who: str, parser: argparse.ArgumentParser) -> int:
    """``compare``: runs side by side; 1 when one regressed against the baseline."""
    if not 0 <= args.baseline < len(args.run_dirs):
        parser.error("--baseline must index one of the runs given")
    try:
        confidence = None if args.confidence is None else parse_confidence(args.confidence)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        comparison = compare_runs(args.run_dirs, args.baseline, args.threshold, confidence)
    except (CompareInputError, ValueError) as exc:  # a file that is no run (malformed, newer schema)
        print(f"{who}: {exc}", file=sys.stderr)
        return 2
    if len(comparison.runs) < 2:
        parser.error("compare needs at least two runs (or one A/B run, whose targets it compares)")
    print(comparison.to_text(details=args.details))
    if args.html:
        args.html.write_text(comparison.to_html(), encoding="utf-8")
    return 1 if comparison.regressions else 0


def _export(run_dir: Path, output: Path | None) -> int:
    from tokenstorm.workloads.rundir import REQUESTS_FILE, SEGMENTS_DIR, export_jsonl

    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such folder" if not run_dir.exists() else f"{run_dir}: not a folder")
    if not (run_dir / SEGMENTS_DIR).is_dir():
        raise FileNotFoundError(f"{run_dir} has no {SEGMENTS_DIR}/ segments (its records are already JSON lines?)")
    if str(output) == "-":
        n = export_jsonl(run_dir, sys.stdout.buffer)
    else:
        target = output or run_dir / REQUESTS_FILE
        tmp = target.with_name(target.name + ".tmp")
        try:
            with tmp.open("wb") as fh:
                n = export_jsonl(run_dir, fh)
            tmp.replace(target)
        except OSError as exc:  # a full disk, a read-only folder: one line, and no .tmp left behind
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise WriteFailed("records", target, exc) from None
        print(f"tokenstorm.reports: wrote {n} records to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
