"""tokenstorm's options as data: each one's flag, default, help and topic (:data:`TOPICS`), which
:func:`add_options` declares to Locust's parser and ``tokenstorm --help`` lists by topic; :mod:`.options`
parses and checks their values.

Every duration (``--warmup``, ``--request-timeout``, ``--steps``' times...) is taken as Locust's ``-t`` takes
one: ``30``, ``30s``, ``5m``, ``1h30m`` (:mod:`tokenstorm.workloads.traffic.durations`).

Locust prints ``--help`` before it loads a locustfile, so ``locust -f ... --help`` never shows these;
``tokenstorm run --help`` does, from this table. A few of Locust's own options get a tokenstorm default
(``--web-host`` on loopback...): they are in the table too, marked ``locust``, so the help says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...traffic.models import MODELS
from .flag import Flag, Topic

__all__ = ["TOPICS", "Flag", "Topic", "add_options", "declared_defaults", "topic_of"]


def _workload_flags() -> tuple[Flag, ...]:
    """Each traffic model's own options (``--contract-prompt-tokens``, ``--chat-turns``, ``--dataset``...)."""
    return tuple(
        Flag(f"--{name}-{o.flag}" if o.prefixed else f"--{o.flag}", o.help)
        for name, model in MODELS.items()
        for o in model.options
    )


TARGET = Topic(
    "Target & auth",
    (
        Flag("--model", "Model name; discovered from /v1/models when empty"),
        Flag(
            "--api-key",
            "Bearer token, sent only to the --host it was given with; never shown in the web UI, logged or stored",
            env="OPENAI_API_KEY",
            web_ui=False,
        ),  # Locust would render its value into the page
        Flag(
            "--targets",
            "A/B in one run: [LABEL=]URL,... e.g. fp8=http://a:8000,awq=http://b:8000 — every user gets a "
            "twin per target with the same seed (same requests, same offered load); each target judged on its own "
            "(also a workload file's targets:)",
        ),
        Flag(
            "--request-timeout",
            "How long a whole request may take before it is abandoned (timeout)",
            "10m",
            duration=True,
        ),
        Flag(
            "--stall-timeout",
            "How long without a byte from the server (before the first token or between two) "
            "before a request is abandoned as a stall; 0: off",
            "0",
            duration=True,
        ),
        Flag(
            "--no-continuous-usage",
            "Do not ask for stream_options.continuous_usage_stats (non-vLLM servers)",
            False,
            switch=True,
        ),
        Flag(
            "--extra-body",
            'JSON merged into every request body, e.g. \'{"chat_template_kwargs": {"enable_thinking": false}}\'',
        ),
        Flag(
            "--think-tags",
            "OPEN,CLOSE markers of reasoning inside the answer text, for servers without a reasoning "
            "parser (a stream may start inside a template's pre-filled OPEN); 'off' to read content as answer only",
            "<think>,</think>",
        ),
        Flag(
            "--emulator-args",
            "Flags for the built-in emulator used when no --host is given, e.g. '--ttft-ms 300'",
            web_ui=False,
        ),
    ),
)

WORKLOADS = Topic(
    "Workloads & traffic",
    (
        Flag("--workload-file", "YAML defining the mix, corpora and lengths"),
        Flag(
            "--weights",
            f"Workload weights, e.g. {','.join(f'{n}={m.defaults.weight}' for n, m in MODELS.items())} "
            "(also $TOKENSTORM_WEIGHTS)",
        ),
        Flag("--seed", "Seed of the request generators (same seed, same requests)", 0, int),
        Flag(
            "--tokenizer",
            "tokenizer.json (or its folder) of the target model, to size prompts exactly; "
            "default: a calibrated estimate",
        ),
        Flag(
            "--api",
            "The API every request speaks: chat (OpenAI chat; code completion also /v1/completions), "
            "messages (Anthropic Messages, /v1/messages: Claude Code's), responses (OpenAI Responses, /v1/responses) "
            "or completions (/v1/completions: prompts only, no agent sessions); a workload file's api: wins",
            "chat",
            choices=("chat", "completions", "messages", "responses"),
        ),
        Flag("--max-tokens", "Override each workload's max_tokens (0: keep)", 0, int),
        Flag("--ignore-eos", "Ask the server to ignore EOS so every request generates max_tokens", False, switch=True),
        Flag("--temperature", "Sampling temperature (empty: server default)", "", str),
        Flag(
            "--wait-time",
            "Pause between a user's sessions, a duration or LO-HI, e.g. 1-3 or 30s-2m (0: closed loop at "
            "full speed); default: each workload's own",
        ),
        *_workload_flags(),
    ),
)

