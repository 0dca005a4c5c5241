"""How well the estimate fits the noisy 1-way marginals: the report's ``estimation.one_way_fit``.

Post-processing only: it compares the target tables with the released noisy 1-way counts (merged
domain), never with the private table. Per attribute, the total variation distance between the
target 1-way marginal and the noisy one (negatives clipped, both normalised), beside the distance
that noise alone would explain: a perfect estimate of the true table is, per cell, |N(0, sigma^2)|
away from the noisy count, E = sigma sqrt(2/pi), so the expected TVD is cells sigma sqrt(2/pi) / (2 n).
An attribute far above that (``ratio``) is one whose 1-way marginal the estimate does not follow:
the operator sees which histograms to check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.measurements import NoisyMarginal

OFF_RATIO = 2.0
"""An attribute whose fit TVD exceeds this multiple of the noise-explained TVD is listed as ``off``."""


def _one_way_of(tables: Mapping[tuple[str, ...], np.ndarray], domain: Domain, attr: str) -> np.ndarray | None:
    cliques = [c for c in tables if attr in c]
    if not cliques:
        return None
    clique = min(cliques, key=len)
    table = np.asarray(tables[clique], dtype=np.float64)
    axes = tuple(i for i, a in enumerate(clique) if a != attr)
    return table.sum(axis=axes) if axes else table


def one_way_fit(tables: Mapping[tuple[str, ...], np.ndarray], marginals: Sequence[NoisyMarginal], domain: Domain,
                total: float, worst: int = 5) -> dict[str, Any]:
    """Per-attribute TVD of the targets' 1-way marginals to the noisy ones, with the noise-explained TVD.

    Returns ``{"mean_tvd", "mean_noise_tvd", "max_tvd", "attributes": {attr: {"tvd", "noise_tvd",
    "ratio"}}, "worst": [attr, ...], "off": [attr, ...]}`` (``off``: ratio above :data:`OFF_RATIO`).
    """
    n = max(float(total), 1.0)
    per: dict[str, dict[str, float]] = {}
    for m in marginals:
        if len(m.attrs) != 1 or m.attrs[0] in per:
            continue
        attr = m.attrs[0]
        target = _one_way_of(tables, domain, attr)
        if target is None:
            continue
        noisy = np.maximum(np.asarray(m.values, dtype=np.float64), 0.0)
        p = noisy / max(noisy.sum(), 1e-300)
        q = np.maximum(target, 0.0) / max(float(np.maximum(target, 0.0).sum()), 1e-300)
        tvd = 0.5 * float(np.abs(p - q).sum())
        noise = noisy.size * float(m.sigma) * math.sqrt(2.0 / math.pi) / (2.0 * n)
        per[attr] = {"tvd": tvd, "noise_tvd": noise, "ratio": tvd / noise if noise > 0 else float("inf")}
    if not per:
        return {"attributes": {}}
    by_tvd = sorted(per, key=lambda a: -per[a]["tvd"])
    return {"mean_tvd": float(np.mean([v["tvd"] for v in per.values()])),
            "mean_noise_tvd": float(np.mean([v["noise_tvd"] for v in per.values()])),
            "max_tvd": per[by_tvd[0]]["tvd"], "attributes": per, "worst": by_tvd[:worst],
            "off": [a for a in by_tvd if per[a]["ratio"] > OFF_RATIO]}
