"""Scale benchmark: the whole pipeline (no evaluation) on generated tables of known structure.

Cases (each in its own process, so peak memory is per case; the Spark session start is excluded):
  a  662,000 x 97, sizes 2-60, a random Bayesian network with up to two parents per column
  b  10,000,000 x 50 (same kind of network)
  c  10,000,000 and 100,000,000 x 15 (per-row cost at both lengths)
  d  the bundled Adult sample (CSV, curated schema)
  w  5,000 x 150 and 5,000 x 300 (width: the driver's planning and selection; few rows, so the InDif
     noise drives the selection, the case that used to hang; sizes 2-20 to stay under the cell cap)

For each: seconds per step (from the run report's timings), the estimate step's driver CPU seconds and
the load average (the machine may be shared: CPU seconds are the figure to compare then), the bare
Spark scan of the same table in the same process, every engine pass against that scan, peak driver
Python and JVM memory, and, for the generated tables, the synthetic table's mean 2-way TVD to the input against independent noisy 1-way
columns (from the run's own measurements), on all pairs (a sample) and on the pairs the network made
dependent. Only this bench reads exact counts of the (generated, public) input; the pipeline does not.

    .venv/bin/python bench/bench_scale.py --cases a,d [--master local[2]] [--workdir /tmp/privsyn-scale]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "a": [(662_000, 97)],
    "b": [(10_000_000, 50)],
    "c": [(10_000_000, 15), (100_000_000, 15)],
    "c7": [(10_000_000, 15)],  # case c one length at a time
    "c8": [(100_000_000, 15)],
    "d": [("adult", 15)],
    "s": [(20_000, 20)],  # a smoke test of the bench itself
    "w": [(5_000, 150), (5_000, 300)],  # width: driver planning and selection on few rows
    "w150": [(5_000, 150)],
    "w300": [(5_000, 300)],
}
TVD_SAMPLE_PAIRS = 300
ADULT_ROWS = 48_842  # the public sample's documented size (UCI), for the per-row figure only


def _jvm_peak_mb(spark) -> float:
    pid = spark.sparkContext._gateway.proc.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _generate(spark, rows: int, columns: int, folder: Path) -> tuple[Path, Path, list[tuple[str, str]]]:
    """Parquet table + schema file of a generated network (reused when already written)."""
    from privsyn_spark.sample.generator import bayes_net_structure, bayes_net_table, dependent_pairs, generated_schema

    # the width cases (more than 100 columns) with sizes 2-20, so all 2-way tables stay under the cell cap
    sizes, parents = bayes_net_structure(columns, max_size=60 if columns <= 100 else 20, seed=columns)
    table, schema = folder / f"table_{rows}x{columns}", folder / f"schema_{rows}x{columns}.yaml"
    if columns > 100 and not (table / "part-0.parquet").exists():
        _generate_wide(rows, sizes, parents, columns, table)  # Spark's plan of 300 chained columns overflows
    elif columns <= 100 and not (table / "_SUCCESS").exists():
        partitions = max(2, rows // 2_000_000)
        bayes_net_table(spark, rows, sizes, parents, seed=columns, partitions=partitions).write.mode(
            "overwrite").parquet(str(table))
    schema.write_text(yaml.safe_dump(generated_schema(sizes) | {"max_column_codes": 100, "reviewed": True}))
    return table, schema, dependent_pairs(parents)


def _generate_wide(rows: int, sizes: list[int], parents: list[tuple[int, ...]], seed: int, table: Path) -> None:
    """A wide generated table of few rows, made with numpy (the same kind of network; bench input only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    data: list[np.ndarray] = []
    for j, size in enumerate(sizes):
        column = rng.integers(0, size, rows)
        if parents[j]:
            copied = (sum(data[p] * 7 for p in parents[j]) + 3) % size
            column = np.where(rng.random(rows) < 0.8, copied, column)
        data.append(column.astype(np.int32))
    table.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(data, names=[f"x{j}" for j in range(len(sizes))]), table / "part-0.parquet")


