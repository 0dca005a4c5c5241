"""A people release's budget: the split, the sensitivities, one accountant with parts, the plan."""

from __future__ import annotations

import math

import pytest

from privsyn_spark import PrivSyn
from privsyn_spark.privacy.accounting import Accountant, BudgetExceededError
from privsyn_spark.privacy.people import (
    PeopleSplit,
    degree_sensitivity,
    person_sensitivity,
    row_sensitivity,
)
from privsyn_spark.privacy.unit import PrivacyUnit
from tests.people_tables import people_doc


def test_split_defaults_sum_exactly_and_bad_splits_are_refused():
    rhos = PeopleSplit().rhos(0.3)
    assert rhos == pytest.approx({"persons": 0.105, "degrees": 0.015, "rows": 0.18})
    assert math.fsum(rhos.values()) == pytest.approx(0.3, rel=1e-15)
    for bad in ((0.5, 0.5, 0.5), (0.0, 0.4, 0.6), (-0.1, 0.5, 0.6)):
        with pytest.raises(ValueError, match="PeopleSplit"):
            PeopleSplit(*bad)


def test_sensitivities_one_one_and_k():
    assert (person_sensitivity(), degree_sensitivity()) == (1.0, 1.0)
    assert row_sensitivity(PrivacyUnit(("id",), 7)) == 7.0


def test_accountant_parts_share_one_ledger_and_keep_to_their_share():
    whole = Accountant(1.0)
    persons, rows = whole.part("persons/", 0.4), whole.part("rows/", 0.6)
    persons.register("one_way:a", 0.4, 1.0, math.sqrt(1 / 0.8))
    with pytest.raises(BudgetExceededError):  # the share is spent, though the whole budget is not
        persons.register("one_way:b", 0.1, 1.0, math.sqrt(1 / 0.2))
    rows.register("one_way:a", 0.6, 2.0, 2 * math.sqrt(1 / 1.2))
    assert [e["name"] for e in whole.ledger] == ["persons/one_way:a", "rows/one_way:a"]
    assert whole.is_exhausted() and persons.is_exhausted() and rows.is_exhausted()


def test_plan_of_a_people_run_shows_the_split_and_every_part():
    plan = PrivSyn(people_doc(), epsilon=1.0, no_ledger=True).plan()
    rhos = PeopleSplit().rhos(plan.rho)
    assert [(n, r, s) for n, _, r, s, _, _ in plan.people] == [
        ("persons", rhos["persons"], 1.0), ("degrees", rhos["degrees"], 1.0), ("rows", rhos["rows"], 3.0)]
    names = [r[0] for r in plan.releases]
    assert "persons/one_way:_degree" in names and "rows/one_way:amount" in names
    assert "persons/one_way:amount" not in names  # a row column is not in the person table
    degree = next(r for r in plan.releases if r[0].startswith("degrees"))
    assert degree[2] == pytest.approx(math.sqrt(1 / (2 * rhos["degrees"])))
    assert "people: persons share 0.35 rho" in str(plan)
    persons_sigma = dict((r[0], r[2]) for r in plan.releases)
    rows_sigma_ratio = persons_sigma["rows/one_way:segment"] / math.sqrt(1 / (2 * [
        r[1] for r in plan.releases if r[0] == "rows/one_way:segment"][0]))
    assert rows_sigma_ratio == pytest.approx(3.0)  # the row table at the person unit: sensitivity K
