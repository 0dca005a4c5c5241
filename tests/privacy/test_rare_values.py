"""Rare-value merging of the noisy 1-way marginals (PrivSyn Algorithm 3, line 2): merged above theta, else zeroed."""

from __future__ import annotations

import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.rare_values import merge_attribute, merge_rare_values


def test_rare_values_merged_when_their_total_is_above_theta():
    vmap, counts, zeroed = merge_attribute(np.array([100.0, 2.0, 50.0, 4.0, 5.0, -1.0]), theta=9.0)
    assert vmap.tolist() == [0, 2, 1, 2, 2, 2]   # kept values in order, rare ones -> new last code
    assert counts.tolist() == [100.0, 50.0, 10.0] and not zeroed


def test_rare_values_zeroed_when_their_total_is_small():
    vmap, counts, zeroed = merge_attribute(np.array([100.0, 2.0, 50.0, 4.0, -3.0]), theta=9.0)
    assert vmap.tolist() == [0, 2, 1, 2, 2] and counts.tolist() == [100.0, 50.0, 0.0] and zeroed


def test_rare_values_untouched_attribute_and_domain():
    domain = Domain(("x", "y"), (3, 4))
    merged = merge_rare_values({"x": np.array([50.0, 60.0, 70.0]), "y": np.array([50.0, 1.0, 0.0, 80.0])},
                               domain, sigma=3.0)
    assert merged.domain.to_dict() == {"x": 3, "y": 3}
    assert merged.value_maps["x"].tolist() == [0, 1, 2] and merged.value_maps["y"].tolist() == [0, 2, 2, 1]
    assert merged.merged_counts == {"x": 0, "y": 2} and merged.zeroed == {"x": False, "y": True}
