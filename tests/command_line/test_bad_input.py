"""Bad input through the real CLI: one case per kind of bad input.

Each case asserts the exit code, the one-line message (no trace), that no budget was charged and
that no table was written. Failures found before Spark starts run `privsyn-spark` as a subprocess
(fast: no session); the others call ``cli.main`` in-process on the test session.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from privsyn_spark.cli import entry as cli
from privsyn_spark.errors import EXIT_BAD_INPUT, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[2]
DATASET = "people"
COLUMNS = [
    {"name": "age", "type": "numerical", "dtype": "int", "min": 18, "max": 80, "bins": 8},
    {"name": "city", "type": "categorical", "values": ["A", "B", "C"]},
    {"name": "score", "type": "numerical", "min": 0, "max": 100, "bins": 5},
]


def people(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 81, n).astype("int32"),
                         "city": rng.choice(["A", "B", "C"], n),
                         "score": rng.uniform(0, 100, n)})


class Case:
    """Files of one CLI call: input, schema, output, runs folder and budget ledger under ``tmp_path``."""

    def __init__(self, tmp_path: Path, frame: pd.DataFrame | None = None, columns=None, **schema_extra):
        self.dir = tmp_path
        self.input = tmp_path / "input.parquet"
        write_parquet(people() if frame is None else frame, self.input)
        self.schema = tmp_path / "schema.yaml"
        self.schema.write_text(yaml.safe_dump({"columns": columns or COLUMNS, **schema_extra}))
        self.output = tmp_path / "out"
        self.runs = tmp_path / "runs"
        self.ledger = tmp_path / "ledger"

    def argv(self, *extra: str, step: str = "run") -> list[str]:
        return [step, "--input", str(self.input), "--schema", str(self.schema), "--output", str(self.output),
                "--runs-dir", str(self.runs), "--run-id", "r1", "--epsilon", "1", "--ledger", str(self.ledger),
                "--dataset-id", DATASET, "--seed", "1", "--gum-rounds", "2",
                "--no-evaluate", *extra]

    def table_written(self) -> bool:
        return (self.output / "_delta_log").is_dir()


def write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Parquet keeping NaN as NaN in float columns (pandas' own writer turns it into null)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = [pa.array(frame[c].to_numpy()) if frame[c].dtype.kind == "f" else pa.array(frame[c].tolist())
              for c in frame.columns]
    pq.write_table(pa.table(arrays, names=list(frame.columns)), path)


def budget_charged(spark, ledger: Path) -> float:
    """The rho the ledger holds for the dataset (0 when the ledger was never created)."""
    if not (ledger / "_delta_log").is_dir():
        return 0.0
    from privsyn_spark.budget.ledger import dataset_state

    return dataset_state(spark, str(ledger), DATASET).spent_rho


def one_error_line(stderr: str) -> str:
    """The CLI's error line; there must be exactly one and no trace."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("privsyn-spark: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def run_subprocess(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def with_column(name: str, **spec) -> list[dict]:
    return [({**c, **spec} if c["name"] == name else c) for c in COLUMNS]


def replaced(name: str, spec: dict) -> list[dict]:
    return [({"name": name, **spec} if c["name"] == name else c) for c in COLUMNS]


def _no_root_write_dir(tmp_path: Path) -> str:
    """A location that cannot be written: a read-only folder, or for root (who ignores modes) /proc."""
    if os.geteuid() == 0:
        return "/proc/privsyn-bad-input/out"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return str(locked / "out")


