"""Marginal combining (PrivSyn Algorithm 2, "Marginal Combine").

Post-processing of the selected pairs. Build the graph whose edges are the selected pairs; go through
its cliques of size s = max .. 3; accept a clique if its domain has fewer than gamma cells and it
shares at most 2 attributes with the attributes S of the cliques accepted so far. Accepted cliques
become higher-way marginals; selected pairs not inside an accepted clique stay 2-way marginals (as in
the authors' reference implementation). Within one size, cliques are taken in lexicographic order of
attributes sorted by size (ties: domain order); the paper leaves this order open.

Instead of listing every clique first (exponential on dense graphs: 100 attributes with all pairs
selected has millions of small cliques), each size level is a depth-first search in that order
that accepts cliques as it meets them and prunes a partial clique when
  - its cells times the next candidate's size to the power of the attributes still needed reach gamma
    (candidates come in ascending size, so every later one fails too), or
  - it already holds 3 attributes of S (S only grows, so no extension can be accepted later), or
  - too few common neighbours remain to reach size s.
Every pruned clique is one the rule would reject, so the result equals the enumerate-then-filter
algorithm. A step cap (``max_steps``) bounds the work on pathological graphs; if hit, combining stops
with the cliques accepted so far (logged as a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import combinations

from privsyn_spark.domain import Domain

logger = logging.getLogger(__name__)

#: PrivSyn's default domain threshold for a combined marginal.
DEFAULT_GAMMA = 5000


class _StepLimit(Exception):
    pass


def bit_members(mask: int) -> list[int]:
    """The set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def combine_marginals(domain: Domain, pairs: Sequence[tuple[str, ...]], gamma: float = DEFAULT_GAMMA,
                      max_steps: int = 2_000_000) -> list[tuple[str, ...]]:
    """Merge cliques of selected pairs into higher-way marginals (PrivSyn Algorithm 2).

    Returns canonical attribute tuples: the accepted cliques (largest first), then the selected pairs
    not covered by any accepted clique, in their original order.
    """
    canon = [domain.canonical(p) for p in pairs]
    # Search order: attribute size ascending, ties in domain order (see module docstring).
    attrs = sorted(domain.attrs, key=lambda a: (domain[a], domain.attrs.index(a)))
    index = {a: i for i, a in enumerate(attrs)}
    size = [domain[a] for a in attrs]
    later = [0] * len(attrs)  # bitmask of neighbours after i in search order
    degree = [0] * len(attrs)
    for p in canon:
        if len(p) != 2:
            raise ValueError(f"combine_marginals: {p} is not a pair")
        i, j = sorted((index[p[0]], index[p[1]]))
        later[i] |= 1 << j
        degree[i] += 1
        degree[j] += 1

    # Largest size worth searching: bounded by the max degree + 1 and by the smallest attribute sizes.
    s_max, cells = 0, 1
    for k, sz in enumerate(sorted(size[i] for i in range(len(attrs)) if degree[i] > 0), start=1):
        cells *= sz
        if cells >= gamma or k > max(degree) + 1:
            break
        s_max = k

    accepted: list[tuple[int, ...]] = []
    used = 0
    steps = 0

    def search(clique: tuple[int, ...], mask: int, cells: int, cands: int, target: int) -> None:
        nonlocal used, steps
        steps += 1
        if steps > max_steps:
            raise _StepLimit
        if len(clique) == target:
            if (used & mask).bit_count() <= 2:  # |c ∩ S| <= 2 (Algorithm 2, line 7)
                accepted.append(clique)
                used |= mask
            return
        in_s = (used & mask).bit_count()
        if in_s > 2:
            return  # S only grows: no extension can be accepted
        if in_s == 2:
            cands &= ~used  # any further attribute must be new
        need = target - len(clique)
        if cands.bit_count() < need:
            return
        for v in bit_members(cands):  # ascending size
            if cells * size[v] ** need >= gamma:
                break  # v and the (need - 1) later, no smaller, attributes reach gamma
            search(clique + (v,), mask | (1 << v), cells * size[v], cands & later[v], target)

    try:
        for target in range(s_max, 2, -1):  # clique sizes from the largest down to 3 (Algorithm 2, line 4)
            for v in range(len(attrs)):
                if later[v].bit_count() >= target - 1:
                    search((v,), 1 << v, size[v], later[v], target)
    except _StepLimit:
        logger.warning("combine: stopped after %d search steps with %d combined marginals", max_steps, len(accepted))

    combined = [domain.canonical(attrs[i] for i in c) for c in accepted]
    covered = {frozenset(e) for c in combined for e in combinations(c, 2)}
    rest: list[tuple[str, ...]] = []
    seen: set[frozenset[str]] = set()
    for p in canon:
        key = frozenset(p)
        if key not in covered and key not in seen:
            rest.append(p)
            seen.add(key)
    if combined:
        logger.info("combine: %d pairs -> %d combined marginals + %d pairs (%d search steps)",
                    len(canon), len(combined), len(rest), steps)
    return combined + rest
