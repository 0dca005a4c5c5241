"""The release diff's entry points: each prepares a case folder (its input, schema and budget ledger) and
goes into the system one way with the audit's seeded noise, returning what that way hands on
(:func:`tests.audit.release_diff.handed_on`, each field prefixed by its step). The CLI runs in this
process (``cli.main``; its exit code, stdout and log captured here, so a module-scoped fixture can run
it) or, once, in a process of its own (``tests/audit/seeded_cli.py``: Spark's own stderr too); the API
path is ``PrivSyn.plan``/``fit``, ``SynthModel.sample`` and ``write_delta``. A people run (a schema with a
``people:`` section) hands on two tables of synthetic persons and rows, whose fresh random keys are masked;
:data:`REAL_IDS` names the files of its case that hold a real id (none may); its steps' case also lists
in :data:`OPERATOR_ONLY` the exact values of the run report found in a handed-on field (none may)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark.budget.ledger import set_budget
from privsyn_spark.cli import entry as cli
from privsyn_spark.privacy.noise import seeded_noise_for_tests_only
from privsyn_spark.runtime.input_identity import files_version
from tests.api.test_people_sample import MARKS
from tests.audit.release_diff import handed_on
from tests.command_line.test_bad_input import COLUMNS, DATASET, people, write_parquet
from tests.people_tables import keyed_table, parent_child, people_doc

ROOT = Path(__file__).resolve().parents[2]
SEED = 11
ROWS = 120
"""Rows of the row-level table: enough for a rare value to merge and a pair to be selected."""
SCHEMA_COLUMNS = [({**c, "nulls": "fail"} if c["name"] == "score" else c) for c in COLUMNS]
CANARY = {"age": 500, "city": "Z", "score": None}  # outside every declared domain; a null where nulls fail
MTIME = 1_700_000_000  # every input file carries one modification time (the run id binds path and time)
PERSON, K, CANARY_ROWS = "pid", 3, 12
"""The person-level runs: the id column, K rows kept per person, the canary person's rows (many more than K)."""
DAY, OTHER_DAY = "2024-01-01", "2024-01-09"
"""The scoped runs' partition, and the canary's partition of its own."""
COMMON = ["--epsilon", "1", "--ledger", "{dir}/ledger", "--dataset-id", DATASET, "--master", "local[2]"]
RUN = ["--input", "{dir}/input.parquet", "--schema", "{dir}/schema.yaml", "--runs-dir", "{dir}/runs", "--seed", "1",
       "--gum-rounds", "1", "--no-evaluate", *COMMON]
SETTINGS = {"sharding": {"gum_rounds": 1}}
"""The API's settings: the CLI's ``--gum-rounds 1``."""
SCHEMA = {"columns": SCHEMA_COLUMNS}
"""The schema of the row-level and person-level cases."""
KEY = people_doc()["people"]["id"]
"""The people run's id column (its privacy unit): real ids ``REALID-<n>-XQZ`` (tests/people_tables.py)."""
PEOPLE_CANARY = {KEY: f"{MARKS[0]}-canary-{MARKS[1]}", "segment": "z", "region": "z", "channel": "z",
                 "amount": 500.0}
"""A row of the people run's canary person: every value outside its declared domain."""
PEOPLE_OUTPUTS = ["--output", "{dir}/rows", "--persons-output", "{dir}/persons"]
"""The people runs' two tables: the rows and the persons."""
PEOPLE_SPLIT = "0.2,0.1,0.7"
"""A non-default people split (persons, degrees, rows): each part's rho, and so its sigma, moves."""
OPERATOR_ONLY = "operator_only"
"""The handed-on field listing the exact values of the people run report (operator only, NOT private)
found in any other handed-on field."""
INPUTS = ("input.parquet", "parents.parquet", "child.parquet")
"""A case's input files (they hold real ids; nothing else may)."""
REAL_IDS = "real_ids"
"""The handed-on field listing the files of a people case (its input aside) that hold a real id, the real
ids' marks in any handed-on field and the output keys that are not fresh 32-hex values."""


def row_table() -> pd.DataFrame:
    """The row-level table D."""
    return people(ROWS)


def person_table(persons: int = 40) -> pd.DataFrame:
    """D of the person-level runs: ``persons`` people with 1 to 6 rows each (more than K for some)."""
    sizes = np.random.default_rng(1).integers(1, 7, persons)
    frame = people(int(sizes.sum()))
    frame.insert(0, PERSON, np.repeat([f"p{i:03d}" for i in range(persons)], sizes))
    return frame


def keyed() -> pd.DataFrame:
    """D of the people run: a keyed table of 120 persons with 1 to 14 rows each (some above M): enough for
    the noisy person count to clear the small-table refusal at epsilon 1."""
    return keyed_table(120, seed=2)