SHAPES = Topic(
    "Load shapes",
    (
        Flag("--warmup", "Time at the start marked as warm-up (not judged); shorter than the run", "0", duration=True),
        Flag("--steps", "Step shape: USERSxDURATION,... e.g. 8x60,16x60,32x2m"),
        Flag("--arrival-rate", "Open loop: requests per second (the run's total, shared by its workers)", 1.0, float),
        Flag("--arrival", "Open-loop arrivals", "poisson", choices=("poisson", "constant")),
        Flag("--capacity-start", "Capacity search: first step's users", 4, int),
        Flag("--capacity-step", "Capacity search: users added per step", 4, int),
        Flag("--capacity-step-time", "Capacity search: time per step", "30s", duration=True),
        Flag("--capacity-max", "Capacity search: stop at this many users", 1024, int),
        Flag(
            "--sweep-levels",
            "Sweep (shape_sweep.py): users per level, increasing, e.g. 1,2,4,8,16; empty: found by a "
            "1-user and a --sweep-max-users probe",
        ),
        Flag("--sweep-level-time", "Sweep: time per level (second half judged)", "30s", duration=True),
        Flag("--sweep-count", "Sweep: levels of an automatic sweep, probes included", 8, int),
        Flag("--sweep-max-users", "Sweep: users of the saturating probe", 256, int),
        Flag(
            "--trace",
            "Trace replay (trace_replay.py): a Mooncake JSONL trace — timestamp (ms), input_length, "
            "output_length, hash_ids per line; each request sent at its recorded offset (distributed: worker i of n "
            "takes rows i, i+n, ...)",
        ),
        Flag("--trace-speed", "Trace replay: time compression, e.g. 2 sends the trace in half its time", 1.0, float),
        Flag("--trace-block-size", "Trace replay: tokens per hash id block (Mooncake's traces: 512)", 512, int),
    ),
)

VERDICT = Topic(
    "SLOs & verdict",
    (
        Flag(
            "--slo",
            "SLO file (YAML); checked before any traffic. Exit code: 0 held, 1 an SLO failed, 3 run failed, "
            "6 inconclusive",
        ),
        Flag(
            "--confidence",
            "Confidence of the interval each SLO is judged by: held when the whole interval meets the "
            "target, failed when none of it does, else inconclusive (exit code 6, with the requests a "
            "conclusive answer needs); 0: judge the point estimates",
            0.95,
            float,
        ),
        Flag(
            "--until-conclusive",
            "Keep the load on until every SLO is held or failed (none inconclusive), then end the "
            "run by itself (checked every 5 s on the records so far, warm-up left out); -t is the cap: still "
            "inconclusive then, the run ends INCONCLUSIVE (exit code 6) naming the requests needed",
            False,
            switch=True,
        ),
        Flag(
            "--run-fail-error-rate",
            "Share of failed requests above which the run itself counts as failed (exit 3)",
            0.5,
            float,
        ),
        Flag(
            "--timing-verdict",
            "fail: a run whose timing is not trustworthy is UNRELIABLE (exit code 5); warn: it is "
            "said everywhere but the SLOs alone set the verdict",
            "fail",
            choices=("fail", "warn"),
        ),
        Flag(
            "--timing-source",
            "What latency SLOs are judged on: client (the records' own timing, what users saw); "
            "server (the server's per-request timing: queue + server TTFT for TTFT, its ITL for ITL/TPOT — what the "
            "engine did); auto: the client's when its timing is trustworthy, else the server's (a busy runner still "
            "gets an answer; every output says which was used and why)",
            "client",
            choices=("client", "server", "auto"),
        ),
        Flag(
            "--allow-lost-workers",
            "A worker lost mid-run does not make the run incomplete (exit code 4)",
            False,
            switch=True,
        ),
        Flag(
            "--consistency-probes",
            "Answer consistency: N fixed short prompts (English and Chinese, temperature 0, "
            "32 tokens) sent before the load and again under it, per target; the share of answers that changed is "
            "measured (RUN_DIR/probes.jsonl; SLO consistency_changed). 0: off",
            "",
            shown_default="0; 8 when the SLO file sets consistency_changed",
        ),
    ),
)

MONITORS = Topic(
    "Monitors",
    (
        Flag(
            "--gpu-monitor",
            "GPU samples: a sidecar URL (python -m tokenstorm.monitors gpu on the GPU host), 'local', "
            "or empty for none",
        ),
        Flag("--monitor-interval", "Time between GPU/server samples", "1s", duration=True),
        Flag("--no-server-metrics", "Do not scrape the target's /metrics", False, switch=True),
        Flag(
            "--gpus",
            "GPUs behind the target, for per-GPU throughput when no GPU samples say (0: from the SLO file, else 1)",
            0,
            int,
        ),
        Flag(
            "--metrics-port",
            "Serve client-side TTFT/ITL/TPOT/E2E histograms and counters for Prometheus at "
            "http://HOST:PORT/metrics (master / local runner; 0: off)",
            0,
            int,
            web_ui=False,
        ),  # listens from start-up
        Flag(
            "--otlp-port",
            "Receive the server's OpenTelemetry traces (OTLP/HTTP, protobuf) at "
            "http://HOST:PORT/v1/traces: vLLM's llm_request spans give each record the server's timing by trace id "
            "where its stream carried none, and the server's front end (start vLLM with --otlp-traces-endpoint "
            "http://HOST:PORT/v1/traces; master / local runner; 0: off)",
            0,
            int,
            web_ui=False,
        ),
        Flag(
            "--otlp-host",
            "Address --otlp-port listens on (0.0.0.0 for a server on another machine)",
            "127.0.0.1",
            web_ui=False,
        ),
        Flag(
            "--metrics-host",
            "Address --metrics-port listens on (0.0.0.0 for a Prometheus on another machine)",
            "127.0.0.1",
            web_ui=False,
        ),
    ),
)

