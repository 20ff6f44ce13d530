"""Request generators for the three traffic models. Same seed, same requests.

* Contract analysis: a long contract (English or Chinese) assembled from the bundled clauses
  to a target length in tokens, a review instruction asking for structured findings, and a
  system prompt shared by every request. A configurable share of the document is identical
  across requests, so prefix caching can be exercised and measured.
* Code completion: prefixes cut from real Python source (the standard library's own files),
  as raw ``/v1/completions`` prompts with stop sequences or as chat skills (completion,
  unit-test generation, bug finding).
* Chat: multi-turn conversations (bundled, or a ShareGPT/JSONL dataset) whose history grows.
"""

from __future__ import annotations

import json
import random
import sysconfig
from functools import cache
from importlib import resources
from pathlib import Path

from ._client import CompletionRequest
from ._datasets import Conversation, load_dataset
from ._settings import WorkloadSettings
from ._tokens import TokenCounter

__all__ = ["ChatSessions", "CodePrompts", "ContractPrompts"]

CONTRACT_SYSTEM = (
    "You are a senior contracts lawyer. Review the contract the user provides and answer in JSON with the keys "
    "parties, obligations (per party), payment_terms, liability (caps and exclusions), jurisdiction, termination, "
    "and risks (each with clause reference, severity high/medium/low and a recommended change)."
)
_REVIEW = {
    "en": "Review the contract above. Report the parties, each party's obligations, the liability regime, the "
    "governing law and jurisdiction, termination rights, and the three biggest risks for the Customer.",
    "zh": "请审阅以上合同，列出合同双方、各方义务、违约责任及赔偿上限、适用法律和管辖法院、"
    "合同解除条件，并指出对甲方最大的三项风险及修改建议。",
}
_PARTIES = {
    "en": ["Northwind Systems Ltd", "Blue Harbor Analytics GmbH", "Acme Cloud Services Inc", "Riverstone Bank plc",
           "Helios Medical BV", "Kite Logistics LLC"],
    "zh": ["北京星河科技有限公司", "上海云启数据服务有限公司", "深圳远航物流股份有限公司", "杭州青禾医疗器械有限公司",
           "广州瑞丰商业银行", "成都天府软件有限公司"],
}  # fmt: skip
_CITIES = {"en": ["London", "Singapore", "New York", "Frankfurt"], "zh": ["北京市", "上海市", "深圳市", "杭州市"]}
_FOLLOW_UPS = ("Can you go into more detail on that?", "Give me a concrete example.",
               "Summarise that in two sentences.", "What would you do differently?",
               "请用中文再解释一遍。")  # fmt: skip


@cache
def _clauses(lang: str) -> tuple[str, ...]:
    text = resources.files("workloads").joinpath(f"data/contract_clauses_{lang}.txt").read_text("utf-8")
    paras = [p.strip() for p in text.split("\n\n")]
    return tuple(p for p in paras if p and not p.startswith("#"))


def _document(lang: str, rng: random.Random, tokens: int, counter: TokenCounter, start_article: int = 1) -> str:
    """A contract of about ``tokens`` tokens: clauses in order, then again with new numbers."""
    a, b = rng.sample(_PARTIES[lang], 2)
    fill = {"party_a": a, "party_b": b, "amount": f"{rng.randrange(1, 50) * 100_000:,}",
            "days": str(rng.choice((15, 30, 45, 60))), "city": rng.choice(_CITIES[lang])}  # fmt: skip
    parts: list[str] = []
    total = 0
    n = start_article
    clauses = _clauses(lang)
    while total < tokens:
        for clause in clauses:
            head = f"第{n}条 " if lang == "zh" else f"Article {n}. "
            para = head + clause.format(**fill)
            parts.append(para)
            total += counter.count(para) + 1
            n += 1
            if total >= tokens:
                break
    return counter.truncate("\n\n".join(parts), tokens)


class ContractPrompts:
    """Long-context contract review requests."""

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        self.settings = settings
        self.counter = counter
        shared_tokens = round(settings.shared_prefix * settings.prompt_tokens.mean)
        # The shared part is the same for every user and request (fixed seed): a cacheable prefix.
        self._shared = {lang: _document(lang, random.Random(f"shared/{seed}/{lang}"), shared_tokens, counter)
                        if shared_tokens else "" for lang in settings.languages}  # fmt: skip
        self._system_tokens = counter.count(CONTRACT_SYSTEM)

    def next(self, rng: random.Random) -> CompletionRequest:
        """One review request."""
        s = self.settings
        lang = rng.choice(s.languages)
        target = s.prompt_tokens.sample(rng)
        review = _REVIEW[lang]
        budget = max(1, target - self._system_tokens - self.counter.count(review) - 8)
        shared = self.counter.truncate(self._shared[lang], budget) if self._shared[lang] else ""
        rest = budget - (self.counter.count(shared) if shared else 0)
        unique = _document(lang, rng, rest, self.counter, start_article=1000) if rest > 0 else ""
        doc = "\n\n".join(p for p in (shared, unique) if p)
        user = f"{doc}\n\n{review}"
        return CompletionRequest(
            workload=s.name,
            endpoint="chat",
            messages=[{"role": "system", "content": CONTRACT_SYSTEM}, {"role": "user", "content": user}],
            max_tokens=s.output_tokens.sample(rng),
            requested_prompt_tokens=self._system_tokens + self.counter.count(user),
        )


