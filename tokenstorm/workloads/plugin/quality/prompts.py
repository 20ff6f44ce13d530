"""The consistency probes' prompts: short questions with one short answer, English and Chinese in turn
(a pass of N probes sends the first N, again from the start past the last; each probe is compared only with
itself, before the load and under it)."""

from __future__ import annotations

__all__ = ["PROBE_PROMPTS"]

PROBE_PROMPTS: tuple[str, ...] = (
    "List the first five prime numbers, separated by commas.",
    "用一句话解释什么是光合作用。",
    "What is the capital of Australia? Answer in one sentence.",
    "请列出一年中的四个季节。",
    "Translate 'good morning' into French, Spanish and German.",
    "水在标准大气压下的沸点是多少摄氏度？",
    "Name three primary colours.",
    "请用三个词形容秋天。",
    "Write one sentence about the Moon.",
    "一周有几天？请依次列出它们的名字。",
    "What is 17 multiplied by 23? Show the result only.",
    "请写出“学习”这个词的一个反义词和一个近义词。",
    "Give a one-line definition of a contract.",
    "中国的首都是哪座城市？请用一句话回答。",
    "Spell the word 'necessary' backwards.",
    "请说出太阳系中最大的行星。",
)
