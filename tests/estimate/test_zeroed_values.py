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


def test_a_ruled_out_code_holds_no_mass_in_the_fit_and_its_cells_noise_moves_nothing_else():
    """A code the noisy 1-way count rules out (count 0) is a structural zero of Private-PGM's fit: the noise a
    pair marginal has in that code's cells neither gives it mass nor moves the kept codes' shares (the fit of the
    kept cells is the one without those cells: a + b's exact tables, here consistent)."""
    from privsyn_spark.estimate.estimation import mirror_descent
    from privsyn_spark.estimate.zeroed_values import ruled_out

    domain = Domain(("a", "b"), (3, 2))
    joint = np.array([[360.0, 240.0], [100.0, 300.0], [0.0, 0.0]])
    noisy_pair = joint + np.array([[0.0, 0.0], [0.0, 0.0], [90.0, -20.0]])  # noise in the ruled-out row only
    marginals = [NoisyMarginal(("a",), joint.sum(1), 1.0, 0.5), NoisyMarginal(("b",), joint.sum(0), 1.0, 0.5),
                 NoisyMarginal(("a", "b"), noisy_pair, 1.0, 0.5)]
    zeros = ruled_out(marginals, domain)
    assert {a: m.tolist() for a, m in zeros.items()} == {"a": [False, False, True]}
    held = mirror_descent(marginals, domain, 1000.0, zeros=zeros, max_iters=2000, tol=1e-9).model
    free = mirror_descent(marginals, domain, 1000.0, max_iters=2000, tol=1e-9).model
    assert held.marginal(("a", "b"))[2].sum() < 1e-6 * 1000.0  # e^-15 of a cell's weight (ZERO_POTENTIAL)
    np.testing.assert_allclose(held.marginal(("a", "b")), joint, atol=0.5)
    assert free.marginal(("a", "b"))[2].sum() > 5.0  # without: the noise gives the ruled-out row mass