# (id, schema columns or None, extra CLI args or a callable(case) -> args, message pattern)
BEFORE_SPARK = [
    ("max-inf", with_column("score", max=math.inf), [], "column 'score': max must be finite"),
    ("int-dtype-string-values", replaced("city", {"type": "categorical", "dtype": "int", "values": ["A", "B"]}), [],
     "column 'city': value 'A' is not of dtype int"),
    ("min-zero-text", with_column("score", min="zero"), [], "column 'score': min must be a finite number, got 'zero'"),
    ("mixed-values", with_column("city", values=["A", 1, 2]), [], "column 'city': 'values' mix types"),
    ("bins-2.7", with_column("age", bins=2.7), [], "column 'age': bins must be a whole number, got 2.7"),
    ("rows-0", None, ["--rows", "0"], "--rows must be >= 1, got 0"),
    ("table-property-owner", None, ["--table-property", "owner=me"],  # Spark drops it silently: refused
     "--table-property 'owner': Spark reserves it (Spark sets it to the writing user; change it after the write"),
    ("rows-negative", None, ["--rows", "-5"], "--rows must be >= 1, got -5"),
    ("shard-rows-0", None, ["--shard-rows", "0"], "--shard-rows: shard_rows must be >= 1"),
    ("run-id-escapes", None, ["--run-id", "../escaped"], "--run-id '../escaped' is not a safe folder name"),
    ("output-is-a-file", None, lambda case: ["--output", str(case.dir / "file.txt")], "is a regular file"),
    ("output-not-writable", None, lambda case: ["--output", _no_root_write_dir(case.dir)], "cannot write in"),
    ("input-missing", None, lambda case: ["--input", str(case.dir / "nope.parquet")], "no such file or folder"),
    ("conf-not-key-value", None, ["--conf", "spark.executor.memory"], "--conf expects KEY=VALUE"),
    ("output-non-delta-folder", None, lambda case: ["--output", str(case.dir / "folder")],
     "an existing folder that is not a Delta table and holds files"),
    ("int-max-beyond-int32", with_column("age", max=1e12), [],
     "column 'age': bounds [18, 1e+12] exceed dtype int ([-2147483648, 2147483647])"),
    ("float-max-beyond-float32", with_column("score", dtype="float", max=1e39), [],
     "column 'score': bounds [0, 1e+39] exceed dtype float"),
    ("partition-by-unknown", None, ["--output-partition-by", "height"],
     "--output-partition-by height: not a column the schema keeps"),
    ("name-with-space", replaced("city", {"name": "home city", "type": "categorical", "values": ["A"]}), [],
     "column 'home city': a Delta table refuses the character(s) [' ']"),
    ("name-with-delta-chars", replaced("city", {"name": "a,b;c{d}(e)=f", "type": "categorical", "values": ["A"]}),
     [], "a Delta table refuses the character(s) ['(', ')', ',', ';', '=', '{', '}']"),
    ("name-with-dot", replaced("city", {"name": "home.city", "type": "categorical", "values": ["A"]}), [],
     "column 'home.city': a Delta table refuses the character(s) ['.']"),
    ("name-with-backtick", replaced("city", {"name": "a`b", "type": "categorical", "values": ["A"]}), [],
     "column 'a`b': a backtick in a column name is not supported"),
    ("schema-yaml-syntax", None, lambda case: _schema_text(case, "columns: [\n  - name: a\n"),
     "schema.yaml: YAML syntax error at line"),
    ("schema-json-syntax", None, lambda case: _schema_text(case, '{"columns": [', ".json"),
     "schema.json: JSON syntax error at line 1"),
    ("schema-is-a-folder", None, lambda case: ["--schema", str(case.dir / "folder")], "is a folder, not a file"),
    ("schema-is-binary", None, lambda case: _schema_text(case, b"\x89PNG\r\n\x1a\n\x00\xff\xfe"),
     "is not a text file"),
    ("config-yaml-syntax", None, lambda case: ["--config", _write(case.dir / "conf.yaml", "selection: {gamma: 5\n")],
     "--config " + "{dir}/conf.yaml: YAML syntax error"),
    ("cell-cap-from-the-schema", None, ["--max-cells", "50"],
     "above the cap of 50; declare fewer values or bins, or raise the cap"),
    ("runs-dir-a-file", None, lambda case: ["--runs-dir", str(case.dir / "file.txt")],
     "--runs-dir {dir}/file.txt is a regular file, not a folder"),
    ("max-rows-per-id-beyond-bigint", [*COLUMNS, {"name": "pid", "type": "drop"}],
     ["--privacy-id", "pid", "--max-rows-per-id", str(2**63)],
     "max_rows_per_id must be at most 2^63 - 1 (a Spark bigint), got 9223372036854775808"),
]


def _write(path: Path, content: str | bytes) -> str:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _schema_text(case: Case, content: str | bytes, suffix: str = ".yaml") -> list[str]:
    """Replace the case's schema file by ``content``."""
    case.schema = case.dir / f"schema{suffix}"
    _write(case.schema, content)
    return []


@pytest.mark.parametrize("name, columns, extra, message", BEFORE_SPARK, ids=[c[0] for c in BEFORE_SPARK])
def test_refused_before_spark_starts(tmp_path, name, columns, extra, message):
    case = Case(tmp_path, columns=columns)
    (tmp_path / "file.txt").write_text("not a table")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "notes.csv").write_text("a,b\n1,2\n")
    args = extra(case) if callable(extra) else extra
    result = run_subprocess(case.argv(*args))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert message.replace("{dir}", str(tmp_path)) in one_error_line(result.stderr)
    # nothing started: no ledger, no run folder, no table (Spark never ran)
    assert not case.ledger.exists() and not case.runs.exists() and not case.table_written()
    assert sorted(p.name for p in (tmp_path / "folder").iterdir()) == ["notes.csv"]
    assert not (tmp_path / "escaped").exists()