_STDLIB_MODULES = ("textwrap.py", "json/encoder.py", "json/decoder.py", "argparse.py", "csv.py", "heapq.py",
                   "fractions.py", "dataclasses.py", "functools.py", "shutil.py", "statistics.py", "string.py",
                   "ipaddress.py", "calendar.py", "difflib.py", "bisect.py", "configparser.py", "gzip.py",
                   "pprint.py", "shlex.py", "tempfile.py", "uuid.py", "email/utils.py")  # fmt: skip


@cache
def _code_sources() -> tuple[tuple[str, tuple[str, ...]], ...]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [stdlib / m for m in _STDLIB_MODULES if (stdlib / m).exists()]
    if not files:  # stdlib sources stripped (some containers): use tokenstorm's own
        files = sorted(Path(__file__).parent.glob("*.py"))
    out = []
    for f in files:
        lines = tuple(f.read_text(encoding="utf-8", errors="replace").splitlines())
        if len(lines) > 40:
            out.append((f.name, lines))
    return tuple(out)


_SKILL_PROMPTS = {
    "complete": "Complete the following Python code. Reply with the missing code only.\n\n```python\n{code}",
    "unit_test": "Write pytest unit tests for the last function in this Python code:\n\n```python\n{code}\n```",
    "bug_find": "Find bugs in this Python code. For each: the line, the problem and a fix.\n\n```python\n{code}\n```",
}
_STOP = ["\ndef ", "\nclass ", "\n\n\n", "\nif __name__"]


class CodePrompts:
    """Short, latency-critical code requests."""

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter) -> None:
        self.settings = settings
        self.counter = counter
        self._sources = _code_sources()

    def _prefix(self, rng: random.Random, tokens: int) -> str:
        _name, lines = rng.choice(self._sources)
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(("def ", "class "))] or [0]
        i = rng.choice(starts)
        out: list[str] = []
        total = 0
        while i < len(lines) and total < tokens:
            out.append(lines[i])
            total += self.counter.count(lines[i]) + 1
            i += 1
        # Cut inside the body so there is something to complete.
        cut = max(1, len(out) - rng.randint(0, min(3, len(out) - 1)))
        return "\n".join(out[:cut]) + "\n"

    def next(self, rng: random.Random) -> CompletionRequest:
        """One code request."""
        s = self.settings
        code = self._prefix(rng, s.prompt_tokens.sample(rng))
        skill = rng.choice(s.skills)
        max_tokens = s.output_tokens.sample(rng)
        use_completions = skill == "complete" and (
            s.endpoint == "completions" or (s.endpoint == "both" and rng.random() < 0.5)
        )
        if use_completions:
            return CompletionRequest(workload=s.name, endpoint="completions", prompt=code, max_tokens=max_tokens,
                                     stop=list(_STOP), requested_prompt_tokens=self.counter.count(code))  # fmt: skip
        text = _SKILL_PROMPTS[skill].format(code=code)
        return CompletionRequest(
            workload=s.name, endpoint="chat", messages=[{"role": "user", "content": text}], max_tokens=max_tokens,
            stop=["```\n\n"] if skill == "complete" else None, requested_prompt_tokens=self.counter.count(text),
        )  # fmt: skip


@cache
def _bundled_conversations() -> tuple[Conversation, ...]:
    text = resources.files("workloads").joinpath("data/chat_conversations.jsonl").read_text("utf-8")
    return tuple(Conversation(tuple(json.loads(line)["turns"])) for line in text.splitlines() if line.strip())


class ChatSessions:
    """Multi-turn conversations: pick one, then replay its user turns with growing history."""

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter) -> None:
        self.settings = settings
        self.counter = counter
        self.conversations = (
            tuple(load_dataset(Path(settings.dataset))) if settings.dataset else _bundled_conversations()
        )

    def session(self, rng: random.Random) -> list[str]:
        """The user turns of one session (padded with follow-ups up to ``turns``)."""
        conv = rng.choice(self.conversations)
        turns = list(conv.turns[: self.settings.turns])
        while len(turns) < self.settings.turns:
            turns.append(rng.choice(_FOLLOW_UPS))
        return turns

    def request(self, rng: random.Random, history: list[dict[str, str]]) -> CompletionRequest:
        """The request for the next turn, given the history so far (ending in a user turn)."""
        s = self.settings
        extra: dict[str, object] = {}
        if s.thinking:
            extra["chat_template_kwargs"] = {"enable_thinking": s.thinking == "on"}
        return CompletionRequest(
            workload=s.name, endpoint="chat", messages=list(history), max_tokens=s.output_tokens.sample(rng),
            extra_body=extra, collect_text=True,
            requested_prompt_tokens=sum(self.counter.count(m["content"]) for m in history),
        )  # fmt: skip
