"""The release diff: each entry point run on D and on a neighbour with the same test-only seeded noise
(``privacy.noise.seeded_noise_for_tests_only``); everything handed on must be equal except the noisy
values and what is computed from them (tests/audit/release_diff.py). D runs once per entry point (a
module-scoped fixture), then each neighbour once. Neighbours: D minus one row; D plus a worst-case canary
(a value outside every declared domain: an age out of range, a new city, a null score where nulls
``fail``); for a person-level run, D minus one person with all their rows and D plus a canary person of
many rows; for a partition-scoped run, D minus one row of the partition and D plus a canary in a
partition of its own; for a people run (in one go, or step by step with a non-default people split), D
minus one person with all their rows and D plus a canary person of many rows (values outside every domain).
The entry points are in tests/audit/entry_points.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import pytest

from tests.audit import entry_points as E
from tests.audit.release_diff import handed_on, leaks
from tests.people_tables import PARENT_CHILD, people_doc
from tests.people_tables import PEOPLE as PEOPLE_SECTION


class EntryPoint(NamedTuple):
    run: Callable[[Path, Any], dict[str, Any]]
    table: Callable[[], pd.DataFrame]
    neighbours: dict[str, Callable[[pd.DataFrame], pd.DataFrame]]
    unit: str = "row"
    schema: dict[str, Any] = E.SCHEMA


def _minus_largest(key: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def minus(d: pd.DataFrame) -> pd.DataFrame:
        largest = d[key].value_counts().index[0]  # a person with more rows than K
        return d[d[key] != largest].reset_index(drop=True)

    return minus


MINUS_ROW = {"minus one row": lambda d: d.drop(index=0).reset_index(drop=True)}
PLUS_CANARY = {"plus a canary": lambda d: E.with_rows(d, [E.CANARY])}
ROWS = {**MINUS_ROW, **PLUS_CANARY}
PEOPLE = {"minus one person": _minus_largest(E.PERSON),
          "plus a canary person": lambda d: E.with_rows(d, [{E.PERSON: "canary", **E.CANARY}] * E.CANARY_ROWS)}
KEYED = {"minus one person": _minus_largest(E.KEY),
         "plus a canary person": lambda d: E.with_rows(d, [E.PEOPLE_CANARY] * E.CANARY_ROWS)}
DAYS = {**MINUS_ROW, "plus a canary in a partition of its own": lambda d: E.with_rows(d, [{**E.CANARY,
                                                                                          "day": E.OTHER_DAY}])}
ENTRY_POINTS = {
    "run, measure, synthesize, sample": EntryPoint(E.run_steps, E.row_table, ROWS),
    "infer-schema --epsilon": EntryPoint(E.draft, E.row_table, ROWS),
    "run --privacy-id": EntryPoint(E.person_run, E.person_table, PEOPLE, unit=E.PERSON),
    "run --persons-output (people)": EntryPoint(E.people_run, E.keyed, KEYED, unit=E.KEY, schema=people_doc(
        {**PEOPLE_SECTION, "summaries": ["channel", "amount"]})),  # a categorical and a numerical summary
    "run --parents (people, parent-child)": EntryPoint(E.parent_child_run, E.keyed, KEYED, unit=E.KEY,
                                                        schema=people_doc(PARENT_CHILD)),
    "measure --people-split, synthesize, evaluate (people)": EntryPoint(E.people_steps, E.keyed, KEYED, unit=E.KEY,
                                                                         schema=people_doc()),
    "run --partition": EntryPoint(E.scoped_run, E.day_table, DAYS),
    "api fit, sample, write_delta": EntryPoint(E.api, E.row_table, ROWS),
    "run in a subprocess": EntryPoint(E.subprocess_run, E.row_table, PLUS_CANARY),
    "plan": EntryPoint(E.plan, E.row_table, PLUS_CANARY),
}
CASES = [(entry, neighbour) for entry, point in ENTRY_POINTS.items() for neighbour in point.neighbours]


def _hand_on(point: EntryPoint, folder: Path, frame: pd.DataFrame, spark: Any) -> dict[str, Any]:
    return point.run(E.prepare(folder, frame, spark, point.unit, point.schema), spark)


@pytest.fixture(scope="module")
def on_d(spark, tmp_path_factory) -> Callable[[str], dict[str, Any]]:
    """What each entry point hands on when run on D: run once per entry point, the first time it is asked."""
    done: dict[str, dict[str, Any]] = {}

    def fields(entry: str) -> dict[str, Any]:
        if entry not in done:
            point = ENTRY_POINTS[entry]
            done[entry] = _hand_on(point, tmp_path_factory.mktemp("d") / "case", point.table(), spark)
        return done[entry]

    return fields


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "neighbour"), CASES)
def test_every_entry_point_hands_on_nothing_but_noisy_values(spark, on_d, tmp_path, entry, neighbour):
    point = ENTRY_POINTS[entry]
    d = on_d(entry)
    assert {k: v for k, v in d.items() if k.split(":")[-1] in ("exit_code", "error") and v} == {}, "D must run"
    other = _hand_on(point, tmp_path / "case", point.neighbours[neighbour](point.table()), spark)
    assert (d.get(E.REAL_IDS, []), other.get(E.REAL_IDS, [])) == ([], []), "a real id was handed on"
    assert (d.get(E.OPERATOR_ONLY, []), other.get(E.OPERATOR_ONLY, [])) == ([], []), "the report was handed on"
    found = leaks(d, other)
    assert found == [], f"{entry}, {neighbour}: handed-on fields that differ:\n" + "\n".join(found)


def test_the_diff_names_a_leaking_field_and_lets_noisy_ones_differ(tmp_path):
    """A table property holding an exact row count, a log line naming a tally: named; noisy values: not."""
    fields = []
    for rows in (400, 401):
        folder = tmp_path / str(rows)
        (folder / "out" / "_delta_log").mkdir(parents=True)
        (folder / "out" / "_delta_log" / "00000000000000000000.json").write_text(
            '{"metaData": {"configuration": {"privsyn.rows": "%d"}}}\n'
            '{"add": {"path": "part-%d.parquet", "size": %d}}\n' % (rows, rows, 10 * rows))
        fields.append(handed_on(folder, output=folder / "out", exit_code=0,
                                log=f"2026-01-01 00:00:00,000 INFO x: {rows} rows read in 1.5 s\n"
                                    f"wrote {rows - 41} synthetic rows to {folder}/out"))
    assert leaks(*fields) == [
        "delta/0/metaData/configuration/privsyn.rows: '400' != '401'",
        "log: lines in one run only: ['INFO x: 400 rows read in <time>', 'INFO x: 401 rows read in <time>']"]


def test_the_people_checks_name_a_report_value_and_a_real_id_but_not_an_image(tmp_path):
    """The report's exact metrics are named by their spellings (0.2 is no mark); a real id's mark in a file
    is named, one inside an image embedded in the report's page is not."""
    metrics = {"rows_per_person_tvd": 0.46490610328638493, "one_value_share_real": 0.2, "workload_queries": 15.0}
    assert E.report_values({"metrics": {"people": metrics}}) == ["0.4649", "0.46490610328638493"]
    assert E.report_values({"metrics": {}}) == ["<the report has no people metrics>"]
    assert [E.carries(t, "0.6634") for t in ("sigma 0.6634,", "[0.6634]", "70.66342686", "0.66341")] == [
        True, True, False, False]
    (tmp_path / "report.html").write_text('<img src="data:image/png;base64,iVBORw0KXQZ+/a=="><p>ok</p>')
    assert E._real_ids(tmp_path, {"log": "no id here"}, None, written=False) == []
    (tmp_path / "state.json").write_text('{"id": "REALID-3-XQZ"}')
    assert E._real_ids(tmp_path, {"log": "XQZ"}, None, written=False) == ["<dir>/state.json", "XQZ"]
