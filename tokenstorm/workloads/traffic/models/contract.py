"""Contract analysis: a long contract (English or Chinese) assembled from the bundled clauses to a
target length in tokens, a review instruction asking for structured findings, and a system prompt
shared by every request. A configurable share of the document is identical across requests, so
prefix caching can be exercised and measured.
"""

from __future__ import annotations

import random
from functools import cache
from importlib import resources
from typing import Any

from ...client.client import CompletionRequest
from ..base import Option, OwnSetting, Session, TrafficModel, WorkloadSettings
from ..checks.needle import make_needle, needle
from ..lengths import LengthDist
from ..tokens import TokenCounter

__all__ = ["CONTRACT_SYSTEM", "Contract"]

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
    "en": [
        "Northwind Systems Ltd",
        "Blue Harbor Analytics GmbH",
        "Acme Cloud Services Inc",
        "Riverstone Bank plc",
        "Helios Medical BV",
        "Kite Logistics LLC",
    ],
    "zh": [
        "北京星河科技有限公司",
        "上海云启数据服务有限公司",
        "深圳远航物流股份有限公司",
        "杭州青禾医疗器械有限公司",
        "广州瑞丰商业银行",
        "成都天府软件有限公司",
    ],
}
_CITIES = {"en": ["London", "Singapore", "New York", "Frankfurt"], "zh": ["北京市", "上海市", "深圳市", "杭州市"]}


@cache
def _clauses(lang: str) -> tuple[str, ...]:
    text = (
        resources.files("tokenstorm.workloads.traffic").joinpath(f"data/contract_clauses_{lang}.txt").read_text("utf-8")
    )
    paras = [p.strip() for p in text.split("\n\n")]
    return tuple(p for p in paras if p and not p.startswith("#"))


def _document(lang: str, rng: random.Random, tokens: int, counter: TokenCounter, start_article: int = 1) -> str:
    """A contract of about ``tokens`` tokens: clauses in order, then again with new numbers."""
    a, b = rng.sample(_PARTIES[lang], 2)
    fill = {
        "party_a": a,
        "party_b": b,
        "amount": f"{rng.randrange(1, 50) * 100_000:,}",
        "days": str(rng.choice((15, 30, 45, 60))),
        "city": rng.choice(_CITIES[lang]),
    }
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


def _parse_on_off(value: Any) -> bool:
    word = str(value).strip().lower()
    if word in ("on", "true", "yes", "1"):
        return True
    if word in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"needle must be on or off, not {value!r}")


def _parse_depth(value: Any) -> tuple[float, float]:
    """``D`` or ``LO-HI``, each 0 (the document's start) to 1 (its end)."""
    text = str(value).strip()
    lo_text, _, hi_text = text.partition("-")
    try:
        lo = float(lo_text)
        hi = float(hi_text) if hi_text else lo
    except ValueError:
        raise ValueError(f"needle_depth must be D or LO-HI between 0 and 1, e.g. 0-1 or 0.9, not {text!r}") from None
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"needle_depth must be D or LO-HI between 0 and 1 with LO <= HI, not {text!r}")
    return lo, hi


def _prompt(settings: WorkloadSettings) -> LengthDist:
    assert settings.prompt_tokens is not None  # contract always has a prompt length
    return settings.prompt_tokens