def _cli(spark, capsys, case: Case, *extra: str, step: str = "run") -> tuple[int, str]:
    """The CLI in this process, on a ledger whose dataset has a budget of epsilon 10."""
    from privsyn_spark.budget.ledger import set_budget

    set_budget(spark, str(case.ledger), DATASET, 10.0, 1e-9)
    code = cli.main(case.argv("--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=4", *extra, step=step))
    return code, capsys.readouterr().err


def _edge_numbers(n: int = 400) -> pd.DataFrame:
    frame = people(n)
    frame.loc[:2, "score"] = [math.inf, -math.inf, 1e30]
    frame.loc[3, "score"] = math.nan
    frame["city"] = frame["city"].astype(object)
    frame.loc[4:9, "city"] = None
    return frame


@pytest.mark.slow
def test_a_fail_policy_stop_is_charged_and_the_error_holds_no_tally(spark, capsys, tmp_path):
    """Issue 24, P1: `fail` used to stop on the exact tally, refunded, naming each failing column (a free
    oracle). Now it is a noisy check in the run's release: exit 4 in one line naming the check, the run's
    rho charged (not refunded), no table, and a retry of the run id stops the same way for free."""
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    frame = _edge_numbers()
    frame.loc[10:309, "score"] = 500.0  # 300 values above max: 6.6 sd above the check's threshold
    case = Case(tmp_path, frame, columns=with_column("score", out_of_range="fail"))
    for _ in range(2):
        code, err = _cli(spark, capsys, case)
        assert code == EXIT_BAD_INPUT, err
        line = one_error_line(err)
        assert "column 'score': values outside the declared domain (a `fail` policy: noisy tally" in line
        assert "'city'" not in line and "'age'" not in line and not any(t in line for t in ("300", "304", " 4 "))
        assert budget_charged(spark, case.ledger) == pytest.approx(rho_from_eps_delta(1.0, 1e-9))
        assert not case.table_written()


@pytest.mark.slow
def test_edge_numbers_are_clipped_and_kept_nulls_counted(spark, capsys, tmp_path):
    """±inf and 1e30 under `clip`, NaN, nulls under `nulls: value`: a table, every handled value counted as what
    it is (the NaN used to be reported as clipped)."""
    import json

    case = Case(tmp_path, _edge_numbers())
    code, err = _cli(spark, capsys, case)
    assert code == 0, err
    report = json.loads((case.runs / "r1" / "operator" / "report.json").read_text())
    assert report["domain_handling"]["score"] == {"out_of_domain": 3, "handling": "clip", "not_a_number": 1,
                                                  "not_a_number_handling": "first bin",
                                                  "clipped_share": pytest.approx(3 / len(_edge_numbers()))}
    assert report["domain_handling"]["city"] == {"nulls": 6, "null_handling": "value"}
    assert case.table_written() and budget_charged(spark, case.ledger) > 0
    out = spark.read.format("delta").load(str(case.output)).toPandas()  # synthetic rows
    assert np.isfinite(out["score"].dropna()).all() and out["score"].dropna().between(0, 100).all()
    assert not (case.runs / "r1" / "checkpoints").exists()  # scratch removed when the run ends
    # release/ holds only what may be handed on; the folder's README says which part is which
    release = case.runs / "r1" / "release"
    files = sorted(str(p.relative_to(release)) for p in release.rglob("*") if p.is_file())
    assert files == ["measurements/measurements.npz", "model.json", "targets/model.json", "targets/model.npz",
                     "targets/targets.json", "targets/targets.npz"], files
    texts = [(release / f).read_text() for f in files if f.endswith(".json")]
    assert not any(key in t for t in texts for key in ("domain_handling", "timings"))
    # ... and operator/ all that is NOT private (exact tallies, the report), apart from both
    run_dir = case.runs / "r1"
    assert sorted(p.name for p in (run_dir / "operator").iterdir()) == ["report.html", "report.json", "state.json"]
    assert '"not_a_number": 1' in (run_dir / "operator" / "state.json").read_text()
    assert sorted(p.name for p in run_dir.iterdir()) == ["README.txt", "measurements", "operator", "release",
                                                         "targets"]
    outside = [p for p in run_dir.rglob("*") if p.is_file() and "operator" not in p.relative_to(run_dir).parts]
    assert not any(key in p.read_text() for p in outside if p.suffix == ".json"
                   for key in ("domain_handling", "timings", "not_a_number"))
    note = (run_dir / "README.txt").read_text()
    assert "release/     MAY BE HANDED ON" in note and "operator/    OPERATORS ONLY, NOT private" in note
    from privsyn_spark import PrivSyn

    assert PrivSyn.load(str(release)).sample(50, seed=3).count() == 50


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["csv-header-only", "parquet-empty", "epsilon-1e-6"])
def test_empty_or_tiny_table_stops_with_no_noise_table(spark, capsys, tmp_path, kind):
    """Emptiness is private: it is judged by the noisy total, so the run's budget is spent (documented)
    but no table of noise is written, and a retry of the run id fails the same way for free."""
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    epsilon = "1"
    if kind == "parquet-empty":
        case = Case(tmp_path, people().iloc[:0])
    else:
        case = Case(tmp_path)
    if kind == "csv-header-only":
        case.input = tmp_path / "empty.csv"
        case.input.write_text("age,city,score\n")
    if kind == "epsilon-1e-6":
        epsilon = "1e-6"
    for _ in range(2):
        code, err = _cli(spark, capsys, case, "--epsilon", epsilon)
        assert code == EXIT_BAD_INPUT, err
        assert "the input table is empty or too small for this budget" in one_error_line(err)
        assert not case.table_written()
        assert budget_charged(spark, case.ledger) == pytest.approx(rho_from_eps_delta(float(epsilon), 1e-9))


