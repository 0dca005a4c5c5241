"""Synthetic people against loose rows given keys: the people metrics, time and peak memory (docs/people.md).

The generated customers-and-orders table (``privsyn_spark.sample.keyed_people``: a capped lognormal
degree by segment, a favourite channel reused with probability p, amounts by segment and category),
written once as Parquet, then at ``--epsilon``, side by side:

- (a) the people model: ``PrivSyn(schema with people).fit(df).sample_people()`` (persons with fresh
  keys, each with its degree of rows);
- (b) what a user can do today: the flat run with the person as the privacy unit (K rows per person
  kept), its rows given random keys afterwards, dealt out within each combination of the person
  columns (so that they stay constant per key) to as many keys as (a)'s person count (the noisy one;
  without (a), the generated table's exact count, said so);
- (c) (a) without the within-person summaries.

Each variant's time is fit + sample + writing its rows as Parquet; its peak memory the high-water
marks of the driver's Python and JVM resident sets (reset before each variant). The metrics
(``privsyn_spark.evaluate.people_metrics``) compare each output with the real table; only this bench
reads exact statistics of the (generated, public) input. Prints a table and the issue's targets.

    .venv/bin/python bench/bench_people.py --people 1000000          # about 2e7 rows
    .venv/bin/python bench/bench_people.py --people 20000 --variants b
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from privsyn_spark.evaluate.people_metrics import PeopleColumns, people_metrics
from privsyn_spark.sample.keyed_people import KEY, PERSON_COLUMNS, SCHEMA_PATH, keyed_people
from privsyn_spark.schema.columns import SchemaError
from privsyn_spark.schema.schema import parse_schema

TARGET_ROWS_TVD = 0.05
PER_PERSON = ("total_amount_ks", "total_amount_wasserstein", "distinct_per_person_tvd", "workload_error_mean")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _peak_kib(pid: int) -> int:
    """The process's resident high-water mark (VmHWM), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # "5": reset the peak RSS (Linux >= 4.0)


def _deal_keys(rows: Any, people: int, seed: int) -> Any:
    """(b)'s keys: the rows of each person-column combination dealt at random to ``people * its row share``
    fresh keys (md5 of a random salt, the combination and an index: 32 hex characters, no real id)."""
    from pyspark.sql import functions as F

    columns = list(PERSON_COLUMNS)
    signature = F.concat_ws("\u0001", *[F.col(c).cast("string") for c in columns])
    shares = rows.groupBy(signature.alias("_sig")).count().collect()  # one row per combination
    total = sum(int(r["count"]) for r in shares)
    keys = F.create_map(*[F.lit(v) for r in shares
                          for v in (r["_sig"], max(1, round(people * int(r["count"]) / total)))])
    index = F.floor(F.rand(seed) * keys[signature]).cast("long")
    salt = secrets.token_hex(16)
    return rows.withColumn(KEY, F.md5(F.concat_ws("\u0001", F.lit(salt), signature, index.cast("string")))) \
        .select(KEY, *[c for c in rows.columns if c != KEY])


