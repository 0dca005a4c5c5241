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

Each variant runs in a process of its own (its own Spark: a JVM's heap once grown stays). Its time is
fit + sample + writing its rows (and persons) as Parquet; its peak memory the high-water marks of the
driver's Python and JVM resident sets over that part. The metrics
(``privsyn_spark.evaluate.people_metrics``) compare each output with the real table; only this bench
reads exact statistics of the (generated, public) input. Prints a table and the targets.

    .venv/bin/python bench/bench_people.py --people 1000000          # about 2e7 rows
    .venv/bin/python bench/bench_people.py --people 20000 --variants b
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from privsyn_spark.evaluate.people_metrics import PeopleColumns, people_metrics
from privsyn_spark.sample.keyed_people import KEY, PERSON_COLUMNS, SCHEMA_PATH, keyed_people

RESULT = "RESULT "
"""The line a variant's process ends with: its results as JSON."""
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


def _columns(spec: dict) -> PeopleColumns:
    return PeopleColumns(key=KEY, person=tuple(PERSON_COLUMNS), row=("channel", "category"), amount="amount",
                         one_value="channel", distinct="category", max_rows=int(spec["max_rows_per_person"]))


def _variant(args: argparse.Namespace, table: Path, work: Path) -> dict[str, float]:
    """One variant in this process (its own Spark): time and peaks of fit + sample + write, then its metrics."""
    from privsyn_spark import PrivSyn
    from privsyn_spark.runtime.session import build_spark_session

    name = args.only
    spark = build_spark_session(master=args.master, app_name=f"bench-people-{name}",
                                conf={"spark.sql.shuffle.partitions": "8"})
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    real = spark.read.parquet(str(table))
    doc = yaml.safe_load(Path(SCHEMA_PATH).read_text())
    spec = doc["people"]
    shutil.rmtree(work / f"runs-{name}", ignore_errors=True)
    for pid in (os.getpid(), jvm_pid):
        _reset_peak(pid)
    start = time.perf_counter()
    out, persons_out = work / f"out-{name}.parquet", work / f"out-{name}-persons.parquet"
    if name == "b":
        flat_doc = {k: v for k, v in doc.items() if k != "people"}
        model = PrivSyn(flat_doc, args.epsilon, no_ledger=True, runs_dir=str(work / "runs-b"), run_id="b").fit(real)
        _deal_keys(model.sample(seed=0), args.key_count, seed=0).write.mode("overwrite").parquet(str(out))
    else:
        section = {**spec, "summaries": spec["summaries"] if name == "a" else []}
        people = PrivSyn({**doc, "people": section}, args.epsilon, no_ledger=True, runs_dir=str(work / f"runs-{name}"),
                         run_id=name).fit(real).sample_people(seed=0)
        people.rows.write.mode("overwrite").parquet(str(out))
        people.persons.write.mode("overwrite").parquet(str(persons_out))
    seconds = time.perf_counter() - start
    peaks = _peak_kib(os.getpid()) / 2 ** 20, _peak_kib(jvm_pid) / 2 ** 20
    result = {**people_metrics(real, spark.read.parquet(str(out)), _columns(spec)), "seconds": seconds,
              "peak_python_gib": peaks[0], "peak_jvm_gib": peaks[1]}
    if name != "b":
        result["people"] = spark.read.parquet(str(persons_out)).count()  # the noisy person count (the default N)
    spark.stop()
    return result


def _run_variant(argv: list[str], name: str, key_count: int) -> dict[str, float]:
    """One variant in a fresh process (its own JVM: its peak memory is its own); its output passed through."""
    command = [sys.executable, __file__, *argv, "--only", name, "--key-count", str(key_count)]
    result: dict[str, float] = {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith(RESULT):
                result = json.loads(line[len(RESULT):])
            else:
                print(line, end="", flush=True)
    if child.returncode:
        raise SystemExit(f"variant ({name}) failed (exit {child.returncode})")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1_000_000)
    parser.add_argument("--mean-rows", type=float, default=21.5, help="the lognormal degree's mean before the cap")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--variants", default="a,b,c", help="which of a, b, c to run (b after a: its key count)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default="/tmp/privsyn-people-bench")
    parser.add_argument("--only", help=argparse.SUPPRESS)  # one variant, in the process _run_variant starts
    parser.add_argument("--key-count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = Path(args.workdir)
    table = work / f"keyed-people-{args.people}-{args.mean_rows:g}.parquet"
    if args.only:
        print(RESULT + json.dumps(_variant(args, table, work)), flush=True)
        return

    from privsyn_spark.runtime.session import build_spark_session

    print(f"uptime at the start: {_uptime()}", flush=True)
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark_session(master=args.master, app_name="bench-people",
                                conf={"spark.sql.shuffle.partitions": "8"})
    if not table.exists():
        keyed_people(spark, args.people, args.mean_rows, seed=1).write.parquet(str(table))
    real = spark.read.parquet(str(table))
    doc = yaml.safe_load(Path(SCHEMA_PATH).read_text())
    rows, ids = real.count(), real.select(KEY).distinct().count()
    spark.stop()
    print(f"table: {rows:,} rows of {ids:,} people (K = {doc['privacy_unit']['max_rows_per_id']}, "
          f"M = {doc['people']['max_rows_per_person']}); {_uptime()}", flush=True)

    results: dict[str, dict[str, float]] = {}
    argv = list(sys.argv[1:])
    for name in args.variants.split(","):
        noisy = results.get("a", {}).get("people")
        if name == "b" and noisy is None:
            print(f"  (b) keys dealt to the exact person count {ids:,} (no (a) run before it)", flush=True)
        results[name] = _run_variant(argv, name, int(noisy or ids))
        print(f"  ({name}) {results[name]}; {_uptime()}", flush=True)

    names = list(results)
    print()
    print("| metric | " + " | ".join(f"({n})" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for metric in dict.fromkeys(m for r in results.values() for m in r):
        print(f"| {metric} | " + " | ".join(f"{results[n][metric]:.4g}" if metric in results[n] else "-"
                                           for n in names) + " |")
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


if __name__ == "__main__":
    main()
