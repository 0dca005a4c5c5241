"""The privacy unit's sensitivities (privacy/unit.py): every ledger entry's sigma is K times the
row-level sigma at the same rho, every entry records the unit and K, the artifact records them, the
default unit is bit for bit the row-level release, and bad units are one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privsyn_spark.domain import Domain
from privsyn_spark.privacy.accounting import Accountant, gaussian_sigma
from privsyn_spark.privacy.discovery import geometric_grid, release_numeric, select_partitions, selection_threshold
from privsyn_spark.privacy.measurements import Measurements
from privsyn_spark.privacy.noise import SeededSamplerForTestsOnly
from privsyn_spark.privacy.unit import PrivacyUnit, PrivacyUnitError, count_sensitivity, partition_threshold
from privsyn_spark.release.measure_privately import measure_privately
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import parse_schema
from privsyn_spark.select.selection_config import SelectionConfig

DOMAIN = Domain(("a", "b", "c"), (3, 4, 5))
EVERY_PAIR = SelectionConfig(min_improvement=-1e18, combine=True)  # all pairs, as (a, b, c), whatever the noise


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.integers(0, s, 5000) for s in DOMAIN.sizes])
    one_way = {(a,): np.bincount(rows[:, j], minlength=s) for j, (a, s) in enumerate(zip(DOMAIN.attrs, DOMAIN.sizes))}

    def exact(marginals, recode):
        out = {}
        for m in marginals:
            idx = [DOMAIN.attrs.index(a) for a in m]
            codes = [np.asarray(recode[a])[rows[:, i]] for a, i in zip(m, idx)]
            shape = tuple(int(np.asarray(recode[a]).max()) + 1 for a in m)
            table = np.zeros(shape, dtype=np.int64)
            np.add.at(table, tuple(codes), 1)
            out[m] = table
        return out

    scores = {p: float(v) for p, v in zip([("a", "b"), ("a", "c"), ("b", "c")], [40.0, 3.0, 900.0])}
    return one_way, scores, exact


def _measure(unit: PrivacyUnit, seed: int = 1) -> Measurements:
    one_way, scores, exact = _inputs()
    return measure_privately(one_way, scores, exact, DOMAIN, run_id="r", schema_hash="h", epsilon=2.0, delta=1e-9,
                             sampler=SeededSamplerForTestsOnly(seed), unit=unit,
                             selection=EVERY_PAIR)


@pytest.mark.parametrize("k", [2, 5, 50])
def test_every_ledger_sigma_is_k_times_the_row_sigma(k):
    row, person = _measure(PrivacyUnit()), _measure(PrivacyUnit(("pid",), k))
    assert [e["name"] for e in row.ledger] == [e["name"] for e in person.ledger]
    assert {e["name"] for e in person.ledger} >= {"one_way:a", "indif"}
    for r, p in zip(row.ledger, person.ledger):
        assert p["rho"] == r["rho"]
        assert p["sigma_requested"] == pytest.approx(k * r["sigma_requested"], rel=1e-12)
        assert p["sensitivity"] == pytest.approx(k * r["sensitivity"], rel=1e-12)
        assert p["sigma_requested"] == pytest.approx(gaussian_sigma(p["sensitivity"], p["rho"]), rel=1e-12)
        assert (p["privacy_unit"], p["max_rows_per_id"]) == ("pid", k)
        assert (r["privacy_unit"], r["max_rows_per_id"]) == ("row", 1)
    assert person.privacy_unit == {"privacy_unit": "pid", "max_rows_per_id": k}
    again = Measurements.from_bytes(person.to_bytes())
    assert again.privacy_unit == person.privacy_unit
    # the rare-value threshold (3 sigma) follows the 1-way sigma
    assert person.marginals[0].sigma >= k * row.marginals[0].sigma * (1 - 1e-5)


def test_the_default_unit_is_the_row_release_bit_for_bit():
    one_way, scores, exact = _inputs()
    old = measure_privately(one_way, scores, exact, DOMAIN, run_id="r", schema_hash="h", epsilon=2.0, delta=1e-9,
                            sampler=SeededSamplerForTestsOnly(1), selection=EVERY_PAIR)
    new = _measure(PrivacyUnit.of(None))
    assert old.noisy_total == new.noisy_total
    assert all(np.array_equal(x.values, y.values) and x.sigma == y.sigma for x, y in zip(old.marginals, new.marginals))


def test_discovery_releases_scale_with_k():
    k, rho, delta = 7, 0.01, 1e-6
    unit = PrivacyUnit(("pid",), k)
    acc = Accountant(1.0)
    picked = select_partitions({"a": 500, "b": 3}, 0, rho, delta, accountant=acc, sampler=SeededSamplerForTestsOnly(2),
                               name="p", unit=unit)
    assert picked.sigma == pytest.approx(k * gaussian_sigma(1.0, rho))
    assert picked.threshold == pytest.approx(k + picked.sigma * math.sqrt(2 * math.log(k / delta)))
    assert selection_threshold(3.0, delta) == partition_threshold(3.0, delta, PrivacyUnit())
    assert selection_threshold(3.0, delta) == 1.0 + 3.0 * math.sqrt(2.0 * math.log(1.0 / delta))
    grid = geometric_grid(0, 100, True)
    cells = np.zeros(grid.cells, dtype=np.int64)
    cells[5] = 1000
    release_numeric(cells, 0, grid, rho, lambda ranges: np.zeros(sum(hi - lo + 1 for lo, hi in ranges), np.int64),
                    accountant=acc, sampler=SeededSamplerForTestsOnly(3), name="n", unit=unit)
    for entry in acc.ledger:
        assert entry["max_rows_per_id"] == k and entry["sensitivity"] == k
        assert entry["sigma_requested"] == pytest.approx(k * gaussian_sigma(1.0, entry["rho"]))


def test_bad_units_are_one_line_errors():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(PrivacyUnitError, match="max_rows_per_id must be a whole number >= 1"):
            PrivacyUnit(("pid",), bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyUnitError, match="needs a privacy id"):
        PrivacyUnit((), 3)
    with pytest.raises(PrivacyUnitError, match="distinct"):
        PrivacyUnit(("a", "a"), 3)
    assert count_sensitivity(PrivacyUnit(("pid",), 9)) == 9.0 and count_sensitivity(PrivacyUnit()) == 1.0
    cols = [{"name": "x", "type": "categorical", "values": ["a", "b"]}, {"name": "pid", "type": "drop"}]
    schema = parse_schema({"columns": cols, "privacy_unit": {"id": "pid", "max_rows_per_id": 4}})
    assert schema.privacy_unit == PrivacyUnit(("pid",), 4)
    assert parse_schema(schema.to_document()) == schema
    assert parse_schema({"columns": cols}).schema_hash() != schema.schema_hash()
    with pytest.raises(SchemaError, match="max_rows_per_id must be a whole number >= 1"):
        parse_schema({"columns": cols, "privacy_unit": {"id": "pid", "max_rows_per_id": 0}})
    with pytest.raises(SchemaError, match="never synthesized"):
        parse_schema({"columns": cols, "privacy_unit": {"id": "x", "max_rows_per_id": 2}})
    with pytest.raises(SchemaError, match="unknown key"):
        parse_schema({"columns": cols, "privacy_unit": {"id": "pid", "k": 2}})


def test_the_proposed_bound_is_the_noisy_quantile_of_rows_per_id():
    from privsyn_spark.privacy.bound_choice import propose_bound, rows_per_id_grid

    rng = np.random.default_rng(8)
    n = np.minimum(5000, rng.zipf(1.8, 200_000))  # rows per id, heavy-tailed
    grid = rows_per_id_grid()
    cells = np.bincount(np.searchsorted(grid.starts, n, side="right") - 1, minlength=grid.cells)
    acc = Accountant(1.0)
    proposed = propose_bound(cells, 0.5, accountant=acc, sampler=SeededSamplerForTestsOnly(4), quantile=0.9)
    exact_q = int(np.quantile(n, 0.9, method="higher"))
    cell = int(np.searchsorted(grid.starts, exact_q, side="right") - 1)
    assert grid.starts[cell] <= proposed.max_rows_per_id <= grid.starts[cell] + max(grid.width[cell], 1) - 1
    exact_share = np.minimum(n, proposed.max_rows_per_id).sum() / n.sum()
    assert abs(proposed.rows_kept_share - exact_share) < 0.05
    assert acc.ledger[0]["sensitivity"] == 1.0 and acc.ledger[0]["cells"] == grid.cells
    empty = propose_bound(np.zeros(grid.cells, np.int64), 1e-6, accountant=Accountant(1.0),
                          sampler=SeededSamplerForTestsOnly(5))
    assert empty.max_rows_per_id >= 1


def test_the_dry_run_shows_k_times_the_row_sigmas():
    from privsyn_spark import PrivSyn
    from privsyn_spark.errors import UsageError
    from privsyn_spark.sample.generator import people_schema

    rows = PrivSyn(parse_schema(people_schema()), 1.0, no_ledger=True).plan()
    persons = PrivSyn(parse_schema(people_schema()), 1.0, no_ledger=True, privacy_id="person_id",
                      max_rows_per_id=20).plan()
    assert [r[0] for r in rows.releases] == [r[0] for r in persons.releases]
    assert all(p[2] == pytest.approx(20 * r[2]) for r, p in zip(rows.releases, persons.releases))
    assert "at most 20 rows each" in str(persons)
    declared = PrivSyn(parse_schema(people_schema(7)), 1.0, no_ledger=True)
    assert declared.unit == PrivacyUnit(("person_id",), 7)
    assert PrivSyn(parse_schema(people_schema(7)), 1.0, no_ledger=True, max_rows_per_id=3).unit.bound == 3
    with pytest.raises(UsageError, match="not the schema's privacy_unit id"):
        PrivSyn(parse_schema(people_schema(7)), 1.0, no_ledger=True, privacy_id="region_id")
    with pytest.raises(UsageError, match="max_rows_per_id must be a whole number >= 1"):
        PrivSyn(parse_schema(people_schema()), 1.0, no_ledger=True, privacy_id="person_id", max_rows_per_id=0)
    with pytest.raises(UsageError, match="needs a privacy id"):
        PrivSyn(parse_schema(people_schema()), 1.0, no_ledger=True, max_rows_per_id=4)


def test_null_ids_keep_or_drop_in_the_schema_section():
    """``null_ids`` in the schema's privacy_unit section: keep (the default, not written back) or drop
    (written back, so the schema's hash and a run's fingerprint tell the two apart); anything else, or
    a row unit that drops, is a one-line error."""
    kept = PrivacyUnit.from_document({"id": "pid", "max_rows_per_id": 3})
    dropped = PrivacyUnit.from_document({"id": "pid", "max_rows_per_id": 3, "null_ids": "drop"})
    assert (kept.null_ids, dropped.null_ids) == ("keep", "drop")
    assert kept.to_document() == {"id": ["pid"], "max_rows_per_id": 3}
    assert PrivacyUnit.from_document(dropped.to_document()) == dropped
    assert kept.record() == dropped.record()  # the accounting is the same: a dropped row is a unit of its own
    for bad in ({"id": "pid", "null_ids": "skip"}, {"id": "pid", "null_ids": None}):
        with pytest.raises(PrivacyUnitError, match="null_ids must be one of"):
            PrivacyUnit.from_document(bad)
    with pytest.raises(PrivacyUnitError, match="null_ids must be one of"):
        PrivacyUnit((), 1, "drop")
