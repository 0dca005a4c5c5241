import numpy as np

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.zeroed_values import drop_zeroed_values
from privsyn_spark.privacy.measurements import NoisyMarginal


def test_zeroed_values_leave_every_target_and_totals_stay():
    domain = Domain(("a", "b"), (3, 2))
    one_way = [NoisyMarginal(("a",), np.array([50.0, 40.0, 0.0]), 1.0, 0.1),
               NoisyMarginal(("b",), np.array([45.0, 45.0]), 1.0, 0.1)]
    tables = {("a", "b"): np.array([[20.0, 25.0], [20.0, 20.0], [3.0, 2.0]]), ("a",): np.array([50.0, 35.0, 5.0])}
    out = drop_zeroed_values(tables, one_way, domain)
    assert out[("a", "b")][2].tolist() == [0.0, 0.0] and out[("a",)][2] == 0.0
    assert out[("a", "b")].sum() == np.float64(90.0) and out[("a",)].sum() == np.float64(90.0)
    np.testing.assert_allclose(out[("a", "b")][:2] / out[("a", "b")][:2].sum(), tables[("a", "b")][:2] / 85.0)
