#!/usr/bin/env bash
# Build the bench-only environment for the MST/AIM anchors of bench/bench_compare.py.
#
#   bench/setup_anchors.sh SNAPSHOT [VENV]
#
# SNAPSHOT: an extracted snapshot of github:ryan112358/private-pgm (it holds src/mbi and mechanisms/),
#   e.g. git clone https://github.com/ryan112358/private-pgm .anchors/private-pgm (bench_compare's default)
# VENV: where the venv goes (default: .anchors/venv, bench_compare's default; .anchors/ is git-ignored).
#   Outside the package install on purpose: the anchors run on the snapshot's own src/mbi (1.0.0) with
#   jax 0.7.1, never PyPI's mbi 1.1.0 (whose synthetic rows lose the joint distribution). Nothing fetched
#   is committed.
set -euo pipefail
snapshot=${1:?usage: bench/setup_anchors.sh SNAPSHOT [VENV]}
venv=${2:-.anchors/venv}
for f in src/mbi/__init__.py mechanisms/mst.py mechanisms/aim.py mechanisms/cdp2adp.py; do
  [[ -f "$snapshot/$f" ]] || { echo "not a private-pgm snapshot: $snapshot/$f missing" >&2; exit 2; }
done
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q "jax==0.7.1" "jaxlib==0.7.1" optax chex attrs scipy "pandas>=2,<3" \
  networkx matplotlib scikit-learn
# the snapshot's src/ goes on PYTHONPATH at run time; check that it imports with this jax
PYTHONPATH="$snapshot/src:$snapshot/mechanisms" "$venv/bin/python" -c \
  "import jax, mbi, mst, aim; print('anchors ready: jax', jax.__version__, 'mbi from', mbi.__file__)"
