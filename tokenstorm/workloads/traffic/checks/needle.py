"""Needle recall in long documents: a unique fact (an account number, an amount, a date, a party's name)
placed at a chosen depth of a contract, a question that asks for it, and the check that the answer
contains it.

The wording is a contract with the emulator, which answers it (``tokenstorm/emulator/_answers.py``):

* fact, English: ``The {subject} is {value}.`` — Chinese: ``{subject}为{value}。`` (a paragraph of its own,
  unnumbered);
* question, English: ``Also answer, on the first line of your reply: what is the {subject} stated in the
  contract?`` — Chinese: ``另外，请在回复的第一行回答：合同中约定的{subject}是什么？``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from . import Check, CheckCall, Reply

__all__ = ["Needle", "make_needle", "needle"]

_SYLLABLES = ("var", "lo", "ten", "mar", "quin", "bel", "dor", "sa", "vik", "ro", "zen", "tal", "mo", "ris")
_SUFFIX = {
    "en": ("Holdings Ltd", "Partners LLP", "Trust Company", "Capital AG"),
    "zh": ("控股有限公司", "投资合伙企业", "信托有限公司", "资本股份公司"),
}
_ZH_NAME = "甲乙丙丁戊己庚辛壬癸金木水火土"
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_SUBJECTS = {
    "en": ("escrow account number", "settlement amount", "effective date", "guarantor"),
    "zh": ("托管账户编号", "和解金额", "生效日期", "担保人"),
}
FACT = {"en": "The {subject} is {value}.", "zh": "{subject}为{value}。"}
QUESTION = {
    "en": "Also answer, on the first line of your reply: what is the {subject} stated in the contract?",
    "zh": "另外，请在回复的第一行回答：合同中约定的{subject}是什么？",
}
_SPACE = re.compile(r"[\s,，]+")
_SEPARATORS = re.compile(r"[,，]")


@dataclass(frozen=True, slots=True)
class Needle:
    """One hidden fact: the sentence that states it, the question that asks for it, its value."""

    lang: str
    subject: str
    value: str

    @property
    def fact(self) -> str:
        """The sentence placed in the document."""
        return FACT[self.lang].format(subject=self.subject, value=self.value)

    @property
    def question(self) -> str:
        """The question added to the instruction."""
        return QUESTION[self.lang].format(subject=self.subject)


def _value(kind: int, lang: str, rng: random.Random) -> str:
    if kind == 0:
        return f"EA-{rng.randrange(10_000, 100_000)}-{rng.choice('KLMNPQRSTVWXZ')}"
    if kind == 1:
        amount = f"{rng.randrange(1_000_000, 99_000_000):,}"
        return f"人民币{amount}元" if lang == "zh" else f"USD {amount}"
    if kind == 2:
        year, month, day = rng.randrange(2027, 2040), rng.randrange(12), rng.randrange(1, 29)
        return f"{year}年{month + 1}月{day}日" if lang == "zh" else f"{day} {_MONTHS[month]} {year}"
    if lang == "zh":
        return "".join(rng.choice(_ZH_NAME) for _ in range(3)) + rng.choice(_SUFFIX["zh"])
    name = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
    return f"{name} {rng.choice(_SUFFIX['en'])}"


def make_needle(lang: str, rng: random.Random) -> Needle:
    """A fresh fact in ``lang`` (``"en"`` or ``"zh"``): its kind and value drawn from ``rng``."""
    kind = rng.randrange(len(_SUBJECTS[lang]))
    return Needle(lang, _SUBJECTS[lang][kind], _value(kind, lang, rng))


def _normal(text: str) -> str:
    return _SPACE.sub("", text).casefold()


def needle(expected: Needle) -> Check:
    """The answer names the needle's value (case, spaces and thousands separators aside) as a whole: not inside
    a longer number or code ("15 March" is not "5 March", "USD 1,234,567,000" not "USD 1,234,567")."""
    # the value's characters, any spacing between them; commas out of both sides
    body = r"\s*".join(re.escape(c) for c in _normal(expected.value))
    return CheckCall("needle", _needle, (expected, rf"(?<![0-9a-z]){body}(?![0-9a-z])"))


def _needle(reply: Reply, expected: Needle, pattern: str) -> bool | str | None:
    if re.search(pattern, _SEPARATORS.sub("", reply.text.casefold())):  # compiled once, kept by re's cache
        return True
    return f"the {expected.subject} {expected.value!r} is not in the answer"