@pytest.mark.slow
def test_append_to_a_table_with_another_schema_is_refused_before_the_budget(spark, capsys, tmp_path):
    case = Case(tmp_path)
    spark.createDataFrame([(1, "x")], "id int, name string").write.format("delta").save(str(case.output))
    code, err = _cli(spark, capsys, case, "--write-mode", "append")
    assert code == EXIT_USAGE
    assert "cannot append, the existing table's columns differ" in one_error_line(err)
    assert budget_charged(spark, case.ledger) == 0.0
    assert spark.read.format("delta").load(str(case.output)).columns == ["id", "name"]  # untouched


@pytest.mark.slow
@pytest.mark.parametrize("kind, extra, message", [
    ("missing-column", [], "columns declared in the schema are missing from the table: ['height']"),
    ("cell-cap", ["--max-cells", "50"], "above the cap of 50; declare fewer values or bins, or raise the cap"),
])
def test_refused_after_reading_the_table_but_before_the_budget(spark, capsys, tmp_path, kind, extra, message):
    columns = COLUMNS + ([{"name": "height", "type": "numerical", "min": 1, "max": 2}] if kind == "missing-column"
                         else [])
    case = Case(tmp_path, columns=columns)
    code, err = _cli(spark, capsys, case, *extra)
    assert code == EXIT_USAGE
    assert message in one_error_line(err)
    assert budget_charged(spark, case.ledger) == 0.0 and not case.table_written()


@pytest.mark.slow
@pytest.mark.parametrize("names", [["age", "city", "score", "city"], ["age", "city", "score", "CITY"]])
def test_duplicate_parquet_columns_are_bad_input_before_the_budget(spark, capsys, tmp_path, names):
    import pyarrow as pa
    import pyarrow.parquet as pq

    case = Case(tmp_path)
    frame = people()
    pq.write_table(pa.table([pa.array(frame[c].tolist()) for c in ["age", "city", "score", "city"]], names=names),
                   case.input)
    code, err = _cli(spark, capsys, case)
    assert code == EXIT_BAD_INPUT
    assert "the table has two columns of the same name" in one_error_line(err)
    assert budget_charged(spark, case.ledger) == 0.0 and not case.table_written()