def day_table() -> pd.DataFrame:
    """D of the scoped runs: the row-level table over two days (a ``day`` partition column)."""
    frame = row_table()
    frame["day"] = np.where(np.arange(len(frame)) % 2 == 0, DAY, "2024-01-02")
    return frame


def with_rows(frame: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """``frame`` with ``rows`` appended: a score as objects (a null stays a null, not NaN), every other
    column of its type in ``frame``."""
    scores = {"score": object} if "score" in frame.columns else {}
    out = pd.concat([frame.astype(scores), pd.DataFrame(rows, dtype=object)], ignore_index=True)
    return out.astype({c: t for c, t in frame.dtypes.items() if c != "score"})


def prepare(folder: Path, frame: pd.DataFrame, spark: Any, unit: str = "row", schema: dict | None = None) -> Path:
    """``folder`` with the input (Parquet; partitioned by ``day`` when ``frame`` has it, one file per day,
    named alike on both sides), the schema (default :data:`SCHEMA`) and the dataset's budget for ``unit``."""
    folder.mkdir(parents=True)
    if "day" in frame.columns:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"age": pa.int32(), "city": pa.string(), "score": pa.float64()}  # a day of nulls stays float
        for day, part in frame.groupby("day"):
            (folder / "input.parquet" / f"day={day}").mkdir(parents=True)
            pq.write_table(pa.table({c: pa.array(part[c].tolist(), type=t) for c, t in types.items()}),
                           folder / "input.parquet" / f"day={day}" / "part-0.parquet")
        files = list((folder / "input.parquet").rglob("*.parquet"))
    else:
        write_parquet(frame, folder / "input.parquet")
        files = [folder / "input.parquet"]
    for f in files:
        os.utime(f, (MTIME, MTIME))
    (folder / "schema.yaml").write_text(yaml.safe_dump(schema or SCHEMA))
    set_budget(spark, str(folder / "ledger"), DATASET, 10.0, 1e-9, privacy_unit=unit)
    return folder


@contextlib.contextmanager
def captured() -> Iterator[dict[str, io.StringIO]]:
    """stdout, and stderr with the INFO log, of the calls in the block (without pytest's capsys/caplog)."""
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield {"stdout": out, "log": err}
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def cli_step(folder: Path, argv: list[str]) -> dict[str, Any]:
    """One CLI call in this process in ``folder`` with the seeded noise: its exit code, stdout and log."""
    with captured() as streams, seeded_noise_for_tests_only(SEED):
        code = cli.main([a.replace("{dir}", str(folder)) for a in argv])
    return {"exit_code": code, "stdout": streams["stdout"].getvalue(), "log": streams["log"].getvalue()}


def _step(fields: dict, name: str, step: dict) -> None:
    fields.update({f"{name}:{k}": v for k, v in step.items()})


def run_steps(folder: Path, spark: Any) -> dict[str, Any]:
    """``run``, then ``measure`` + ``synthesize`` of a second run id, then a resample of the first."""
    fields: dict[str, Any] = {}
    steps = [("run", ["run", *RUN, "--run-id", "r1", "--output", "{dir}/out"], "r1", "out"),
             ("measure", ["measure", *RUN, "--run-id", "r2"], "r2", None),
             ("synthesize", ["synthesize", *RUN, "--run-id", "r2", "--output", "{dir}/out2"], "r2", "out2"),
             ("sample", ["sample", "--from-run", "r1", "--schema", "{dir}/schema.yaml", "--runs-dir", "{dir}/runs",
                         "--ledger", "{dir}/ledger", "--dataset-id", DATASET, "--output", "{dir}/resampled",
                         "--master", "local[2]"], None, "resampled")]
    for name, argv, run_id, output in steps:
        result = cli_step(folder, argv)
        _step(fields, name, handed_on(folder, run_id=run_id, output=folder / output if output else None,
                                      ledger=folder / "ledger", **result))
    return fields


def person_run(folder: Path, spark: Any) -> dict[str, Any]:
    """``run`` with a person as the privacy unit (``--privacy-id``, K rows kept per person)."""
    result = cli_step(folder, ["run", *RUN, "--run-id", "p1", "--output", "{dir}/out", "--privacy-id", PERSON,
                               "--max-rows-per-id", str(K)])
    return handed_on(folder, run_id="p1", output=folder / "out", ledger=folder / "ledger", **result)


_EMBEDDED = re.compile(rb"data:image/[a-z+]+;base64,[A-Za-z0-9+/=]+")
"""An image embedded in the report's page: its base64 text holds any 3 letters (a real id's mark) by chance."""


