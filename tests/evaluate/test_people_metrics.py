"""The people metrics against a pandas brute force on small keyed tables (a synthetic side that misses
groups, caps at M and breaks a person's constant columns is included)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from privsyn_spark.evaluate.fidelity import tvd
from privsyn_spark.evaluate.people_metrics import MEASURES, PeopleColumns, people_metrics, workload
from privsyn_spark.sample.keyed_people import KEY, PERSON_COLUMNS

COLS = PeopleColumns(key="id", person=("seg", "reg", "tier"), row=("ch", "cat"), amount="amt", one_value="ch",
                     distinct="cat", max_rows=5)


def _keyed(rng: np.random.Generator, people: int, segments: list[str], prefix: str) -> pd.DataFrame:
    frames = []
    for i in range(people):
        n = int(rng.integers(1, 8))
        seg, reg, tier = rng.choice(segments), rng.choice(["x", "y"]), int(rng.integers(1, 3))
        ch = rng.choice(["p", "q", "r"], n, p=[0.6, 0.3, 0.1] if seg == "a" else [0.2, 0.4, 0.4])
        frames.append(pd.DataFrame({"id": f"{prefix}{i}", "seg": seg, "reg": reg, "tier": tier, "ch": ch,
                                    "cat": rng.integers(0, 4, n), "amt": rng.integers(0, 5000, n) / 100}))
    return pd.concat(frames, ignore_index=True)


def _tvd_by(real: pd.DataFrame, synth: pd.DataFrame, columns: list[str]) -> float:
    both = pd.concat([real.groupby(columns).size().rename("r"), synth.groupby(columns).size().rename("s")],
                     axis=1).fillna(0)
    return tvd(both["r"].to_numpy(), both["s"].to_numpy())


def _answers(rows: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    g = rows.groupby(group)
    return pd.DataFrame({"rows": g.size(), "amount_sum": g["amt"].sum(), "amount_avg": g["amt"].mean(),
                         "people": g["id"].nunique(), "rows_per_person": g.size() / g["id"].nunique()})


@pytest.mark.slow
def test_people_metrics_equal_pandas(spark):
    real = _keyed(np.random.default_rng(1), 80, ["a", "b", "c"], "r")
    synth = _keyed(np.random.default_rng(2), 60, ["a", "b"], "s")  # no segment c
    synth.loc[synth["id"] == "s3", "reg"] = ["x", "y"] * (int((synth["id"] == "s3").sum()) // 2) + \
        ["x"] * (int((synth["id"] == "s3").sum()) % 2)  # a person whose column is not constant: its min counts
    out = people_metrics(spark.createDataFrame(real), spark.createDataFrame(synth), COLS)

    persons = []
    for t in (real, synth):
        g = t.groupby("id")
        persons.append(pd.DataFrame({**{c: g[c].min() for c in COLS.person}, "n": g.size().clip(upper=5),
                                     "total": g["amt"].sum(), "distinct": g["cat"].nunique(),
                                     "one": g["ch"].nunique() == 1}))
    assert out["rows_per_person_tvd"] == pytest.approx(_tvd_by(*persons, ["n"]))
    assert out["person_tvd_1way"] == pytest.approx(np.mean([_tvd_by(*persons, [c]) for c in COLS.person]))
    assert out["person_tvd_2way"] == pytest.approx(
        np.mean([_tvd_by(*persons, list(p)) for p in combinations(COLS.person, 2)]))
    # the person x row marginals are over rows; a person's columns as its rows carry them
    assert out["person_row_tvd_2way"] == pytest.approx(
        np.mean([_tvd_by(real, synth, [p, r]) for p in COLS.person for r in COLS.row]))
    assert out["total_amount_ks"] == pytest.approx(stats.ks_2samp(persons[0]["total"], persons[1]["total"]).statistic)
    assert out["total_amount_wasserstein"] == pytest.approx(
        stats.wasserstein_distance(persons[0]["total"], persons[1]["total"]))
    assert out["distinct_per_person_tvd"] == pytest.approx(_tvd_by(*persons, ["distinct"]))
    assert out["one_value_share_real"] == pytest.approx(persons[0]["one"].mean())
    assert out["one_value_share_synthetic"] == pytest.approx(persons[1]["one"].mean())

    # the workload joins rows to their person: a person's attributes are the person table's
    joined = [t.drop(columns=list(COLS.person)).join(p[list(COLS.person)], on="id") for t, p in zip((real, synth),
                                                                                                 persons)]
    errors = []
    for group, measure in workload(COLS):
        both = pd.concat([_answers(joined[0], list(group))[measure].rename("r"),
                          _answers(joined[1], list(group))[measure].rename("s")], axis=1).fillna(0)
        errors.append((both["s"] - both["r"]).abs().sum() / both["r"].abs().sum())
    assert out["workload_queries"] == len(errors) == len(MEASURES) * 6
    assert out["workload_error_mean"] == pytest.approx(np.mean(errors))
    assert out["workload_error_median"] == pytest.approx(np.median(errors))
    assert out["workload_error_max"] == pytest.approx(np.max(errors))


def test_the_workload_of_the_generated_people_has_fifty_queries():
    cols = PeopleColumns(key=KEY, person=tuple(PERSON_COLUMNS), row=("channel", "category"), amount="amount",
                         one_value="channel", distinct="category", max_rows=100)
    queries = workload(cols)
    assert len(queries) == len(set(queries)) >= 50
    assert {len(g) for g, _ in queries} == {1, 2}
