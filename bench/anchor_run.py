"""One MST or AIM run for bench/bench_compare.py, inside the anchors' venv (bench/setup_anchors.sh).

Runs ``mechanisms/mst.py`` or ``mechanisms/aim.py`` of a private-pgm snapshot on its own ``src/mbi``
(both on PYTHONPATH, set by the caller); never imports privsyn_spark. Reads the integer-coded training
table (CSV, one column per attribute) and its domain (JSON: attribute -> number of codes), writes the
synthetic table as CSV and prints one JSON line with the wall time of the mechanism.

    PYTHONPATH=<snapshot>/src:<snapshot>/mechanisms <venv>/bin/python bench/anchor_run.py \
        --mechanism mst --data train.csv --domain domain.json --epsilon 1 --delta 1e-9 --seed 0 --out synth.csv
"""

import argparse
import itertools
import json
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanism", choices=["mst", "aim"], required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--aim-rounds", type=int, default=None, help="AIM rounds (default: the script's 16 d)")
    parser.add_argument("--aim-max-model-size", type=float, default=80.0, help="AIM model bound, MB")
    parser.add_argument("--aim-max-iters", type=int, default=1000, help="AIM mirror-descent iterations per fit")
    parser.add_argument("--aim-max-cells", type=int, default=10000, help="AIM workload: pairs up to this many cells")
    args = parser.parse_args()

    from mbi import Dataset

    np.random.seed(args.seed)
    data = Dataset.load(args.data, args.domain)
    start = time.perf_counter()
    if args.mechanism == "mst":
        from mst import MST

        synth = MST(data, args.epsilon, args.delta)
    else:
        from aim import AIM

        workload = [(cl, 1.0) for cl in itertools.combinations(data.domain, 2)
                    if data.domain.size(cl) <= args.aim_max_cells]
        # AIM passes its prng positionally as Mechanism's `bounded`: the noise comes from np.random (seeded above)
        mech = AIM(args.epsilon, args.delta, rounds=args.aim_rounds,
                   max_model_size=args.aim_max_model_size, max_iters=args.aim_max_iters)
        _, synth = mech.run(data, workload)
    seconds = time.perf_counter() - start
    synth.df.to_csv(args.out, index=False)
    print(json.dumps({"seconds": seconds, "rows": int(len(synth.df))}))


if __name__ == "__main__":
    main()