def _real_ids(folder: Path, fields: dict[str, Any], spark: Any, written: bool) -> list[str]:
    """What :data:`REAL_IDS` lists for a people case in ``folder``: its files holding a real id's mark (the
    input and the report's embedded images aside), the marks in a handed-on field and, when the tables were
    ``written``, their keys that are not fresh 32-hex values."""
    text = [str(v) for v in fields.values()]
    keys = [] if not written else [  # the synthetic tables' keys (not the input): fresh 32-hex values
        str(r[0]) for t in ("persons", "rows") for r in spark.read.format("delta").load(str(folder / t))
        .select(KEY).distinct().collect() if not re.fullmatch("[0-9a-f]{32}", str(r[0]))]
    files = [p for p in folder.rglob("*") if p.is_file() and not {*INPUTS} & {*p.parts}
             and any(m.encode() in _EMBEDDED.sub(b"", p.read_bytes()) for m in MARKS)]
    marks = [m for m in MARKS if any(m in t for t in text)]
    return [str(p).replace(str(folder), "<dir>") for p in files] + marks + keys


def _people_step(fields: dict[str, Any], name: str, folder: Path, run_id: str, result: dict[str, Any],
                 masks: dict[str, str] | None = None) -> None:
    """What a people step hands on, into ``fields``: its run's release, the rows' table, the ledger (prefixed
    ``name``), the persons' table (prefixed ``name-persons``)."""
    _step(fields, name, handed_on(folder, run_id=run_id, output=folder / "rows", ledger=folder / "ledger",
                                  masks=masks, **result))
    _step(fields, f"{name}-persons", handed_on(folder, output=folder / "persons", exit_code=result["exit_code"]))


def people_run(folder: Path, spark: Any) -> dict[str, Any]:
    """``run`` of a people schema: the persons to ``--persons-output``, their rows to ``--output`` (two Delta
    tables); :data:`REAL_IDS` lists the case's files holding a real id."""
    result = cli_step(folder, ["run", *RUN, "--run-id", "pp1", *PEOPLE_OUTPUTS])
    fields: dict[str, Any] = {}
    _people_step(fields, "run", folder, "pp1", result)
    fields[REAL_IDS] = _real_ids(folder, fields, spark, written=not result["exit_code"])
    return fields


def parent_child_run(folder: Path, spark: Any) -> dict[str, Any]:
    """``run --parents`` of a people schema's parent-child form: D's keyed table split into its parent table
    (one row per id) and its child table (the rows, a foreign key to the parent), both Parquet; then as
    :func:`people_run`. A person removed or added takes their parent row and all their rows with them."""
    parents, child = parent_child(pd.read_parquet(folder / "input.parquet"))
    parents.to_parquet(folder / "parents.parquet", index=False)
    child.to_parquet(folder / "child.parquet", index=False)
    run = [a.replace("input.parquet", "child.parquet") for a in RUN]
    result = cli_step(folder, ["run", *run, "--parents", "{dir}/parents.parquet", "--run-id", "pc1", *PEOPLE_OUTPUTS])
    files = [f for t in ("child", "parents") for f in spark.read.parquet(str(folder / f"{t}.parquet")).inputFiles()]
    fields: dict[str, Any] = {}
    _people_step(fields, "run", folder, "pc1", result, masks={files_version(files): "<input files>"})  # their paths
    fields[REAL_IDS] = _real_ids(folder, fields, spark, written=not result["exit_code"])
    return fields


def report_values(report: dict[str, Any]) -> list[str]:
    """The spellings of the exact people metrics of a run report (its numbers of more than 3 decimals:
    ``repr`` and 4 decimals) that a leak would carry; a report without people metrics gives a marker that
    fails the case."""
    metrics = (report.get("metrics") or {}).get("people")
    if not metrics:
        return ["<the report has no people metrics>"]
    numbers = [v for v in metrics.values() if isinstance(v, float) and round(v, 3) != v]  # 0.2 is no mark
    return sorted({s for v in numbers for s in (repr(v), f"{v:.4f}")})


def carries(text: str, number: str) -> bool:
    """Whether ``text`` holds ``number`` as a whole number, not inside a longer one (a noisy sigma of
    70.66342686777934 does not carry 0.6634)."""
    return re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text) is not None