def _without_people_model(doc: dict) -> str | None:
    """Why this checkout cannot run the people model (its schema refuses the people section), or None."""
    try:
        parse_schema(doc)
    except SchemaError as err:
        return f"the schema's people section is refused here ({err})"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1_000_000)
    parser.add_argument("--mean-rows", type=float, default=21.5, help="the lognormal degree's mean before the cap")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--variants", default="a,b,c", help="which of a, b, c to run (b after a: its key count)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default="/tmp/privsyn-people-bench")
    args = parser.parse_args()
    variants = args.variants.split(",")

    from privsyn_spark import PrivSyn
    from privsyn_spark.runtime.session import build_spark_session

    print(f"uptime at the start: {_uptime()}", flush=True)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark_session(master=args.master, app_name="bench-people",
                                conf={"spark.sql.shuffle.partitions": "8"})
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    table = work / f"keyed-people-{args.people}-{args.mean_rows:g}.parquet"
    if not table.exists():
        keyed_people(spark, args.people, args.mean_rows, seed=1).write.parquet(str(table))
    real = spark.read.parquet(str(table))
    doc = yaml.safe_load(Path(SCHEMA_PATH).read_text())
    people_doc, flat_doc = dict(doc), {k: v for k, v in doc.items() if k != "people"}
    spec = doc["people"]
    cols = PeopleColumns(key=KEY, person=tuple(PERSON_COLUMNS), row=("channel", "category"), amount="amount",
                         one_value="channel", distinct="category", max_rows=int(spec["max_rows_per_person"]))
    rows, ids = real.count(), real.select(KEY).distinct().count()
    print(f"table: {rows:,} rows of {ids:,} people (K = {doc['privacy_unit']['max_rows_per_id']}, "
          f"M = {cols.max_rows}); {_uptime()}", flush=True)

    results: dict[str, dict[str, float]] = {}
    noisy_people: int | None = None

    def run(name: str, make: Callable[[], tuple[Any, Any]]) -> None:
        nonlocal noisy_people
        _reset_peak(os.getpid())
        _reset_peak(jvm_pid)
        start = time.perf_counter()
        out, persons_out = work / f"out-{name}.parquet", work / f"out-{name}-persons.parquet"
        rows_df, persons_df = make()
        rows_df.write.mode("overwrite").parquet(str(out))
        if persons_df is not None:
            persons_df.write.mode("overwrite").parquet(str(persons_out))
        seconds = time.perf_counter() - start
        peaks = _peak_kib(os.getpid()) / 2 ** 20, _peak_kib(jvm_pid) / 2 ** 20
        if persons_df is not None and noisy_people is None:
            noisy_people = spark.read.parquet(str(persons_out)).count()  # the noisy person count (the default N)
        metrics = people_metrics(real, spark.read.parquet(str(out)), cols)
        results[name] = {**metrics, "seconds": seconds, "peak_python_gib": peaks[0], "peak_jvm_gib": peaks[1]}
        print(f"  ({name}) {seconds:.0f} s, peak {peaks[0]:.2f} + {peaks[1]:.2f} GiB: {metrics}; {_uptime()}",
              flush=True)

    def people_run(name: str, summaries: bool) -> Callable[[], tuple[Any, Any]]:
        def make() -> tuple[Any, Any]:
            section = {**spec, "summaries": spec["summaries"] if summaries else []}
            model = PrivSyn({**people_doc, "people": section}, args.epsilon, no_ledger=True,
                            runs_dir=str(work / f"runs-{name}"), run_id=name).fit(real)
            people = model.sample_people(seed=0)
            return people.rows, people.persons
        return make

    def flat_run() -> tuple[Any, Any]:
        model = PrivSyn(flat_doc, args.epsilon, no_ledger=True, runs_dir=str(work / "runs-b"), run_id="b").fit(real)
        return _deal_keys(model.sample(seed=0), noisy_people or ids, seed=0), None

    missing = _without_people_model(people_doc)
    for name in variants:
        shutil.rmtree(work / f"runs-{name}", ignore_errors=True)
        if name in ("a", "c") and missing:
            print(f"  ({name}) skipped: {missing}", flush=True)
            continue
        if name == "b" and noisy_people is None:
            print(f"  (b) keys dealt to the exact person count {ids:,} (no (a) run before it)", flush=True)
        run(name, {"a": people_run("a", True), "b": flat_run, "c": people_run("c", False)}[name])

    names = list(results)
    print()
    print("| metric | " + " | ".join(f"({n})" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for metric in next(iter(results.values()), {}):
        print(f"| {metric} | " + " | ".join(f"{results[n][metric]:.4g}" for n in names) + " |")
    if "a" in results:
        a = results["a"]
        print(f"\ntarget rows-per-person TVD <= {TARGET_ROWS_TVD}: {a['rows_per_person_tvd']:.4f}")
        for other, limit in (("b", 0.5), ("c", 0.8)):
            if other in results:
                for metric in PER_PERSON:
                    ratio = a[metric] / results[other][metric] if results[other][metric] else float("nan")
                    print(f"target {metric} (a) <= {limit}x ({other}): {ratio:.2f}x")
        if "b" in results:
            b = results["b"]
            print(f"target person x row 2-way TVD (a) <= (b): {a['person_row_tvd_2way']:.4f} vs "
                  f"{b['person_row_tvd_2way']:.4f}")
            print(f"target time (a) <= 2x (b): {a['seconds'] / b['seconds']:.2f}x; peak JVM "
                  f"{a['peak_jvm_gib'] / b['peak_jvm_gib']:.2f}x, Python {a['peak_python_gib'] / b['peak_python_gib']:.2f}x")
    print(f"\n{rows:,} rows, {ids:,} people, epsilon {args.epsilon:g}; uptime at the end: {_uptime()}")
    spark.stop()


if __name__ == "__main__":
    main()
