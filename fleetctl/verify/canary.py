"""Is the share of requests the canary answered consistent with its weight? An exact
two-sided binomial test: the tails of a few hundred requests are far from normal."""

from __future__ import annotations

import math

ALPHA = 0.001
"""A healthy split is called inconsistent once in a thousand runs."""


def _pmf(k: int, requests: int, share: float) -> float:
    if share in (0.0, 1.0):
        return 1.0 if k == round(requests * share) else 0.0
    log = (
        math.lgamma(requests + 1)
        - math.lgamma(k + 1)
        - math.lgamma(requests - k + 1)
        + k * math.log(share)
        + (requests - k) * math.log(1 - share)
    )
    return math.exp(log)


def p_value(hits: int, requests: int, weight: int) -> float:
    """The probability, under the configured weight, of a count at most as likely as ``hits``."""
    share = weight / 100
    observed = _pmf(hits, requests, share)
    return min(1.0, sum(p for k in range(requests + 1) if (p := _pmf(k, requests, share)) <= observed * (1 + 1e-9)))


def consistent(hits: int, requests: int, weight: int) -> bool:
    return p_value(hits, requests, weight) >= ALPHA


def tolerance(requests: int, weight: int) -> tuple[int, int]:
    """The fewest and most canary hits still consistent with the weight."""
    accepted = [k for k in range(requests + 1) if consistent(k, requests, weight)]
    return accepted[0], accepted[-1]
