"""Benchmark: how fast a wide schema is refused or planned, through the real CLI (no data read, no Spark).

For each width (generated categorical columns of 2 values, 4 codes each), times `privsyn-spark plan`
at the default pair limit (refused above 500 columns), `plan` with the limit raised in --config (the
whole dry run: schema, rho split, every sigma, the first pass's cells), and `run` on a one-row CSV
(refused before Spark above the limit; not timed at or below it, where it would start Spark). Wall seconds of each subprocess, the interpreter's start included.
Run: .venv/bin/python bench/bench_width.py [--widths 500 1000 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from privsyn_spark.sample.generator import generated_schema
from privsyn_spark.select.selection_config import SelectionConfig

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and exit code of one CLI call."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd)
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[500, 1000, 2000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        raised = work / "raised.yaml"
        raised.write_text(f"selection: {{max_attribute_pairs: {max(args.widths) ** 2}}}\n")
        for width in args.widths:
            schema = work / f"w{width}.yaml"
            schema.write_text(yaml.safe_dump(generated_schema([2] * width)))
            data = work / f"w{width}.csv"
            data.write_text(",".join(f"x{j}" for j in range(width)) + "\n" + ",".join("0" * width) + "\n")
            plan = ["plan", "--schema", str(schema), "--epsilon", "1", "--no-ledger"]
            run = ["run", "--input", str(data), "--schema", str(schema), "--output", str(work / "out"),
                   "--epsilon", "1", "--no-ledger", "--runs-dir", str(work / "runs")]
            pairs = width * (width - 1) // 2
            refused = pairs > SelectionConfig().max_attribute_pairs
            rows.append((width, pairs, timed(plan, work), timed([*plan, "--config", str(raised)], work),
                         timed(run, work) if refused else None))
    print(f"wide schemas through the CLI, wall seconds (exit code); load {os.getloadavg()[0]:.1f}")
    print("| columns | pairs | plan (default limit) | plan (limit raised) | run (default limit) |")
    print("|---:|---:|---:|---:|---:|")
    for width, pairs, plan_default, plan_raised, run_default in rows:
        cells = " | ".join("-" if t is None else f"{t[0]:.1f} ({t[1]})" for t in (plan_default, plan_raised, run_default))
        print(f"| {width:,} | {pairs:,} | {cells} |")


if __name__ == "__main__":
    main()
