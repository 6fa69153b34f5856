"""Is the share of requests the canary answered consistent with its weight? An exact
two-sided binomial test: the tails of a few hundred requests are far from normal."""

from __future__ import annotations

import bisect
import itertools
import math

ALPHA = 0.001
"""A healthy split is called inconsistent once in a thousand runs."""
_RELATIVE = 1 + 1e-9
"""Counts whose probabilities differ only by rounding are equally likely."""


def _pmfs(requests: int, share: float) -> list[float]:
    """P(k canary hits) for every k in 0..requests."""
    if share in (0.0, 1.0):
        return [1.0 if k == round(requests * share) else 0.0 for k in range(requests + 1)]
    return [
        math.exp(
            math.lgamma(requests + 1)
            - math.lgamma(k + 1)
            - math.lgamma(requests - k + 1)
            + k * math.log(share)
            + (requests - k) * math.log(1 - share)
        )
        for k in range(requests + 1)
    ]


def p_values(requests: int, weight: int) -> list[float]:
    """For every count k, the probability under the weight of a count at most as likely as k."""
    pmfs = _pmfs(requests, weight / 100)
    ordered = sorted(pmfs)
    cumulative = list(itertools.accumulate(ordered))
    return [min(1.0, cumulative[bisect.bisect_right(ordered, p * _RELATIVE) - 1]) for p in pmfs]


def p_value(hits: int, requests: int, weight: int) -> float:
    return p_values(requests, weight)[hits]


def consistent(hits: int, requests: int, weight: int) -> bool:
    return p_value(hits, requests, weight) >= ALPHA


def tolerance(requests: int, weight: int) -> tuple[int, int]:
    """The fewest and most canary hits still consistent with the weight."""
    accepted = [k for k, p in enumerate(p_values(requests, weight)) if p >= ALPHA]
    return accepted[0], accepted[-1]
