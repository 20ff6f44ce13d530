"""Multi-turn chat: a conversation (bundled, or a ShareGPT/JSONL dataset) replayed turn by turn,
the history growing with each answer, with think time between turns. Output length of a turn:
the dataset entry's ``max_tokens``; else the length of the answer the dataset recorded for that
turn (ShareGPT's ``gpt`` turns, JSONL ``assistant`` messages), counted with ``--tokenizer``
when given, 4 to 2,048 tokens — unless ``output_tokens`` was set for the workload; else sampled from
``output_tokens``. (``--max-tokens`` overrides all.) Prompt lengths are the conversations' own.
"""

from __future__ import annotations

import json
import random
from functools import cache
from importlib import resources
from pathlib import Path

from ...client.client import CompletionRequest
from ..base import Option, Session, TrafficModel, WorkloadSettings
from ..checks.text import complete, repetition, script, script_of
from ..datasets import Conversation, load_dataset
from ..lengths import LengthDist
from ..tokens import TokenCounter

__all__ = ["SYSTEM_PROMPT", "Chat"]

SYSTEM_PROMPT = "You are a helpful assistant."
#: the longest output a recorded dataset answer asks for
RECORDED_ANSWER_MAX_TOKENS = 2048
_FOLLOW_UPS = (
    "Can you go into more detail on that?",
    "Give me a concrete example.",
    "Summarise that in two sentences.",
    "What would you do differently?",
    "请用中文再解释一遍。",
)


@cache
def _bundled_conversations() -> tuple[Conversation, ...]:
    text = resources.files("tokenstorm.workloads.traffic").joinpath("data/chat_conversations.jsonl").read_text("utf-8")
    return tuple(Conversation(tuple(json.loads(line)["turns"])) for line in text.splitlines() if line.strip())


class Chat(TrafficModel):
    """Multi-turn conversations: pick one, then replay its user turns with growing history."""

    name = "chat"
    description = "multi-turn chat: growing history, think time between turns, optional dataset"
    defaults = WorkloadSettings(
        "chat", 2, LengthDist.parse("lognormal:250,0.8"), turns=3, think_time_s=(1.0, 5.0), wait_s=(1.0, 3.0)
    )
    settings = frozenset({"output_tokens", "turns", "think_time_s", "thinking", "dataset", "wait_s"})
    options = (
        Option("output-tokens", "output_tokens", "Chat answer length (default lognormal:250,0.8)"),
        Option("turns", "turns", "Turns per chat session (default 3)"),
        Option("think-time", "think_time_s", "Pause between turns, a duration or LO-HI, e.g. 5s-1m (default 1-5)"),
        Option("thinking", "thinking", "on/off: chat_template_kwargs.enable_thinking; empty: not sent"),
        Option(
            "dataset",
            "dataset",
            "Chat prompts: ShareGPT JSON or JSONL ({'prompt'} / {'messages'}, optional 'max_tokens')",
            prefixed=False,
        ),
    )

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        super().__init__(settings, counter, seed)
        self.conversations = (
            tuple(load_dataset(Path(settings.dataset))) if settings.dataset else _bundled_conversations()
        )
        # Recorded answers set the lengths unless the user chose an output distribution.
        self._answer_lengths = bool(settings.dataset) and settings.output_tokens == self.defaults.output_tokens
        self._answer_tokens: dict[tuple[str, ...], tuple[int, ...]] = {}

    def session(self, rng: random.Random) -> Session:
        """One conversation: a request per user turn; each answer joins the history."""
        conv = rng.choice(self.conversations)
        history = [{"role": "system", "content": SYSTEM_PROMPT}]
        turns = self.turns(rng, conv)
        for i, turn in enumerate(turns):
            history.append({"role": "user", "content": turn})
            req = self.request(rng, history, conv.max_tokens or self._recorded_length(conv, i))
            req.final_step = i == len(turns) - 1  # the session's end: its latency is judged (session_ms)
            answer = yield req
            if answer is None:
                return  # the turn failed: a real user would start over
            history.append({"role": "assistant", "content": answer.text})

    def _recorded_length(self, conv: Conversation, turn: int) -> int | None:
        """Tokens of the answer the dataset recorded for ``turn`` (counted once per conversation)."""
        if not self._answer_lengths or turn >= len(conv.answers):
            return None
        lengths = self._answer_tokens.get(conv.answers)
        if lengths is None:
            used = conv.answers[: self.config.turns]  # only the turns a session replays
            lengths = self._answer_tokens[conv.answers] = tuple(self.counter.count(a) if a else 0 for a in used)
        n = lengths[turn] if turn < len(lengths) else 0
        # As vLLM's ShareGPT sampler: answers under 4 tokens say nothing about length; a very long
        # one is clipped so that a growing history plus the answer stays inside a usual context.
        return min(n, RECORDED_ANSWER_MAX_TOKENS) if n >= 4 else None

    def turns(self, rng: random.Random, conv: Conversation) -> list[str]:
        """The user turns of one session (padded with follow-ups up to ``turns``)."""
        turns = list(conv.turns[: self.config.turns])
        while len(turns) < self.config.turns:
            turns.append(rng.choice(_FOLLOW_UPS))
        return turns

    def request(
        self, rng: random.Random, history: list[dict[str, str]], max_tokens: int | None = None
    ) -> CompletionRequest:
        """The request for the next turn, given the history so far (ending in a user turn)."""
        s = self.config
        extra: dict[str, object] = {}
        if s.thinking:
            extra["chat_template_kwargs"] = {"enable_thinking": s.thinking == "on"}
        return CompletionRequest(
            workload=s.name,
            endpoint="chat",
            messages=list(history),
            max_tokens=max_tokens if max_tokens is not None else s.output_tokens.sample(rng),
            extra_body=extra,
            collect_text=True,
            requested_prompt_tokens=sum(self.counter.count(m["content"]) for m in history),
            # answered in the script of the turn it answers, not looping, not cut short
            checks=(script(script_of(history[-1]["content"])), repetition(), complete()),
        )


MODEL = Chat
