"""Which table each wanted marginal is summed down from, with shared intermediate tables.

Mirror descent asks every oracle call for the marginals of all measured cliques. Summed straight
from the junction-tree clique holding them, each costs a pass over that clique's table: on Adult all
21 pairs of a 5·10^6-cell clique, 21 passes. Here the wanted tables that no other wanted one holds
are split recursively: the table without one attribute holds every wanted table lacking it, so it
is summed once (one pass) and they come from it; the attribute dropped is the one whose table holds
the most of them, ties to the cheapest sum (:func:`~privsyn_spark.estimate.factor.sum_cost`). Three
passes of the clique and small tables then give those 21 pairs. Smaller wanted tables come from the
smallest table already planned that holds them.
"""

from __future__ import annotations

from collections.abc import Iterable

from privsyn_spark.domain import Domain
from privsyn_spark.estimate.factor import sum_cost

Step = tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]
"""(attrs, source, axes of source summed out): one table of the plan."""


def sum_down_plan(domain: Domain, tables: Iterable[tuple[str, ...]],
                  wanted: Iterable[tuple[str, ...]]) -> list[Step]:
    """Steps computing every ``wanted`` table (canonical tuples) from ``tables`` (those at hand, canonical),
    in order: each step's source is at hand or an earlier step's. Raises ``KeyError`` for a wanted
    table no table holds."""
    known = {c: domain.cells(c) for c in tables}
    plan: list[Step] = []

    def add(attrs: tuple[str, ...], source: tuple[str, ...]) -> None:
        plan.append((attrs, source, tuple(k for k, a in enumerate(source) if a not in attrs)))
        known[attrs] = domain.cells(attrs)

    def holder(attrs: tuple[str, ...]) -> tuple[str, ...]:
        holders = [(cells, src) for src, cells in known.items() if set(attrs) <= set(src)]
        if not holders:
            raise KeyError(f"{attrs} is not inside any junction-tree clique")
        return min(holders)[1]

    def split(source: tuple[str, ...], targets: list[tuple[str, ...]]) -> None:
        targets = [t for t in targets if t not in known]
        while len(targets) > 1:
            shape = domain.shape(source)
            options = []
            for k, a in enumerate(source):
                covered = [t for t in targets if a not in t]
                if len(covered) > 1:
                    options.append((-len(covered), sum_cost(shape, (k,)) + domain.cells(source) / shape[k], k))
            if not options:
                break
            k = min(options)[2]
            child = source[:k] + source[k + 1:]
            if child not in known:
                add(child, source)
            split(child, [t for t in targets if source[k] not in t])
            targets = [t for t in targets if source[k] in t]
        for t in targets:
            add(t, source)

    rest = sorted(set(wanted) - known.keys(), key=lambda c: (-domain.cells(c), c))
    maximal = [c for c in rest if not any(set(c) < set(o) for o in rest)]
    homes: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for c in maximal:
        homes.setdefault(holder(c), []).append(c)
    for home, targets in homes.items():
        split(home, targets)
    for c in rest:
        if c not in known:
            add(c, holder(c))
    return plan