class Contract(TrafficModel):
    """Long contract documents for review: long context, ~512 output tokens."""

    name = "contract"
    description = "contract analysis: long documents (en/zh), structured review, shared prefix"
    defaults = WorkloadSettings(
        "contract",
        1,
        LengthDist.parse(512),
        LengthDist.parse("uniform:2000-8000"),
        shared_prefix=0.5,
        wait_s=(1.0, 5.0),
        extra={"needle": True, "needle_depth": None},
    )
    settings = frozenset({"prompt_tokens", "output_tokens", "shared_prefix", "languages", "wait_s"})
    own_settings = (OwnSetting("needle", _parse_on_off), OwnSetting("needle_depth", _parse_depth))
    options = (
        Option(
            "prompt-tokens",
            "prompt_tokens",
            "Contract prompt length, e.g. uniform:2000-8000, 32000 (default uniform:2000-8000)",
        ),
        Option("output-tokens", "output_tokens", "Contract output length (default 512)"),
        Option(
            "shared-prefix",
            "shared_prefix",
            "Share of each contract identical across requests, 0-1, to exercise prefix caching (default 0.5)",
        ),
        Option("languages", "languages", "en, zh or en,zh (default en,zh)"),
        Option(
            "needle",
            "needle",
            "on (default) or off: hide a unique fact (an account number, amount, date or "
            "party) in each contract, ask for it, and check the answer names it (the needle check)",
        ),
        Option(
            "needle-depth",
            "needle_depth",
            "Where the needle sits, 0 (the document's start) to 1 (its end): "
            "D or LO-HI, drawn uniformly. Default: anywhere after the shared prefix, which a needle would "
            "end (0-1 with a shared prefix trades prefix-cache hits for depth coverage)",
        ),
    )

    def __init__(self, settings: WorkloadSettings, counter: TokenCounter, seed: int = 0) -> None:
        super().__init__(settings, counter, seed)
        shared_tokens = round(settings.shared_prefix * _prompt(settings).mean)
        # The shared part is the same for every user and request (fixed seed): a cacheable prefix.
        self._shared = {
            lang: _document(lang, random.Random(f"shared/{seed}/{lang}"), shared_tokens, counter)
            if shared_tokens
            else ""
            for lang in settings.languages
        }
        self._system_tokens = counter.count(CONTRACT_SYSTEM)
        extra = {**self.defaults.extra, **settings.extra}
        self._needle: bool = extra["needle"]
        self._depth: tuple[float, float] | None = extra["needle_depth"]

    def session(self, rng: random.Random) -> Session:
        """One review request."""
        yield self.request(rng)

    def request(self, rng: random.Random) -> CompletionRequest:
        """A review request of a freshly assembled contract."""
        s = self.config
        lang = rng.choice(s.languages)
        target = _prompt(s).sample(rng)
        fact = make_needle(lang, rng) if self._needle else None
        review = _REVIEW[lang] + ((" " if lang == "en" else "") + fact.question if fact else "")
        budget = max(1, target - self._system_tokens - self.counter.count(review) - 8)
        if fact:
            budget = max(1, budget - self.counter.count(fact.fact) - 1)
        shared = self.counter.truncate(self._shared[lang], budget) if self._shared[lang] else ""
        rest = budget - (self.counter.count(shared) if shared else 0)
        unique = _document(lang, rng, rest, self.counter, start_article=1000) if rest > 0 else ""
        own = shared.count("\n\n") + 1 if shared else 0  # the shared prefix's paragraphs
        paras = [p for p in "\n\n".join(p for p in (shared, unique) if p).split("\n\n") if p]
        depth = None
        if fact:
            # The fact as a paragraph of its own, at a depth drawn from needle_depth (by paragraphs), by
            # default after the shared prefix (a unique paragraph inside it would end the cacheable part).
            at = round(rng.uniform(*self._depth) * len(paras)) if self._depth else rng.randint(own, len(paras))
            paras.insert(at, fact.fact)
            depth = at / max(1, len(paras) - 1)
        user = "\n\n".join(paras) + f"\n\n{review}"
        return CompletionRequest(
            workload=s.name,
            endpoint="chat",
            messages=[{"role": "system", "content": CONTRACT_SYSTEM}, {"role": "user", "content": user}],
            max_tokens=s.output_tokens.sample(rng),
            requested_prompt_tokens=self._system_tokens + self.counter.count(user),
            checks=(needle(fact),) if fact else (),
            needle_depth=depth,
        )


MODEL = Contract