def people_steps(folder: Path, spark: Any) -> dict[str, Any]:
    """``measure`` with a non-default ``--people-split``, then ``synthesize`` and ``evaluate`` of a people
    schema (one run id; each step's fields prefixed by it). ``evaluate`` writes the operator's report (exact
    people metrics, NOT private: not handed on); :data:`OPERATOR_ONLY` lists the report's exact values found
    in any handed-on field, :data:`REAL_IDS` the real ids found anywhere (the report included)."""
    fields: dict[str, Any] = {}
    code = 0
    for step in ("measure", "synthesize", "evaluate"):
        result = cli_step(folder, [step, *RUN, "--run-id", "ps1", "--people-split", PEOPLE_SPLIT, *PEOPLE_OUTPUTS])
        code = code or result["exit_code"]
        _people_step(fields, step, folder, "ps1", result)
    meta = "measure:measurements/measurements.npz/__meta__/"
    if not code:  # the case runs the split it names: the degrees' rho is its share of the run's
        assert fields[meta + "degrees/rho"] == pytest.approx(float(PEOPLE_SPLIT.split(",")[1]) * fields[meta + "rho"])
    report = folder / "runs" / "ps1" / "operator" / "report.json"
    exact = report_values(json.loads(report.read_text()) if report.is_file() else {})
    text = [str(v) for v in fields.values()]
    fields[OPERATOR_ONLY] = [s for s in exact if s.startswith("<") or any(carries(t, s) for t in text)]
    fields[REAL_IDS] = _real_ids(folder, fields, spark, written=not code)
    return fields


def scoped_run(folder: Path, spark: Any) -> dict[str, Any]:
    """``run --partition day=...`` on a partitioned input: the partition's rows only, its output partition."""
    result = cli_step(folder, ["run", *RUN, "--run-id", "d1", "--output", "{dir}/out", "--partition", f"day={DAY}"])
    files = sorted((folder / "input.parquet" / f"day={DAY}").glob("*.parquet"))
    masks = {files_version([f"file:{f}" for f in files]): "<partition files>"}  # the hash of their paths only
    return handed_on(folder, run_id="d1", output=folder / "out", ledger=folder / "ledger", masks=masks, **result)


def draft(folder: Path, spark: Any) -> dict[str, Any]:
    """``infer-schema --epsilon``: a private draft of the schema."""
    result = cli_step(folder, ["infer-schema", "--input", "{dir}/input.parquet", "--out", "{dir}/draft.yaml",
                               "--run-id", "draft", "--bounds", "age=0:120", "--bounds", "score=0:100", *COMMON])
    return handed_on(folder, ledger=folder / "ledger", draft=folder / "draft.yaml", **result)


def plan(folder: Path, spark: Any) -> dict[str, Any]:
    """``plan``: the dry run, which reads no data."""
    result = cli_step(folder, ["plan", "--schema", "{dir}/schema.yaml", "--epsilon", "1", "--ledger", "{dir}/ledger",
                               "--dataset-id", DATASET])
    return handed_on(folder, **result)


def api(folder: Path, spark: Any) -> dict[str, Any]:
    """The Python API: ``PrivSyn(...).plan(df)`` and ``fit(df)``, ``model.sample()``, ``write_delta``; an
    error is handed on as its type and message."""
    from privsyn_spark import PrivSyn, write_delta

    rows = pd.read_parquet(folder / "input.parquet")
    df = spark.createDataFrame(rows.astype(object).where(rows.notna(), None))  # a caller's DataFrame: no location
    outcome = {"exit_code": 0, "error": None}
    with captured() as streams, seeded_noise_for_tests_only(SEED):
        synth = PrivSyn(str(folder / "schema.yaml"), epsilon=1.0, ledger=str(folder / "ledger"), dataset_id=DATASET,
                        run_id="a1", runs_dir=str(folder / "runs"), settings=SETTINGS)
        print(synth.plan(df))
        try:
            model = synth.fit(df)
            write_delta(model.sample(seed=1), str(folder / "out"), provenance=model)
        except Exception as err:  # noqa: BLE001 - what the caller sees is compared
            outcome = {"exit_code": 1, "error": f"{type(err).__name__}: {err}"}
    fields = handed_on(folder, run_id="a1", output=folder / "out", ledger=folder / "ledger",
                       exit_code=outcome["exit_code"], stdout=streams["stdout"].getvalue(),
                       log=streams["log"].getvalue())
    fields["error"] = None if outcome["error"] is None else outcome["error"].replace(str(folder), "<dir>")
    return fields


def subprocess_run(folder: Path, spark: Any) -> dict[str, Any]:
    """``run`` in a process of its own (``-v``): its exit code, stdout and whole stderr, Spark's included."""
    argv = [a.replace("{dir}", str(folder)) for a in ["run", *RUN, "--run-id", "s1", "--output", "{dir}/out", "-v"]]
    done = subprocess.run([sys.executable, "-m", "tests.audit.seeded_cli", str(SEED), *argv], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)
    return handed_on(folder, run_id="s1", output=folder / "out", ledger=folder / "ledger",
                     exit_code=done.returncode, stdout=done.stdout, log=done.stderr)