def _tvds(spark, source: str, fmt: str, schema_path: Path, output: str, measurements_dir: Path,
          dependent: list[tuple[str, str]]) -> dict[str, float]:
    """Mean 2-way TVD of synthetic vs input and of independent noisy 1-way columns vs input."""
    from privsyn_spark.measure.encode import encode
    from privsyn_spark.measure.engine import count_marginals
    from privsyn_spark.privacy.measurements import Measurements
    from privsyn_spark.runtime.input_table import read_table
    from privsyn_spark.schema.schema import load_schema

    schema = load_schema(str(schema_path))
    real = encode(read_table(spark, source, fmt), schema)
    synthetic = encode(spark.read.format("delta").load(output), schema)
    attrs = list(real.domain.attrs)
    rng = np.random.default_rng(0)
    every = [(a, b) for i, a in enumerate(attrs) for b in attrs[i + 1:]]
    sample = [every[i] for i in rng.choice(len(every), size=min(TVD_SAMPLE_PAIRS, len(every)), replace=False)]
    pairs = sorted(set(sample) | set(tuple(real.domain.canonical(p)) for p in dependent))
    real_t = count_marginals(real, pairs).tables
    synth_t = count_marginals(synthetic, pairs).tables
    one_way = Measurements.load(measurements_dir).one_way_original

    def normalised(t: np.ndarray) -> np.ndarray:
        t = np.clip(np.asarray(t, dtype=float), 0, None)
        return t / max(t.sum(), 1e-12)

    def tvd(p: np.ndarray, q: np.ndarray) -> float:
        return 0.5 * float(np.abs(normalised(p) - normalised(q)).sum())

    dep = {tuple(real.domain.canonical(p)) for p in dependent}
    out: dict[str, list[float]] = {"synthetic": [], "independent": [], "synthetic_dep": [], "independent_dep": []}
    for pair in pairs:
        independent = np.outer(normalised(one_way[pair[0]]), normalised(one_way[pair[1]]))
        s, i = tvd(real_t[pair], synth_t[pair]), tvd(real_t[pair], independent)
        if pair in sample or pair[::-1] in sample:
            out["synthetic"].append(s)
            out["independent"].append(i)
        if pair in dep:
            out["synthetic_dep"].append(s)
            out["independent_dep"].append(i)
    return {k: float(np.mean(v)) if v else float("nan") for k, v in out.items()}