OUTPUT = Topic(
    "Output & run directory",
    (
        Flag("--run-dir", "Folder under which each run's directory is made", "runs"),
        Flag(
            "--records",
            "How request records are stored: 'parquet' (compact Arrow/Parquet segments under "
            "RUN_DIR/requests/, ~10x smaller, for long runs) or 'jsonl' (RUN_DIR/requests.jsonl, one JSON object per "
            "line). `python -m tokenstorm.reports export RUN_DIR --jsonl` turns the first into the second",
            "parquet",
            choices=("parquet", "jsonl"),
        ),
        Flag(
            "--report-every",
            "Time between report.html snapshots during a run, built in a child process (0: only at the end)",
            "1h",
            duration=True,
        ),
        Flag(
            "--gpu-cost-per-hour",
            "Price of one GPU-hour (any currency): the report gives the cost per 1M output and "
            "total tokens at the measured throughput (GPUs: from the GPU samples, the SLO file's gpus, or --gpus)",
            0.0,
            float,
        ),
        Flag(
            "--locust-stats",
            "Headless: print Locust's own stats tables every few seconds as well (off: only "
            "tokenstorm's exact figures at the end, and its progress every 5 s)",
            False,
            switch=True,
            web_ui=False,
        ),
        # Headless: Locust's tables every few seconds (rounded percentiles) give way to tokenstorm's closing block.
        Flag(
            "--only-summary",
            "Locust's option, on under tokenstorm: no periodic stats tables in a headless run "
            "(--locust-stats brings them back)",
            True,
            switch=True,
            locust=True,
        ),
    ),
)

WEB = Topic(
    "Web UI & distributed runs",
    (
        # The web UI has no login by default: it listens on loopback unless --web-host says otherwise.
        Flag(
            "--web-host",
            "Address the web UI listens on. tokenstorm's default is loopback (the web UI has no login and "
            "starts load against any host), not Locust's '*' (all interfaces): --web-host 0.0.0.0 to serve other "
            "machines, behind a firewall or --web-login",
            "127.0.0.1",
            locust=True,
        ),
        # The master's worker port hands every worker the run's options: loopback for --processes (its workers
        # are its own children); a distributed master binds all interfaces, as Locust does, and says so.
        Flag(
            "--master-bind-host",
            "Address a master's worker port listens on (it hands every worker the run's options, "
            "never the API key): loopback for --processes, whose workers are its own children; every interface "
            "for --master, as Locust",
            None,
            shown_default="127.0.0.1 with --processes, else *",
            locust=True,
        ),
    ),
)

#: every tokenstorm option, by topic, in the order ``--help`` lists them
TOPICS: tuple[Topic, ...] = (TARGET, WORKLOADS, SHAPES, VERDICT, MONITORS, OUTPUT, WEB)


def topic_of(dest: str) -> str | None:
    """The title of the topic option ``dest`` belongs to (None: not one of tokenstorm's)."""
    return next((t.title for t in TOPICS for f in t.flags if f.dest == dest), None)


#: the parser Locust built with tokenstorm's options (its defaults are the ones ``run.json`` records)
_PARSER: list[Any] = []


def add_options(parser: Any, **_kw: Any) -> None:
    """Add tokenstorm's options to Locust's parser (``init_command_line_parser`` listener)."""
    _PARSER[:] = [parser]
    for topic in TOPICS:
        for flag in topic.flags:
            if flag.locust:
                parser.set_defaults(**{flag.dest: flag.default_value()})
            else:
                # Locust only honours include_in_web_ui on the top-level parser (not on argument groups).
                parser.add_argument(flag.flag, include_in_web_ui=flag.web_ui, **flag.argparse_kwargs())


def declared_defaults() -> dict[str, Any]:
    """Every option's default as declared above (``$env`` where one is set): the one home of the defaults that
    Locust's parser, ``--help``, the web form and :class:`~.options.RunOptions` use."""
    return {flag.dest: flag.default_value() for topic in TOPICS for flag in topic.flags}


def option_defaults(names: Iterable[str]) -> dict[str, Any]:
    """Each of ``names``' default as this process's parser has it: tokenstorm's (declared above, once) and
    Locust's own; empty before Locust built one."""
    if not _PARSER:
        return {}
    return {name: _PARSER[0].get_default(name) for name in names}