@pytest.mark.slow
def test_a_struct_column_declared_numerical_is_bad_input_before_the_reservation(spark, capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from privsyn_spark.budget.ledger import dataset_state

    case = Case(tmp_path)
    frame = people()
    score = pa.array([{"value": v, "unit": "pt"} for v in frame["score"]])  # a Parquet struct column
    pq.write_table(pa.table([pa.array(frame["age"].tolist()), pa.array(frame["city"].tolist()), score],
                            names=["age", "city", "score"]), case.input)
    code, err = _cli(spark, capsys, case)
    assert code == EXIT_BAD_INPUT, err
    assert "column(s) 'score' (struct) hold nested values in the table" in one_error_line(err)
    assert dataset_state(spark, str(case.ledger), DATASET).reservations == [] and not case.table_written()


def _corrupt(path: Path) -> None:
    path.write_bytes(b"not an artifact")


@pytest.mark.slow
def test_a_damaged_local_artifact_has_one_recovery_path(spark, capsys, tmp_path):
    """Issue 24, reliability 6: a corrupted local artifact used to give exit 2 ("use a new run id") before
    the ledger was consulted, so --recharge could not help, while from another runs dir the same fault gave
    exit 3. Now both are exit 3 naming --recharge, and --recharge pays for fresh measurements."""
    from privsyn_spark.privacy.accounting import rho_from_eps_delta

    case = Case(tmp_path)
    rho = rho_from_eps_delta(1.0, 1e-9)
    assert _cli(spark, capsys, case, step="measure")[0] == 0
    artifact = case.runs / "r1" / "measurements" / "measurements.npz"
    _corrupt(artifact)
    other = tmp_path / "other-runs"
    (other / "r1" / "measurements").mkdir(parents=True)
    (other / "r1" / "measurements" / "measurements.npz").write_bytes(b"not an artifact")
    for runs in (case.runs, other):
        code, err = _cli(spark, capsys, case, "--runs-dir", str(runs), step="measure")
        assert code == 3 and "pass --recharge to pay for fresh measurements" in one_error_line(err), err
        assert budget_charged(spark, case.ledger) == pytest.approx(rho)
    code, err = _cli(spark, capsys, case, "--recharge", step="measure")
    assert code == 0, err
    assert budget_charged(spark, case.ledger) == pytest.approx(2 * rho)  # the lost release stays charged
    from privsyn_spark.privacy.measurements import Measurements

    Measurements.from_bytes(artifact.read_bytes())  # a readable artifact again


@pytest.mark.slow
def test_a_wrong_ledger_path_creates_nothing(spark, capsys, tmp_path):
    """Issue 24, item 8: a mistyped --ledger used to create an empty ledger there (then: no budget)."""
    case = Case(tmp_path)
    wrong = tmp_path / "ledgr"
    code, err = _cli(spark, capsys, case, "--ledger", str(wrong))
    assert code == 3 and f"no budget ledger at {wrong}: check --ledger" in one_error_line(err)
    assert not wrong.exists() and not case.table_written()
    assert cli.main(["budget", "show", "--ledger", str(wrong)]) == 3 and not wrong.exists()


@pytest.mark.slow
def test_the_same_run_id_over_a_changed_input_file_is_refused(spark, capsys, tmp_path):
    """Issue 24, item 8: the same run id over a changed file at the same path used to reuse the old
    measurements silently. The fingerprint holds the files' version (paths and modification times)."""
    case = Case(tmp_path)
    assert _cli(spark, capsys, case, step="measure")[0] == 0
    spent = budget_charged(spark, case.ledger)
    assert _cli(spark, capsys, case, step="measure")[0] == 0  # unchanged: reused, nothing charged
    write_parquet(people(400, seed=1), case.input)
    later = case.input.stat().st_mtime + 10
    os.utime(case.input, (later, later))
    code, err = _cli(spark, capsys, case, step="measure")
    assert code == EXIT_USAGE
    line = one_error_line(err)
    assert "input_version: the input's files changed since it was measured; use a new run id" in line
    assert budget_charged(spark, case.ledger) == spent


@pytest.mark.slow
def test_a_budget_refusal_speaks_epsilon_and_delta(spark, capsys, tmp_path):
    """Issue 24, P4: refusals in (epsilon, delta), not only rho."""
    case = Case(tmp_path)
    code, err = _cli(spark, capsys, case, "--epsilon", "50", step="measure")
    line = one_error_line(err)
    assert code == 3 and "asks epsilon=50 at delta=1e-09" in line and "of the budget epsilon=10 at delta=1e-09" in line


@pytest.mark.slow
@pytest.mark.parametrize("where", ["file-uri", "catalog"])
def test_a_missing_uri_or_table_is_a_usage_error_not_a_retry(spark, capsys, tmp_path, where):
    """Issue 25, item 8: a missing ``file://`` input (any URI Spark reads) or catalog table exits 2 with one
    line naming it, as a missing local path does, not 1 (which a scheduler retries); nothing is charged."""
    case = Case(tmp_path)
    missing = (tmp_path / "absent" / "input.csv").as_uri() if where == "file-uri" else "no_such_db.no_such_table"
    case.input = missing  # type: ignore[assignment]
    code, err = _cli(spark, capsys, case, step="measure")
    line = one_error_line(err)
    assert code == EXIT_USAGE, err
    kind = "no such file or folder" if where == "file-uri" else "no such table"
    assert line.startswith(f"privsyn-spark: error: {missing}: {kind} (")
    assert budget_charged(spark, case.ledger) == 0.0 and not case.table_written()