def run_case(rows, columns: int, master: str, workdir: Path, epsilon: float, config: str | None = None,
             synthesizer: str | None = None) -> dict:
    """One case in this process: generate, scan, run the pipeline, measure fidelity."""
    from pyspark.sql import functions as F

    from privsyn_spark.cli import main as cli_main
    from privsyn_spark.runtime.session import build_spark_session

    spark = build_spark_session(master=master)
    spark.range(1).count()  # the session is up and has run an action: excluded from the timings
    workdir.mkdir(parents=True, exist_ok=True)
    if rows == "adult":
        source, fmt = str(ROOT / "privsyn_spark/sample/adult.csv.gz"), "csv"
        schema, dependent = ROOT / "privsyn_spark/sample/adult.schema.yaml", []
    else:
        start = time.perf_counter()
        table, schema, dependent = _generate(spark, rows, columns, workdir)
        print(f"  generated {rows:,} x {columns} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        source, fmt = str(table), "parquet"
    from privsyn_spark.runtime.input_table import read_table

    df = read_table(spark, source, fmt)
    start = time.perf_counter()
    df.select(*[F.sum(F.hash(c)) for c in df.columns]).collect()
    scan = time.perf_counter() - start
    run_id = f"scale-{rows}x{columns}"
    output, runs = workdir / f"out_{run_id}", workdir / "runs"
    shutil.rmtree(runs / run_id, ignore_errors=True)
    shutil.rmtree(output, ignore_errors=True)
    argv = ["run", "--input", source, "--input-format", fmt, "--schema", str(schema), "--output", str(output),
            "--epsilon", str(epsilon), "--run-id", run_id, "--runs-dir", str(runs), "--no-evaluate",
            "--master", master, *(["--config", config] if config else []),
            *(["--synthesizer", synthesizer] if synthesizer else [])]
    if "--no-ledger" in subprocess.run([sys.executable, "-m", "privsyn_spark.cli", "run", "--help"],
                                       capture_output=True, text=True).stdout:
        argv.append("--no-ledger")
    start = time.perf_counter()
    code = cli_main(argv)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"pipeline exited {code} on case {run_id}")
    report = json.loads((runs / run_id / "operator" / "report.json").read_text())
    result = {"case": f"{rows:,} x {columns}" if rows != "adult" else "Adult sample", "rows": rows,
              "columns": columns, "wall": wall, "scan": scan, "timings": report.get("timings", {}),
              "estimation": (report.get("estimation") or {}).get("method"),
              "estimate_cpu": ((report.get("estimation") or {}).get("info") or {}).get("estimation_cpu_seconds"),
              "marginals": len(report.get("selection", {}).get("marginals", [])),
              "driver_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "jvm_mb": _jvm_peak_mb(spark), "load": os.getloadavg()}
    if rows != "adult":
        result["tvd"] = _tvds(spark, source, fmt, schema, str(output), runs / run_id / "measurements", dependent)
    spark.stop()
    return result


def _print_table(results: list[dict]) -> None:
    steps = sorted({k for r in results for k in r["timings"]}, key=lambda k: list(results[0]["timings"]).index(k)
                   if k in results[0]["timings"] else 99)
    print("\n| case | " + " | ".join(f"{s} (s)" for s in steps) + " | end to end (s) | bare scan (s) | "
          "read+encode / count passes vs scan | s per 10^6 rows | estimator | estimate CPU (s) | marginals | driver MB "
          "| JVM MB | load at the end (1/5/15 min) |")
    print("|---" * (len(steps) + 12) + "|")
    for r in results:
        t = r["timings"]
        cpu = "-" if r.get("estimate_cpu") is None else f"{r['estimate_cpu']:.1f}"
        passes = [v for k, v in t.items() if k.startswith(("read", "count"))]
        ratio = " / ".join(f"{v / r['scan']:.1f}x" for v in passes) or "-"
        per_row = r["wall"] / ((r["rows"] if isinstance(r["rows"], int) else ADULT_ROWS) / 1e6)
        print(f"| {r['case']} | " + " | ".join(f"{t.get(s, 0.0):.1f}" for s in steps)
              + f" | {r['wall']:.1f} | {r['scan']:.1f} | {ratio} | {per_row:.2f} | {r['estimation']} | "
              f"{cpu} | {r['marginals']} | {r['driver_mb']:,.0f} | {r['jvm_mb']:,.0f} | "
              + " / ".join(f"{v:.1f}" for v in r.get("load", ())) + " |")
    with_tvd = [r for r in results if "tvd" in r]
    if with_tvd:
        print("\n| case | 2-way TVD synthetic | independent 1-way | dependent pairs: synthetic | independent |")
        print("|---|---|---|---|---|")
        for r in with_tvd:
            v = r["tvd"]
            print(f"| {r['case']} | {v['synthetic']:.4f} | {v['independent']:.4f} | {v['synthetic_dep']:.4f} | "
                  f"{v['independent_dep']:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="a,d", help="comma-separated cases among a, b, c, d")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--workdir", default="/tmp/privsyn-scale")
    parser.add_argument("--config", help="a --config YAML (Settings) for every run, e.g. bench/configs/privsyn_defaults.yaml")
    parser.add_argument("--synthesizer", choices=("gum", "pgm"), help="the pipeline's --synthesizer (default: its own)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one case, print its JSON
    args = parser.parse_args()
    if args.one:
        rows, columns = json.loads(args.one)
        print("RESULT " + json.dumps(run_case(rows, columns, args.master, Path(args.workdir), args.epsilon, args.config,
                                                  args.synthesizer)))
        return
    results = []
    for case in args.cases.split(","):
        for rows, columns in CASES[case]:
            print(f"case {case}: {rows} x {columns} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
            proc = subprocess.run([sys.executable, __file__, "--one", json.dumps([rows, columns]), "--master",
                                   args.master, "--epsilon", str(args.epsilon), "--workdir", args.workdir,
                                   *(["--config", args.config] if args.config else []),
                                   *(["--synthesizer", args.synthesizer] if args.synthesizer else [])],
                                  stdout=subprocess.PIPE, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                print(f"case {case} {rows} x {columns} failed (exit {proc.returncode})", file=sys.stderr)
                continue
            results.append(json.loads(lines[-1][len("RESULT "):]))
            _print_table(results)
    print(f"\nmaster {args.master}, epsilon {args.epsilon}, load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
