"""A private draft's type test: whether an untyped (string) column holds numbers or dates, from noisy counts.

For each tested column one release of ``1 + len(TYPE_CANDIDATES)`` counts: its non-null values (the null
tokens left out), then per candidate type the values that do *not* parse as it. A row adds at most 1 to each
count, so the vector's L2 sensitivity is ``sqrt(6)`` (a person of K rows: ``K sqrt(6)``; the discrete Gaussian at
rho-zCDP, CKS20). The decision is post-processing: the first candidate whose noisy misses are at most
``max(MISS_SHARE x noisy values, EMPTY_SIGMAS sigma)``, when the noisy values are above twice that; else none
(the column stays a string). A value that does not parse as the chosen type is read as null, as ``--dtype`` does.
"""

from __future__ import annotations

import math

import numpy as np

from privsyn_spark.privacy.accounting import Accountant
from privsyn_spark.privacy.discovery import EMPTY_SIGMAS
from privsyn_spark.privacy.noise import NoiseSampler, gaussian_mechanism
from privsyn_spark.privacy.unit import PrivacyUnit, count_sensitivity

TYPE_CANDIDATES = ("int", "long", "double", "date", "timestamp")
"""The types tested, narrowest first (a whole number parses as each of int, long, double)."""
TYPE_TEST_SHARE = 0.1
"""The share of a draft's column budget that its type tests take (only when some column is tested)."""
MISS_SHARE = 0.01
"""A type is taken when at most this share of the values (or the noise) does not parse as it."""


def release_type(exact: np.ndarray, rho: float, *, accountant: Accountant, sampler: NoiseSampler, name: str,
                 unit: PrivacyUnit = PrivacyUnit()) -> str | None:
    """The type of a string column from its counts ``exact`` (values, then misses per :data:`TYPE_CANDIDATES`),
    released once at ``rho``; None when no candidate fits (module docstring)."""
    exact = np.asarray(exact, dtype=np.int64)
    if exact.shape != (1 + len(TYPE_CANDIDATES),):
        raise ValueError(f"release_type({name!r}): expected {1 + len(TYPE_CANDIDATES)} counts, got {exact.shape}")
    sensitivity = count_sensitivity(unit) * math.sqrt(exact.size)  # each count moves by at most K
    noisy, sigma = gaussian_mechanism(exact, rho, accountant=accountant, sampler=sampler, name=f"{name}:type",
                                      sensitivity=sensitivity, **unit.record())
    values = noisy[0]
    bar = max(MISS_SHARE * values, EMPTY_SIGMAS * sigma)
    if values <= 2 * bar:
        return None
    return next((t for t, miss in zip(TYPE_CANDIDATES, noisy[1:]) if miss <= bar), None)
