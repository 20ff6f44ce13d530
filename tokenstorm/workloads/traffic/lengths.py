"""Token-length distributions: fixed, uniform, normal, lognormal.

Written as ``512``, ``fixed:512``, ``uniform:256-1024``, ``normal:512,128`` (mean, std) or
``lognormal:512,0.6`` (mean, sigma of the underlying normal). Samples are clipped to
``[1, max]`` and drawn from the caller's seeded ``random.Random``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["LengthDist"]


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts."""

    kind: str
    a: float
    b: float = 0.0
    maximum: int = 10_000_000

    @classmethod
    def parse(cls, text: str | int) -> LengthDist:
        """Parse the compact form; raise ``ValueError`` with the expected syntax."""
        raw = str(text).strip()
        kind, _, args = raw.partition(":") if ":" in raw else ("fixed", "", raw)
        try:
            if kind == "fixed":
                dist = cls("fixed", float(args))
            elif kind == "uniform":
                lo, hi = (float(x) for x in args.split("-"))
                if hi < lo:
                    raise ValueError
                dist = cls("uniform", lo, hi)
            elif kind in ("normal", "lognormal"):
                mean, spread = (float(x) for x in args.split(","))
                if spread < 0:
                    raise ValueError
                dist = cls(kind, mean, spread)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"bad length {raw!r}: use N, fixed:N, uniform:LO-HI, normal:MEAN,STD or lognormal:MEAN,SIGMA"
            ) from None
        if dist.a < 1:
            raise ValueError(f"bad length {raw!r}: lengths are at least 1 token")
        return dist

    @property
    def mean(self) -> float:
        """The distribution's mean (before clipping)."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    def sample(self, rng: random.Random) -> int:
        """One length in tokens."""
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.uniform(self.a, self.b)
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:  # lognormal with the given mean: mu = ln(mean) - sigma^2 / 2
            value = rng.lognormvariate(math.log(self.a) - self.b**2 / 2, self.b)
        return max(1, min(self.maximum, round(value)))

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{self.a:g}"
        if self.kind == "uniform":
            return f"uniform:{self.a:g}-{self.b:g}"
        return f"{self.kind}:{self.a:g},{self.b:g}"
